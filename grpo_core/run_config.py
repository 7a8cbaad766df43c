"""The typed run configuration: :class:`RunConfig`, its defaults, help texts, validation and YAML round trip.

A :class:`RunConfig` is everything needed to reproduce a run: it is stored with the run (JSON in the store, YAML
in the run folder) and ``grpo-dashboard train run.yaml`` re-runs it headless. Field names follow TRL's where one
exists (``num_generations``, ``beta``, ``max_completion_length``, ...). This module imports neither torch nor TRL
: the web process validates configs with it. The mapping onto TRL's ``GRPOConfig`` and PEFT's ``LoraConfig`` is on
the worker side (:mod:`grpo_core.engine.trl_args`).
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from grpo_core.bounded_parse import dump_yaml, load_yaml
from grpo_core.rewards.compose import RewardSpec
from grpo_core.trl_fields import check_choice, trl_field

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
#: A completion that is just a (signed, maybe decimal) number, with an optional final period: matched with
#: ``mode="fullmatch"`` (:data:`NUMBER_ONLY_MODE`), so that the whole completion must be the number ("82\nbecause"
#: fails; in ``search`` mode, ``MULTILINE`` let any line holding only a number pass).
NUMBER_ONLY_PATTERN = r"^\s*-?\d+(\.\d+)?\s*\.?\s*$"
NUMBER_ONLY_MODE = "fullmatch"


#: The shipped tools a run may give its policy (:data:`grpo_core.tools.library.LIBRARY`, kept equal by a test).
ToolName = Literal["calculator", "python"]


class ConfigError(ValueError):
    """A run config that cannot be used; the message names the field (and the file, for YAML)."""


def _default_rewards() -> list[RewardSpec]:
    """The quick start's rules: the right number scores 1, a reply that is a number alone 0.5 more (the format is
    what a small model learns first, and it makes groups differ before any answer is right)."""
    return [
        RewardSpec(rule="numeric_answer", weight=1.0),
        RewardSpec(rule="format_regex", weight=0.5, params={"pattern": NUMBER_ONLY_PATTERN, "mode": NUMBER_ONLY_MODE}),
    ]


def _choice(name: str) -> Any:
    """A text field of TRL's that takes one of the values TRL documents (the snapshot's choices), checked wherever
    the field's type is (a whole config, a sweep's values): a clear error naming them otherwise."""
    return Annotated[str, AfterValidator(partial(check_choice, name))]


LossType = _choice("loss_type")
ScaleRewards = _choice("scale_rewards")
Aggregation = _choice("multi_objective_aggregation")
SamplingLevel = _choice("importance_sampling_level")
VllmSamplingMode = _choice("vllm_importance_sampling_mode")


def _trl(name: str, **constraints: Any) -> Any:
    """A run config field that is TRL's ``GRPOConfig`` field ``name``: its default and help text are TRL's (the
    snapshot of :mod:`grpo_core.trl_fields`); ``constraints`` are the bounds TRL's help text states."""
    field = trl_field(name)
    return Field(field.default, description=field.help, **constraints)


