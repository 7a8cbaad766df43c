"""Sweeps: one run per point of a grid of run config fields (``learning_rate`` × ``beta`` × ``num_generations``),
launched together. Imports no torch.

A grid is ``field -> [values]``, written either as the Launch form's lines or as YAML:

.. code-block:: yaml

    learning_rate: 1e-5, 1e-4      # a comma-separated list ...
    beta: [0.0, 0.04]              # ... or a YAML list
    num_generations: 4             # one value: a fixed override, not a varied field

or inside a run config, as its ``sweep:`` block (``grpo-dashboard sweep run.yaml``, the API's ``launch_sweep``).

* :func:`parse_grid_text` reads the text; :func:`split_sweep_block` takes the ``sweep:`` block out of a run config
  mapping.
* :func:`plan_sweep` checks every field name and value against :class:`~grpo_core.run_config.RunConfig` (an unknown
  field gets the closest real ones; a value its field refuses is named with the reason; a point whose fields do not
  fit together, e.g. ``num_generations`` not dividing the completions per step, is named), refuses more than
  :data:`MAX_SWEEP_POINTS` points, and expands the grid into the cartesian product, first field slowest, each point
  a named :class:`RunConfig`.
* :func:`submit_sweep` validates every point as :func:`grpo_core.submit.validate.validate_run_config` does and then queues
  them all in one store transaction (:meth:`storage.Store.create_sweep`): if any point is invalid nothing is queued.
  Each run carries the sweep's id and the tag ``sweep:<id>``. The launcher starts them like any queued run, through
  whichever executor it has, ``max_concurrent_runs`` at a time; nothing here picks where a run trains.
* :func:`sweep_table` is a sweep's runs as table rows: each varied field, status, step, final and best reward.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import TypeAdapter, ValidationError

from grpo_core.access.boundary import OPEN, Boundary
from grpo_core.bounded_parse import load_yaml
from grpo_core.run_config import ConfigError, RunConfig, parse_run_config
from grpo_core.submit.queue import check_config_size, stored_run_config
from grpo_core.submit.validate import validate_checked_config
from storage import RunInfo, RunStatus, Store, SweepInfo

MAX_SWEEP_POINTS = 64
"""The most runs one sweep launches; a larger grid is refused (split it, or drop values)."""

SWEEP_KEY = "sweep"
"""The key of a run config's sweep block (``sweep: {learning_rate: [...], ...}``)."""

UNSWEPT_FIELDS = {"name": "each run's name is made from the sweep's name and its point's values"}
"""Run config fields a grid may not vary, with the reason."""

REWARD_KEY = "reward"
"""The metric a sweep's table reports (TRL's total weighted reward, the mean over a step's completions)."""

#: The fields :func:`grpo_core.submit.validate.validate_run_config` reads: two points equal on these validate alike, so a sweep
#: over hyperparameters alone reads the dataset (and tries plugins) once.
_VALIDATED_FIELDS = ("use_vllm", "model", "dataset_id", "dataset_path", "prompt_column", "system_prompt",
                     "column_renames", "rewards", "eval_dataset_id", "max_completion_length", "tool_plugins",
                     "environment")

Grid = dict[str, list[Any]]
"""Run config field -> its values, in the order written (the first field varies slowest)."""


class SweepError(ConfigError):
    """A sweep that cannot be launched; the message names the field, the value or the point."""


@dataclass(frozen=True)
class SweepPlan:
    """A checked sweep: ``grid`` with each value as its field holds it, in JSON form (``"1e-5"`` -> ``1e-05``),
    ``points`` one mapping ``field -> value`` per run (cartesian product, first field slowest) and ``configs`` the run
    config of each point, named after the sweep and the point's varied values."""

    name: str
    grid: Grid
    points: list[dict[str, Any]]
    configs: list[RunConfig]

    @property
    def varied(self) -> list[str]:
        """The fields with more than one value, in grid order."""
        return varied_fields(self.grid)


@dataclass(frozen=True)
class LaunchedSweep:
    """A queued sweep, its runs (in point order) and the warnings of their validation (each once)."""

    sweep: SweepInfo
    runs: list[RunInfo]
    warnings: list[str]


def runs_word(count: int) -> str:
    """``"1 run"``, ``"4 runs"``."""
    return f"{count} run{'s' if count != 1 else ''}"


def varied_fields(grid: Mapping[str, Sequence[Any]]) -> list[str]:
    """The fields of ``grid`` with more than one value, in grid order."""
    return [field for field, values in grid.items() if len(values) > 1]


