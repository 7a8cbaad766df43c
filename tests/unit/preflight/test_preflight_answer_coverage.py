"""The preflight report's answer coverage (rows an answer rule cannot judge) and the chat template's <think>: in the
report, its JSON, its text and the verdict; and the Datasets and Launch tabs' lines about them."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from app.tabs.datasets import answer_coverage_markdown
from grpo_core.preflight.report import LEVEL_WARNING, PreflightReport, format_report
from grpo_core.preflight.verdict import judge
from grpo_core.rewards.answer_coverage import coverage_lines, dataset_answer_coverage
from tests.helpers import R1_DISTILL, preflight_report


def test_answer_coverage_reaches_the_report_its_json_its_text_and_the_verdict() -> None:
    rows = [{"prompt": "q", "answer": a} for a in (1, 2, "see figure", None)]
    coverage = dataset_answer_coverage(rows, ["numeric_answer"], thorough=True)
    report = preflight_report()
    report.answers_not_judged = {c.rule: c.not_judged for c in coverage}
    report.answer_coverage_notes = coverage_lines(coverage)
    report.template_opened_think = True
    report.verdict = judge(report)
    assert report.answers_not_judged == {"numeric_answer": 2}
    assert report.verdict.level == LEVEL_WARNING
    assert any(a.startswith("numeric_answer cannot judge 2 of 4 rows") for a in report.verdict.advice)
    again = PreflightReport.from_dict(json.loads(json.dumps(report.to_dict(), allow_nan=False)))
    assert again.answers_not_judged == {"numeric_answer": 2} and again.template_opened_think is True
    text = format_report(report)
    assert "chat template opens <think> in the prompt: yes" in text
    assert "answer rows not judged: numeric_answer cannot judge 2 of 4 rows" in text


def test_an_older_report_without_the_new_fields_still_loads() -> None:
    data = preflight_report().to_dict()
    for key in ("answers_not_judged", "answer_coverage_notes", "template_opened_think"):
        data.pop(key)
    again = PreflightReport.from_dict(data)
    assert again.answers_not_judged == {} and again.template_opened_think is False


def test_datasets_tab_line() -> None:
    assert answer_coverage_markdown([{"prompt": "q", "answer": 3}]) == ""
    line = answer_coverage_markdown([{"prompt": "q", "answer": "see figure"}, {"prompt": "q", "answer": 3}])
    assert "numeric_answer cannot judge 1 of 2 rows" in line and "math_equivalence cannot judge 1 of 2" in line


def test_launch_tab_template_line(tmp_path: Path, settings, store) -> None:
    from app.tabs.launch.tools import bench_specs, template_think_markdown
    from grpo_core.rewards import RewardSpec

    ctx = SimpleNamespace(settings=settings, store=store, logins=None)  # what these helpers read of the app context
    folder = tmp_path / "r1"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    (folder / "tokenizer.json").write_text("{}", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": R1_DISTILL}), encoding="utf-8")
    assert "**opens `<think>`**" in template_think_markdown(ctx, str(folder))
    assert "not on disk yet" in template_think_markdown(ctx, "org/unknown-model")
    specs, opens = bench_specs(ctx, [RewardSpec(rule="think_answer_format")], str(folder), None)
    assert opens and specs[0].params["template_opened_think"] == "yes"


def test_launch_validation_warns_about_rows_an_answer_rule_cannot_judge(tmp_path: Path, store) -> None:
    from grpo_core.run_config import RunConfig
    from grpo_core.submit.validate import validate_run_config

    data = tmp_path / "d.jsonl"
    rows = [{"prompt": "What is 2+2?", "answer": 4}, {"prompt": "Draw it.", "answer": "see figure"}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    config = RunConfig(dataset_path=str(data), rewards=[{"rule": "numeric_answer"}, {"rule": "length"}])
    warnings = validate_run_config(store, config)
    assert any(w.startswith("numeric_answer cannot judge 1 of 2 rows") and "row 1 'see figure'" in w for w in warnings)
    config = RunConfig(dataset_path=str(data), rewards=[{"rule": "exact_match"}])
    assert not any("cannot judge" in w for w in validate_run_config(store, config))