class RunConfig(BaseModel):
    """One GRPO run (DeepSeekMath, Shao et al. 2024, arXiv 2402.03300), as TRL's ``GRPOTrainer`` runs it.

    Each step samples ``per_device_train_batch_size // num_generations`` prompts per process, ``num_generations``
    completions (a *group*) for each, scores them with the weighted reward rules, turns rewards into group-relative
    advantages ``(r - mean) / (std + 1e-4)`` and takes one clipped policy-gradient step with a KL penalty ``beta``
    against the frozen reference model. Lengths are in tokens; ``learning_rate`` is per optimizer step.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str = Field("", description="Run name shown in the dashboard; empty = generated.")
    model: str = Field(
        DEFAULT_MODEL,
        description="'SmolLM2-135M-Instruct' (shipped offline), a local Hugging Face model folder, or a hub id.",
    )
    dataset_id: int | None = Field(None, description="Id of an uploaded dataset in the store.")
    dataset_path: str | None = Field(
        None, description="Path of a JSONL/JSON/CSV/Parquet prompt file or a save_to_disk folder (headless runs)."
    )
    prompt_column: str | None = Field(
        None, description="Dataset column holding the prompt when it is not 'prompt' (e.g. 'question', 'problem')."
    )
    system_prompt: str = Field("", description="System prompt that turns text prompts into chat prompts; '' = none.")
    column_renames: dict[str, str] = Field(
        default_factory=dict, description="Other dataset columns to rename, {old: new} (e.g. {solution: answer})."
    )
    rewards: list[RewardSpec] = Field(default_factory=_default_rewards, description="Weighted reward rules.")

    # sampling
    num_generations: int = Field(4, ge=2, description="Completions per prompt (the group size G).")
    per_device_train_batch_size: int = Field(
        8, ge=1, description="Completions per process per micro-batch (one forward and backward pass)."
    )
    gradient_accumulation_steps: int = Field(
        1, ge=1, description="Micro-batches per optimizer step: completions per step = per_device_train_batch_size x "
        "gradient_accumulation_steps x num_processes; more micro-batches of fewer completions take less memory."
    )
    max_completion_length: int = Field(24, ge=1, description="Longest completion, in tokens; longer ones are cut.")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of the rollouts.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling threshold.")

    # optimisation
    learning_rate: float = Field(1e-4, gt=0, description="Peak learning rate (AdamW).")
    beta: float = Field(0.02, ge=0, description="KL penalty coefficient against the reference model.")
    epsilon: float = Field(0.2, gt=0, description="PPO-style clipping range of the importance ratio.")
    num_iterations: int = Field(1, ge=1, description="Optimisation passes per generated batch (mu in the paper).")
    loss_type: LossType = _trl("loss_type")
    scale_rewards: ScaleRewards = _trl("scale_rewards")
    max_steps: int = Field(60, ge=1, description="Optimizer steps to train.")
    warmup_steps: int = Field(0, ge=0, description="Linear warm-up steps.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")
    seed: int = Field(42, description="Random seed.")
    gradient_checkpointing: bool = Field(False, description="Trade compute for memory.")

    # what GRPO users tune today (TRL's GRPOConfig fields of the same names)
    multi_objective_aggregation: Aggregation = _trl("multi_objective_aggregation")
    mask_truncated_completions: bool = Field(
        False, description="Leave completions cut at max_completion_length out of the loss (DAPO)."
    )
    epsilon_high: float | None = Field(
        None, gt=0, description="Upper clipping bound of the importance ratio (DAPO clip-higher); empty = epsilon."
    )
    importance_sampling_level: SamplingLevel = _trl("importance_sampling_level")
    delta: float | None = _trl("delta", gt=0)
    # TRL 1.16's entropy terms, off-policy masking, SAPO/VESPO and vLLM importance sampling (the form's GRPO headings,
    # grpo_core.trl_fields.GRPO_SECTIONS): TRL's names, defaults and help text
    entropy_coef: float = _trl("entropy_coef")
    use_adaptive_entropy: bool = _trl("use_adaptive_entropy")
    entropy_target: float = _trl("entropy_target", ge=0)
    entropy_coef_delta: float = _trl("entropy_coef_delta", ge=0)
    entropy_coef_min: float = _trl("entropy_coef_min")
    entropy_coef_max: float = _trl("entropy_coef_max")
    top_entropy_quantile: float = _trl("top_entropy_quantile", ge=0, le=1)
    off_policy_mask_threshold: float | None = _trl("off_policy_mask_threshold", gt=0)
    use_bias_correction_kl: bool = _trl("use_bias_correction_kl")
    sapo_temperature_pos: float = _trl("sapo_temperature_pos", gt=0)
    sapo_temperature_neg: float = _trl("sapo_temperature_neg", gt=0)
    vespo_k_pos: float = _trl("vespo_k_pos")
    vespo_lambda_pos: float = _trl("vespo_lambda_pos")
    vespo_k_neg: float = _trl("vespo_k_neg")
    vespo_lambda_neg: float = _trl("vespo_lambda_neg")
    vllm_importance_sampling_correction: bool = _trl("vllm_importance_sampling_correction")
    vllm_importance_sampling_mode: VllmSamplingMode = _trl("vllm_importance_sampling_mode")
    vllm_importance_sampling_clip_min: float | None = _trl("vllm_importance_sampling_clip_min", ge=0)
    vllm_importance_sampling_clip_max: float | None = _trl("vllm_importance_sampling_clip_max", gt=0)
    steps_per_generation: int | None = Field(
        None, ge=1, description="Optimizer steps per generated batch; empty = gradient_accumulation_steps."
    )
    top_k: int = Field(0, ge=0, description="Keep the k most likely tokens when sampling; 0 = off.")
    min_p: float | None = Field(
        None, ge=0, le=1, description="Drop tokens below min_p × the top token's probability; empty = off."
    )
    repetition_penalty: float = Field(1.0, gt=0, description="> 1 discourages repeating tokens; 1 = off.")
    lr_scheduler_type: Literal[
        "linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
        "inverse_sqrt", "cosine_with_min_lr", "warmup_stable_decay",
    ] = Field("linear", description="Learning-rate schedule after the warm-up.")
    num_train_epochs: float = Field(
        0.0,
        ge=0,
        description="Passes over the training rows; 0 = max_steps decides. When > 0 training stops after "
        "ceil(epochs × training rows ÷ prompts per step) × num_iterations steps, or at max_steps if sooner.",
    )

    # held-out evaluation (TRL's eval_dataset, eval_strategy="steps", eval_steps)
    eval_fraction: float = Field(
        0.0, ge=0, lt=1, description="Fraction of the dataset's rows held out for evaluation; 0 = none."
    )
    eval_dataset_id: int | None = Field(
        None, description="A second uploaded dataset to evaluate on (instead of a held-out fraction)."
    )
    eval_steps: int = Field(10, ge=1, description="Score the eval rows with the run's rules every N steps.")

    # tool calling (TRL's GRPOTrainer tools= and GRPOConfig.max_tool_calling_iterations)
    tools: list[ToolName] = Field(
        default_factory=list,
        description="Library tools the policy may call in its rollouts (calculator, python: runs in the sandbox); "
        "the model's chat template must render tool calls.",
    )
    tool_plugins: list[str] = Field(
        default_factory=list, max_length=64,
        description="Your own tool functions, 'file.py:function' or 'module:function' (plugins, as reward plugins); "
        "at most 64.",
    )
    environment: str = Field(
        "",
        description="Your own environment class, 'file.py:Class' or 'module:Class' (TRL's environment_factory: "
        "public methods are tools, reset() per rollout, optional get_reward()); '' = none.",
    )
    max_tool_calling_iterations: int | None = Field(
        None, ge=1, le=100, description="Most tool-calling rounds per rollout; empty = TRL's default (no limit)."
    )

    # pass-through to TRL
    report_to: list[Literal["trackio", "tensorboard", "wandb"]] = Field(
        default_factory=list,
        description="Also report metrics to these trackers (the dashboard's store keeps recording).",
    )
    trl_args: dict[str, Any] = Field(
        default_factory=dict,
        description="Any other GRPOConfig / TrainingArguments field by name (checked against the installed TRL).",
    )

    # LoRA (Hu et al. 2021, arXiv 2106.09685)
    use_lora: bool = Field(True, description="Train a LoRA adapter instead of all weights.")
    lora_r: int = Field(16, ge=1, description="LoRA rank.")
    lora_alpha: int = Field(32, ge=1, description="LoRA scaling numerator.")
    lora_dropout: float = Field(0.05, ge=0, lt=1, description="Dropout on the LoRA input.")
    lora_target_modules: str = Field("all-linear", description="'all-linear' or comma-separated module names.")

    # execution
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="Where to train.")
    num_processes: int = Field(1, ge=1, description="Data-parallel processes (accelerate launch when > 1).")
    use_vllm: bool = Field(False, description="Generate rollouts with vLLM (needs vLLM and a CUDA GPU).")
    vllm_mode: Literal["colocate", "server"] = Field(
        "colocate", description="vLLM in the training processes (colocate) or a separate `trl vllm-serve` (server)."
    )
    vllm_gpu_memory_utilization: float = Field(
        0.3, gt=0, le=1, description="Share of each GPU's memory a colocated vLLM reserves for weights and KV cache."
    )
    vllm_tensor_parallel_size: int = Field(
        1, ge=1, description="GPUs one colocated vLLM engine spans; must divide num_processes."
    )
    logging_steps: int = Field(1, ge=1, description="Record metrics and groups every N steps.")
    save_steps: int = Field(
        0,
        ge=0,
        description="Checkpoint every N steps into the run folder (0 = only the final adapter, and a checkpoint "
        "when cancelled); Resume continues a cancelled or failed run from its last checkpoint.",
    )
    gpus: str = Field(
        "",
        description="CUDA_VISIBLE_DEVICES for the run, e.g. '0,1'; empty = auto (num_processes GPUs no other "
        "running run holds; the run waits queued until they are free).",
    )
    webhook_url: str = Field(
        "",
        description="http(s) URL that receives a JSON message when this run completes, fails or is cancelled, and "
        "for each new run-doctor warning; empty = the dashboard's --webhook-url (if any). Internal hosts (loopback, "
        "private networks, this machine) are refused unless the admin allows them (--webhook-allow-host); with "
        "logins only admins may set one unless --run-webhooks all.",
    )

    @field_validator("rewards")
    @classmethod
    def _rewards_not_empty(cls, value: list[RewardSpec]) -> list[RewardSpec]:
        if not value:
            raise ValueError("at least one reward rule is needed")
        return value

    @model_validator(mode="before")
    @classmethod
    def _lift_run_config_fields(cls, data: Any) -> Any:
        """Move a ``trl_args`` entry that names a run config field of TRL's meaning (``mask_truncated_completions``,
        ``beta``, ...) to that field, so each value has one home; a different value given in both is refused."""
        if not isinstance(data, dict) or not isinstance(data.get("trl_args"), dict):
            return data
        from grpo_core.trl_fields import load_trl_fields

        trl_names = load_trl_fields()[1]
        data, extra = dict(data), dict(data["trl_args"])
        for name in [n for n in extra if n in cls.model_fields and n in trl_names and n != "report_to"]:
            value = extra.pop(name)
            if name in data and data[name] != value:
                raise ValueError(f"{name} is given twice ({data[name]!r} and trl_args {value!r})")
            data[name] = value
        data["trl_args"] = extra
        return data

    @field_validator("tools")
    @classmethod
    def _tools_once(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("a tool is listed twice")
        return value

    @field_validator("tool_plugins", "environment")
    @classmethod
    def _plugin_targets(cls, value: list[str] | str) -> list[str] | str:
        """Each target written as a plugin's (``file.py:function`` or ``module:function``); nothing is imported."""
        from grpo_core.rewards.plugin import parse_plugin_target

        for target in [value] if isinstance(value, str) else value:
            if isinstance(value, list) or target.strip():
                parse_plugin_target(target)
        return value.strip() if isinstance(value, str) else [target.strip() for target in value]

    @field_validator("trl_args")
    @classmethod
    def _known_trl_args(cls, value: dict[str, Any]) -> dict[str, Any]:
        from grpo_core.trl_fields import check_trl_args

        return check_trl_args(value, cls.model_fields)

    @model_validator(mode="after")
    def _trl_combinations(self) -> RunConfig:
        """What ``GRPOConfig`` / ``GRPOTrainer`` refuse at start, refused before launch with the same reason."""
        low, high = self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max
        if low is not None and high is not None and low >= high:
            raise ValueError(f"vllm_importance_sampling_clip_min ({low}) must be less than "
                             f"vllm_importance_sampling_clip_max ({high})")
        correcting = self.vllm_importance_sampling_correction
        if correcting and self.vllm_importance_sampling_mode.endswith("_truncate") and low is None and high is None:
            raise ValueError("a *_truncate vllm_importance_sampling_mode needs vllm_importance_sampling_clip_min or "
                             "vllm_importance_sampling_clip_max")
        if (self.loss_type == "vespo" and self.use_vllm and correcting
                and self.vllm_importance_sampling_mode not in ("token_truncate", "token_mask")):
            raise ValueError("loss_type vespo with vLLM needs vllm_importance_sampling_mode token_truncate or "
                             f"token_mask, got {self.vllm_importance_sampling_mode}")
        if self.use_adaptive_entropy and self.entropy_coef_min > self.entropy_coef_max:
            raise ValueError(f"entropy_coef_min ({self.entropy_coef_min}) must not exceed entropy_coef_max "
                             f"({self.entropy_coef_max})")
        return self

    @model_validator(mode="after")
    def _one_eval_source(self) -> RunConfig:
        if self.eval_fraction and self.eval_dataset_id is not None:
            raise ValueError("set eval_fraction or eval_dataset_id, not both")
        return self

    @property
    def evaluates(self) -> bool:
        """Whether the run scores held-out rows every ``eval_steps`` steps."""
        return bool(self.eval_fraction) or self.eval_dataset_id is not None

    @field_validator("gpus")
    @classmethod
    def _gpu_list(cls, value: str) -> str:
        ids = [part.strip() for part in value.split(",") if part.strip()]
        for gpu in ids:
            if not re.fullmatch(r"[0-9]+|(GPU|MIG)-[0-9A-Za-z\-/]+", gpu):
                raise ValueError(f"{gpu!r} is not a GPU index or UUID (write e.g. '0,1')")
        return ",".join(ids)

    @model_validator(mode="after")
    def _enough_gpus(self) -> RunConfig:
        listed = len([g for g in self.gpus.split(",") if g])
        if listed and self.device != "cpu" and listed < self.num_processes:
            raise ValueError(f"gpus lists {listed} GPU(s) for num_processes = {self.num_processes} (one per process)")
        return self

    @model_validator(mode="after")
    def _vllm_options(self) -> RunConfig:
        """vLLM generates on CUDA GPUs; its memory share and tensor parallelism are set here only for colocate mode
        (a ``trl vllm-serve`` server takes them as its own flags), and an engine spans whole groups of processes."""
        if not self.use_vllm:
            return self
        if self.device == "cpu":
            raise ValueError("use_vllm: vLLM generates on a CUDA GPU; set device to auto or cuda, or turn use_vllm off")
        if self.vllm_mode == "server":
            for name, flag in (("vllm_gpu_memory_utilization", "--gpu_memory_utilization"),
                               ("vllm_tensor_parallel_size", "--tensor_parallel_size")):
                if getattr(self, name) != type(self).model_fields[name].default:
                    raise ValueError(f"{name} applies to vllm_mode colocate; with a server pass {flag} to "
                                     "`trl vllm-serve` instead")
        elif self.num_processes % self.vllm_tensor_parallel_size:
            raise ValueError(f"vllm_tensor_parallel_size = {self.vllm_tensor_parallel_size} must divide "
                             f"num_processes = {self.num_processes} (each vLLM engine spans that many processes)")
        return self

    @model_validator(mode="after")
    def _batch_divisible(self) -> RunConfig:
        total = self.per_device_train_batch_size * self.num_processes * self.gradient_accumulation_steps
        if total % self.num_generations:
            raise ValueError(  # the Launch form's words first ("completions per step"), then the fields
                f"{total} completions per step (per_device_train_batch_size {self.per_device_train_batch_size} × "
                f"num_processes {self.num_processes} × gradient_accumulation_steps "
                f"{self.gradient_accumulation_steps}) must be a multiple of num_generations = {self.num_generations}: "
                f"each prompt gets num_generations completions; try {self._nearest_multiple(total)} completions "
                "per step"
            )
        return self

    def _nearest_multiple(self, total: int) -> int:
        """The multiple of ``num_generations`` nearest ``total`` completions (at least one group)."""
        return max(self.num_generations, round(total / self.num_generations) * self.num_generations)

    @property
    def prompts_per_step(self) -> int:
        """Distinct prompts sampled per optimizer step (all processes)."""
        total = self.per_device_train_batch_size * self.num_processes * self.gradient_accumulation_steps
        return total // self.num_generations

    def to_yaml(self) -> str:
        """The config as YAML (round-trips through :func:`load_run_config`)."""
        return dump_yaml(self.model_dump(mode="json"))


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "config"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def parse_run_config(data: dict[str, Any], *, source: str = "config") -> RunConfig:
    """Validate a mapping into a :class:`RunConfig`.

    Raises:
        ConfigError: a field is unknown or invalid; the message names ``source`` and each field.
    """
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc)}") from None


def load_run_config(path: str | Path) -> RunConfig:
    """Read a run config YAML file (as written in each run folder).

    Raises:
        ConfigError: the file is missing, not YAML (with line and column), not a mapping, or fails validation.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    return parse_run_config_text(text, source=str(path))


def parse_run_config_text(text: str, *, source: str = "config") -> RunConfig:
    """Parse a run config written as YAML or JSON (JSON is YAML) text.

    Raises:
        ConfigError: the text is not YAML (with line and column), breaks a limit of
            :func:`grpo_core.bounded_parse.load_yaml` (size, aliases, tags, nesting), is not a mapping, or fails
            validation; the message starts with ``source``.
    """
    data = load_yaml(text, source=source, error=ConfigError)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of config fields, got {type(data).__name__}")
    return parse_run_config(data, source=source)
