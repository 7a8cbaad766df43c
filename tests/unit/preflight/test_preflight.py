"""Tests of the preflight's pure parts: statistics of scored groups, the verdict rules (table-driven), the report's
text and JSON forms (grpo_core.preflight.report), row picking, EOS cutting and the dataset loading of a config."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from grpo_core.datasets.formats import read_normalized_row
from grpo_core.datasets.prompt_dataset import DatasetError
from grpo_core.datasets.rows import load_rows, prompt_text
from grpo_core.engine.policy_model import EndOfSequence
from grpo_core.preflight.report import (
    LEVEL_OK,
    LEVEL_PROBLEM,
    LEVEL_WARNING,
    PreflightReport,
    SampledGroup,
    format_report,
    summarize,
)
from grpo_core.preflight.verdict import judge
from grpo_core.preflight.worker import pick_rows
from grpo_core.rewards.compose import score_group
from grpo_core.run_config import ConfigError, RunConfig
from tests.helpers import preflight_report, rule_stats

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "arithmetic.jsonl"
RULES = [
    {"rule": "numeric_answer", "weight": 1.0},
    {"rule": "format_regex", "weight": 0.5, "params": {"pattern": r"^\d+$"}},
]


def _config(**overrides) -> RunConfig:
    return RunConfig.model_validate({"dataset_path": str(EXAMPLE), "rewards": RULES, **overrides})


def _group(
    config: RunConfig,
    texts: list[str],
    answer: int,
    *,
    tokens: list[int] | None = None,
    truncated: list[bool] | None = None,
    row_index: int = 0,
) -> SampledGroup:
    row = {"prompt": "What is it?", "answer": answer}
    ids = [[1] * n for n in tokens] if tokens else None
    return SampledGroup(
        row_index=row_index,
        prompt="What is it?",
        texts=texts,
        num_tokens=tokens or [len(t) for t in texts],
        truncated=truncated or [False] * len(texts),
        score=score_group(config.rewards, texts, row, completion_ids=ids),
    )


# ------------------------------------------------------------------------------------------------ summarize


def test_summarize_counts_signal_truncation_and_rule_statistics():
    config = _config()
    varied = _group(
        config, ["42", "41", "the answer is 42", "x"], 42, tokens=[2, 2, 6, 64], truncated=[False, False, False, True]
    )
    flat = _group(config, ["no", "nope", "never", "nah"], 7, tokens=[1, 2, 3, 4], row_index=5)
    report = summarize([varied, flat], config=config, seconds=1.5)

    assert report.num_prompts == 2 and report.num_generations == 4
    assert report.zero_std_share == 0.5  # the second group scores 0 everywhere
    assert report.truncation_rate == 1 / 8
    assert report.mean_completion_tokens == (2 + 2 + 6 + 64 + 1 + 2 + 3 + 4) / 8
    assert report.unscorable_share == 0
    numeric, fmt = report.rules
    assert (numeric.name, numeric.weight, numeric.count) == ("numeric_answer", 1.0, 8)
    assert numeric.mean == 2 / 8 and numeric.min == 0 and numeric.max == 1
    assert numeric.nonzero_share == 2 / 8
    assert numeric.varies_share == 0.5
    assert math.isclose(numeric.std, math.sqrt(sum((v - 0.25) ** 2 for v in [1, 0, 1, 0, 0, 0, 0, 0]) / 7))
    assert fmt.nonzero_share == 2 / 8  # "42" and "41"
    assert report.mean_total == (1.5 + 0.5 + 1.0) / 8
    # examples: best and worst of each group, best first
    assert [e.row_index for e in report.examples] == [0, 0, 5, 5]
    assert report.examples[0].text == "42" and report.examples[0].advantage > 0
    assert report.examples[0].rewards == {"numeric_answer": 1.0, "format_regex": 1.0}


def test_summarize_counts_none_rewards_and_unscorable_completions():
    config = _config(rewards=[{"rule": "numeric_answer", "weight": 1.0}])
    row_without_answer = SampledGroup(
        row_index=0,
        prompt="p",
        texts=["1", "2"],
        num_tokens=[1, 1],
        truncated=[False, False],
        score=score_group(config.rewards, ["1", "2"], {"prompt": "p", "answer": None}),
    )
    report = summarize([row_without_answer], config=config.model_copy(update={"num_generations": 2}))
    assert report.rules[0].count == 0 and report.rules[0].none_share == 1.0
    assert report.rules[0].mean is None and report.rules[0].std is None
    assert report.unscorable_share == 1.0
    assert report.zero_std_share == 1.0  # fewer than two scorable completions: no signal


def test_summarize_needs_groups():
    with pytest.raises(ValueError, match="no groups"):
        summarize([], config=_config())


def test_report_round_trips_through_json_and_drops_non_finite_values():
    config = _config()
    report = summarize([_group(config, ["42", "1", "2", "3"], 42)], config=config)
    report.verdict = judge(report)
    report.rules[0] = replace(report.rules[0], std=float("nan"))
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    again = PreflightReport.from_dict(data)
    assert again.rules[0].std is None
    assert again.verdict == report.verdict
    assert again.examples == report.examples


def test_format_report_lists_rules_shares_and_verdict():
    config = _config()
    report = summarize([_group(config, ["42", "1", "two", "3"], 42)], config=config, seconds=2.0)
    report.verdict = judge(report)
    text = format_report(report)
    assert "numeric_answer" in text and "format_regex" in text
    assert "frac_reward_zero_std): 0%" in text
    assert "Verdict (ok): Rewards vary within groups" in text


# ------------------------------------------------------------------------------------------------ judge


JUDGE_CASES = [
    # (case, report, level, headline fragment, advice fragments)
    ("healthy", preflight_report(), LEVEL_OK, "this run can learn", []),
    (
        "most groups flat",
        preflight_report(zero_std=0.75, num_prompts=16),
        LEVEL_PROBLEM,
        "Most groups give no learning signal",
        ["most groups give no learning signal", "raise temperature or num_generations"],
    ),
    (
        "every group flat",
        preflight_report(zero_std=1.0),
        LEVEL_PROBLEM,
        "No group gives a learning signal",
        ["loosen the format rule"],
    ),
    # 3 of 4 flat: the share's 95% interval is 30%-95%, it cannot tell (the quick start gets this 1 time in 12)
    ("3 of 4 groups flat is a note", preflight_report(zero_std=0.75), LEVEL_OK, "can learn", ["75% of groups", "3 of 4"]),
    ("many groups flat", preflight_report(zero_std=0.625, num_prompts=32), LEVEL_WARNING, "can learn, but", ["62% of groups"]),
    # 2 of 4 flat was a warning: the quick start's groups are flat about a third of the time, so 2 of 4 is chance
    ("half of 4 flat is a note", preflight_report(zero_std=0.5), LEVEL_OK, "can learn", ["too few groups to tell"]),
    (
        "cut, nothing finishes, groups flat",
        preflight_report(truncation=0.95, zero_std=0.5, num_prompts=2),
        LEVEL_WARNING,
        "can learn",
        ["raise max_completion_length"],
    ),
    ("cut but the cut texts differ", preflight_report(truncation=0.95), LEVEL_OK, "can learn", ["rewards still differ"]),
    (
        "nearly all cut and finishing does not pay",
        preflight_report(truncation=0.94, finish_gain=0.0, zero_std=0.5, num_prompts=2),
        LEVEL_WARNING,
        "can learn",
        ["finishing does not pay", "raise max_completion_length"],
    ),
    (
        "nearly all cut but the few finished score more",
        preflight_report(truncation=0.94, finish_gain=0.5),
        LEVEL_OK,
        "can learn",
        ["finished completions score +0.5 more"],
    ),
    # was a warning: the quick start cuts 75% at first, and finished answers score more, which GRPO learns from
    (
        "cut but finishing pays",
        preflight_report(truncation=0.75, finish_gain=0.4),
        LEVEL_OK,
        "can learn",
        ["finished completions score +0.4 more than cut ones"],
    ),
    ("a little truncation is fine", preflight_report(truncation=0.25), LEVEL_OK, "can learn", []),
    # a shaping rule absent from a small sample while the main rule varies: a note (was a warning on the quick start)
    (
        "shaping rule never fires",
        preflight_report(rules=[rule_stats("numeric_answer"), rule_stats("format_regex", 0.2, low=0, high=0, nonzero=0, varies=0)]),
        LEVEL_OK,
        "can learn",
        ["rule `format_regex` did not fire on any of the 16 sampled completions", "its regex"],
    ),
    (
        "the only rule never fires",
        preflight_report(rules=[rule_stats("format_regex", 1.0, low=0, high=0, nonzero=0, varies=0)], zero_std=1.0),
        LEVEL_PROBLEM,
        "No group",
        ["rule `format_regex` never fires", "its regex"],
    ),
    (
        "rule never applies",
        preflight_report(rules=[rule_stats("numeric_answer"), rule_stats("exact_match", 0.5, count=0, nonzero=0, varies=0)]),
        LEVEL_WARNING,
        "can learn",
        ["rule `exact_match` never applies", "column"],
    ),
    (
        "code rule never applies: its tests, not the column",
        preflight_report(rules=[rule_stats("code_tests", count=0, nonzero=0, varies=0), rule_stats("length", 0.2)]),
        LEVEL_WARNING,
        "can learn",
        ["rule `code_tests` never applies", "`tests` could not be run", "pre-launch check"],
    ),
    (
        "rule constant",
        preflight_report(rules=[rule_stats("numeric_answer"), rule_stats("length", 0.2, low=1, high=1, nonzero=1, varies=0)]),
        LEVEL_WARNING,
        "can learn",
        ["`length` gives every completion the same reward (1)"],
    ),
    (
        "signal only from shaping",
        preflight_report(rules=[rule_stats("numeric_answer", low=0, high=1, nonzero=0.2, varies=0), rule_stats("length", 0.2)]),
        LEVEL_WARNING,
        "only through `length`: this run can learn that, not `numeric_answer`",
        ["main rule `numeric_answer`", "comes only from `length`: the policy will optimise that first"],
    ),
    (
        "answer never earned, shaping varies",
        preflight_report(
            rules=[
                rule_stats("numeric_answer", low=0, high=0, nonzero=0, varies=0),
                rule_stats("length", 0.2),
                rule_stats("format_regex", 0.2),
            ]
        ),
        LEVEL_WARNING,
        "only through `length`, `format_regex`",
        ["rule `numeric_answer` never fires", "never earns it", "optimise those first"],
    ),
    (
        "signal mostly from shaping (the HumanEval preflight of SmolLM2)",
        preflight_report(
            rules=[
                rule_stats("code_tests", 0.7, low=0, high=0.1, nonzero=0.06, varies=0.25),
                rule_stats("code_style", 0.1, varies=1.0),
                rule_stats("length", 0.1, varies=1.0),
                rule_stats("numeric_answer", 0.05, varies=0.25),
            ]
        ),
        LEVEL_WARNING,
        "this run can learn, but see the advice",
        ["`code_tests` (weight 0.7) differs within only 25% of groups", "only from `code_style`, `length`:"],
    ),
    ("unscorable completions", preflight_report(unscorable=0.25), LEVEL_WARNING, "can learn", ["no rule applied to 25%"]),
    (
        "weight-0 rule is ignored",
        preflight_report(rules=[rule_stats("numeric_answer"), rule_stats("format_regex", 0.0, low=0, high=0, nonzero=0, varies=0)]),
        LEVEL_OK,
        "can learn",
        [],
    ),
    (
        "plugin name shown with its rule",
        preflight_report(
            rules=[rule_stats("numeric_answer"), rule_stats("mine", 0.3, low=0, high=0, nonzero=0, varies=0, rule="plugin")]
        ),
        LEVEL_OK,
        "can learn",
        ["rule `mine` (plugin) did not fire"],
    ),
]


@pytest.mark.parametrize(
    ("case", "report", "level", "headline", "advice"), JUDGE_CASES, ids=[c[0] for c in JUDGE_CASES]
)
def test_judge(case, report, level, headline, advice):
    verdict = judge(report)
    assert verdict.level == level, verdict
    assert headline in verdict.headline
    joined = "\n".join(verdict.advice)
    for fragment in advice:
        assert fragment in joined, joined
    if not advice:
        assert verdict.advice == []


def test_judge_lists_the_signal_problem_first():
    verdict = judge(preflight_report(zero_std=1.0, truncation=0.9))
    assert "learning signal" in verdict.advice[0]
    assert "max_completion_length" in verdict.advice[1]


# ------------------------------------------------------------------------------------------------ helpers


def test_pick_rows_is_seeded_distinct_and_bounded():
    assert pick_rows(100, 4, seed=1) == pick_rows(100, 4, seed=1)
    assert pick_rows(100, 4, seed=1) != pick_rows(100, 4, seed=2)
    assert len(set(pick_rows(100, 10, seed=0))) == 10
    assert sorted(pick_rows(3, 10, seed=0)) == [0, 1, 2]
    with pytest.raises(ValueError, match="no rows"):
        pick_rows(0, 4, seed=0)
    with pytest.raises(ValueError, match="at least 1"):
        pick_rows(5, 0, seed=0)


@pytest.mark.parametrize(
    ("ids", "eos", "expected"),
    [
        ([5, 6, 2, 0, 0], [2], ([5, 6, 2], False)),  # cut after the first EOS, which stays (TRL counts it)
        ([5, 6, 7], [2], ([5, 6, 7], True)),  # no EOS: truncated
        ([2, 2], [2, 9], ([2], False)),
        ([5, 9, 2], [2, 9], ([5, 9], False)),  # any of several EOS ids
        ([], [2], ([], True)),
    ],
)
def test_cut_at_eos(ids, eos, expected):
    assert EndOfSequence(ids=tuple(eos), pad_id=None).cut(ids) == expected


def test_prompt_text():
    assert prompt_text("plain") == "plain"
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    assert prompt_text(chat) == "system: Be brief.\nuser: 2+2?"


def test_load_rows_from_path_relative_to_the_config(tmp_path, monkeypatch):
    (tmp_path / "d.jsonl").write_text('{"prompt": "a", "answer": 1}\n{"prompt": "b", "answer": 2}\n')
    monkeypatch.chdir(tmp_path.parent)
    config = _config(dataset_path="d.jsonl")
    rows = load_rows(None, config, base_dir=tmp_path)
    assert [r["answer"] for r in rows] == [1, 2]


def test_load_rows_from_the_store(store, settings):
    from grpo_core.datasets.library import import_dataset

    info = import_dataset(store, settings, EXAMPLE, source_name="arithmetic.jsonl", name="arith")
    rows = load_rows(store, _config(dataset_path=None, dataset_id=info.id))
    assert len(rows) == 400 and "answer" in rows[0]
    with pytest.raises(ConfigError, match="needs the store"):
        load_rows(None, _config(dataset_path=None, dataset_id=info.id))
    with pytest.raises(ConfigError, match="names no dataset"):
        load_rows(store, _config(dataset_path=None))


def test_read_normalized_row(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"prompt": "a", "n": 0}\n\n{"prompt": "b\u2028c", "n": 1}\n[1]\n')
    assert read_normalized_row(path, 0) == {"prompt": "a", "n": 0}
    assert read_normalized_row(path, 1) == {"prompt": "b\u2028c", "n": 1}
    with pytest.raises(DatasetError, match="line 4"):
        read_normalized_row(path, 2)
    with pytest.raises(IndexError, match="numbered from 0"):
        read_normalized_row(path, -1)
    path.write_text('{"prompt": "a"}\n')
    with pytest.raises(IndexError, match="has 1 rows"):
        read_normalized_row(path, 5)


@pytest.mark.parametrize(
    ("cores", "load", "omp", "default", "expected"),
    [
        (2, 0.1, None, 2, 2),  # idle: torch's default
        (2, 8.0, None, 2, 1),  # oversubscribed: one thread, never zero
        (16, 6.4, None, 16, 10),  # the idle cores
        (16, 0.0, None, 8, 8),  # never more than the default
        (2, 8.0, "2", 2, 2),  # OMP_NUM_THREADS wins
    ],
)
def test_cpu_threads_uses_the_idle_cores(monkeypatch, cores, load, omp, default, expected):
    import grpo_core.preflight.worker as preflight

    monkeypatch.setattr(preflight.os, "cpu_count", lambda: cores)
    monkeypatch.setattr(preflight.os, "getloadavg", lambda: (load, load, load))
    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    assert preflight.cpu_threads(default) == expected


# ------------------------------------------------------------------------------------------------ the probe


def test_flagged_probes_reach_the_report_its_json_its_text_and_the_verdict():
    from grpo_core.rewards.hacking_probe import probe_row

    config = _config(rewards=[{"rule": "length", "params": {"min_tokens": 0, "max_tokens": 4}}])
    row = {"prompt": "What is it?", "answer": 42}
    texts = ["It is 42.", "Forty two, since forty plus two is that."]
    group = _group(config, texts, 42, row_index=5)
    group.probes = probe_row(config.rewards, row, texts, row_index=5)
    report = summarize([group], config=config)
    report.verdict = judge(report)
    assert ("empty", "length") in {(p.probe, p.rule) for p in report.probes}
    assert report.verdict.level == LEVEL_WARNING
    assert any(a.startswith("reward hacking: the probe 'empty'") for a in report.verdict.advice)
    again = PreflightReport.from_dict(json.loads(json.dumps(report.to_dict(), allow_nan=False)))
    assert again.probes == report.probes
    assert "the probe 'empty' scores 1 on row 5" in format_report(report)
    assert format_report(report).count("the probe 'empty'") == 1  # each finding listed once
    from app.tabs.launch.tools import verdict_markdown

    assert verdict_markdown(report).count("the probe 'empty'") == 1  # in the Launch tab too


def test_default_rules_with_a_right_answer_flag_no_probe():
    from grpo_core.rewards.hacking_probe import probe_row

    config = RunConfig.model_validate({"dataset_path": str(EXAMPLE)})
    row = {"prompt": "What is 40 + 2?", "answer": 42}
    texts = ["42", "41", "The answer is 42."]
    group = _group(config, texts, 42)
    group.probes = probe_row(config.rewards, row, texts)
    report = summarize([group], config=config)
    report.verdict = judge(report)
    assert report.probes == []
    assert not any("reward hacking" in a for a in report.verdict.advice)
    assert "no degenerate completion scores at or above the best sampled one" in format_report(report)
