"""Exports a run for use outside the dashboard: its config YAML, metrics CSV, groups Parquet and adapter zip.

Everything is read from the store (metrics, groups, the run's config) and the run folder (the adapter); nothing
imports torch. :func:`export_run` writes all of them into a fresh folder under ``<data dir>/exports/`` plus one zip
bundling them:

* ``run-NNNNN-config.yaml``: the :class:`~grpo_core.run_config.RunConfig`, re-runnable headless with
  ``grpo-dashboard train run-NNNNN-config.yaml``. An uploaded dataset (``dataset_id``, which only means something
  in this store) is copied beside it as ``run-NNNNN-dataset.jsonl`` and the YAML names that file instead, relative
  to the YAML, so the pair trains anywhere the model is. A plugin reward function's ``file.py`` is copied into
  ``plugins/`` beside it the same way (a dotted module target is left as it is: it must be importable there too).
* ``run-NNNNN-provenance.json``: what reproduces the run as its worker recorded it (dataset sha256, model
  identity, library versions, device; see :mod:`grpo_core.runs.provenance`), when it has a record; the config YAML
  also carries it as a comment block at its top (``RunConfig`` has no field for it, so ``train`` ignores it).
* ``run-NNNNN-metrics.csv``: wide format, one row per logged step: ``step``, ``wall_time`` (seconds since the
  epoch, the first recorded at that step), then one column per metric key (TRL's names), sorted; empty cells are
  metrics not logged at that step or logged as NaN.
* ``run-NNNNN-groups.parquet``: one row per recorded completion (see :data:`GROUP_COLUMNS`), each reward rule's
  reward in its own ``reward_<name>`` column.
* ``run-NNNNN-adapter.zip``: the final ``adapter/`` folder, when training finished and saved one.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from grpo_core.access.ownership import SINGLE_USER, Actor, may_change
from grpo_core.datasets.rows import dataset_file
from grpo_core.run_config import RunConfig, parse_run_config
from grpo_core.runs.files import ADAPTER_DIR_NAME, adapter_dir, run_dir
from grpo_core.runs.provenance import flatten_provenance, plugin_hashes
from grpo_core.settings import Settings
from storage import RunInfo, Store

EXPORTS_DIR_NAME = "exports"
#: The fixed columns of the groups Parquet, in order; ``reward_<name>`` columns (float64) follow ``text``.
GROUP_COLUMNS = (
    ("run_id", pa.int64()),
    ("step", pa.int64()),
    ("row_index", pa.int64()),
    ("prompt", pa.string()),
    ("completion_index", pa.int64()),
    ("text", pa.string()),
)
GROUP_TAIL_COLUMNS = (
    ("total_reward", pa.float64()),
    ("advantage", pa.float64()),
    ("num_tokens", pa.int64()),
    ("truncated", pa.bool_()),
)
REWARD_COLUMN_PREFIX = "reward_"
_BATCH_ROWS = 20_000


class ExportError(ValueError):
    """A run cannot be exported as asked (for instance it has no adapter yet); the message says why."""


class ConfigExport(NamedTuple):
    """What :func:`export_config_yaml` wrote: the YAML, the dataset copy (or ``None``), the plugin file copies, and
    the plugin files it could not copy."""

    yaml: Path
    dataset: Path | None
    plugins: tuple[Path, ...] = ()
    #: plugin ``file.py`` targets whose file is gone: the YAML keeps them as stored and will not train elsewhere
    missing_plugins: tuple[str, ...] = ()
    #: plugin files copied whose content differs from what the run's provenance recorded (:func:`changed_plugin_files`)
    changed_plugins: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunExport:
    """The files :func:`export_run` wrote. ``adapter`` is ``None`` when the run has no final adapter (yet)."""

    run_id: int
    folder: Path
    config: Path
    dataset: Path | None
    metrics: Path
    groups: Path
    adapter: Path | None
    bundle: Path
    provenance: Path | None = None
    plugins: tuple[Path, ...] = ()
    missing_plugins: tuple[str, ...] = ()
    #: plugin files copied that differ from what the run trained with (their sha256 differs from its provenance)
    changed_plugins: tuple[str, ...] = ()

    def warnings(self) -> list[str]:
        """What keeps the export from re-training elsewhere as it is (empty when nothing does)."""
        return [
            *(f"plugin file gone, not copied: {target} (the YAML still names it)" for target in self.missing_plugins),
            *(f"plugin file changed since the run trained: {path} (copied as it is now)" for path in self.changed_plugins),
        ]

    def files(self) -> list[Path]:
        """Every written file, bundle last (what the Export panel offers for download)."""
        parts = [self.config, *self.plugins, self.provenance, self.dataset, self.metrics, self.groups, self.adapter,
                 self.bundle]
        return [p for p in parts if p is not None]


def exports_dir(settings: Settings) -> Path:
    """The folder holding every export: ``<data dir>/exports`` (the web server may serve files from it)."""
    return settings.data_dir / EXPORTS_DIR_NAME


def _prefix(run_id: int) -> str:
    return f"run-{run_id:05d}"


# ------------------------------------------------------------------------------------------------------ config
PLUGINS_DIR_NAME = "plugins"


def _copy_plugin_files(config: RunConfig, folder: Path) -> tuple[RunConfig, dict[Path, Path], tuple[str, ...]]:
    """``config`` with each plugin target's existing ``file.py`` copied into ``folder/plugins/`` and the target
    naming the copy relative to ``folder``; a file named by several rules is copied once, and two different files
    of the same name get ``-2``, ``-3``... A dotted module target, or a file that is gone, is left as stored (the
    third item lists the latter's targets); the second is ``{source's real path: copy}``. The file is copied as it is
    now, which may differ from what the run trained with."""
    copies: dict[Path, Path] = {}
    missing: list[str] = []
    specs = []
    for spec in config.rewards:
        target = str(spec.params.get("target", "")).strip()
        module, _, function = target.rpartition(":")
        source = Path(module.strip())
        if spec.rule != "plugin" or not module.strip().endswith(".py") or not source.is_file():
            if spec.rule == "plugin" and module.strip().endswith(".py") and target not in missing:
                missing.append(target)
            specs.append(spec)
            continue
        source = source.resolve()
        if source not in copies:
            (folder / PLUGINS_DIR_NAME).mkdir(parents=True, exist_ok=True)
            copy, number = folder / PLUGINS_DIR_NAME / source.name, 2
            while copy.exists():
                copy, number = copy.with_name(f"{source.stem}-{number}{source.suffix}"), number + 1
            shutil.copyfile(source, copy)
            copies[source] = copy
        relative = copies[source].relative_to(folder).as_posix()
        specs.append(spec.model_copy(update={"params": {**spec.params, "target": f"{relative}:{function}"}}))
    return config.model_copy(update={"rewards": specs}), copies, tuple(missing)


def export_config_yaml(
    store: Store, run: RunInfo, dest: Path, *, copy_dataset: bool = True, reader: Actor = SINGLE_USER
) -> ConfigExport:
    """Write the run's config as YAML to ``dest``; copy its dataset and plugin files beside it when ``copy_dataset``.

    The YAML validates as a :class:`~grpo_core.run_config.RunConfig` and round-trips through ``load_run_config``. With
    ``copy_dataset`` the dataset file is copied to ``<dest stem minus "-config">-dataset<suffix>`` and the YAML's
    ``dataset_path`` names it relative to the YAML (``dataset_id`` cleared), and each plugin's ``file.py`` is copied
    into ``plugins/`` with its target made relative, both of which ``grpo-dashboard train`` resolves against the
    YAML's folder. Without it (or when a file is gone) the config is written as stored.

    Returns:
        ``(yaml path, dataset copy or None, plugin copies, plugin targets whose file is gone)``.

    ``reader`` (the login exporting) gets the run's ``webhook_url`` only when it may change the run: the address is
    its owner's secret (:func:`grpo_core.access.ownership.config_shown_to`); anyone else's export leaves it empty.

    Raises:
        grpo_core.run_config.ConfigError: the stored config no longer validates (written by an older version).
        OSError: a file cannot be written.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    config = parse_run_config(run.config, source=f"run {run.id} config")
    if config.webhook_url and not may_change(reader, run.owner):
        config = config.model_copy(update={"webhook_url": ""})
    copied: Path | None = None
    source = dataset_file(store, run.config) if copy_dataset else None
    if source is not None and (run.config or {}).get("dataset_id") is None and not _reads_as_dataset(source):
        source = None  # a dataset_path that is no dataset (the store, a picture, a checkpoint): never copied
    if source is not None:
        stem = dest.stem.removesuffix("-config") or dest.stem
        copied = dest.with_name(f"{stem}-dataset{source.suffix or '.jsonl'}")
        shutil.copyfile(source, copied)
        config = config.model_copy(update={"dataset_id": None, "dataset_path": copied.name})
    copies: dict[Path, Path] = {}
    missing: tuple[str, ...] = ()
    if copy_dataset:
        config, copies, missing = _copy_plugin_files(config, dest.parent)
    changed = changed_plugin_files(run, copies)
    lines = "".join(f"# plugin file changed since the run trained: {path} (copied as it is now)\n" for path in changed)
    dest.write_text(provenance_comment(run.provenance) + lines + config.to_yaml(), encoding="utf-8")
    return ConfigExport(dest, copied, tuple(copies.values()), missing, changed)


