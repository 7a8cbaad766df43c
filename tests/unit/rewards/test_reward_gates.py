"""Gates in reward composition: a gated rule returns its own reward where the gating rule reaches ``min`` and 0.0
elsewhere, stays its own reward function (its own metric name), survives pickling, and bad gates are refused."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from grpo_core.rewards import RewardSpec, build_reward_funcs, score_group
from grpo_core.run_config import load_run_config

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

# format_regex "^\d+$" as the gate; length (min 1, max 4 words) as the gated rule.
GATE = {"rule": "format_regex", "min": 0.5}
SPECS = [
    {"rule": "format_regex", "weight": 1.0, "params": {"pattern": r"^\d+$"}},
    {"rule": "length", "weight": 0.5, "params": {"min_tokens": 1, "max_tokens": 4}, "gate": GATE},
]

GATE_CASES = [
    # (completion, format_regex reward, gated length reward, total)
    ("42", 1.0, 1.0, 1.5),  # gate holds: length counts
    ("forty two", 0.0, 0.0, 0.0),  # gate fails: length would give 1.0, counts 0
    ("", 0.0, 0.0, 0.0),  # empty: length's 0 stays 0
    ("a b c d e f g h", 0.0, 0.0, 0.0),
]


@pytest.mark.parametrize(("completion", "gate_reward", "gated_reward", "total"), GATE_CASES)
def test_gated_rule_counts_only_where_the_gate_holds(completion, gate_reward, gated_reward, total):
    score = score_group(SPECS, [completion, "7"], {"prompt": "p"})
    assert score.names == ["format_regex", "length"]
    assert score.rewards[0][0] == gate_reward
    assert score.rewards[1][0] == gated_reward
    assert score.total[0] == pytest.approx(total)


@pytest.mark.parametrize(("minimum", "expected"), [(0.0, 1.0), (1.0, 1.0), (1.01, 0.0)])
def test_gate_threshold_is_inclusive(minimum, expected):
    specs = [SPECS[0], {**SPECS[1], "gate": {"rule": "format_regex", "min": minimum}}]
    assert score_group(specs, ["42"], {"prompt": "p"}).rewards[1] == [expected]


def test_ungated_rule_is_unchanged_by_a_gate_elsewhere():
    ungated = score_group([SPECS[0], {**SPECS[1], "gate": None}], ["forty two"], {"prompt": "p"})
    assert ungated.rewards[1] == [1.0]  # without the gate length pays the non-answer


def test_gated_functions_keep_their_names_and_pickle():
    funcs, weights, names = build_reward_funcs(SPECS)
    assert names == ["format_regex", "length"]
    assert [f.__name__ for f in funcs] == names
    assert weights == [1.0, 0.5]
    copies = pickle.loads(pickle.dumps(funcs))
    assert copies[1](completions=["42", "no"], prompts=["p", "p"]) == [1.0, 0.0]
    assert copies[0](completions=["42", "no"], prompts=["p", "p"]) == [1.0, 0.0]


def test_gating_rule_runs_once_per_batch():
    calls = []
    funcs, _, _ = build_reward_funcs([SPECS[0], SPECS[1], {**SPECS[1], "weight": 0.1}])
    inner = funcs[0].func

    def counting(**kwargs):
        calls.append(1)
        return inner(**kwargs)

    funcs[0].func = counting
    for func in funcs:
        func(completions=["42", "x"], prompts=["p", "p"], trainer_state=None)
    assert len(calls) == 1
    funcs[0](completions=["43"], prompts=["p"], trainer_state=None)
    assert len(calls) == 2


@pytest.mark.parametrize(
    ("gate", "message"),
    [
        ({"rule": "numeric_answer", "min": 1}, "not a rule of this run"),
        ({"rule": "length", "min": 1}, "cannot gate itself"),
        ({"rule": "format_regex", "min": float("nan")}, "finite"),
    ],
)
def test_bad_gates_are_refused(gate, message):
    with pytest.raises(ValueError, match=message):
        build_reward_funcs([SPECS[0], {**SPECS[1], "gate": gate}])


def test_gate_on_a_gated_rule_is_refused():
    specs = [SPECS[0], SPECS[1], {"rule": "length", "gate": {"rule": "length", "min": 0.5}}]
    with pytest.raises(ValueError, match="itself gated"):
        build_reward_funcs(specs)


def test_gate_in_yaml_round_trips():
    config = load_run_config(EXAMPLES / "code_gated.yaml")
    gated = [spec.rule for spec in config.rewards if spec.gate is not None]
    assert gated == ["code_style", "code_runtime", "length"]
    assert all(spec.gate.rule == "code_tests" and spec.gate.min == 0.01 for spec in config.rewards if spec.gate)
    assert RewardSpec.model_validate(config.rewards[1].model_dump()) == config.rewards[1]
