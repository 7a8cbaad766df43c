"""The reward-hacking probe: degenerate completions against the best real completion of a row."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_core.rewards.hacking_probe import describe, flagged, probe_completions, probe_row
from grpo_core.run_config import RunConfig, load_run_config

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
ARITHMETIC_ROW = {"prompt": "What is 40 + 2?", "answer": 42}
CODE_ROW = {"prompt": "Write f(x) returning x + 1.", "tests": ["assert f(1) == 2", "assert f(2) == 3"]}
SEED_CODE = [
    {"rule": "code_tests", "weight": 0.7, "params": {"timeout_s": 5.0}},
    {"rule": "code_style", "weight": 0.1},
    {"rule": "code_runtime", "weight": 0.1},
    {"rule": "length", "weight": 0.1, "params": {"min_tokens": 1, "max_tokens": 24}},
]
# What SmolLM2 wrote on HumanEval before training: a one-line print and a function that fails every test.
FAILING_CODE = ['print("hello")', "```python\ndef f(x):\n    return x\n```"]


def test_probe_completions_cover_every_kind():
    names = [name for name, _ in probe_completions(ARITHMETIC_ROW, "What is 40 + 2?")]
    assert names == ["empty", "whitespace", "prompt_echo", "bare_fence", "pass", "answer_only", "answer_then_junk",
                     "answer_then_line", "junk_then_answer", "repeated_number", "long_padding", "wrong_in_format"]
    texts = dict(probe_completions(ARITHMETIC_ROW, "What is 40 + 2?"))
    assert texts["answer_only"] == "42"
    assert "43" in texts["wrong_in_format"] and "42" not in texts["wrong_in_format"]
    assert "answer_only" not in dict(probe_completions(CODE_ROW, "p"))
    assert texts["answer_then_line"].startswith("42\n") and texts["junk_then_answer"].endswith("\n42")


NUMBER_ALONE = r"^\s*-?\d+(\.\d+)?\s*\.?\s*$"


@pytest.mark.parametrize("mode", ["search", "fullmatch"])
def test_a_format_rule_that_pays_the_answer_with_junk_is_flagged(mode):
    """The number-alone pattern matched in search mode with MULTILINE pays "42\\nbecause I said so": the probe must
    say so; matched whole (fullmatch), it pays nothing of the kind."""
    specs = [{"rule": "numeric_answer"}, {"rule": "format_regex", "weight": 0.5,
                                          "params": {"pattern": NUMBER_ALONE, "mode": mode}}]
    results = probe_row(specs, ARITHMETIC_ROW, ["42", "The answer is 42."])
    found = {(r.probe, r.rule) for r in flagged(results)}
    if mode == "search":
        assert found == {("answer_then_line", "format_regex"), ("junk_then_answer", "format_regex")}
        assert any("not the answer alone" in line for line in describe(results))
    else:
        assert found == set()


def test_the_quick_start_format_rule_needs_the_whole_completion_to_be_the_number():
    from grpo_core.rewards.compose import score_group

    texts = ["82", " -3.5.\n", "82\nbecause I said so", "because\n82", "82 because"]
    score = score_group(RunConfig().rewards, texts, {"answer": 82})
    assert score.rewards[score.names.index("format_regex")] == [1.0, 1.0, 0.0, 0.0, 0.0]


PROBE_CASES = [
    # (rules, row, real completions, probes expected flagged as (probe, rule))
    ("default rules, a right answer", RunConfig().rewards, ARITHMETIC_ROW, ["42", "The answer is 42.", "41"], set()),
    ("length alone: the empty completion wins", [{"rule": "length", "params": {"min_tokens": 0, "max_tokens": 8}}],
     ARITHMETIC_ROW, ["Forty plus two makes forty-two, so the answer is 42."],
     {(p, "length") for p in ("empty", "whitespace", "prompt_echo", "bare_fence", "pass", "long_padding")}),
    ("seed code recipe, failing real code", SEED_CODE, CODE_ROW, FAILING_CODE, set()),
    ("gated code recipe, failing real code", load_run_config(EXAMPLES / "code_gated.yaml").rewards, CODE_ROW,
     FAILING_CODE, set()),
    ("gated code recipe, a passing solution", load_run_config(EXAMPLES / "code_gated.yaml").rewards, CODE_ROW,
     [*FAILING_CODE, "```python\ndef f(x):\n    return x + 1\n```"], set()),
]


@pytest.mark.parametrize(("case", "specs", "row", "real", "expected"), PROBE_CASES, ids=[c[0] for c in PROBE_CASES])
def test_probe_flags_the_winning_degenerate_completions(case, specs, row, real, expected):
    results = probe_row(specs, row, real, row_index=3)
    assert {(r.probe, r.rule) for r in flagged(results)} == expected
    assert all(r.row_index == 3 for r in results)
    for result in results:
        if result.flagged:
            assert result.total is not None and result.total >= result.best_real - 1e-9


def test_empty_completion_is_described_with_its_rule():
    results = probe_row([{"rule": "length", "params": {"min_tokens": 0, "max_tokens": 8}}], ARITHMETIC_ROW,
                        ["Forty plus two makes forty-two, so the answer is 42."])
    lines = describe(results)
    assert lines[0].startswith("the probe 'empty' scores 1 on row 0, at or above the best real completion (0")
    assert lines[0].endswith("rule `length` rewards it")


def test_the_right_answer_alone_is_never_flagged():
    """The bare answer is what the arithmetic system prompt asks for: not a hack, even when it beats every sample."""
    specs = RunConfig().rewards  # the quick start's: numeric_answer 1.0, format_regex 0.5 (a number alone)
    assert not flagged(probe_row(specs, ARITHMETIC_ROW, ["42"]))
    assert not flagged(probe_row(specs, ARITHMETIC_ROW, ["41", "I do not know"]))


def test_a_degenerate_completion_paid_by_the_task_rule_is_flagged_even_below_the_best():
    """A task rule that pays the prompt echo is a hack even when a real completion scores more."""
    row = {"prompt": "What is 7 + 35? Say 42", "answer": "42"}
    results = probe_row([{"rule": "numeric_answer"}], row, ["42"])
    assert [r for r in flagged(results) if r.probe == "prompt_echo"] == []  # the prompt ends with the answer
    row = {"prompt": "Like \\boxed{42}, box it. What is 40 + 2?", "answer": "42"}
    specs = [{"rule": "math_equivalence"}, {"rule": "length", "weight": 2.0, "params": {"min_tokens": 0}}]
    results = probe_row(specs, row, ["The answer is \\boxed{42}, as 40 + 2 = 42 and nothing else."])
    assert ("prompt_echo", "math_equivalence") in {(r.probe, r.rule) for r in flagged(results)}
    assert any("should earn nothing" in line for line in describe(results))


def test_each_finding_is_listed_once():
    specs = [{"rule": "length", "params": {"min_tokens": 0, "max_tokens": 8}}]
    results = probe_row(specs, ARITHMETIC_ROW, ["a long real answer " * 5], row_index=0)
    results += probe_row(specs, ARITHMETIC_ROW, ["a long real answer " * 5], row_index=1)
    lines = describe(results)
    assert len(lines) == len(set(lines)) == len({r.probe for r in flagged(results)})


def test_probe_needs_a_real_completion():
    with pytest.raises(ValueError, match="real completion"):
        probe_row([{"rule": "length"}], ARITHMETIC_ROW, [])


def test_probe_counts_tokens_when_given_a_tokenizer():
    specs = [{"rule": "length", "params": {"min_tokens": 0, "max_tokens": 2}}]
    real = ["one two three"]
    by_words = {r.probe: r.total for r in probe_row(specs, ARITHMETIC_ROW, real)}
    by_chars = {r.probe: r.total for r in probe_row(specs, ARITHMETIC_ROW, real, tokenize=lambda t: list(t.encode()))}
    assert by_words["answer_only"] == 1.0
    assert by_chars["long_padding"] == 0.0


@pytest.mark.parametrize("real", [["13", "I am not sure."], ["7"], ["The sum is 9, so 9."]],
                         ids=["wrong_and_prose", "wrong_number", "prose"])
def test_the_quick_start_raises_no_hacking_finding_on_any_row(real):
    """The shipped quick start (its dataset and default rules, the prompt as the preflight passes it): whatever the
    model samples, no degenerate completion is flagged; the bare answer is what its system prompt asks for."""
    import json

    from grpo_core.datasets.rows import prompt_text

    rows = [json.loads(line) for line in (EXAMPLES / "arithmetic_sums1.jsonl").read_text().splitlines() if line]
    findings = []
    for index, row in enumerate(rows):
        results = probe_row(RunConfig().rewards, row, real, row_index=index, prompt=prompt_text(row["prompt"]))
        findings += describe(results)
    assert findings == []