def _scalar(text: str) -> Any:
    """One comma-separated value as YAML reads it (``0.04`` -> float, ``true`` -> bool, ``cosine`` -> str)."""
    try:
        return load_yaml(text, source="sweep value")
    except ValueError:
        return text


def _values(field: str, value: Any) -> list[Any]:
    """A grid entry's values: a YAML list as is, a comma-separated string split, anything else as one value."""
    if isinstance(value, list):
        values = value
    elif isinstance(value, str) and "," in value:
        values = [_scalar(part.strip()) for part in value.split(",")]
    else:
        values = [value]
    if not values or any(v is None or v == "" for v in values):
        raise SweepError(f"sweep: {field} has an empty value; write `{field}: value, value, ...`")
    return values


def grid_from_mapping(data: Any, *, source: str = "sweep") -> Grid:
    """A grid from a parsed YAML mapping ``field -> values`` (a list, a comma-separated string, or one value).

    Raises:
        SweepError: ``data`` is not a non-empty mapping, or a field has no value.
    """
    if not isinstance(data, dict) or not data:
        raise SweepError(f"{source}: write the grid as `field: value, value, ...` lines, e.g. `beta: 0.0, 0.04`")
    return {str(field): _values(str(field), value) for field, value in data.items()}


def parse_grid_text(text: str, *, source: str = "sweep") -> Grid:
    """The grid written in ``text``: ``field: value, value`` lines, a YAML mapping ``field: [values]``, or a
    mapping with one key ``sweep:`` holding either (as in a run config).

    Returns the grid unchecked (field names and values are checked by :func:`plan_sweep`).

    Raises:
        SweepError: empty, not YAML (with line and column), not a mapping, a ``sweep:`` block beside other fields,
            or a field without a value.
    """
    if not (text or "").strip():
        raise SweepError(f"{source}: the grid is empty; write one `field: value, value, ...` a line")
    data = load_yaml(text, source=source, error=SweepError)
    if isinstance(data, dict) and SWEEP_KEY in data:
        if len(data) > 1:
            others = ", ".join(str(k) for k in data if k != SWEEP_KEY)
            raise SweepError(f"{source}: only the grid goes here, not other fields ({others}); set those in the form")
        data = data[SWEEP_KEY]
    return grid_from_mapping(data, source=source)


def split_sweep_block(data: Mapping[str, Any], *, source: str = "config") -> tuple[dict[str, Any], Grid | None]:
    """A run config mapping without its ``sweep:`` block, and that block as a grid (``None`` when it has none).

    Raises:
        SweepError: the block is not a non-empty mapping of fields to values.
    """
    config = dict(data)
    if SWEEP_KEY not in config:
        return config, None
    return config, grid_from_mapping(config.pop(SWEEP_KEY), source=f"{source}: {SWEEP_KEY}")


def parse_sweep_config_text(text: str, grid_text: str = "", *, source: str = "config") -> tuple[RunConfig, Grid]:
    """A run config written as YAML or JSON text with its ``sweep:`` block, and the grid: that block, or
    ``grid_text`` (:func:`parse_grid_text`) when given; the config's ``name`` becomes the sweep's name.

    Raises:
        SweepError: no grid (neither a ``sweep:`` block nor ``grid_text``), both given, or either unreadable.
        ConfigError: the text is not YAML, not a mapping, or the config (without its block) is invalid.
    """
    data = load_yaml(text or "", source=source, error=ConfigError)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of config fields, got {type(data).__name__}")
    data, grid = split_sweep_block(data, source=source)
    if (grid_text or "").strip():
        if grid is not None:
            raise SweepError(f"{source}: give the grid once, as its `{SWEEP_KEY}:` block or as the grid, not both")
        grid = parse_grid_text(grid_text)
    if grid is None:
        raise SweepError(f"{source}: no grid: add a `{SWEEP_KEY}:` block, e.g. `{SWEEP_KEY}: {{beta: [0.0, 0.04]}}`")
    return parse_run_config(data, source=source), grid


def count_points(grid: Mapping[str, Sequence[Any]]) -> int:
    """The number of runs ``grid`` launches: the product of its fields' value counts."""
    return math.prod(len(values) for values in grid.values())


def describe_grid(grid: Mapping[str, Sequence[Any]]) -> str:
    """``"4 runs: learning_rate (2) × beta (2); fixed: num_generations"``, the shape of a grid in words."""
    points = count_points(grid)
    varied = varied_fields(grid)
    fixed = [field for field in grid if field not in varied]
    shape = " × ".join(f"{field} ({len(grid[field])})" for field in varied) or "no varied field"
    return f"{runs_word(points)}: {shape}" + (f"; fixed: {', '.join(fixed)}" if fixed else "")


