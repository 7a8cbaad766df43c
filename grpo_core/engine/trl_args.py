"""The one mapping from a :class:`~grpo_core.run_config.RunConfig` to TRL's ``GRPOConfig`` and PEFT's ``LoraConfig``
(imports TRL and PEFT when called; worker processes only). Field names follow TRL's (``num_generations``, ``beta``,
``epsilon``, ``loss_type``, ``scale_rewards``, ...)."""

from __future__ import annotations

import math
from pathlib import Path

from grpo_core.run_config import RunConfig
from grpo_core.trl_fields import GRPO_SECTIONS


def max_steps_for(config: RunConfig, num_train_rows: int | None) -> int:
    """Optimizer steps to train: ``max_steps``, or fewer when ``num_train_epochs`` passes over ``num_train_rows``
    training rows end sooner (``ceil(epochs × rows ÷ prompts_per_step) × num_iterations``, at least 1)."""
    if not config.num_train_epochs or not num_train_rows:
        return config.max_steps
    steps = math.ceil(config.num_train_epochs * num_train_rows / config.prompts_per_step) * config.num_iterations
    return max(1, min(config.max_steps, steps))


def to_grpo_config(
    config: RunConfig,
    output_dir: str | Path,
    *,
    use_cpu: bool,
    bf16: bool = False,
    num_train_rows: int | None = None,
    evaluate: bool = False,
):
    """Map a :class:`RunConfig` onto TRL's ``GRPOConfig`` (imports TRL).

    Args:
        config: the run config.
        output_dir: where TRL writes checkpoints and the final adapter.
        use_cpu: train on the CPU even where an accelerator exists.
        bf16: mixed precision in bfloat16 (GPU only).
        num_train_rows: training rows (after any held-out eval split), for ``num_train_epochs``.
        evaluate: the trainer gets an ``eval_dataset``: evaluate every ``eval_steps`` steps.

    Returns:
        ``trl.GRPOConfig`` with ``reward_weights`` from the rules, logging every ``logging_steps`` steps to the
        trackers of ``report_to`` (none by default: the dashboard's recorder writes the store either way), and the
        run's ``trl_args`` (checked against TRL's fields by :mod:`grpo_core.trl_fields`) applied last.
    """
    from trl import GRPOConfig

    eval_batch = max(1, config.per_device_train_batch_size // config.num_generations) * config.num_generations
    kwargs = dict(
        output_dir=str(output_dir),
        num_generations=config.num_generations,
        per_device_train_batch_size=config.per_device_train_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        max_completion_length=config.max_completion_length,
        temperature=config.temperature,
        top_p=config.top_p,
        learning_rate=config.learning_rate,
        beta=config.beta,
        epsilon=config.epsilon,
        num_iterations=config.num_iterations,
        loss_type=config.loss_type,
        scale_rewards=config.scale_rewards,
        max_steps=max_steps_for(config, num_train_rows),
        warmup_steps=config.warmup_steps,
        max_grad_norm=config.max_grad_norm,
        seed=config.seed,
        gradient_checkpointing=config.gradient_checkpointing,
        reward_weights=[spec.weight for spec in config.rewards],
        logging_steps=config.logging_steps,
        save_strategy="steps" if config.save_steps else "no",
        save_steps=config.save_steps or 500,
        report_to=list(config.report_to) or "none",
        use_cpu=use_cpu,
        bf16=bf16,
        fp16=False,
        log_completions=False,
        use_vllm=config.use_vllm,
        vllm_mode=config.vllm_mode,
        vllm_gpu_memory_utilization=config.vllm_gpu_memory_utilization,
        vllm_tensor_parallel_size=config.vllm_tensor_parallel_size,
        disable_tqdm=True,
        dataloader_num_workers=0,
        multi_objective_aggregation=config.multi_objective_aggregation,
        mask_truncated_completions=config.mask_truncated_completions,
        epsilon_high=config.epsilon_high,
        importance_sampling_level=config.importance_sampling_level,
        steps_per_generation=config.steps_per_generation,
        top_k=config.top_k,
        min_p=config.min_p,
        repetition_penalty=config.repetition_penalty,
        lr_scheduler_type=config.lr_scheduler_type,
        eval_strategy="steps" if evaluate else "no",
        eval_steps=config.eval_steps,
        per_device_eval_batch_size=eval_batch,
        max_tool_calling_iterations=config.max_tool_calling_iterations,
    )
    # TRL's GRPO fields the form shows under its headings, by their TRL names (loss_type, delta, entropy_coef, ...)
    kwargs.update({name: getattr(config, name) for _heading, names in GRPO_SECTIONS for name in names})
    # trl_args never name a field set above that the dashboard owns (grpo_core.trl_fields.OWNED_FIELDS) nor a run
    # config field; they may replace the worker's other choices (log_completions, per_device_eval_batch_size, ...).
    kwargs.update(config.trl_args)
    return GRPOConfig(**kwargs)


#: The default LoRA targets of a vision-language model: the language model's projections only (PEFT reads a string
#: as a regular expression over module names), never the vision tower's or the projector's.
VLM_LORA_TARGETS = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"


def to_lora_config(config: RunConfig, *, vision: bool = False):
    """PEFT's ``LoraConfig`` for a causal LM, or ``None`` when ``use_lora`` is off (imports PEFT). With ``vision``
    (a vision-language policy) and the default targets, LoRA adapts the language model only
    (:data:`VLM_LORA_TARGETS`)."""
    if not config.use_lora:
        return None
    from peft import LoraConfig

    targets: str | list[str] = config.lora_target_modules.strip() or "all-linear"
    if vision and targets == "all-linear":
        targets = VLM_LORA_TARGETS
    elif targets != "all-linear":
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
    )
