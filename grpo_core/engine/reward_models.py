"""Reward models on the worker side: the ``reward_model`` rule's model loaded as TRL loads one, handed to
``GRPOTrainer`` (:func:`reward_funcs_for_trl`), or scored directly where a worker scores groups without the trainer
(preflight, try the model: :func:`enable_reward_model_scoring`). Imports torch and transformers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grpo_core.rewards import reward_model as reward_model_rule
from grpo_core.rewards.plugin import AsyncPluginReward, PluginReward
from grpo_core.rewards.reward_model import RewardModelRule


class TruncatingTokenizer:
    """A reward model's tokenizer that cuts every text to ``max_length`` tokens (TRL tokenizes reward inputs without
    truncation). Everything else (``pad_token_id``, ``apply_chat_template``...) is the wrapped tokenizer's."""

    def __init__(self, tokenizer: Any, max_length: int) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.tokenizer(*args, **kwargs, truncation=True, max_length=self.max_length)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tokenizer, name)


def load_reward_model(rule: RewardModelRule) -> tuple[Any, Any]:
    """The rule's ``AutoModelForSequenceClassification`` (``num_labels=1``, in eval mode) and tokenizer, as TRL 1.16
    loads a reward model: the tokenizer's pad token is its end-of-sequence token when it has none, and the model's
    ``pad_token_id`` is the tokenizer's (the reward is read at the last non-padding token). With ``max_length`` the
    tokenizer is a :class:`TruncatingTokenizer`.

    Raises:
        OSError: the model or tokenizer cannot be loaded (``from_pretrained``).
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(rule.model, num_labels=1, trust_remote_code=False)
    tokenizer = AutoTokenizer.from_pretrained(rule.model, trust_remote_code=False)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id
    model.eval()
    return model, (TruncatingTokenizer(tokenizer, rule.max_length) if rule.max_length else tokenizer)


class RewardModelScorer:
    """Scores completions with a reward model exactly as ``GRPOTrainer._calculate_rewards`` (TRL 1.16.0) does:
    text = prompt + completion (the chat template over prompt + completion messages for a chat prompt), tokenized
    padded on the right without special tokens; the reward is ``logits[:, 0]``. Models are loaded once per process.

    Call: ``(rule, prompts, completions) -> list[float]``, one reward per completion.
    """

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, int], tuple[Any, Any]] = {}

    def __call__(self, rule: RewardModelRule, prompts: Sequence[Any], completions: Sequence[Any]) -> list[float]:
        import torch
        from trl.data_utils import apply_chat_template, is_conversational

        key = (rule.model, rule.max_length)
        if key not in self._loaded:
            self._loaded[key] = load_reward_model(rule)
        model, tokenizer = self._loaded[key]
        if is_conversational({"prompt": prompts[0]}):
            # A completion may come as plain text beside a chat prompt (the reward-hacking probe's): one assistant turn.
            messages = [c if isinstance(c, list) else [{"role": "assistant", "content": str(c)}] for c in completions]
            texts = [
                apply_chat_template({"messages": p + c}, tokenizer)["text"]
                for p, c in zip(prompts, messages, strict=True)
            ]
        else:
            texts = [p + c for p, c in zip(prompts, completions, strict=True)]
        inputs = tokenizer(text=texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False)
        inputs = {k: v.to(model.device) for k, v in inputs.items()}
        with torch.inference_mode():
            return [float(x) for x in model(**inputs).logits[:, 0]]


_SCORER: RewardModelScorer | None = None


def enable_reward_model_scoring() -> None:
    """Let ``reward_model`` rules score in this (worker) process, through one :class:`RewardModelScorer` for the
    whole process (:func:`grpo_core.rewards.reward_model.set_model_scorer`); the web process never calls this."""
    global _SCORER
    if _SCORER is None:
        _SCORER = RewardModelScorer()
    reward_model_rule.set_model_scorer(_SCORER)


def reward_funcs_for_trl(funcs: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """Turn the built reward functions into TRL's ``reward_funcs`` and ``reward_processing_classes``.

    * a :class:`~grpo_core.rewards.reward_model.RewardModelRule` becomes the ``AutoModelForSequenceClassification``
      (``num_labels=1``) it names, with its tokenizer (pad token set to the end-of-sequence token when it has none,
      as TRL does; cut to ``max_length`` when one is set). Its ``config._name_or_path`` is set to the rule's metric
      name, because TRL names a model reward from that field (``rewards/<name>/mean``);
    * a plugin whose function is ``async def`` becomes an :class:`~grpo_core.rewards.plugin.AsyncPluginReward`, so
      TRL awaits it concurrently with the other async reward functions (the first function stays synchronous:
      the :class:`RolloutTap` wraps it);
    * anything else is passed as is, with no processing class.

    Raises:
        ValueError: a plugin (after the first) cannot be loaded.
        OSError: a reward model or its tokenizer cannot be loaded (from ``from_pretrained``).
    """
    out: list[Any] = []
    processing: list[Any] = []
    for index, func in enumerate(funcs):
        if isinstance(func, RewardModelRule):
            model, tokenizer = load_reward_model(func)
            model.config._name_or_path = func.__name__
            out.append(model)
            processing.append(tokenizer)
            continue
        if isinstance(func, PluginReward) and index > 0 and func.is_async():
            func = AsyncPluginReward(func)
        out.append(func)
        processing.append(None)
    return out, processing
