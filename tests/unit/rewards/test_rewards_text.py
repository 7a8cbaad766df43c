"""Table-driven tests of the text rules: format_regex, think_answer_format, length, repetition, json_valid, plugin."""

from __future__ import annotations

import importlib.util
import pickle
import random
import re
import sys
import textwrap
from pathlib import Path

import pytest

from grpo_core.rewards import get_rule
from grpo_core.rewards.text import is_soft_think_answer, is_strict_think_answer

HUGE = "word " * 200_000  # 1 MB
GOOD = "<think>\nI add 2 and 2.\n</think>\n<answer>\n4\n</answer>"


def conversational(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


# --------------------------------------------------------------------------------------------------------------------
# format_regex
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "params", "expected"),
    [
        (GOOD, {}, 1.0),
        ("<think>a</think><answer>b</answer>", {}, 1.0),
        ("<think>a</think>\n\n<answer>b</answer>", {}, 1.0),
        ("<answer>b</answer>", {}, 0.0),
        ("<think>a</think>", {}, 0.0),
        ("", {}, 0.0),
        ("preamble\n<think>a</think><answer>b</answer>", {}, 1.0),  # MULTILINE: ^ matches at a line start
        ("preamble <think>a</think><answer>b</answer>", {}, 0.0),
        ("<think>中文推理</think><answer>答案</answer>", {}, 1.0),
        (conversational(GOOD), {}, 1.0),
        ("abc 123", {"pattern": r"\d+"}, 1.0),
        ("abc 123", {"pattern": r"\d+", "mode": "fullmatch"}, 0.0),
        ("123", {"pattern": r"\d+", "mode": "fullmatch"}, 1.0),
        ("line1\nline2", {"pattern": r"line1.line2", "mode": "fullmatch"}, 1.0),  # DOTALL
        (HUGE, {}, 0.0),
        (HUGE, {"pattern": "word $"}, 1.0),
    ],
)
def test_format_regex(completion: object, params: dict, expected: float) -> None:
    assert get_rule("format_regex").build(params)([completion]) == [expected]


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(unclosed", r"invalid regular expression '\(unclosed'.*position 0"),
        ("ab[c", r"'ab\[c'.*unterminated character set at position 2 \(line 1, column 3\)"),
        ("a**", r"multiple repeat at position 2"),
    ],
)
def test_format_regex_invalid_pattern_fails_at_build(pattern: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        get_rule("format_regex").build({"pattern": pattern})


def test_format_regex_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="mode"):
        get_rule("format_regex").build({"mode": "match"})


# --------------------------------------------------------------------------------------------------------------------
# think_answer_format
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "strict", "expected"),
    [
        (GOOD, True, 1.0),
        (GOOD, False, 1.0),
        ("<think>a</think><answer>b</answer>", True, 0.0),  # strict needs the newlines
        ("<think>a</think><answer>b</answer>", False, 1.0),
        ("<think>a</think> \n <answer>b</answer>", False, 1.0),
        ("<think>a</think> text <answer>b</answer>", False, 0.0),
        (GOOD + "\n", True, 0.0),  # strict: nothing after </answer>
        ("intro " + GOOD, True, 0.0),
        ("intro " + GOOD, False, 1.0),
        ("<answer>b</answer><think>a</think>", False, 0.0),
        ("<think>\nno answer\n</think>", True, 0.0),
        ("", False, 0.0),
        ("", True, 0.0),
        ("<think>\n推理\n</think>\n<answer>\n答案\n</answer>", True, 1.0),
        (conversational(GOOD), True, 1.0),
        (HUGE, False, 0.0),
        ("<think>\n" + HUGE + "\n</think>\n<answer>\n1\n</answer>", True, 1.0),
    ],
)
def test_think_answer_format(completion: object, strict: bool, expected: float) -> None:
    assert get_rule("think_answer_format").build({"strict": strict})([completion]) == [expected]


