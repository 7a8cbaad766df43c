"""A run recorded from a user's own script (DashboardCallback: no dataset row index) keeps each prompt's identity: its
groups are keyed by the prompt text, so "one prompt across steps" in Inspect groups one prompt only."""

from __future__ import annotations

import pytest

from grpo_core.datasets.rows import PROMPT_KEY_BASE, is_prompt_key, prompt_key

pytest.importorskip("transformers")

from grpo_core.engine.group_capture import groups_from_trl_logs  # noqa: E402

QUESTIONS = [f"What is {a} + {a + 1}?" for a in range(12)]


def _logs(prompts: list[str], row_ids: list[int] | None = None) -> dict:
    completions = [f"answer {i}" for i in range(2 * len(prompts))]
    logs = {
        "prompt": [p for p in prompts for _ in range(2)],
        "completion": completions,
        "advantages": [0.5, -0.5] * len(prompts),
        "rewards": {"r": [1.0, 0.0] * len(prompts)},
        "extra": {},
    }
    if row_ids is not None:
        logs["extra"]["_row_index"] = [i for i in row_ids for _ in range(2)]
    return logs


def _groups(logs: dict, step: int):
    return groups_from_trl_logs(logs, step=step, num_generations=2, reward_names=["r"], reward_weights=[1.0])


def test_a_script_runs_prompts_keep_one_key_each_across_steps():
    first = _groups(_logs(QUESTIONS[:6]), step=1)
    second = _groups(_logs(list(reversed(QUESTIONS))), step=2)
    keys = {g.prompt: g.row_index for g in first}
    assert len(set(keys.values())) == 6, "twelve questions must not share one row"
    for group in second:
        assert is_prompt_key(group.row_index)
        if group.prompt in keys:
            assert group.row_index == keys[group.prompt]
    by_key: dict[int, set[str]] = {}
    for group in [*first, *second]:
        by_key.setdefault(group.row_index, set()).add(group.prompt)
    assert all(len(prompts) == 1 for prompts in by_key.values())  # one prompt per key
    assert -1 not in by_key


def test_a_dataset_row_index_is_kept_as_it_is():
    groups = _groups(_logs(QUESTIONS[:3], row_ids=[7, 0, 41]), step=1)
    assert [g.row_index for g in groups] == [7, 0, 41]
    assert not any(is_prompt_key(g.row_index) for g in groups)


def test_prompt_keys_are_stable_in_range_and_apart_from_rows():
    assert prompt_key("What is 2 + 3?") == prompt_key("What is 2 + 3?")
    assert prompt_key("What is 2 + 3?") != prompt_key("What is 2 + 4?")
    for text in ["", "x", "\udc80 lone surrogate", "é" * 10_000]:
        key = prompt_key(text)
        assert PROMPT_KEY_BASE <= key < 2**31 and is_prompt_key(key)
    assert not is_prompt_key(0) and not is_prompt_key(PROMPT_KEY_BASE - 1) and not is_prompt_key(-1)


def test_inspect_labels_a_prompt_key_as_a_prompt_not_a_dataset_row():
    from app.tabs.inspect.tools import _row_label

    assert _row_label(12) == "row 12"
    label = _row_label(prompt_key("What is 2 + 3?"))
    assert label.startswith("prompt #") and "row" not in label
