"""The dashboard's public API: the endpoints a notebook scripts with ``gradio_client``, under stable names.

==============  ===================================================  ==================================================
endpoint        inputs                                               output
==============  ===================================================  ==================================================
add_dataset     ``file`` (JSONL/JSON/CSV/Parquet/.zip), ``name``,    the dataset: id, name, num_rows, columns, ...
                ``prompt_column``, ``system_prompt``, ``column_renames``
launch_run      ``config`` (a RunConfig as YAML or JSON text)        ``{"run": <run>, "warnings": [...]}``
launch_sweep    ``config`` (with a ``sweep:`` block), or ``config``  ``{"sweep": <sweep>, "runs": [<run>, ...],
                and ``grid`` (``field: value, value`` lines)         "warnings": [...]}``
list_runs       ``status`` ("" = all, or queued, running, ...)       ``[<run>, ...]`` newest first
run_metrics     ``run_id``, ``after_step`` (-1: all), ``keys``       ``[{"step", "key", "value", "wall_time"}, ...]``
run_groups      ``run_id``, ``after_step`` (-1: all), ``step``,      ``[{"step", "row_index", "prompt", "id",
                ``limit``, ``row_index`` (one dataset row),          "completions": [...]}, ...]``, step by step
                ``after_group`` (the page's keyset: last id)         (a page ends at ~2 million characters of text)
run_images      ``run_id``, ``row_index`` (a group's), ``split``         ``[{"name", "data_url"}, ...]``: the prompt's
                (``"train"`` or ``"eval"``)                          images; only the run's owner or an admin
cancel_run      ``run_id``                                           the run (``cancel_requested`` set)
resume_run      ``run_id``                                           the run, queued again
delete_run      ``run_id``                                           ``{"run_id", "deleted": true}``
export_run      ``run_id``                                           ``{"run_id", "folder", "files", ...}``, the zip
merge_run       ``run_id``, ``download`` (True: also the zip)        ``{"run_id", "folder", "files"}``, the zip or None
list_datasets   (none)                                               ``[<dataset>, ...]`` newest first
rename_dataset  ``dataset_id``, ``name``                             the dataset
delete_dataset  ``dataset_id``                                       ``{"dataset_id", "deleted": true, "kept_for_runs"}``
rescore_run     ``run_id``, ``rules`` (YAML), ``first_step``,        the comparison of the run's scoring with the new
                ``last_step``, ``sample``, ``seed``,                 rules (:mod:`app.api.rescore`)
                ``scale_rewards``
==============  ===================================================  ==================================================

A ``<run>`` is :func:`run_dict` (with ``owner``, the login that launched it), a ``<dataset>`` :func:`dataset_dict`.
With several logins, ``cancel_run``, ``resume_run``, ``delete_run``, ``rename_dataset`` and ``delete_dataset`` are
refused (``AppError`` naming the owner) unless the caller's login owns the run or dataset or is an admin
(:mod:`grpo_core.access.ownership`). ``launch_run`` and ``launch_sweep`` read their texts under
:mod:`grpo_core.bounded_parse`'s limits and refuse a ``webhook_url`` the login may not set or that names an
internal host (:func:`grpo_core.alerts.targets.check_launch_webhooks`). ``merge_run``, like ``export_run``, is open to every login: it reads the run and
writes a new folder under ``exports/``, changing nothing of the run. With several logins, ``launch_run`` and
``launch_sweep`` also refuse plugins, dataset files, model folders and ``trust_remote_code`` beyond what the admin
allows, before importing or reading anything (the plugins they may import are checked in children holding the
login's share of :data:`grpo_core.child_jobs.slots.PLUGIN_CHECK_SLOTS`: over it, refused at once), and
``resume_run``, ``export_run`` and ``merge_run`` re-check the run's stored config against the caller
(:mod:`grpo_core.access.boundary`, docs/security.md). Every handler calls the store, the launcher
or :mod:`grpo_core` as the tabs do; errors come back as ``gradio_client`` ``AppError`` with the store's or the
config's message. Every other event of the dashboard (the tabs' handlers) is made private by
:func:`hide_internal_endpoints`: not listed, not callable by name.

No ``from __future__ import annotations`` here: ``gr.api`` reads the handlers' return annotations as types.
"""

import dataclasses
import logging
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import gradio as gr