# --------------------------------------------------------------------------------------------------------------------
# length
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("length", "params", "expected"),
    [
        (0, {"min_tokens": 4, "max_tokens": 10}, 0.0),
        (1, {"min_tokens": 4, "max_tokens": 10}, 0.25),
        (4, {"min_tokens": 4, "max_tokens": 10}, 1.0),
        (10, {"min_tokens": 4, "max_tokens": 10}, 1.0),
        (11, {"min_tokens": 4, "max_tokens": 10}, 0.0),  # no buffer: hard cut
        (11, {"min_tokens": 4, "max_tokens": 10, "overlong_buffer": 4}, 0.75),
        (12, {"min_tokens": 4, "max_tokens": 10, "overlong_buffer": 4}, 0.5),
        (14, {"min_tokens": 4, "max_tokens": 10, "overlong_buffer": 4}, 0.0),
        (15, {"min_tokens": 4, "max_tokens": 10, "overlong_buffer": 4}, 0.0),
        (0, {"min_tokens": 0, "max_tokens": 0}, 1.0),
        (64, {}, 1.0),
        (65, {}, 0.0),
    ],
)
def test_length_from_completion_ids(length: int, params: dict, expected: float) -> None:
    reward = get_rule("length").build(params)
    assert reward(["ignored text"], completion_ids=[list(range(length))]) == [pytest.approx(expected)]


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_an_empty_completion_has_length_zero_though_its_ids_hold_the_end_token(text: str) -> None:
    reward = get_rule("length").build({})  # min_tokens 1
    eos = 2
    assert reward([text, "7"], completion_ids=[[eos], [55, eos]]) == [0.0, 1.0]


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("", 0.0),
        ("one", 0.5),
        ("one two", 1.0),
        ("one  two\nthree", 1.0),
        ("one two three four", 0.5),  # 1 over max with a buffer of 2
        ("一 二 三", 1.0),  # words are whitespace-separated, whatever the script
        ("一二三四五六七八", 0.5),  # no spaces: one word
        (conversational("a b c"), 1.0),
        (HUGE, 0.0),
    ],
)
def test_length_counts_words_without_completion_ids(completion: object, expected: float) -> None:
    reward = get_rule("length").build({"min_tokens": 2, "max_tokens": 3, "overlong_buffer": 2})
    assert reward([completion]) == [pytest.approx(expected)]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"min_tokens": -1}, "min_tokens"),
        ({"overlong_buffer": -1}, "overlong_buffer"),
        ({"min_tokens": 10, "max_tokens": 5}, "max_tokens"),
        ({"max_tokens": 2.5}, "whole number"),
    ],
)
def test_length_rejects_bad_params(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        get_rule("length").build(params)


# --------------------------------------------------------------------------------------------------------------------
# repetition
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "params", "expected"),
    [
        ("", {}, 0.0),
        ("a b", {}, 0.0),  # shorter than n
        ("a b c", {}, 0.0),
        ("a b c d e f", {}, 0.0),  # 4 trigrams, all unique
        ("a a a a a a", {}, -0.75),  # 4 trigrams, 1 unique: -1 * (1 - 1/4)
        ("a b a b a b", {"ngram_size": 2}, -0.6),  # 5 bigrams, 2 unique
        ("a a a a a a", {"max_penalty": -0.5}, -0.375),
        ("a a", {"ngram_size": 1}, -0.5),
        ("我 我 我 我", {}, -0.5),  # 2 trigrams, 1 unique
        (conversational("x x x x x x"), {}, -0.75),
        (HUGE, {}, pytest.approx(-1.0, abs=1e-4)),
    ],
)
def test_repetition(completion: object, params: dict, expected: float) -> None:
    assert get_rule("repetition").build(params)([completion]) == [pytest.approx(expected)]


