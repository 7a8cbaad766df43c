"""What a script's ``GRPOTrainer`` is, as the dashboard records it: reward functions and weights, group size, the
run config, the full ``GRPOConfig``, the provenance (library versions, the device, the model's identity).

Read from the trainer :class:`~grpo_core.integrations.DashboardCallback` is added to, when training begins (TRL's
``reward_func_names``, ``reward_weights``, ``args``, the model's ``_name_or_path`` and PEFT config).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from grpo_core.runs.provenance import collect_provenance
from grpo_core.runs.script_runs import jsonable, run_config_from_trainer


@dataclass
class TrainerFacts:
    """What :func:`describe_trainer` read."""

    reward_names: list[str]
    reward_weights: list[float]
    num_generations: int
    max_steps: int
    config: dict[str, Any]
    grpo_config: dict[str, Any]
    provenance: dict[str, Any] = field(default_factory=dict)
    device_metrics: Callable[[], dict[str, float]] | None = None

    def token_capture(self, trainer):
        """A :class:`~grpo_core.engine.token_stats.TokenCapture` installed on ``trainer`` (main process only)."""
        from grpo_core.engine.token_stats import TokenCapture

        return TokenCapture(self.num_generations).install(trainer)


def _lora_fields(model) -> dict[str, Any] | None:
    configs = getattr(model, "peft_config", None)
    if not isinstance(configs, dict) or not configs:
        return None
    config = next(iter(configs.values()))
    return {name: getattr(config, name, None) for name in ("r", "lora_alpha", "lora_dropout", "target_modules")}


def _model_name(model) -> str:
    config = getattr(model, "config", None)
    return str(getattr(config, "_name_or_path", "") or type(model).__name__)


def describe_trainer(trainer, *, max_steps: int, keep_columns: Sequence[str] = ()) -> TrainerFacts:
    """The facts of ``trainer`` (a TRL ``GRPOTrainer``) about to train ``max_steps`` optimizer steps."""
    from grpo_core.engine.policy_model import describe_device, gpu_step_metrics

    args = trainer.args
    names = [str(n) for n in trainer.reward_func_names]
    raw = getattr(trainer, "reward_weights", None)
    weights = [float(w) for w in raw.tolist()] if hasattr(raw, "tolist") else [1.0] * len(names)
    grpo_config = jsonable(args.to_dict())
    model = trainer.model
    model_name = _model_name(model)
    config = run_config_from_trainer(grpo_config, model=model_name, reward_names=names, reward_weights=weights,
                                     lora=_lora_fields(model), max_steps=max_steps,
                                     num_processes=getattr(args, "world_size", 1))
    device = str(getattr(args, "device", "cpu"))
    device_type = "cuda" if device.startswith("cuda") else "cpu"
    try:
        provenance = collect_provenance(dataset_file=None, model=model_name, cache_dir=None,
                                        device=describe_device(device_type))
    except Exception as exc:  # noqa: BLE001 - provenance is informative; a failure must not stop training
        provenance = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    if keep_columns:
        provenance["kept_columns"] = list(keep_columns)
    return TrainerFacts(
        reward_names=names, reward_weights=weights, num_generations=int(args.num_generations),
        max_steps=int(max_steps), config=config, grpo_config=grpo_config, provenance=provenance,
        device_metrics=gpu_step_metrics if device_type == "cuda" else None)
