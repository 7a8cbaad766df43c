"""Tests of reward composition (RewardSpec, build_reward_funcs, score_group) and of the registry as a whole."""

from __future__ import annotations

import math
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_core.rewards import (
    GroupScore,
    RewardRule,
    RewardSpec,
    RuleParam,
    all_rules,
    build_reward_funcs,
    completion_text,
    get_rule,
    score_group,
)

MY_MODULES = {"grpo_core.rewards.answer", "grpo_core.rewards.text"}
GOOD = "<think>\nx\n</think>\n<answer>\n4\n</answer>"


# --------------------------------------------------------------------------------------------------------------------
# The registry: every rule builds with defaults, pickles, and follows TRL's calling convention
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture
def plugin_target(tmp_path: Path) -> str:
    path = tmp_path / "plug.py"
    path.write_text("def reward(completions, **kwargs):\n    return [0.5 for _ in completions]\n")
    return f"{path}:reward"


def test_builtin_rules_are_registered() -> None:
    names = {rule.name for rule in all_rules()}
    expected = {"numeric_answer", "math_equivalence", "exact_match", "format_regex", "think_answer_format"}
    assert expected | {"length", "repetition", "json_valid", "plugin"} <= names


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.name)
def test_every_rule_pickles_and_is_callable(rule: RewardRule, plugin_target: str, tmp_path: Path) -> None:
    (tmp_path / "scorer").mkdir()
    (tmp_path / "scorer" / "config.json").write_text("{}")
    params = {"plugin": {"target": plugin_target}, "reward_model": {"model": str(tmp_path / "scorer")}}.get(rule.name, {})
    func = rule.build(params)
    assert func.__name__ == ("reward" if rule.name == "plugin" else rule.name)
    assert all(isinstance(p, RuleParam) for p in rule.params)
    assert rule.description and rule.category
    clone = pickle.loads(pickle.dumps(func))
    assert clone.__name__ == func.__name__
    if rule.factory.__module__ not in MY_MODULES:
        return  # another module's rules (code execution) are exercised by their own tests
    completions = ["", "答案 \\boxed{4}", [{"role": "assistant", "content": GOOD}], "x" * 1_000_000]
    columns = {column: ["4", None, "4", "4"] for column in rule.columns}
    kwargs = {"prompts": ["q"] * 4, "completion_ids": [[], [1], [1, 2], [1] * 10], "trainer_state": None}
    expected = func(completions, **columns, **kwargs)
    again = pickle.loads(pickle.dumps(clone))(completions, **columns, **kwargs)
    assert again == expected
    assert len(expected) == 4
    assert all(value is None or isinstance(value, float) for value in expected)
    if rule.columns:
        assert expected[1] is None  # the row without an answer