@pytest.mark.parametrize(
    ("params", "message"),
    [({"ngram_size": 0}, "ngram_size"), ({"max_penalty": 0.5}, "max_penalty"), ({"max_penalty": "nan"}, "max_penalty")],
)
def test_repetition_rejects_bad_params(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        get_rule("repetition").build(params)


# --------------------------------------------------------------------------------------------------------------------
# json_valid
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ('{"a": 1}', 1.0),
        ('  [1, 2, "三"]  \n', 1.0),
        ("42", 1.0),
        ('"text"', 1.0),
        ("{'a': 1}", 0.0),  # Python, not JSON
        ('{"a": 1,}', 0.0),
        ("", 0.0),
        ("   ", 0.0),
        ('Here it is:\n```json\n{"a": [1, 2]}\n```\nDone.', 1.0),
        ('```\n{"a": 1}\n```', 1.0),
        ('```json\n{"a": }\n```', 0.0),
        ('```json\n{"a": 1}\n```\n```json\n{bad}\n```', 1.0),  # the first block counts
        ("[" * 100_000 + "]" * 100_000, 0.0),  # too deep for json.loads: 0, not a crash
        (conversational('{"ok": true}'), 1.0),
        ('{"k": "' + "x" * 1_000_000 + '"}', 1.0),
        (HUGE, 0.0),
    ],
)
def test_json_valid(completion: object, expected: float) -> None:
    assert get_rule("json_valid").build()([completion]) == [expected]


HAS_JSONSCHEMA = importlib.util.find_spec("jsonschema") is not None


@pytest.mark.skipif(HAS_JSONSCHEMA, reason="jsonschema is installed")
def test_json_valid_schema_column_needs_jsonschema() -> None:
    with pytest.raises(ValueError, match="jsonschema"):
        get_rule("json_valid").build({"schema_column": "schema"})


@pytest.mark.skipif(not HAS_JSONSCHEMA, reason="jsonschema is not installed")
@pytest.mark.parametrize(
    ("completion", "schema", "expected"),
    [
        ('{"a": 1}', {"type": "object", "required": ["a"]}, 1.0),
        ('{"b": 1}', {"type": "object", "required": ["a"]}, 0.0),
        ('{"a": 1}', '{"type": "object", "required": ["a"]}', 1.0),
        ('{"a": 1}', None, 1.0),
        ('{"a": 1}', {"type": 12}, None),  # the schema itself is invalid
        ('{"a": 1}', "[" * 100_000 + "]" * 100_000, None),  # a schema nested past the interpreter: invalid, no crash
        ("not json", {"type": "object"}, 0.0),
    ],
)
def test_json_valid_with_schema(completion: str, schema: object, expected: float | None) -> None:
    reward = get_rule("json_valid").build({"schema_column": "schema"})
    assert reward([completion], schema=[schema]) == [expected]


# --------------------------------------------------------------------------------------------------------------------
# plugin
# --------------------------------------------------------------------------------------------------------------------

PLUGIN_SOURCE = textwrap.dedent(
    """
    CALLS = []

    def reward(completions, answer=None, **kwargs):
        CALLS.append(len(completions))
        return [float(len(c)) if c else None for c in completions]

    def wrong_length(completions, **kwargs):
        return [1.0]

    def not_numbers(completions, **kwargs):
        return ["high" for _ in completions]

    def not_a_list(completions, **kwargs):
        return 1.0

    class Scorer:
        @staticmethod
        def score(completions, **kwargs):
            return [1 for _ in completions]

    VALUE = 3
    """
)


@pytest.fixture
def plugin_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_rewards.py"
    path.write_text(PLUGIN_SOURCE)
    return path


def test_plugin_loads_lazily_and_scores(plugin_file: Path) -> None:
    reward = get_rule("plugin").build({"target": f"{plugin_file}:reward"})
    assert reward.__name__ == "reward"
    assert reward._fn is None  # nothing loaded at build time
    assert reward(["ab", "", "abcd"], answer=[1, 2, 3], prompts=["p"] * 3) == [2.0, None, 4.0]
    assert reward._fn is not None


def test_plugin_stays_picklable_after_loading(plugin_file: Path) -> None:
    reward = get_rule("plugin").build({"target": f"{plugin_file}:reward", "name": "my_len"})
    before = pickle.loads(pickle.dumps(reward))
    assert reward(["abc"]) == [3.0]
    after = pickle.loads(pickle.dumps(reward))
    assert after._fn is None
    assert after.__name__ == before.__name__ == "my_len"
    assert after(["abcd"]) == [4.0]