def _reads_as_dataset(path: Path) -> bool:
    """Whether ``path`` reads as a prompt dataset. A run's ``dataset_path`` is its owner's to write (a script run's
    is never read at ingest), and a login may name any file under the data directory: a copy of ``grpo.db`` in the
    bundle gave a plain login every login's runs, presets and token hashes."""
    from grpo_core.datasets.formats import load_prompt_dataset
    from grpo_core.datasets.prompt_dataset import DatasetError

    try:
        load_prompt_dataset(path)
    except (DatasetError, OSError, ValueError):
        return False
    return True


def provenance_comment(provenance: dict[str, Any] | None) -> str:
    """The run's provenance as YAML comment lines (``# provenance.versions.trl: 1.16.0``) ending in a newline, or
    ``""`` without a record. Comments keep the YAML a valid :class:`~grpo_core.run_config.RunConfig`."""
    if not provenance:
        return ""
    lines = ["# What reproduced this run when it trained (recorded by its worker; not read by `train`):"]
    for field, value in sorted(flatten_provenance(provenance).items()):
        lines.append(f"# provenance.{_comment_text(field)}: {_comment_text(value)}")
    return "".join(f"{line}\n" for line in lines)


def _comment_text(value: Any) -> str:
    r"""``value`` as text that stays on one comment line: printable text as is, anything else as ASCII JSON. A stored
    provenance is hostile (any token holder writes one), and YAML ends a comment at ``\r``, NEL, U+2028 and U+2029
    as well as ``\n``: a key or value holding one would write lines of its own into the exported config."""
    if isinstance(value, str) and value.isprintable():  # no line break of any kind (\x85 is a control)
        return value
    return json.dumps(value, ensure_ascii=True, default=str)