from app.api.group_pages import groups_page
from app.api.rescore import create_rescore_api
from app.context import MODEL_JOBS, PLUGIN_CHECK_JOBS, AppContext, actor_of, boundary_of, check_webhooks, fair_share
from grpo_core.access.ownership import Actor, NotOwnerError, config_shown_to
from grpo_core.child_jobs.slots import MODEL_SLOTS, SlotsBusy
from grpo_core.datasets.library import (
    DatasetInUseError,
    delete_dataset,
    import_dataset,
    parse_renames,
    rename_dataset,
)
from grpo_core.datasets.prompt_dataset import ColumnMapping, DatasetError
from grpo_core.integrations.wire import MAX_RUN_METRIC_KEYS
from grpo_core.merge.job import MergeError, merge_run, zip_merged_folder
from grpo_core.run_config import ConfigError, parse_run_config_text
from grpo_core.runs.actions import RunActionError, cancel_run, delete_run, resume_run
from grpo_core.runs.export import export_run
from grpo_core.runs.images import group_images
from grpo_core.submit.queue import submit_run
from grpo_core.submit.sweeps import parse_sweep_config_text, submit_sweep
from grpo_core.tools.turns import clean_spans, clean_turns
from storage import CompletionRecord, DatasetInfo, GroupRecord, MetricPoint, RunInfo, RunStatus, StoreError

LOG = logging.getLogger(__name__)


def refused(message: str) -> gr.Error:
    """The error an endpoint raises for a call it refuses (bad input, not the caller's run, unknown id): the client
    gets ``message``; the server logs one line instead of Gradio's traceback (a refusal is not a server fault)."""
    LOG.info("API call refused: %s", message)
    return gr.Error(message, print_exception=False)


#: The endpoints :func:`create_public_api` adds, in the order the API page lists them.
PUBLIC_ENDPOINTS = (
    "add_dataset",
    "launch_run",
    "launch_sweep",
    "list_runs",
    "run_metrics",
    "run_groups",
    "run_images",
    "cancel_run",
    "resume_run",
    "export_run",
    "delete_run",
    "merge_run",
    "list_datasets",
    "rename_dataset",
    "delete_dataset",
    "rescore_run",  # app/api/rescore.py
)

#: The most groups one ``run_groups`` call returns.
MAX_GROUPS = 1000


def _plain(value: Any) -> Any:
    """``value`` with datetimes as ISO 8601 text, enums as their value, paths as text (JSON-able)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, RunStatus):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def run_dict(run: RunInfo, reader: Actor | None = None) -> dict[str, Any]:
    """A run as plain JSON: every :class:`storage.RunInfo` field (times ISO 8601 UTC, status as text, ``config``
    the stored RunConfig, as ``reader`` may read it: another owner's ``webhook_url`` hidden,
    :func:`grpo_core.access.ownership.config_shown_to`; ``None``: a run the caller just launched or changed)."""
    fields = _plain(dataclasses.asdict(run))
    if reader is not None:
        fields["config"] = config_shown_to(reader, run.owner, fields.get("config"))
    return fields


def dataset_dict(dataset: DatasetInfo) -> dict[str, Any]:
    """A dataset as plain JSON: the :class:`storage.DatasetInfo` fields, ``path`` (the normalised JSONL file on the
    server) renamed ``stored_file``: Gradio takes any output mapping with a ``path`` key for a file to send."""
    fields = _plain(dataclasses.asdict(dataset))
    fields["stored_file"] = fields.pop("path")
    return fields


def metric_dict(point: MetricPoint) -> dict[str, Any]:
    """``{"step", "key", "value", "wall_time"}``: value ``None`` where TRL logged NaN; wall time in epoch seconds."""
    return dataclasses.asdict(point)


def group_dict(group: GroupRecord) -> dict[str, Any]:
    """A group as plain JSON: ``step``, ``row_index``, ``prompt``, ``extra``, ``id`` and ``completions``, each
    with ``index``, ``text``, ``rewards`` (rule -> reward), ``total_reward``, ``advantage``, ``num_tokens``,
    ``truncated``, and for a multi-turn completion (a rollout with tool calls) ``turns`` (assistant text, tool
    calls with their arguments, tool results or errors, environment rewards, in order; see
    :mod:`grpo_core.tools.turns`) and ``tool_mask`` (which tokens TRL trained on, as ``[[1|0, length], ...]``),
    both ``None`` for a single-turn one; ``text`` is then the final assistant turn."""
    return {field.name: [_completion_dict(c) for c in group.completions] if field.name == "completions"
            else _field_value(getattr(group, field.name)) for field in dataclasses.fields(group)}


def _field_value(value: Any) -> Any:
    """A record's field as plain JSON (a nested record as its fields, as ``dataclasses.asdict`` gives them)."""
    return _plain(dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value)


