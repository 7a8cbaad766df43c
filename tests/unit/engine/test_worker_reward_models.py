"""The reward_model rule on the worker side: a tiny LlamaForSequenceClassification scores prompt + completion the way
TRL's GRPOTrainer does (right padding, reward = logit at the last real token), through score_group once a worker
process enables it; max_length cuts the text."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_core.rewards import reward_model as reward_model_rule
from grpo_core.rewards import score_group
from grpo_core.rewards.reward_model import RewardModelRule


@pytest.fixture(scope="module")
def tiny_reward_model(tmp_path_factory) -> Path:
    from tests.tiny_model import build_tiny_reward_model

    return build_tiny_reward_model(tmp_path_factory.mktemp("tiny-reward-model"))


@pytest.fixture
def scoring():
    from grpo_core.engine.reward_models import enable_reward_model_scoring

    enable_reward_model_scoring()
    yield
    reward_model_rule.set_model_scorer(None)


def _alone(folder: Path, text: str, max_length: int | None = None) -> float:
    """The model's reward for one text, unpadded (what padding must not change)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=1).eval()
    cut = {"truncation": True, "max_length": max_length} if max_length else {}
    inputs = tokenizer(text, return_tensors="pt", add_special_tokens=False, **cut)
    with torch.inference_mode():
        return float(model(**inputs).logits[0, 0])


def test_scores_prompt_plus_completion_like_trl(tiny_reward_model: Path, scoring) -> None:
    spec = [{"rule": "reward_model", "params": {"model": str(tiny_reward_model)}}]
    completions = [" 42", " forty two, or so I think", ""]
    score = score_group(spec, completions, {"prompt": "What is 40 + 2?"})
    expected = [_alone(tiny_reward_model, "What is 40 + 2?" + c) for c in completions]
    assert score.rewards[0] == pytest.approx(expected, abs=1e-5)
    assert len(set(score.rewards[0])) == 3


def test_chat_prompts_use_the_reward_tokenizers_template(tiny_reward_model: Path, scoring) -> None:
    from transformers import AutoTokenizer

    prompt = [{"role": "user", "content": "What is 40 + 2?"}]
    completion = [{"role": "assistant", "content": "42"}]
    score = score_group([{"rule": "reward_model", "params": {"model": str(tiny_reward_model)}}], [completion], {"prompt": prompt})
    text = AutoTokenizer.from_pretrained(tiny_reward_model).apply_chat_template(prompt + completion, tokenize=False)
    assert score.rewards[0] == pytest.approx([_alone(tiny_reward_model, text)], abs=1e-5)


def test_plain_text_completion_beside_a_chat_prompt_is_one_assistant_turn(tiny_reward_model: Path, scoring) -> None:
    """The reward-hacking probe hands plain text for a chat prompt: scored as the assistant message it stands for."""
    prompt = [{"role": "user", "content": "What is 40 + 2?"}]
    spec = [{"rule": "reward_model", "params": {"model": str(tiny_reward_model)}}]
    as_text = score_group(spec, ["42"], {"prompt": prompt})
    as_message = score_group(spec, [[{"role": "assistant", "content": "42"}]], {"prompt": prompt})
    assert as_text.rewards[0] == pytest.approx(as_message.rewards[0], abs=1e-6)


def test_max_length_cuts_the_text(tiny_reward_model: Path, scoring) -> None:
    rule = RewardModelRule(str(tiny_reward_model), max_length=4)
    long = " and then some more words to read"
    assert rule(["x" + long], prompts=["What is"]) == pytest.approx([_alone(tiny_reward_model, "What isx" + long, 4)], abs=1e-5)
