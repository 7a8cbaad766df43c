"""Tests of grpo_core.rewards.template_tags: whether a chat template opens <think>, and resolving
``template_opened_think: auto`` from a model folder before a run."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from grpo_core.rewards import RewardSpec, get_rule
from grpo_core.rewards.template_tags import (
    model_chat_template,
    resolve_for_model,
    resolve_template_tags,
    template_opens_think,
)
from tests.helpers import R1_DISTILL

# The generation prompts of the templates as shipped (shortened to what matters here; R1_DISTILL is in
# tests/helpers.py).
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
QWEN3_NO_THINKING = CHATML.replace("assistant\\n{% endif %}", "assistant\\n<think>\\n\\n</think>\\n\\n{% endif %}")
THINK_IN_SYSTEM_TEXT = (
    "<|system|>Reason inside <think></think> tags.{% for m in messages %}{{ m.content }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (R1_DISTILL, True),
        (R1_DISTILL.replace("<think>\\n", "<think>"), True),
        (CHATML, False),
        (QWEN3_NO_THINKING, False),  # opened and closed: the completion starts after the thought
        (THINK_IN_SYSTEM_TEXT, False),  # <think> mentioned before the prompt, not opened at its end
        ("{{ raise_exception('no') }}{% if add_generation_prompt %}<think>\n{% endif %}", True),  # text fallback
        ("", False),
        (None, False),
    ],
)
def test_template_opens_think(template: str | None, expected: bool) -> None:
    assert template_opens_think(template, {"bos_token": "<s>"}) is expected


def model_folder(tmp_path: Path, template: str) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "tokenizer.json").write_text("{}", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": template, "bos_token": "<s>"}), encoding="utf-8"
    )
    return folder


def test_resolve_for_model_reads_the_folder_template(tmp_path: Path) -> None:
    folder = model_folder(tmp_path, R1_DISTILL)
    assert model_chat_template(str(folder))[0] == R1_DISTILL
    specs = [RewardSpec(rule="think_answer_format"), RewardSpec(rule="numeric_answer"),
             RewardSpec(rule="format_regex", params={"template_opened_think": "no"})]
    resolved, opens = resolve_for_model(specs, str(folder), [{"prompt": [{"role": "user", "content": "q"}]}])
    assert opens is True
    assert resolved[0].params == {"template_opened_think": "yes"}
    assert resolved[1] is specs[1]
    assert resolved[2].params == {"template_opened_think": "no"}  # an explicit choice is kept
    # text prompts never go through the chat template
    resolved, opens = resolve_for_model(specs, str(folder), [{"prompt": "q"}])
    assert opens is False and resolved[0].params == {"template_opened_think": "no"}


def test_resolved_rule_pays_completions_that_start_inside_the_thought(tmp_path: Path) -> None:
    folder = model_folder(tmp_path, R1_DISTILL)
    (spec,), _ = resolve_for_model([{"rule": "think_answer_format", "params": {"strict": True}}], str(folder),
                                   [{"prompt": [{"role": "user", "content": "q"}]}])
    reward = pickle.loads(pickle.dumps(get_rule("think_answer_format").build(spec["params"])))
    completions = ["I add 2 and 2.\n</think>\n<answer>\n4\n</answer>", "<answer>\n4\n</answer>", ""]
    assert reward(completions) == [1.0, 0.0, 0.0]


def test_unknown_model_resolves_auto_to_no() -> None:
    resolved = resolve_template_tags([{"rule": "think_answer_format", "params": {}}], opens_think=False)
    assert resolved == [{"rule": "think_answer_format", "params": {"template_opened_think": "no"}}]
    assert model_chat_template("org/not-on-disk") == (None, {})


def test_bad_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="template_opened_think"):
        get_rule("think_answer_format").build({"template_opened_think": "maybe"})