def format_value(value: Any) -> str:
    """A point's value as run names and tables show it: numbers with ``:g`` (``1e-05``), text as is, others JSON."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int | str):
        return str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def point_label(point: Mapping[str, Any], fields: Sequence[str]) -> str:
    """``"learning_rate=1e-05 beta=0.04"``: the values of ``fields`` at ``point``."""
    return " ".join(f"{field}={format_value(point[field])}" for field in fields)


def _closest_fields(field: str) -> str:
    close = difflib.get_close_matches(field, list(RunConfig.model_fields), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def _check_value(field: str, value: Any) -> Any:
    """``value`` as ``field`` holds it, in JSON form (``"1e-5"`` -> ``1e-05``, a reward rule as its mapping), checked
    against the field's type and bounds alone (the point's whole config is checked next)."""
    info = RunConfig.model_fields[field]
    adapter = TypeAdapter(Annotated[info.annotation, info])
    try:
        return adapter.dump_python(adapter.validate_python(value), mode="json")
    except ValidationError as exc:
        reason = "; ".join(item["msg"] for item in exc.errors())
        raise SweepError(f"sweep: {field} = {value!r}: {reason}") from None


def check_grid(grid: Mapping[str, Sequence[Any]]) -> Grid:
    """``grid`` with every field name known and every value as its field holds it.

    Raises:
        SweepError: a field is not a run config field (with the closest ones) or may not be varied
            (:data:`UNSWEPT_FIELDS`), has no value, a value its field refuses (named with the reason), or a value
            listed twice; or the grid has more than :data:`MAX_SWEEP_POINTS` points.
    """
    if not grid:
        raise SweepError("sweep: the grid is empty; write one `field: value, value, ...` a line")
    for field in grid:
        if field not in RunConfig.model_fields:
            raise SweepError(f"sweep: {field} is not a run config field{_closest_fields(field)}")
        if field in UNSWEPT_FIELDS:
            raise SweepError(f"sweep: {field} cannot be varied: {UNSWEPT_FIELDS[field]}")
        if not grid[field]:
            raise SweepError(f"sweep: {field} has no value")
    points = count_points(grid)
    if points > MAX_SWEEP_POINTS:
        raise SweepError(
            f"sweep: {' × '.join(f'{len(v)} {f}' for f, v in grid.items())} = {points} runs; at most "
            f"{MAX_SWEEP_POINTS} per sweep: drop values or split it into several sweeps"
        )
    checked: Grid = {}
    for field, values in grid.items():
        typed = [_check_value(field, value) for value in values]
        for index, value in enumerate(typed):
            if value in typed[:index]:
                raise SweepError(f"sweep: {field} lists {format_value(value)} twice")
        checked[field] = typed
    return checked


def plan_sweep(base: RunConfig, grid: Mapping[str, Sequence[Any]], *, name: str | None = None) -> SweepPlan:
    """Check ``grid`` against ``base`` and expand it: one run config per point (cartesian product, first field
    slowest), each ``base`` with the point's values, named ``"<sweep name> · <varied values>"``.

    Args:
        base: the fields every run shares (the Launch form, or the run config beside the ``sweep:`` block).
        grid: field -> values (:func:`parse_grid_text`).
        name: the sweep's name; default ``base.name``, else ``sweep-<time>``.

    Raises:
        SweepError: as :func:`check_grid`, or a point whose config is invalid (e.g. ``num_generations`` not
            dividing the completions per step), named by its values. Pure: nothing is queued.
    """
    checked = check_grid(grid)
    sweep_name = (name or base.name).strip() or f"sweep-{datetime.now():%Y%m%d-%H%M%S}"
    fields = list(checked)
    varied = varied_fields(checked) or fields
    base_data = base.model_dump(mode="json")
    points, configs = [], []
    for values in itertools.product(*checked.values()):
        point = dict(zip(fields, values, strict=True))
        label = point_label(point, varied)
        data = {**base_data, **point}
        data["name"] = f"{sweep_name} · {label}"[:200]
        try:
            configs.append(parse_run_config(data, source=f"sweep point {label}"))
        except ConfigError as exc:
            raise SweepError(str(exc)) from None
        points.append(point)
    return SweepPlan(name=sweep_name, grid=checked, points=points, configs=configs)


def submit_sweep(
    store: Store,
    base: RunConfig,
    grid: Mapping[str, Sequence[Any]],
    *,
    name: str | None = None,
    model_cache_dir: Path | None = None,
    owner: str | None = None,
    boundary: Boundary = OPEN,
) -> LaunchedSweep:
    """Check, expand and queue a sweep: all of its runs, or none.

    Every point is validated as a single launch is (:func:`grpo_core.submit.validate.validate_run_config`: model, dataset,
    reward rules and their columns, prompt lengths, plugins), once per distinct combination of the fields that
    validation reads; only when every point passes are the runs queued, in one transaction, with the sweep's id and
    the tag ``sweep:<id>``, owned by login ``owner``.

    Raises:
        SweepError: as :func:`plan_sweep`.
        ConfigError: a point fails ``boundary`` (:mod:`grpo_core.access.boundary`, checked for every point first) or
            :func:`grpo_core.submit.validate.validate_run_config`; the message names the point.
        grpo_core.child_jobs.slots.SlotsBusy: a point's plugins are due for a check and ``owner`` holds its share of
            :data:`grpo_core.child_jobs.slots.PLUGIN_CHECK_SLOTS` (or they are all taken); nothing was launched.
    """
    plan = plan_sweep(base, grid, name=name)
    for index, (point, config) in enumerate(zip(plan.points, plan.configs, strict=True)):
        try:
            check_config_size(config)
            plan.configs[index] = boundary.check_config(config)  # every point, before any file is read
        except ConfigError as exc:  # a grpo_core.access.boundary.BoundaryError: kept as such
            label = point_label(point, plan.varied) if len(plan.points) > 1 else "its only point"
            raise type(exc)(f"sweep point {label}: {exc}; nothing was launched") from None
    warnings: list[str] = []
    validated: set[str] = set()
    for point, config in zip(plan.points, plan.configs, strict=True):
        key = json.dumps([config.model_dump(mode="json")[f] for f in _VALIDATED_FIELDS], sort_keys=True)
        if key in validated:
            continue
        try:
            found = validate_checked_config(store, config, model_cache_dir=model_cache_dir,  # checked above
                                            login=owner)
        except ConfigError as exc:
            label = point_label(point, plan.varied) if len(plan.points) > 1 else "its only point"
            raise ConfigError(f"sweep point {label}: {exc}; nothing was launched") from None
        warnings += [w for w in found if w not in warnings]
        validated.add(key)
    runs = []
    for config in plan.configs:
        stored = stored_run_config(config)
        runs.append({"name": stored.name, "config": stored.model_dump(mode="json"), "dataset_id": stored.dataset_id,
                     "max_steps": stored.max_steps})
    sweep, infos = store.create_sweep(name=plan.name, grid=plan.grid, runs=runs, owner=owner)
    return LaunchedSweep(sweep=sweep, runs=infos, warnings=warnings)


def sweep_table(
    sweep: SweepInfo, runs: Sequence[RunInfo], rewards: Mapping[int, tuple[float | None, float | None]]
) -> tuple[list[str], list[list[Any]]]:
    """A sweep's runs as a table: ``(headers, rows)``, one row per run in ``runs`` order.

    Columns: ``run`` (``#id``), ``status``, ``step`` (``current/max``), one per varied field of the grid (the run's
    own config value, so a run resumed or edited since shows what it trains with), ``final reward`` (the ``reward``
    metric at its last recorded step) and ``best reward`` (its largest over all steps), both ``None`` before its
    first step.

    Args:
        rewards: run id -> (final, best) (:meth:`storage.Store.final_and_best` of :data:`REWARD_KEY`).
    """
    fields = varied_fields(sweep.grid) or list(sweep.grid)
    headers = ["run", "status", "step", *fields, "final reward", "best reward"]
    rows = []
    for run in runs:
        final, best = rewards.get(run.id, (None, None))
        values = [format_value(run.config.get(field)) if field in run.config else "" for field in fields]
        rows.append([f"#{run.id}", run.status.value, f"{run.current_step}/{run.max_steps}", *values,
                     None if final is None else round(final, 4), None if best is None else round(best, 4)])
    return headers, rows


def failure_lines(runs: Sequence[RunInfo], max_chars: int = 300) -> list[str]:
    """One line per failed run of ``runs``: ``"#12 failed: <the first line of its error>"`` (cut at ``max_chars``
    characters), for the headless sweep's summary under its table; a failed run without a stored error says
    ``"no error recorded: see its train.log"``."""
    lines = []
    for run in runs:
        if run.status is not RunStatus.FAILED:
            continue
        first = next((line.strip() for line in (run.error or "").splitlines() if line.strip()), "")
        if len(first) > max_chars:
            first = first[: max_chars - 3] + "..."
        lines.append(f"#{run.id} failed: {first or 'no error recorded: see its train.log'}")
    return lines