def _completion_dict(completion: CompletionRecord) -> dict[str, Any]:
    """A completion as :func:`group_dict` gives it: the turns and tool mask the store gave back bounded again
    (:func:`grpo_core.tools.turns.clean_turns` builds them anew: no deep copy of a long trajectory before)."""
    cleaners = {"turns": clean_turns, "tool_mask": clean_spans}
    return {field.name: cleaners[field.name](getattr(completion, field.name)) if field.name in cleaners
            else _field_value(getattr(completion, field.name)) for field in dataclasses.fields(completion)}


def create_public_api(ctx: AppContext) -> None:
    """Add the :data:`PUBLIC_ENDPOINTS` to the current ``gr.Blocks`` (API only: their components are hidden)."""

    def add_dataset(
        file: str | None,
        name: str | None,
        prompt_column: str | None = None,
        system_prompt: str | None = None,
        column_renames: str | None = None,
        request: gr.Request = None,
    ) -> dict[str, Any]:
        """Add a prompt file (JSONL, JSON, CSV, Parquet, or a .zip of a save_to_disk folder) as a dataset named
        ``name`` (default: the file's name). ``prompt_column`` names the prompt column when it is not ``prompt``
        (e.g. ``question``), ``system_prompt`` turns text prompts into chat prompts, ``column_renames`` renames
        others (``"solution=answer"``). Returns the dataset; fails when the file is invalid (with line and column),
        the mapping names a column the file lacks, or the name is taken."""
        if not file:
            raise refused("add_dataset: give a file")
        try:
            mapping = ColumnMapping(prompt_column=(prompt_column or "").strip() or None,
                                    system_prompt=system_prompt or "", renames=parse_renames(column_renames))
            info = import_dataset(ctx.store, ctx.settings, file, source_name=Path(file).name,
                                  name=name or None, mapping=mapping, owner=actor_of(ctx, request).user)
        except (DatasetError, StoreError, ValueError) as exc:
            raise refused(f"add_dataset: {exc}") from None
        return dataset_dict(info)

    def launch_run(config: str, request: gr.Request) -> dict:
        """Queue a run from a RunConfig written as YAML or JSON text (the fields of ``run.yaml``; ``dataset_id`` from
        ``add_dataset``). Returns {"run": the queued run, "warnings": [text, ...]}."""
        try:
            boundary = boundary_of(ctx, request)
            run_config = parse_run_config_text(config or "", source="config")
            check_webhooks(ctx, request, [run_config.webhook_url])
            submitted = submit_run(ctx.store, run_config, model_cache_dir=ctx.settings.model_cache_dir,
                                   owner=actor_of(ctx, request).user, boundary=boundary)
        except (ConfigError, ValueError, SlotsBusy) as exc:  # SlotsBusy: the login's plugin checks
            raise refused(f"launch_run: {exc}") from None
        ctx.launcher.tick()
        return {"run": run_dict(ctx.store.get_run(submitted.run.id)), "warnings": list(submitted.warnings)}

    def launch_sweep(config: str, grid: str = "", request: gr.Request = None) -> dict:
        """Queue a sweep: one run per point of a grid of run config fields, all of them or none. ``config`` is a
        RunConfig as YAML or JSON text, with the grid as its ``sweep:`` block (``sweep: {learning_rate: [1e-5,
        1e-4], beta: [0.0, 0.04]}``), or the grid in ``grid`` (``learning_rate: 1e-5, 1e-4`` lines); at most 64
        points. Returns {"sweep": {"id", "name", "grid", "run_ids", ...}, "runs": [the queued runs], "warnings"}."""
        try:
            base, sweep_grid = parse_sweep_config_text(config or "", grid or "", source="config")
            check_webhooks(ctx, request, [base.webhook_url, *sweep_grid.get("webhook_url", [])])
            launched = submit_sweep(ctx.store, base, sweep_grid, model_cache_dir=ctx.settings.model_cache_dir,
                                    owner=actor_of(ctx, request).user, boundary=boundary_of(ctx, request))
        except (ConfigError, ValueError, SlotsBusy) as exc:
            raise refused(f"launch_sweep: {exc}") from None
        ctx.launcher.tick()
        return {"sweep": _plain(dataclasses.asdict(launched.sweep)),
                "runs": [run_dict(ctx.store.get_run(run.id)) for run in launched.runs],
                "warnings": launched.warnings}

    def list_runs(status: str = "", request: gr.Request = None) -> list:
        """Every run, newest first, or only those with ``status`` (queued, running, completed, failed, cancelled;
        empty: all). Another login's run's ``webhook_url`` reads ``(set by the run's owner; hidden)``."""
        try:
            statuses = [RunStatus(status)] if status else None
        except ValueError:
            choices = ", ".join(s.value for s in RunStatus)
            raise refused(f"list_runs: status must be one of {choices}, or empty for all") from None
        reader = actor_of(ctx, request)
        return [run_dict(run, reader) for run in ctx.store.list_runs(statuses)]

    def run_metrics(run_id: int, after_step: int = -1, keys: list[str] | None = None) -> list:
        """The run's metric points at steps after ``after_step`` (-1: all), step by step, only ``keys`` when given
        (TRL's names: reward, kl, rewards/<rule>/mean, ...; at most 2,000, as many as a run keeps). Pass the last
        step seen to read only new points."""
        _run(run_id)
        if keys and (not isinstance(keys, list) or len(keys) > MAX_RUN_METRIC_KEYS
                     or not all(isinstance(key, str) and len(key) <= 200 for key in keys)):
            raise refused(f"run_metrics: keys must be a list of at most {MAX_RUN_METRIC_KEYS:,} metric names of at "
                          "most 200 characters each")
        points = ctx.store.metrics_since(int(run_id), int(after_step), keys=list(keys) if keys else None)
        return [metric_dict(point) for point in points]

    def run_groups(run_id: int, after_step: int = -1, step: int | None = None, limit: int = 200,
                   row_index: int | None = None, after_group: int | None = None) -> list:
        """The run's sampled groups (prompt, completions with per-rule rewards, total and advantage): those at
        ``step`` when given, else those after ``after_step`` (-1: all), step by step, at most ``limit`` (up to
        1000); only dataset row ``row_index``'s when given (one prompt across steps). Pages: pass the last group's
        ``step`` and ``id`` as ``after_step`` and ``after_group`` (without ``after_group`` every group of
        ``after_step`` counts as seen) until a page comes back empty: a page of long completions (agentic rollouts)
        ends before ``limit`` once it carries ~2 million characters of text (:mod:`app.api.group_pages`)."""
        _run(run_id)
        after_step, step, limit, row_index, after_group = (
            _whole("run_groups", name, value)
            for name, value in (("after_step", after_step), ("step", step), ("limit", limit),
                                ("row_index", row_index), ("after_group", after_group))
        )
        if limit < 1:
            raise refused(f"run_groups: limit must be at least 1, got {limit}")
        limit = min(limit, MAX_GROUPS)
        return groups_page(ctx.store, int(run_id), after_step=after_step, step=step, limit=limit,
                           row_index=row_index, after_group=after_group, to_dict=group_dict)

    def run_images(run_id: int, row_index: int, split: str = "train", request: gr.Request = None) -> list:
        """The images of a group's prompt (dataset row ``row_index`` of the run, or the prompt key of a group a
        training script recorded with its pictures; ``split`` ``"eval"`` for a held-out group), each as
        ``{"name": <stored name: sha256 of the PNG>, "data_url": "data:image/png;base64,..."}``; ``[]`` for a text
        prompt; at most 16 and 24 MB a group. Only the run's owner or an admin may read them, and a dataset row's
        only when the login may also see the dataset's (its owner or an admin)."""
        run = _run(run_id)
        index = _whole("run_images", "row_index", row_index)
        if index is None:
            raise refused("run_images: give the group's row_index")
        if split not in ("train", "eval"):
            raise refused(f"run_images: split must be 'train' or 'eval', got {str(split)[:20]!r}")
        try:
            found = group_images(ctx.store, run, index, split=split, actor=actor_of(ctx, request))
        except NotOwnerError as exc:
            raise refused(str(exc)) from None
        return [{"name": image.name, "data_url": image.data_url()} for image in found]

    def cancel_run_endpoint(run_id: int, request: gr.Request) -> dict:
        """Ask a run to stop: a queued run is cancelled at once, a running one at the end of its current step.
        Returns the run. Refused unless the login owns the run or is an admin."""
        _run(run_id)
        try:
            cancel_run(ctx.store, int(run_id), actor_of(ctx, request), request_stop=ctx.launcher.cancel)
        except (NotOwnerError, StoreError) as exc:
            raise refused(f"cancel_run: {exc}") from None
        return run_dict(ctx.store.get_run(int(run_id)))

    def resume_run_endpoint(run_id: int, request: gr.Request) -> dict:
        """Queue a cancelled or failed run again, from its last checkpoint (or step 0 without one). Returns the
        run. Refused unless the login owns the run or is an admin."""
        try:
            run = resume_run(ctx.store, ctx.settings, int(run_id), actor_of(ctx, request))
        except (RunActionError, NotOwnerError, StoreError, ConfigError) as exc:
            raise refused(f"resume_run: {exc}") from None
        return run_dict(run)  # the launcher's next pass starts it, as after a resume in the Runs tab

    def delete_run_endpoint(run_id: int, request: gr.Request) -> dict:
        """Delete a finished run with its folder, metrics and groups. Returns {"run_id", "deleted": true}. Refused
        while it is queued or running, and unless the login owns the run or is an admin."""
        _run(run_id)
        try:
            delete_run(ctx.store, ctx.settings, int(run_id), actor_of(ctx, request))
        except (RunActionError, NotOwnerError, StoreError, OSError) as exc:
            raise refused(f"delete_run: {exc}") from None
        return {"run_id": int(run_id), "deleted": True}

    def export(run_id: int | None, request: gr.Request) -> tuple[dict[str, Any], str]:
        """Write the run's config YAML (with its dataset), metrics CSV, groups Parquet and adapter zip (when saved)
        on the server. Returns the list of written files and the zip of all of them (downloaded by the client)."""
        if run_id is None:
            raise refused("export_run: give a run_id")
        try:
            boundary_of(ctx, request).check_stored(ctx.store.get_run(int(run_id)).config or {}, "export")
            result = export_run(ctx.store, ctx.settings, int(run_id), reader=actor_of(ctx, request))
        except (StoreError, ConfigError, OSError) as exc:
            raise refused(f"export_run: {exc}") from None
        summary = {
            "run_id": result.run_id,
            "folder": str(result.folder),
            "files": [str(path) for path in result.files()],
            "has_adapter": result.adapter is not None,
            "warnings": result.warnings(),
        }
        try:
            return summary, ctx.offer(result.bundle, request)
        except OSError as exc:
            raise refused(f"export_run: {exc}") from None

    def merge(run_id: int | None, download: bool = True, request: gr.Request = None) -> tuple[dict[str, Any], str | None]:
        """Merge a finished run's LoRA adapter into its base model in a worker process (as the Export panel's merge
        button), writing ``<data dir>/exports/run-NNNNN-merged-<time>/`` (safetensors, tokenizer, generation
        config). Returns ``{"run_id", "folder", "files"}`` and, with ``download``, a zip of the folder (the size of
        the model in float32: 0.5 GB for SmolLM2-135M); None without. Fails while the run has no adapter. Open to
        every login, like ``export_run``."""
        if run_id is None:
            raise refused("merge_run: give a run_id")
        try:
            run = ctx.store.get_run(int(run_id))
            boundary_of(ctx, request).check_stored(run.config or {}, "merge")
            *_, folder = merge_run(ctx.settings, run)
            folder = Path(folder)
            bundle = zip_merged_folder(folder) if download else None
        except (StoreError, MergeError, OSError, ConfigError) as exc:
            raise refused(f"merge_run: {exc}") from None
        summary = {"run_id": run.id, "folder": str(folder),
                   "files": sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())}
        try:
            return summary, ctx.offer(bundle, request)
        except OSError as exc:
            raise refused(f"merge_run: {exc}") from None

    def list_datasets() -> list:
        """Every dataset, newest first (a deleted one is left out: see ``delete_dataset``), with its ``owner``."""
        return [dataset_dict(info) for info in ctx.store.list_datasets()]

    def rename_dataset_endpoint(dataset_id: int, name: str, request: gr.Request) -> dict:
        """Give a dataset a new name (letters, digits, spaces and . ( ) - + _); runs refer to it by id. Returns the
        dataset. Refused when the name is taken, and unless the login owns the dataset or is an admin."""
        try:
            info = rename_dataset(ctx.store, int(dataset_id), name, actor_of(ctx, request))
        except (DatasetError, NotOwnerError, StoreError, TypeError, ValueError) as exc:
            raise refused(f"rename_dataset: {exc}") from None
        return dataset_dict(info)

    def delete_dataset_endpoint(dataset_id: int, request: gr.Request) -> dict:
        """Delete a dataset. Returns {"dataset_id", "deleted": true, "kept_for_runs": [run ids]}: when finished
        runs used it, it leaves the lists but its rows are kept for them (they still resume and export); else its
        file is removed too. Refused while a queued or running run uses it, and unless the login owns the dataset
        or is an admin."""
        try:
            done = delete_dataset(ctx.store, ctx.settings, int(dataset_id), actor_of(ctx, request))
        except (DatasetInUseError, NotOwnerError, StoreError, OSError, TypeError, ValueError) as exc:
            raise refused(f"delete_dataset: {exc}") from None
        return {"dataset_id": done.dataset_id, "deleted": True, "kept_for_runs": list(done.kept_for_runs)}

    def _whole(endpoint: str, name: str, value: Any) -> int | None:
        """``value`` as a whole number (``None`` stays ``None``); a refusal naming the argument otherwise."""
        if value is None:
            return None
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not math.isfinite(number) or number != int(number):
            raise refused(f"{endpoint}: {name} must be a whole number, got {value!r}")
        return int(number)

    def _run(run_id: int) -> RunInfo:
        try:
            return ctx.store.get_run(int(run_id))
        except (StoreError, TypeError, ValueError):
            raise refused(f"no run with id {run_id}") from None

    with gr.Column(visible=False):
        upload = gr.File(label="file", type="filepath", file_types=[".jsonl", ".json", ".csv", ".parquet", ".zip"])
        dataset_name = gr.Textbox(label="name", value="")
        prompt_column = gr.Textbox(label="prompt_column", value="")
        system_prompt = gr.Textbox(label="system_prompt", value="")
        column_renames = gr.Textbox(label="column_renames", value="")
        dataset_out = gr.JSON(label="dataset")
        export_id = gr.Number(label="run_id", precision=0)
        export_out = gr.JSON(label="export")
        export_zip = gr.File(label="bundle")
        merge_id = gr.Number(label="run_id", precision=0)
        merge_download = gr.Checkbox(label="download", value=True)
        merge_out = gr.JSON(label="merged")
        merge_zip = gr.File(label="merged zip")
    gr.on([], add_dataset, inputs=[upload, dataset_name, prompt_column, system_prompt, column_renames],
          outputs=dataset_out, api_name="add_dataset")
    gr.api(launch_run, api_name="launch_run", **PLUGIN_CHECK_JOBS)
    gr.api(launch_sweep, api_name="launch_sweep", **PLUGIN_CHECK_JOBS)
    gr.api(list_runs, api_name="list_runs")
    gr.api(run_metrics, api_name="run_metrics")
    gr.api(run_groups, api_name="run_groups")
    gr.api(run_images, api_name="run_images")
    gr.api(cancel_run_endpoint, api_name="cancel_run", api_description=cancel_run_endpoint.__doc__)
    gr.api(resume_run_endpoint, api_name="resume_run", api_description=resume_run_endpoint.__doc__)
    gr.on([], export, inputs=export_id, outputs=[export_out, export_zip], api_name="export_run")
    gr.api(delete_run_endpoint, api_name="delete_run", api_description=delete_run_endpoint.__doc__)
    gr.on([], fair_share(MODEL_SLOTS, merge), inputs=[merge_id, merge_download], outputs=[merge_out, merge_zip],
          api_name="merge_run", **MODEL_JOBS)
    gr.api(list_datasets, api_name="list_datasets")
    gr.api(rename_dataset_endpoint, api_name="rename_dataset", api_description=rename_dataset_endpoint.__doc__)
    gr.api(delete_dataset_endpoint, api_name="delete_dataset", api_description=delete_dataset_endpoint.__doc__)
    create_rescore_api(ctx)  # the reward workbench's rescore_run (app/api/rescore.py)


def hide_internal_endpoints(blocks: gr.Blocks, public: tuple[str, ...] = PUBLIC_ENDPOINTS) -> list[str]:
    """Make every event of ``blocks`` whose API name is not in ``public`` private: the page's own handlers still
    run, but they are neither listed on the API page nor callable by name from a client. Call after the whole page
    is built. Returns the names hidden."""
    hidden = []
    for block_fn in blocks.fns.values():
        if block_fn.api_name not in public and block_fn.api_visibility != "private":
            block_fn.api_visibility = "private"
            hidden.append(str(block_fn.api_name))
    return hidden
