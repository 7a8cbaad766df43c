"""The ``reward_model`` rule: a sequence-classification model scores each prompt + completion, as TRL's
``GRPOTrainer`` does when ``reward_funcs`` holds a model (TRL 1.16.0: ``AutoModelForSequenceClassification`` with
``num_labels=1``; the reward is the logit at the last non-padding token; the text is ``prompt + completion``, or the
chat template applied to the prompt and completion messages).

The web process never loads the model: the rule builds a :class:`RewardModelRule`, a picklable description
(model folder or hub id, optional ``max_length``) that the training worker turns into the model and tokenizer it
passes to TRL (:func:`grpo_core.engine.reward_models.reward_funcs_for_trl`). Called like a reward function
(:func:`grpo_core.rewards.compose.score_group`), it scores through the scorer a worker process registered
(:func:`set_model_scorer`: preflight, try the model), and raises anywhere else (the web process's try-out bench).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grpo_core.rewards.registry import RewardRule, RuleParam, register

#: ``scorer(rule, prompts, completions) -> list[float]``, set by a worker process; ``None`` in the web process.
_model_scorer: Callable[[RewardModelRule, Sequence[Any], Sequence[Any]], list[float]] | None = None


def set_model_scorer(scorer: Callable[[RewardModelRule, Sequence[Any], Sequence[Any]], list[float]] | None) -> None:
    """Register how this process scores with reward models (see
    :func:`grpo_core.engine.reward_models.enable_reward_model_scoring`); ``None`` turns it off."""
    global _model_scorer
    _model_scorer = scorer


class RewardModelRule:
    """A reward model named by a local folder or a hub id, loaded only in the training worker.

    Attributes:
        model: folder (with ``config.json``) or hub id of a sequence-classification model with one label.
        max_length: the longest prompt + completion, in the reward model's tokens, that it reads (longer texts are
            cut at the right); 0 means no limit (TRL's own behaviour).

    Call: ``(completions, prompts=..., **kwargs) -> list[float]`` through the registered scorer; raises
    ``ValueError`` where none is registered (the web process).
    """

    def __init__(self, model: str, max_length: int = 0) -> None:
        self.model = model
        self.max_length = max_length
        self.__name__ = "reward_model"

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        if _model_scorer is not None:
            return list(_model_scorer(self, kwargs.get("prompts") or [""] * len(completions), completions))
        raise ValueError(
            f"reward_model {self.model!r} is a model: only the training worker loads and scores it; "
            "try the other rules here, or launch a short run"
        )


def make_reward_model(model: str = "", max_length: int = 0) -> RewardModelRule:
    """Build ``reward_model``; checks that ``model`` is given and, when it names a local path, that it is a folder
    with a ``config.json`` (a hub id is taken as is: the worker resolves it, online or from its cache).

    Raises:
        ValueError: an empty ``model``, a local path that is not a model folder, or a negative ``max_length``.
    """
    model = model.strip()
    if not model:
        raise ValueError("parameter 'model': give a sequence-classification model folder or hub id")
    if max_length < 0:
        raise ValueError(f"parameter 'max_length': {max_length} is negative (0 means no limit)")
    path = Path(model).expanduser()
    looks_local = model.startswith((".", "/", "~")) or path.exists() or model.count("/") > 1
    if looks_local and not (path / "config.json").is_file():
        raise ValueError(f"parameter 'model': {model} is not a model folder (no config.json there)")
    return RewardModelRule(str(path.resolve()) if looks_local else model, max_length)


register(
    RewardRule(
        name="reward_model",
        description="a sequence-classification reward model scores prompt + completion (folder or hub id)",
        factory=make_reward_model,
        params=(
            RuleParam("model", "str", "", "reward model folder or hub id (one output label)"),
            RuleParam("max_length", "int", 0, "longest prompt + completion read, in tokens (0: no limit)"),
        ),
        category="plugin",
    )
)