def test_registry_import_does_not_load_heavy_modules() -> None:
    code = (
        "import sys\n"
        "from grpo_core.rewards import all_rules, build_reward_funcs\n"
        "all_rules()\n"
        "build_reward_funcs([{'rule': r.name} for r in all_rules() if r.category != 'plugin'])\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'sympy', 'math_verify') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("plain", "plain"),
        (None, ""),
        # a multi-turn rollout: the model's final assistant turn, never the tool's output (issue: agentic GRPO)
        ([{"role": "assistant", "content": "a"}, {"role": "tool", "content": "b"}], "a"),
        ([{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "c"}], "a\nc"),
        ([{"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "image"}]}], "x"),
        ({"role": "assistant", "content": "d"}, "d"),
    ],
)
def test_completion_text(completion: object, expected: str) -> None:
    assert completion_text(completion) == expected


# --------------------------------------------------------------------------------------------------------------------
# RewardSpec and build_reward_funcs
# --------------------------------------------------------------------------------------------------------------------


def test_build_returns_funcs_weights_and_names() -> None:
    funcs, weights, names = build_reward_funcs(
        [
            RewardSpec(rule="numeric_answer", weight=2.0),
            {"rule": "think_answer_format", "weight": 0.5, "params": {"strict": "true"}},
            RewardSpec(rule="length", weight=-1, params={"max_tokens": 8}, name="short"),
        ]
    )
    assert names == ["numeric_answer", "think_answer_format", "short"]
    assert weights == [2.0, 0.5, -1.0]
    assert [f.__name__ for f in funcs] == names
    assert funcs[1].strict is True
    assert funcs[2].max_tokens == 8


def test_duplicate_names_get_suffixes() -> None:
    _, _, names = build_reward_funcs(
        [
            {"rule": "numeric_answer"},
            {"rule": "numeric_answer", "params": {"tolerance": 1}},
            {"rule": "length", "name": "numeric_answer"},
            {"rule": "length", "name": "numeric_answer_2"},
            {"rule": "length", "name": "  "},  # a blank name means the default
        ]
    )
    assert names == ["numeric_answer", "numeric_answer_2", "numeric_answer_3", "numeric_answer_2_2", "length"]


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ([], "at least one reward rule"),
        ([{"rule": "length"}, {"rule": "no_such_rule"}], r"reward rule 2 \(no_such_rule\): unknown reward rule"),
        (
            [{"rule": "length"}, {"rule": "format_regex", "params": {"pattern": "(x"}}],
            r"reward rule 2 \(format_regex\): parameter 'pattern': invalid regular expression '\(x'",
        ),
        ([{"rule": "length", "params": {"max_tokens": "many"}}], r"reward rule 1 \(length\): parameter 'max_tokens'"),
        ([{"rule": "length", "params": {"colour": 1}}], r"reward rule 1 \(length\): .*no parameter 'colour'"),
        ([{"rule": "think_answer_format", "params": {"strict": "maybe"}}], r"parameter 'strict'"),
        ([{"rule": "length", "weight": "heavy"}], r"reward rule 1 \(length\): weight"),
        ([{"rule": "length", "weight": float("nan")}], r"reward rule 1 \(length\): weight: .*finite"),
        ([{"rule": "length", "wieght": 2}], r"reward rule 1 \(length\): wieght: Extra inputs"),
        ([{"weight": 2}], r"reward rule 1 \(\?\): rule: Field required"),
        ([{"rule": "plugin"}], r"reward rule 1 \(plugin\): parameter 'target'"),
    ],
)
def test_build_errors_name_the_spec(specs: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_reward_funcs(specs)


def test_reward_spec_round_trips_through_json() -> None:
    spec = RewardSpec(rule="format_regex", weight=0.25, params={"pattern": "^a$"}, name="fmt")
    assert RewardSpec.model_validate_json(spec.model_dump_json()) == spec
    assert RewardSpec(rule="length").params == {}


def test_built_funcs_pickle_with_their_names() -> None:
    funcs, _, _ = build_reward_funcs([{"rule": "length"}, {"rule": "length"}])
    clones = pickle.loads(pickle.dumps(funcs))
    assert [f.__name__ for f in clones] == ["length", "length_2"]


# --------------------------------------------------------------------------------------------------------------------
# score_group: hand-computed GRPO advantages
# --------------------------------------------------------------------------------------------------------------------

ONE_TWO_TOTALS = 0.5 / (math.sqrt(1 / 3) + 1e-4)  # totals [1, 0, 0, 1]: mean 0.5, unbiased std sqrt(1/3)


@pytest.mark.parametrize(
    ("completions", "answer", "scale", "expected_advantages"),
    [
        (["1", "0", "0", "1"], 1, "group", [ONE_TWO_TOTALS, -ONE_TWO_TOTALS, -ONE_TWO_TOTALS, ONE_TWO_TOTALS]),
        (["1", "0", "0", "1"], 1, True, [ONE_TWO_TOTALS, -ONE_TWO_TOTALS, -ONE_TWO_TOTALS, ONE_TWO_TOTALS]),
        (["1", "0", "0", "1"], 1, "batch", [ONE_TWO_TOTALS, -ONE_TWO_TOTALS, -ONE_TWO_TOTALS, ONE_TWO_TOTALS]),
        (["1", "0", "0", "1"], 1, "none", [0.5, -0.5, -0.5, 0.5]),
        (["1", "0", "0", "1"], 1, False, [0.5, -0.5, -0.5, 0.5]),
        (["1", "1", "1", "1"], 1, "group", [0.0, 0.0, 0.0, 0.0]),  # all equal: no signal
        (["0", "0"], 1, "group", [0.0, 0.0]),
        (["1", "0", "0", "0"], 1, "group", [0.75 / (0.5 + 1e-4)] + [-0.25 / (0.5 + 1e-4)] * 3),
        (["1"], 1, "group", [0.0]),  # G = 1: std taken as 0
        (["1", "0"], None, "group", [0.0, 0.0]),  # nothing scorable
    ],
)
def test_score_group_single_rule(
    completions: list[str], answer: object, scale: object, expected_advantages: list
) -> None:
    score = score_group([{"rule": "numeric_answer"}], completions, {"answer": answer}, scale_rewards=scale)
    assert score.advantages == pytest.approx(expected_advantages, rel=1e-9)
    assert score.names == ["numeric_answer"]


def test_score_group_weights_and_none() -> None:
    specs = [
        RewardSpec(rule="numeric_answer", weight=2.0),
        RewardSpec(rule="think_answer_format", weight=0.5),
    ]
    completions = ["<think>a</think><answer>4</answer>", "<think>a</think><answer>5</answer>", "4", "5"]
    score = score_group(specs, completions, {"answer": 4, "prompt": "2+2?"})
    assert score.rewards == [[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]]
    assert score.total == [2.5, 0.5, 2.0, 0.0]
    mean = 5.0 / 4
    std = math.sqrt(((1.25**2) + (0.75**2) + (0.75**2) + (1.25**2)) / 3)
    assert score.advantages == pytest.approx([(t - mean) / (std + 1e-4) for t in score.total], rel=1e-9)
    assert isinstance(score, GroupScore)


def test_score_group_unscorable_completion_is_left_out_like_trl() -> None:
    # Rule 1 applies to no completion (no answer); rule 2 applies to all. A row is unscorable only when every rule
    # returns None, so here every completion is scored by rule 2 alone.
    specs = [{"rule": "numeric_answer"}, {"rule": "length", "params": {"max_tokens": 1}}]
    score = score_group(specs, ["a", "a b", "a", "a b"], {"answer": None})
    assert score.rewards[0] == [None] * 4
    assert score.total == [1.0, 0.0, 1.0, 0.0]
    assert score.advantages == pytest.approx([ONE_TWO_TOTALS, -ONE_TWO_TOTALS, ONE_TWO_TOTALS, -ONE_TWO_TOTALS])


def test_score_group_excludes_unscorable_rows_from_the_baseline(tmp_path: Path) -> None:
    path = tmp_path / "partial.py"
    path.write_text("def reward(completions, **kwargs):\n    return [None, 1.0, 0.0, 2.0]\n")
    score = score_group([{"rule": "plugin", "params": {"target": f"{path}:reward"}}], list("abcd"), {})
    assert score.total == [None, 1.0, 0.0, 2.0]
    # baseline over the 3 scorable rows: mean 1, unbiased std 1
    assert score.advantages == pytest.approx([0.0, 0.0, -1 / (1 + 1e-4), 1 / (1 + 1e-4)])


def test_score_group_single_scorable_completion_gets_zero_advantage(tmp_path: Path) -> None:
    path = tmp_path / "single.py"
    path.write_text("def reward(completions, **kwargs):\n    return [None, 3.0, None]\n")
    score = score_group([{"rule": "plugin", "params": {"target": f"{path}:reward"}}], list("abc"), {})
    assert score.total == [None, 3.0, None]
    assert score.advantages == [0.0, 0.0, 0.0]  # nanstd of one value is NaN, so TRL's nan_to_num gives 0


def test_score_group_uses_completion_ids_for_length() -> None:
    spec = [{"rule": "length", "params": {"min_tokens": 1, "max_tokens": 2, "overlong_buffer": 2}}]
    score = score_group(spec, ["a", "a"], {}, completion_ids=[[1, 2, 3], [1]])
    assert score.rewards == [[0.5, 1.0]]


def test_score_group_normalize_then_sum() -> None:
    specs = [{"rule": "numeric_answer", "weight": 1.0}, {"rule": "think_answer_format", "weight": 1.0}]
    completions = ["<think>a</think><answer>4</answer>", "5", "4", "<think>a</think><answer>5</answer>"]
    score = score_group(specs, completions, {"answer": 4}, multi_objective_aggregation="normalize_then_sum")
    # each rule is [1, 0, 1, 0] or [1, 0, 0, 1]: normalised to +-z with z = 0.5 / (sqrt(1/3) + 1e-4)
    z = ONE_TWO_TOTALS
    summed = [2 * z, -2 * z, 0.0, 0.0]
    std = math.sqrt(sum(s * s for s in summed) / 3)
    assert score.total == [2.0, 0.0, 1.0, 1.0]  # the raw weighted sum, as TRL logs it
    assert score.advantages == pytest.approx([s / (std + 1e-4) for s in summed], rel=1e-9)


def test_score_group_passes_row_columns_like_trl(tmp_path: Path) -> None:
    path = tmp_path / "spy.py"
    path.write_text(
        "SEEN = {}\n"
        "def reward(completions, prompts, completion_ids, trainer_state, log_extra, log_metric, **columns):\n"
        "    log_extra('note', ['x'] * len(completions))\n"
        "    log_metric('m', 1.0)\n"
        "    SEEN.update(prompts=prompts, columns=columns, ids=completion_ids, state=trainer_state)\n"
        "    return [1.0] * len(completions)\n"
    )
    score_group(
        [{"rule": "plugin", "params": {"target": f"{path}:reward"}}],
        ["a", "b"],
        {"prompt": "P", "answer": 3, "completion": "ignored"},
    )
    seen = next(m for m in sys.modules.values() if getattr(m, "__file__", None) == str(path)).SEEN
    assert seen == {"prompts": ["P", "P"], "columns": {"answer": [3, 3]}, "ids": None, "state": None}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"completions": []}, "at least one completion"),
        ({"scale_rewards": "std"}, "scale_rewards"),
        ({"multi_objective_aggregation": "mean"}, "multi_objective_aggregation"),
        ({"completion_ids": [[1]]}, "completion_ids has 1 entries for 2 completions"),
    ],
)
def test_score_group_rejects_bad_arguments(kwargs: dict, message: str) -> None:
    arguments = {"specs": [{"rule": "length"}], "completions": ["a", "b"], "row": {}} | kwargs
    with pytest.raises(ValueError, match=message):
        score_group(**arguments)


def test_score_group_checks_reward_count(tmp_path: Path) -> None:
    path = tmp_path / "short.py"
    path.write_text("def reward(completions, **kwargs):\n    return [1.0] * (len(completions) + 1)\n")
    with pytest.raises(ValueError, match="must return a list of 2 numbers"):
        score_group([{"rule": "plugin", "params": {"target": f"{path}:reward"}}], ["a", "b"], {})


def test_get_rule_unknown_lists_known_rules() -> None:
    with pytest.raises(ValueError, match="known rules: .*numeric_answer"):
        get_rule("nope")


def test_a_prompts_image_block_without_text_reads_as_no_text():
    from grpo_core.datasets.rows import prompt_text

    # Arrow gives every content block of a column every key: an image block's "text" is None
    prompt = [{"role": "user", "content": [{"type": "image", "text": None}, {"type": "text", "text": "Colour?"}]}]
    assert prompt_text(prompt) == "user: Colour?"
