"""THE rows of a run: which dataset file a run config names, its prompt rows, and a prompt as text. Imports no torch.

A run config names its prompts in one of two ways (:class:`grpo_core.run_config.RunConfig`):

* ``dataset_id``: a dataset stored in the data directory (:mod:`grpo_core.datasets.library`); its file is the
  normalised JSON Lines written at import, read back with :func:`grpo_core.datasets.formats.read_normalized`;
* ``dataset_path``: a prompt file (JSON Lines, JSON, CSV, Parquet, a ``save_to_disk`` folder) read with
  :func:`grpo_core.datasets.formats.load_prompt_dataset`. A relative path that does not exist from the working directory is
  looked up in ``base_dir`` (the folder of the YAML file it came from), as ``grpo-dashboard train`` and
  ``grpo-dashboard preflight`` do.

The config's column mapping (``prompt_column``, ``system_prompt``, ``column_renames``; :func:`column_mapping`) is
applied to the rows either way. Every reader of a run's rows (the worker, the preflight, the export, the Try-the-model tab, the CLI) goes through
:func:`dataset_file` and :func:`load_rows`. A row's position in that list is its ``row_index`` (0-based), the number
recorded with each sampled group; the trainer hands it to TRL as the dataset column :data:`ROW_INDEX_COLUMN`.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grpo_core.bounded_parse import ParseError, load_json
from grpo_core.datasets.checks import remap_rows
from grpo_core.datasets.formats import load_prompt_dataset, read_normalized
from grpo_core.datasets.prompt_dataset import ColumnMapping
from grpo_core.rewards.registry import completion_text
from grpo_core.run_config import ConfigError, RunConfig

ROW_INDEX_COLUMN = "_row_index"
"""Dataset column the trainer adds to every row: the row's 0-based ``row_index`` in the run's rows. TRL passes it
to the reward functions (and so to the recorder's tap) with the other columns; it is never shown or exported."""

PROMPT_KEY_BASE = 2**30
"""The least ``row_index`` that is a prompt key (:func:`prompt_key`), not a dataset row: a run recorded from a user's
own script has no row index, and its groups are keyed by their prompt text instead."""


def prompt_key(text: str) -> int:
    """A stable ``row_index`` for a prompt without a dataset row (a script run's): the first 30 bits of the BLAKE2b
    digest of its text, plus :data:`PROMPT_KEY_BASE`, so in ``[2**30, 2**31)`` (the store's 32-bit column) and never a
    real row's index. The same prompt text gets the same key at every step and in every process; two different
    prompts share one with probability about n^2 / 2^31 for n distinct prompts (1 in 2,000 for 1,000 prompts)."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=4).digest()
    return PROMPT_KEY_BASE + (int.from_bytes(digest, "big") & (PROMPT_KEY_BASE - 1))


def is_prompt_key(row_index: int) -> bool:
    """Whether ``row_index`` is a :func:`prompt_key` rather than a dataset row's index."""
    return row_index >= PROMPT_KEY_BASE


def _dataset_fields(config: RunConfig | Mapping[str, Any]) -> tuple[int | None, str | None]:
    if isinstance(config, RunConfig):
        return config.dataset_id, config.dataset_path
    dataset_id = config.get("dataset_id")
    return (None if dataset_id is None else int(dataset_id)), (config.get("dataset_path") or None)


def column_mapping(config: RunConfig | Mapping[str, Any]) -> ColumnMapping | None:
    """The column mapping a run config sets (``prompt_column``, ``system_prompt``, ``column_renames``), or ``None``
    when it sets none."""
    if isinstance(config, RunConfig):
        fields = (config.prompt_column, config.system_prompt, config.column_renames)
    else:
        fields = (config.get("prompt_column"), config.get("system_prompt") or "", config.get("column_renames") or {})
    mapping = ColumnMapping(prompt_column=fields[0] or None, system_prompt=fields[1] or "", renames=dict(fields[2]))
    return None if mapping.is_identity else mapping


def resolve_dataset_path(dataset_path: str | Path, base_dir: str | Path | None = None) -> Path:
    """``dataset_path`` as given, or inside ``base_dir`` when it is relative, absent from the working directory and
    present there."""
    path = Path(dataset_path)
    if not path.is_absolute() and not path.exists() and base_dir is not None:
        candidate = Path(base_dir) / path
        if candidate.exists():
            return candidate
    return path


def dataset_file(store, config: RunConfig | Mapping[str, Any], *, base_dir: str | Path | None = None) -> Path | None:
    """The file holding the prompt rows a run config names (a run's ``config`` mapping, or a :class:`RunConfig`):
    the stored dataset's normalised JSON Lines, else ``dataset_path``; ``None`` when it names neither, the stored
    dataset is unknown (or there is no ``store``), or the file is gone."""
    dataset_id, dataset_path = _dataset_fields(config)
    path: Path | None = None
    if dataset_id is not None:
        if store is None:
            return None
        try:
            path = Path(store.get_dataset(dataset_id).path)
        except ValueError:  # storage.StoreError: no such dataset
            return None
    elif dataset_path:
        path = resolve_dataset_path(dataset_path, base_dir)
    if path is None or not path.is_file():
        return None
    return path


def load_rows(
    store, config: RunConfig | Mapping[str, Any], *, base_dir: str | Path | None = None
) -> list[dict[str, Any]]:
    """The prompt rows a run config names, in file order (each a dict with ``prompt`` and the other columns), with
    the config's column mapping applied.

    Args:
        store: the :class:`storage.Store` holding ``dataset_id`` (may be ``None`` when the config names a file).
        config: a run's ``config`` mapping or a :class:`RunConfig`.
        base_dir: the folder a relative ``dataset_path`` is also looked up in (the YAML file's folder).

    Raises:
        ConfigError: the config names no dataset, or names a stored one and ``store`` is ``None``.
        grpo_core.datasets.prompt_dataset.DatasetError: the file is not a valid prompt dataset, or the mapping names a column it
            lacks.
        storage.StoreError: no stored dataset with that id.
        OSError: the file cannot be read.
    """
    dataset_id, dataset_path = _dataset_fields(config)
    mapping = column_mapping(config)
    if dataset_id is not None:
        if store is None:
            raise ConfigError("dataset_id needs the store (--db / --data-dir)")
        info = store.get_dataset(dataset_id)
        return remap_rows(read_normalized(Path(info.path)), mapping, info.name)
    if dataset_path:
        return load_prompt_dataset(resolve_dataset_path(dataset_path, base_dir), mapping=mapping).rows
    raise ConfigError("dataset: the config names no dataset (set dataset_id or dataset_path)")


def eval_row_indices(num_rows: int, fraction: float, seed: int) -> list[int]:
    """The ``row_index`` values held out for evaluation: ``round(fraction × num_rows)`` rows (at least 1 when
    ``fraction > 0``, at most ``num_rows - 1`` so that training keeps a row), drawn with ``seed``, ascending.

    The same rows for the same ``(num_rows, fraction, seed)``, so a resumed run evaluates the rows it held out.
    """
    if fraction <= 0 or num_rows < 2:
        return []
    count = min(num_rows - 1, max(1, round(fraction * num_rows)))
    return sorted(random.Random(seed).sample(range(num_rows), count))


# ------------------------------------------------------------------------------------------- prompt <-> text
def prompt_text(prompt: Any) -> str:
    """A prompt for display and for the store: text as is, chat messages as ``role: content`` lines."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return "\n".join(
            f"{m.get('role', '?')}: {completion_text([m])}" if isinstance(m, dict) else str(m) for m in prompt
        )
    return str(prompt)


def editable_prompt_text(prompt: Any) -> str:
    """A prompt for a text box the user edits: text as is, a message list as indented JSON (what
    :func:`prompt_from_text` reads back, so an unedited prompt round-trips exactly)."""
    if isinstance(prompt, str):
        return prompt
    return json.dumps(prompt, ensure_ascii=False, indent=1)


def prompt_from_text(text: str, chat: bool) -> str | list[dict[str, Any]]:
    """The prompt a user typed, as the run's dataset holds prompts.

    A JSON list of ``{"role", "content"}`` objects is a message list as is; other text is one user message when the
    run trained on chat prompts (``chat``), else plain text.

    Raises:
        ValueError: the text is blank.
    """
    if not text or not text.strip():
        raise ValueError("the prompt is empty")
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            value = load_json(stripped, source="prompt")
        except ParseError:
            value = None
        if isinstance(value, list) and value and all(isinstance(m, dict) and "content" in m for m in value):
            return value
    return [{"role": "user", "content": text}] if chat else text
