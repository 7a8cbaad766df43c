"""Runs recorded from a user's own training script (:class:`grpo_core.integrations.DashboardCallback`).

Such a run is a run like any other in the store (metrics, groups, token values, provenance), created ``running`` by
the script itself; its provenance says where it trains::

    "recorded_from": {"kind": "script", "host": "node-7", "command": "python train.py --lr 1e-5", "pid": 4242,
                      "output_dir": "/abs/out", "grpo_config": {...every GRPOConfig field, as JSON...}}

The dashboard's launcher never starts, watches or kills its process (it runs elsewhere, maybe on another machine);
Cancel sets the run's flag, which the callback turns into ``should_training_stop`` at the next step. It cannot be
resumed from the dashboard; its config can be cloned into a dashboard run (:func:`run_config_from_trainer`: the
``GRPOConfig`` fields the run config has, the model, LoRA, and the reward functions as placeholders to replace by
rules).

Imports neither torch nor TRL: the web process reads these runs too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from grpo_core.run_config import RunConfig

RECORDED_FROM = "recorded_from"
SCRIPT_KIND = "script"
#: The rule name a reward function of a script gets in the run's config: not a registry rule, so a clone of the
#: config into the Launch form asks for a rule in its place instead of running something else silently.
SCRIPT_REWARD_RULE = "script_function"
#: ``GRPOConfig`` fields the run config has under the same name and meaning.
_SHARED_FIELDS = (
    "num_generations", "per_device_train_batch_size", "gradient_accumulation_steps", "max_completion_length",
    "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "learning_rate", "beta", "epsilon",
    "epsilon_high", "num_iterations", "loss_type", "scale_rewards", "max_steps", "warmup_steps", "max_grad_norm",
    "seed", "gradient_checkpointing", "mask_truncated_completions", "importance_sampling_level",
    "steps_per_generation", "num_train_epochs", "eval_steps", "logging_steps", "save_steps", "use_vllm", "vllm_mode",
    "vllm_gpu_memory_utilization", "vllm_tensor_parallel_size", "multi_objective_aggregation",
)


def script_origin(run: Any) -> dict[str, Any] | None:
    """Where a run recorded from a script trains (its provenance's ``recorded_from``), else ``None``."""
    provenance = getattr(run, "provenance", None) or {}
    origin = provenance.get(RECORDED_FROM) if isinstance(provenance, Mapping) else None
    if isinstance(origin, Mapping) and origin.get("kind") == SCRIPT_KIND:
        return dict(origin)
    return None


def is_script_run(run: Any) -> bool:
    """Whether ``run`` (a :class:`storage.RunInfo`) was recorded from a user's own script."""
    return script_origin(run) is not None


def describe_origin(run: Any) -> str:
    """One line for the UI: ``recorded from a script on HOST: COMMAND`` ("" for a dashboard run)."""
    origin = script_origin(run)
    if origin is None:
        return ""
    return f"recorded from a script on {origin.get('host') or '?'}: {origin.get('command') or '?'}"


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON (a config field): numbers, strings, lists and dicts as they are, non-finite floats as
    ``None``, anything else (an enum, a path, a class) as its ``str``."""
    if depth > 8:
        return str(value)[:500]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, depth + 1) for k, v in list(value.items())[:500]}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, depth + 1) for v in list(value)[:500]]
    enum_value = getattr(value, "value", None)
    if isinstance(enum_value, (str, int, float)):
        return enum_value
    return str(value)[:500]


def run_config_from_trainer(
    grpo_config: Mapping[str, Any],
    *,
    model: str,
    reward_names: Sequence[str],
    reward_weights: Sequence[float],
    lora: Mapping[str, Any] | None = None,
    max_steps: int | None = None,
    num_processes: int = 1,
) -> dict[str, Any]:
    """A run config (as stored with a run: ``RunConfig.model_dump``) describing a script's ``GRPOTrainer``.

    Args:
        grpo_config: ``GRPOConfig.to_dict()`` (or any mapping of its fields).
        model: the policy's name or path (``model.config._name_or_path``).
        reward_names, reward_weights: TRL's ``reward_func_names`` and ``reward_weights``.
        lora: the PEFT ``LoraConfig`` fields (``r``, ``lora_alpha``, ``lora_dropout``, ``target_modules``), or
            ``None`` without LoRA.
        max_steps: the optimizer steps the trainer will take (``TrainerState.max_steps``).
        num_processes: data-parallel processes.

    A field whose value the run config refuses (a ``loss_type`` it does not know, a learning rate of 0) keeps the
    run config's default: the config describes the run as far as the dashboard can run it; the full ``GRPOConfig``
    is in the provenance's ``recorded_from.grpo_config``.
    """
    values: dict[str, Any] = {"model": str(model)[:1000], "num_processes": max(1, int(num_processes))}
    for name in _SHARED_FIELDS:
        if name in grpo_config and grpo_config[name] is not None:
            values[name] = jsonable(grpo_config[name])
    if max_steps is not None and max_steps > 0:
        values["max_steps"] = int(max_steps)
    if values.get("max_steps", 0) <= 0:
        values.pop("max_steps", None)
    values["rewards"] = [
        {"rule": SCRIPT_REWARD_RULE, "name": str(name)[:200], "weight": float(weight) if math.isfinite(weight) else 1.0}
        for name, weight in zip(reward_names, list(reward_weights) + [1.0] * len(reward_names), strict=False)
    ] or [{"rule": SCRIPT_REWARD_RULE, "name": "reward", "weight": 1.0}]
    if lora is not None:
        values["use_lora"] = True
        for ours, theirs in (("lora_r", "r"), ("lora_alpha", "lora_alpha"), ("lora_dropout", "lora_dropout")):
            if lora.get(theirs) is not None:
                values[ours] = jsonable(lora[theirs])
        targets = lora.get("target_modules")
        if targets:
            values["lora_target_modules"] = targets if isinstance(targets, str) else ",".join(sorted(map(str, targets)))
    else:
        values["use_lora"] = False
    return _keep_valid(values)


def _keep_valid(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` as a valid run config dump; a field it refuses is dropped (its default kept), one at a time."""
    kept: dict[str, Any] = {}
    pending = dict(values)
    for _ in range(3):  # a field may fit only beside one kept later (num_generations and the batch size)
        for name, value in list(pending.items()):
            trial = {**kept, name: value}
            try:
                RunConfig.model_validate(trial)
            except (ValueError, TypeError):
                continue
            kept = trial
            del pending[name]
    return RunConfig.model_validate(kept).model_dump(mode="json")
