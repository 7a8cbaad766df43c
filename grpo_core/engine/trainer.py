"""Builds TRL's ``GRPOTrainer`` from a :class:`~grpo_core.run_config.RunConfig` (imports torch, transformers, TRL).

TRL is the training engine; this module only assembles its inputs: the dataset (with the
:data:`~grpo_core.datasets.rows.ROW_INDEX_COLUMN` column so each recorded group knows its ``row_index``), the policy model
and tokenizer (:mod:`grpo_core.engine.policy_model`), the reward functions and weights, ``GRPOConfig`` and ``LoraConfig``
(:mod:`grpo_core.engine.trl_args`), the :class:`~grpo_core.engine.recorder.RunRecorder` callback and the
:class:`~grpo_core.engine.token_stats.TokenCapture` of each recorded completion's per-token values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_core.datasets.images import IMAGES_COLUMN, image_in_folder
from grpo_core.datasets.rows import ROW_INDEX_COLUMN, eval_row_indices
from grpo_core.engine.group_capture import RolloutTap
from grpo_core.engine.heartbeat import Heartbeat
from grpo_core.engine.policy_model import (
    end_of_sequence_ids,
    gpu_step_metrics,
    load_policy,
    pick_device,
    policy_dtype,
    share_cpu_threads,
)
from grpo_core.engine.recorder import RunRecorder
from grpo_core.engine.reward_models import reward_funcs_for_trl
from grpo_core.engine.token_stats import TokenCapture
from grpo_core.engine.tool_rollout import bounded_environment, bounded_tool
from grpo_core.engine.tool_template import use_tool_chat_template
from grpo_core.engine.trl_args import to_grpo_config, to_lora_config
from grpo_core.rewards.compose import build_reward_funcs, guard_reward_funcs
from grpo_core.rewards.plugin import load_plugin_function
from grpo_core.rewards.template_tags import resolve_for_model
from grpo_core.run_config import RunConfig
from grpo_core.tools.library import library_tools
from storage import Store


@dataclass
class BuiltTrainer:
    """A ready ``GRPOTrainer``, the recorder attached to it and the capture of its per-token values."""

    trainer: Any
    recorder: RunRecorder
    device: str
    token_capture: TokenCapture | None = None


def to_hf_dataset(rows: Sequence[dict[str, Any]], indices: Sequence[int] | None = None,
                  images: Path | None = None):
    """A ``datasets.Dataset`` of the prompt rows (those at ``indices``, default all) plus the :data:`ROW_INDEX_COLUMN`
    column (each row's 0-based ``row_index`` in ``rows``). With ``images`` (the dataset's image folder,
    :func:`grpo_core.datasets.images.image_folder`) each row's ``images`` names become the pictures TRL's
    ``GRPOTrainer`` hands the processor (a ``datasets.Image`` feature read from the stored PNG files).

    Raises:
        ValueError: a row names an image that is not a stored image's name.
    """
    from datasets import Dataset, Image
    from datasets import Sequence as FeatureList

    chosen = range(len(rows)) if indices is None else indices
    listed = [{**rows[i], ROW_INDEX_COLUMN: i} for i in chosen]
    if images is None or not any(IMAGES_COLUMN in row for row in listed):
        return Dataset.from_list(listed)
    for row in listed:
        row[IMAGES_COLUMN] = [str(image_in_folder(images, name))
                              for name in row.get(IMAGES_COLUMN) or []]
    dataset = Dataset.from_list(listed)
    return dataset.cast_column(IMAGES_COLUMN, FeatureList(Image()))


def split_rows(
    config: RunConfig, rows: Sequence[dict[str, Any]], eval_rows: Sequence[dict[str, Any]] | None = None
) -> tuple[list[int], Sequence[dict[str, Any]] | None, list[int]]:
    """The training ``row_index`` values, the rows evaluated on and their indices.

    With ``eval_rows`` (the run's ``eval_dataset_id``) all ``rows`` train and every eval row is evaluated; with
    ``eval_fraction`` the rows of :func:`grpo_core.datasets.rows.eval_row_indices` are held out of training; otherwise
    nothing is evaluated (``None``, ``[]``).
    """
    if eval_rows:
        return list(range(len(rows))), eval_rows, list(range(len(eval_rows)))
    held = eval_row_indices(len(rows), config.eval_fraction, config.seed) if config.eval_fraction else []
    if not held:
        return list(range(len(rows))), None, []
    held_set = set(held)
    return [i for i in range(len(rows)) if i not in held_set], rows, held


def build_trainer(
    config: RunConfig,
    rows: Sequence[dict[str, Any]],
    *,
    model_path: str,
    output_dir: Path,
    store: Store,
    run_id: int,
    heartbeat: Heartbeat | None = None,
    progress: Callable[[str], None] = print,
    eval_rows: Sequence[dict[str, Any]] | None = None,
    images: Path | None = None,
    eval_images: Path | None = None,
) -> BuiltTrainer:
    """Assemble a ``trl.GRPOTrainer`` that records into ``store`` as run ``run_id``.

    Args:
        config: the run config.
        rows: prompt rows (``prompt`` plus the columns the reward rules read).
        model_path: a folder or hub id for ``from_pretrained`` (see :func:`grpo_core.engine.policy_model.prepare_model`).
        output_dir: TRL's output folder (checkpoints, final adapter).
        store, run_id: where the recorder writes.
        heartbeat: the worker's heartbeat (its cancel flag stops training at the next step).
        progress: receives one-line status messages.
        eval_rows: the rows of the run's ``eval_dataset_id`` (else the ``eval_fraction`` split of ``rows``, if any).
        images, eval_images: the image folders of ``rows``' and ``eval_rows``' datasets (their ``images`` names),
            or ``None`` for text datasets.

    A ``reward_model`` rule becomes the model TRL scores with (:func:`grpo_core.engine.reward_models.
    reward_funcs_for_trl`); when the first rule is one, the first reward function is moved ahead of it (the
    :class:`RolloutTap` wraps a function), with its weight and name.

    Raises:
        ValueError: a reward rule cannot be built (bad parameter), every rule is a ``reward_model``, or the dataset
            is empty.
        OSError: a reward model cannot be loaded.
    """
    import torch
    from trl import GRPOTrainer

    if not rows:
        raise ValueError("the dataset has no rows")
    models = [spec.rule == "reward_model" for spec in config.rewards]
    if all(models):
        raise ValueError("rewards: a reward_model needs at least one other reward rule beside it")
    if models[0]:  # the RolloutTap wraps a function, never a model: put the first function first
        first = models.index(False)
        rewards = [config.rewards[first], *config.rewards[:first], *config.rewards[first + 1 :]]
        config = config.model_copy(update={"rewards": rewards})
    rewards, opens_think = resolve_for_model(config.rewards, str(model_path), rows)  # template_opened_think: auto
    if opens_think:
        progress("the chat template opens <think> in the prompt: format rules read completions as starting inside it")
    config = config.model_copy(update={"rewards": rewards})
    funcs, weights, names = build_reward_funcs(config.rewards)
    device = pick_device(config.device)
    bf16 = policy_dtype(device) == torch.bfloat16
    share_cpu_threads(device)  # beside the web process: a core left to it (grpo_core.training.cpu_share)
    on = f"cpu ({torch.get_num_threads()} torch threads)" if device == "cpu" else device
    progress(f"loading model from {model_path} on {on} in {'bfloat16' if bf16 else 'float32'}")
    model, tokenizer = load_policy(model_path, device)
    if config.tools or config.tool_plugins or config.environment:
        template = use_tool_chat_template(tokenizer)  # a ChatML model whose own template cannot render tools
        if template:
            progress(f"the model's chat template cannot render tools: using {template}")
    funcs, processing = reward_funcs_for_trl(funcs)
    funcs = guard_reward_funcs(funcs)  # a rule that raises: None rewards and rewards/<fn>/errors, not a crash
    tap = RolloutTap(funcs[0], end_of_sequence_ids(model, tokenizer), config.max_completion_length)
    funcs = [tap, *funcs[1:]]

    train_ids, eval_source, eval_ids = split_rows(config, rows, eval_rows)
    if eval_ids:
        progress(f"holding out {len(eval_ids)} rows for evaluation every {config.eval_steps} steps")
    token_capture = TokenCapture(config.num_generations)
    recorder = RunRecorder(
        store,
        run_id,
        reward_names=names,
        reward_weights=weights,
        num_generations=config.num_generations,
        rows=list(rows),
        heartbeat=heartbeat,
        tap=tap,
        eval_rows=eval_source,
        device_metrics=gpu_step_metrics if device == "cuda" else None,
        token_capture=token_capture,
    )
    args = to_grpo_config(
        config, output_dir, use_cpu=device == "cpu", bf16=bf16, num_train_rows=len(train_ids), evaluate=bool(eval_ids)
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=to_hf_dataset(rows, train_ids, images),
        eval_dataset=to_hf_dataset(eval_source, eval_ids, images if eval_rows is None else eval_images)
        if eval_ids else None,
        processing_class=tokenizer,
        reward_processing_classes=processing,
        peft_config=to_lora_config(config, vision=hasattr(model.config, "vision_config")),
        callbacks=[recorder],
        **tool_arguments(config),
    )
    recorder.attach(trainer)
    token_capture.install(trainer)
    return BuiltTrainer(trainer=trainer, recorder=recorder, device=device, token_capture=token_capture)


def tool_arguments(config: RunConfig, timeout_s: float | None = None) -> dict[str, Any]:
    """``GRPOTrainer``'s ``tools`` (the library's, then the run's tool plugins) and ``environment_factory`` (the
    run's environment class) for ``config``; empty for a run without tools. The plugin targets were checked against
    the login boundary at launch (:meth:`grpo_core.access.boundary.Boundary.check_config`), as reward plugins are.

    Every tool, and every public method of the environment, is bounded in time (``timeout_s``, default
    :data:`grpo_core.engine.tool_rollout.CALL_TIMEOUT_S`; :func:`~grpo_core.engine.tool_rollout.bounded_tool`,
    :func:`~grpo_core.engine.tool_rollout.bounded_environment`): TRL calls tools synchronously in its rollout loop,
    so a plugin that hangs would stall the run; bounded, it is a failed call that TRL records as
    ``{"error": ...}`` and counts in ``tools/failure_frequency``.

    Raises:
        ValueError: a plugin cannot be loaded or is not callable (the message names it).
    """
    arguments: dict[str, Any] = {}
    tools = library_tools(config.tools) + [load_plugin_function(target) for target in config.tool_plugins]
    if tools:
        arguments["tools"] = [bounded_tool(tool, timeout_s, what=f"the tool {tool.__name__}") for tool in tools]
    if config.environment:
        arguments["environment_factory"] = bounded_environment(load_plugin_function(config.environment), timeout_s)
    return arguments