def export_provenance_json(run: RunInfo, dest: Path) -> Path | None:
    """Write the run's provenance record to ``dest`` as indented JSON; ``None`` (nothing written) when the run has
    no record (its worker has not started yet, or it was recorded by an older version).

    Raises:
        OSError: the file cannot be written.
    """
    if not run.provenance:
        return None
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(run.provenance, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    return dest


# ----------------------------------------------------------------------------------------------------- metrics
def metrics_frame(store: Store, run_id: int) -> pd.DataFrame:
    """The run's metrics in wide format: one row per step (ascending), columns ``step``, ``wall_time``, then one
    float column per metric key, sorted by name; NaN where a key was not logged (or logged as NaN) at a step.

    An empty run gives an empty frame with just ``step`` and ``wall_time``.
    """
    points = store.metrics_since(run_id)
    if not points:
        return pd.DataFrame({"step": pd.Series([], dtype="int64"), "wall_time": pd.Series([], dtype="float64")})
    long = pd.DataFrame(
        {
            "step": [p.step for p in points],
            "key": [p.key for p in points],
            "value": [p.value for p in points],
            "wall_time": [p.wall_time for p in points],
        }
    )
    long["value"] = pd.to_numeric(long["value"], errors="coerce").astype("float64")
    wide = long.pivot(index="step", columns="key", values="value")
    wide = wide.reindex(columns=sorted(wide.columns))
    wide.columns.name = None
    wall = long.groupby("step")["wall_time"].min()
    wide.insert(0, "wall_time", wall)
    return wide.reset_index().sort_values("step", kind="stable").reset_index(drop=True)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")
"""A cell starting with one of these is a formula (or a DDE call) to Excel, LibreOffice and Google Sheets; the
full-width forms too, which some of them fold (OWASP, "CSV Injection")."""


def spreadsheet_safe(text: str) -> str:
    """``text`` as a spreadsheet shows it literally: prefixed with ``'`` if it starts with a formula character
    (:data:`FORMULA_STARTS`), otherwise unchanged. Metric names come from logins and ingest tokens."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def export_metrics_csv(store: Store, run_id: int, dest: Path) -> Path:
    """Write :func:`metrics_frame` of the run to ``dest`` as CSV (UTF-8, header row, no index). Returns ``dest``.

    The header's metric names go through :func:`spreadsheet_safe` (the cells below are numbers): a name such as
    ``=HYPERLINK(...)`` recorded by a script must not become a formula in whoever opens the export.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    frame = metrics_frame(store, run_id)
    frame.columns = [spreadsheet_safe(str(c)) for c in frame.columns]
    frame.to_csv(dest, index=False)
    return dest


# ------------------------------------------------------------------------------------------------------ groups
def _groups_schema(reward_names: list[str]) -> pa.Schema:
    fields = [pa.field(n, t) for n, t in GROUP_COLUMNS]
    fields += [pa.field(REWARD_COLUMN_PREFIX + name, pa.float64()) for name in reward_names]
    fields += [pa.field(n, t) for n, t in GROUP_TAIL_COLUMNS]
    return pa.schema(fields)


def export_groups_parquet(store: Store, run_id: int, dest: Path) -> Path:
    """Write every recorded completion of the run to ``dest`` as Parquet, one row per completion.

    Columns: ``run_id``, ``step``, ``row_index`` (dataset row, -1 when unknown), ``prompt`` (rendered text),
    ``completion_index`` (0..G-1 within its group), ``text``, one ``reward_<name>`` float column per reward
    function (null where the rule did not apply), ``total_reward`` (TRL's weighted sum), ``advantage`` (as TRL
    computed it), ``num_tokens`` and ``truncated``. Rows are ordered by step, then group, then completion index.
    The reward columns are those of the run's first recorded group (every group of a run has the same functions).
    Written step by step, so memory stays bounded for long runs.

    Returns:
        ``dest``.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    steps = store.group_steps(run_id)
    reward_names: list[str] = []
    for step in steps[:1]:
        for group in store.groups_at(run_id, step)[:1]:
            for completion in group.completions[:1]:
                reward_names = list(completion.rewards)
    schema = _groups_schema(reward_names)
    columns: dict[str, list[Any]] = {f.name: [] for f in schema}

    def flush(writer: pq.ParquetWriter) -> None:
        if columns["run_id"]:
            writer.write_table(pa.table(columns, schema=schema))
            for values in columns.values():
                values.clear()

    with pq.ParquetWriter(dest, schema) as writer:
        for step in steps:
            for group in store.groups_at(run_id, step):
                for completion in group.completions:
                    columns["run_id"].append(run_id)
                    columns["step"].append(group.step)
                    columns["row_index"].append(group.row_index)
                    columns["prompt"].append(group.prompt)
                    columns["completion_index"].append(completion.index)
                    columns["text"].append(completion.text)
                    for name in reward_names:
                        columns[REWARD_COLUMN_PREFIX + name].append(completion.rewards.get(name))
                    columns["total_reward"].append(completion.total_reward)
                    columns["advantage"].append(completion.advantage)
                    columns["num_tokens"].append(completion.num_tokens)
                    columns["truncated"].append(bool(completion.truncated))
            if len(columns["run_id"]) >= _BATCH_ROWS:
                flush(writer)
        flush(writer)
    return dest


# ----------------------------------------------------------------------------------------------------- adapter
def _zip_folder(source: Path, dest: Path, arc_root: str) -> Path:
    with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for path in sorted(source.rglob("*")):
            if path.is_file():
                archive.write(path, f"{arc_root}/{path.relative_to(source).as_posix()}")
    return dest


def export_adapter_zip(settings: Settings, run: RunInfo, dest: Path) -> Path:
    """Zip the run's final ``adapter/`` folder (PEFT adapter, or full weights without LoRA) to ``dest``; entries
    are under ``adapter/``.

    Raises:
        ExportError: the run folder has no ``adapter/`` (the run is still training, failed or was cancelled
            before saving).
    """
    source = adapter_dir(run_dir(settings, run))
    if not source.is_dir() or not any(source.iterdir()):
        raise ExportError(f"run #{run.id} has no adapter yet ({source} is missing)")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    return _zip_folder(source, dest, ADAPTER_DIR_NAME)


# ---------------------------------------------------------------------------------------------------------- all
def _fresh_folder(root: Path, name: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    candidate, number = root / name, 2
    while candidate.exists():
        candidate, number = root / f"{name}-{number}", number + 1
    candidate.mkdir()
    return candidate


def export_run(store: Store, settings: Settings, run_id: int, *, now: datetime | None = None,
               reader: Actor = SINGLE_USER) -> RunExport:
    """Export everything of run ``run_id`` into ``<data dir>/exports/run-NNNNN-<YYYYmmdd-HHMMSS>/`` and one zip.

    The folder holds the config YAML (with its dataset copy), the provenance JSON (when recorded), metrics CSV,
    groups Parquet and, when the run saved one, the adapter zip; the bundle ``<folder>.zip`` beside the folder holds the same files (the adapter as an
    ``adapter/`` folder, not a nested zip). A run still training is exported as far as it got. ``reader``: the
    login exporting (another owner's ``webhook_url`` is left out, :func:`export_config_yaml`).

    Raises:
        storage.StoreError: no run with that id.
        grpo_core.run_config.ConfigError: the stored config no longer validates.
        OSError: a file cannot be written.
    """
    run = store.get_run(run_id)
    prefix = _prefix(run.id)
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    folder = _fresh_folder(exports_dir(settings), f"{prefix}-{stamp}")
    config, dataset, plugins, missing_plugins, changed = export_config_yaml(
        store, run, folder / f"{prefix}-config.yaml", reader=reader)
    provenance = export_provenance_json(run, folder / f"{prefix}-provenance.json")
    metrics = export_metrics_csv(store, run.id, folder / f"{prefix}-metrics.csv")
    groups = export_groups_parquet(store, run.id, folder / f"{prefix}-groups.parquet")
    try:
        adapter: Path | None = export_adapter_zip(settings, run, folder / f"{prefix}-adapter.zip")
    except ExportError:
        adapter = None
    bundle = folder.with_suffix(".zip")
    with zipfile.ZipFile(bundle, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for path in (config, *plugins, provenance, dataset, metrics, groups):
            if path is not None:
                archive.write(path, f"{folder.name}/{path.relative_to(folder).as_posix()}")
        adapter_source = adapter_dir(run_dir(settings, run))
        if adapter is not None:
            for path in sorted(adapter_source.rglob("*")):
                if path.is_file():
                    archive.write(path, f"{folder.name}/{ADAPTER_DIR_NAME}/{path.relative_to(adapter_source)}")
    return RunExport(
        run_id=run.id,
        folder=folder,
        config=config,
        dataset=dataset,
        metrics=metrics,
        groups=groups,
        adapter=adapter,
        bundle=bundle,
        provenance=provenance,
        plugins=plugins,
        missing_plugins=missing_plugins,
        changed_plugins=changed,
    )


def changed_plugin_files(run: RunInfo, copies: Mapping[Path, Path]) -> tuple[str, ...]:
    """The plugin files copied for the export (``{source's real path: copy}``, from the run's config, which the
    caller's boundary has checked) whose sha256 differs from the one the run's provenance recorded when it trained.

    Only the copies are hashed: a path the provenance alone names is never read, hashed or looked up (a provenance
    comes from a worker or, over the ingest API, from any token holder), so the answer tells nothing of files the run
    did not copy. A run recorded without plugin hashes (an older version) has none.
    """
    recorded = (run.provenance or {}).get("plugins") if isinstance(run.provenance, Mapping) else None
    if not isinstance(recorded, Mapping) or not copies:
        return ()
    now = plugin_hashes([str(copy) for copy in copies.values()])
    changed = []
    for source, copy in copies.items():
        digest = recorded.get(str(source))
        if isinstance(digest, str) and digest and now.get(str(copy)) != digest:
            changed.append(str(source))
    return tuple(changed)
