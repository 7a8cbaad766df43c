"""Validate a run config before it is queued: what a :class:`~grpo_core.run_config.RunConfig` refers to (model,
dataset, reward rules, the columns the rules read, prompt lengths, plugins), without loading a model. Imports no
torch.

:func:`validate_run_config` checks the login's boundary, then validates; :func:`validate_checked_config` validates a
config the boundary has already checked. A launch is checked and validated once, by
:func:`grpo_core.submit.queue.submit_run` (which returns the warnings); a sweep once per point (the boundary) and once
per distinct point (the rest, :mod:`grpo_core.submit.sweeps`); the Launch tab's preflight once, alone.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from grpo_core.access.boundary import OPEN, Boundary
from grpo_core.datasets.leaks import leak_lines
from grpo_core.datasets.prompt_dataset import DatasetError
from grpo_core.datasets.rows import column_mapping, load_rows
from grpo_core.models.prompt_lengths import model_text_folder, require_prompts_fit
from grpo_core.models.prompt_tokens import run_tool_schemas
from grpo_core.models.source import ModelSourceError, describe_model
from grpo_core.models.vision import check_model_reads_images
from grpo_core.reward_check.job import check_plugins, has_plugins
from grpo_core.rewards.answer_coverage import coverage_lines, dataset_answer_coverage
from grpo_core.rewards.compose import build_reward_funcs
from grpo_core.rewards.registry import first_missing_column
from grpo_core.run_config import ConfigError, RunConfig
from grpo_core.tools.job import check_tool_plugins
from storage import DatasetInfo, Store, StoreError


def _listed_dataset(store: Store, dataset_id: int) -> DatasetInfo:
    """The dataset a new run may use: not one marked deleted (kept only for the runs that used it).

    Raises:
        StoreError: no such dataset, or it was deleted.
    """
    info = store.get_dataset(dataset_id)
    if info.deleted_at is not None:
        raise StoreError(f"dataset #{dataset_id} was deleted ({info.name}); choose another")
    return info


TESTS_RULES = ("code_tests", "code_runtime")
"""Rules that read the ``tests`` column (see :func:`grpo_core.rewards.code.units.split_tests`)."""


def _unreadable_tests(config: RunConfig, rows: list[dict[str, Any]]) -> list[str]:
    """Warnings for the rows whose ``tests`` value the code rules cannot read (their reward would be ``None``).

    Raises:
        ConfigError: no row's ``tests`` can be read; the message names the column, a row and why.
    """
    if not rows or not any(spec.rule in TESTS_RULES for spec in config.rewards):
        return []
    from grpo_core.rewards.code.units import why_tests_unreadable

    problems = [
        (index, problem)
        for index, row in enumerate(rows)
        if "tests" in row and (problem := why_tests_unreadable(row.get("tests"), row.get("entry_point"))) is not None
    ]
    if not problems:
        return []
    index, problem = problems[0]
    if len(problems) == len(rows):
        raise ConfigError(
            f"rewards: code_tests cannot read the dataset column 'tests' (row {index}: {problem}); every row's "
            "reward would be None"
        )
    return [
        f"code_tests cannot read the column 'tests' of {len(problems)} of {len(rows)} rows (row {index}: {problem}); "
        "those rows get no code reward"
    ]


def validate_run_config(
    store: Store, config: RunConfig, *, model_cache_dir: Path | None = None, boundary: Boundary = OPEN,
    login: str | None = None,
) -> list[str]:
    """Check what a :class:`RunConfig` refers to, without loading a model. Returns warnings (may be empty).

    The dataset's rows are read with the config's column mapping, and, when the model's tokenizer files are on disk
    (a local folder, or the packaged GGUF once converted into ``model_cache_dir``), every prompt is counted against
    the model's context as the run renders it (:func:`grpo_core.models.prompt_lengths.require_prompts_fit`: the
    run's chat template, its tools' JSON schemas, earlier turns' tool calls); otherwise a warning says the worker
    checks the lengths before loading the model.

    An answer rule that cannot read some rows' ``answer`` (missing, prose, not one number) adds a warning naming how
    many rows and a few of them (:mod:`grpo_core.rewards.answer_coverage`).

    Plugin reward rules are imported and called once on the dataset's first row, in a child process
    (:func:`grpo_core.reward_check.job.check_plugins`), so a broken plugin is refused here in seconds rather than after
    the worker has loaded the model; tool plugins and the environment class are imported and checked the same way
    (:func:`grpo_core.tools.job.check_tool_plugins`: TRL can build each tool's JSON schema, the class has ``reset``).
    That costs two child processes' start-up (three with tool plugins), which is why a launch validates once
    (:func:`grpo_core.submit.queue.submit_run` calls this and returns its warnings); call it directly only to check
    without queueing (the Launch tab's preflight, a sweep's points).

    ``boundary`` (the login's, :func:`grpo_core.access.boundary.boundary_for`) is checked first, before any file is read
    or any plugin imported. Each plugin check's child holds one of
    :data:`grpo_core.child_jobs.slots.PLUGIN_CHECK_SLOTS` for ``login`` while it runs (a config without plugins
    takes none).

    Raises:
        grpo_core.access.boundary.BoundaryError: (a ``ConfigError``) the config names code or a file the login may not use.
        ConfigError: the model cannot be found, the dataset (or the eval dataset) does not exist or its column
            mapping names a column it lacks, a reward rule or parameter is invalid, a rule needs a column the dataset
            (or the eval dataset) lacks, prompts are longer than the model's context minus ``max_completion_length``
            (the message names the rows), every rule is a ``reward_model``, or a plugin does not import, does not fit
            TRL's call or does not return one number (or None) per completion; a tool plugin or the environment does
            not import, a tool has no JSON schema TRL can build, or the environment class has no callable ``reset``.
        grpo_core.child_jobs.slots.SlotsBusy: a plugin check was due and ``login`` holds its share of the plugin
            check slots (or they are all taken); no child was started.
    """
    return validate_checked_config(store, boundary.check_config(config), model_cache_dir=model_cache_dir, login=login)


def validate_checked_config(store: Store, config: RunConfig, *, model_cache_dir: Path | None = None,
                            login: str | None = None) -> list[str]:
    """:func:`validate_run_config` of a config the login's boundary has already checked (what
    :meth:`~grpo_core.access.boundary.Boundary.check_config` returned): the launch's one check is in
    :func:`grpo_core.submit.queue.submit_run`, a sweep's in :mod:`grpo_core.submit.sweeps`. Same warnings and errors,
    less the boundary's."""
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
            columns = _listed_dataset(store, config.dataset_id).columns
        except StoreError as exc:
            raise ConfigError(f"dataset: {exc}") from None
    elif config.dataset_path:
        if not Path(config.dataset_path).exists():
            raise ConfigError(f"dataset_path: {config.dataset_path} does not exist")
    else:
        raise ConfigError("dataset: choose a dataset")
    try:
        rows = load_rows(store, config)
    except (DatasetError, OSError) as exc:
        raise ConfigError(f"dataset: {exc}") from None
    if config.dataset_id is None and rows and ("image" in rows[0] or "images" in rows[0]):
        raise ConfigError("dataset_path: a file with images trains only as a stored dataset; add it in the Datasets "
                          "tab (or with add_dataset), which checks and stores its images, and name its dataset_id")
    if columns is None or column_mapping(config) is not None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    try:
        build_reward_funcs(config.rewards)
    except ValueError as exc:
        raise ConfigError(f"rewards: {exc}") from None
    warnings = []
    rules = [spec.rule for spec in config.rewards]
    if columns is not None and (gap := first_missing_column(rules, columns)) is not None:
        raise ConfigError(
            f"reward rule {gap.position} ({gap.rule}) reads column {gap.column!r}, which the dataset lacks; "
            f"its columns are {', '.join(columns)}"
        )
    warnings += _unreadable_tests(config, rows)
    if config.eval_dataset_id is not None:
        try:
            eval_columns = _listed_dataset(store, config.eval_dataset_id).columns
        except StoreError as exc:
            raise ConfigError(f"eval_dataset_id: {exc}") from None
        if (gap := first_missing_column(rules, eval_columns)) is not None:
            raise ConfigError(
                f"eval_dataset_id: reward rule {gap.rule} reads column {gap.column!r}, which the eval dataset "
                f"lacks; its columns are {', '.join(eval_columns)}"
            )
    if all(spec.rule == "reward_model" for spec in config.rewards):
        raise ConfigError("rewards: a reward_model needs at least one other reward rule beside it")
    if has_plugins(config.rewards):
        try:
            check_plugins(config.rewards, rows[0] if rows else {}, login=login)
        except ValueError as exc:
            raise ConfigError(f"rewards: {exc}") from None
    try:  # tool plugins and the environment imported in a child, as the worker would after loading the model
        plugin_schemas = check_tool_plugins(config.tool_plugins, config.environment, login=login)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if config.max_completion_length < 16:
        warnings.append("max_completion_length below 16 tokens truncates most completions")
    # rows whose answer an answer rule cannot read give it None on every completion: no learning signal
    warnings += coverage_lines(dataset_answer_coverage(rows, rules))
    warnings += leak_lines(rows)  # a final assistant message or the answer inside the prompt: copying is paid
    folder = model_text_folder(config.model, model_cache_dir)
    try:  # an image dataset trains only a vision-language model
        images_warning = check_model_reads_images(config.model, folder, rows)
    except ValueError as exc:
        raise ConfigError(f"model: {exc}") from None
    if images_warning:
        warnings.append(images_warning)
    if folder is None:
        if describe_model(config.model).kind != "folder":
            warnings.append(
                "prompt lengths not checked yet: the model's tokenizer is not on disk (a GGUF is converted at its "
                "first run); the run checks them before loading the model"
            )
    else:
        try:  # as the run renders them: its chat template, its tools' schemas, earlier turns' tool calls
            require_prompts_fit(rows, folder, config.max_completion_length,
                                tools=run_tool_schemas(config.model_dump(mode="json"), plugin_schemas))
        except ValueError as exc:  # PromptTooLongError, or a chat prompt the model's template refuses
            raise ConfigError(f"dataset: {exc}") from None
    return warnings