def test_plugin_dotted_attribute_and_module_target(plugin_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert get_rule("plugin").build({"target": f"{plugin_file}:Scorer.score"})(["x", "y"]) == [1.0, 1.0]
    monkeypatch.syspath_prepend(str(plugin_file.parent))
    monkeypatch.delitem(sys.modules, "my_rewards", raising=False)
    reward = get_rule("plugin").build({"target": "my_rewards:reward"})
    assert reward(["abc"]) == [3.0]
    assert sys.modules["my_rewards"].CALLS == [1]


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("wrong_length", "must return a list of 2 numbers or None; got 1 values"),
        ("not_numbers", "returned str 'high' at index 0"),
        ("not_a_list", "got float"),
        ("VALUE", "is not callable"),
        ("missing", "could not be loaded: AttributeError"),
    ],
)
def test_plugin_bad_results_name_the_target(plugin_file: Path, function: str, message: str) -> None:
    reward = get_rule("plugin").build({"target": f"{plugin_file}:{function}"})
    with pytest.raises(ValueError, match=message) as info:
        reward(["a", "b"])
    assert function in str(info.value)


def test_plugin_missing_file_fails_on_call_not_build(tmp_path: Path) -> None:
    reward = get_rule("plugin").build({"target": f"{tmp_path / 'nope.py'}:reward"})
    with pytest.raises(ValueError, match="nope.py:reward' could not be loaded"):
        reward(["a"])


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("", "give the reward function"),
        ("   ", "give the reward function"),
        ("package.module", "must look like"),
        (":func", "empty module"),
        ("package.module:", "empty module or function"),
        ("bad module!:func", "neither a dotted module name"),
        ("pkg.mod:not-a-name", "not a Python function name"),
        ("/tmp/x.txt:func", "neither a dotted module name"),
    ],
)
def test_plugin_target_syntax_is_checked_at_build(target: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        get_rule("plugin").build({"target": target})


# --------------------------------------------------------------------------------------------------------------------
# Linear-time checks agree with the regexes they replace, and degenerate completions do not stall training
# --------------------------------------------------------------------------------------------------------------------

PIECES = ["<think>", "</think>", "<answer>", "</answer>", "\n", " ", "x"]


def random_texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 9))) for _ in range(count)]


@pytest.mark.parametrize("seed", range(5))
def test_think_answer_checks_agree_with_reference_regexes(seed: int) -> None:
    strict_re = re.compile(r"<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>", re.DOTALL)
    soft_re = re.compile(r"<think>.*?</think>\s*<answer>.*?</answer>", re.DOTALL)
    texts = random_texts(3000, seed) + [GOOD, "<think>\n\n</think>\n<answer>\n\n</answer>"]
    for text in texts:
        assert is_strict_think_answer(text) == bool(strict_re.fullmatch(text)), repr(text)
        assert is_soft_think_answer(text) == bool(soft_re.search(text)), repr(text)
    assert sum(is_soft_think_answer(t) for t in texts) > 10  # the sample exercises both outcomes


@pytest.mark.parametrize(
    "text",
    [
        "<think>\n" * 20_000,
        "<think>" * 20_000,
        "\\boxed{" * 20_000,
        "<answer>" * 20_000,
        "<think>\n" + "\n</think>\n<answer>\n" * 10_000,
    ],
    ids=["think-lines", "think", "boxed", "answer", "separator"],
)
def test_degenerate_completions_are_scored(text: str) -> None:
    # Each of these took 10 to 100 seconds with backtracking regexes; a looping model can produce them.
    # (Their speed is measured in benchmarks/, not here.)
    for name, params in [
        ("format_regex", {}),
        ("think_answer_format", {}),
        ("think_answer_format", {"strict": True}),
        ("numeric_answer", {}),
        ("exact_match", {}),
    ]:
        assert get_rule(name).build(params)([text], answer=["1"]) == [0.0]
