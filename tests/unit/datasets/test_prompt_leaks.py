"""Prompts that give their answer away are warned about where the data can still be fixed: at upload (the Datasets
tab's message), at launch (the validation's warnings) and in the preflight verdict: a conversational prompt whose last
message is the assistant's (SFT data), or a prompt that holds the row's answer."""

from __future__ import annotations

import json

import pytest

from grpo_core.datasets.leaks import leak_lines, row_leak
from grpo_core.preflight.report import PreflightReport, format_report
from grpo_core.preflight.verdict import LEVEL_OK, LEVEL_WARNING, judge
from grpo_core.run_config import RunConfig
from grpo_core.submit.validate import validate_run_config

SFT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 6 x 7?"},
       {"role": "assistant", "content": "42"}]
ASK = [{"role": "user", "content": "What is 6 x 7?"}]


@pytest.mark.parametrize(
    ("row", "why"),
    [
        ({"prompt": SFT, "answer": "42"}, "ends with an assistant message"),
        ({"prompt": SFT}, "ends with an assistant message"),
        ({"prompt": [*ASK, {"role": "assistant", "content": "It is 42."}, {"role": "user", "content": "Sure?"}],
          "answer": 42}, "contains the answer"),
        ({"prompt": "What is 6 x 7? #### 42", "answer": "42"}, "contains the answer"),
        ({"prompt": "Solve 6 x 7. The answer is 42.", "answer": 42}, "contains the answer"),
        ({"prompt": "Which city is the capital of France (Paris or Lyon)?", "answer": "Paris"}, "contains the answer"),
        ({"prompt": ASK, "answer": "42"}, None),
        ({"prompt": "What is -34 + 0?", "answer": -34}, None),  # an operand equal to the answer gives nothing away
        ({"prompt": "What is 420 / 10?", "answer": 42}, None),
        ({"prompt": "Pick a or b.", "answer": "a"}, None),
    ],
)
def test_row_leaks(row, why):
    assert row_leak(row) == why


def test_leak_lines_count_and_name_rows():
    rows = [{"prompt": ASK, "answer": "42"}] * 3 + [{"prompt": SFT, "answer": "42"}] * 5
    (line,) = leak_lines(rows)
    assert line.startswith("5 of 8 rows have a prompt that ends with an assistant message")
    assert "rows 3, 4, 5, …" in line and "drop the final assistant message" in line
    assert leak_lines([{"prompt": ASK, "answer": "42"}]) == []


def test_the_upload_message_warns(tmp_path):
    from app.tabs.datasets import answer_coverage_markdown

    text = answer_coverage_markdown([{"prompt": SFT, "answer": "42"}])
    assert "⚠️ 1 of 1 rows have a prompt that ends with an assistant message" in text


def test_the_launch_check_warns(store, tmp_path, tiny_model_dir):
    path = tmp_path / "sft.jsonl"
    path.write_text("".join(json.dumps({"prompt": SFT, "answer": "42"}) + "\n" for _ in range(4)), encoding="utf-8")
    config = RunConfig(model=str(tiny_model_dir), dataset_path=str(path), rewards=[{"rule": "numeric_answer"}])
    warnings = validate_run_config(store, config)
    assert any("4 of 4 rows have a prompt that ends with an assistant message" in w for w in warnings)


def test_the_preflight_verdict_warns():
    report = PreflightReport(model="m", num_prompts=4, num_generations=4, max_completion_length=64, temperature=1.0,
                             top_p=1.0, rules=[], zero_std_share=0.0, truncation_rate=0.0,
                             mean_completion_tokens=5.0, unscorable_share=0.0, mean_total=0.5, std_total=0.4,
                             examples=[])
    assert judge(report).level == LEVEL_OK
    report.prompt_leak_notes = leak_lines([{"prompt": SFT, "answer": "42"}])
    verdict = judge(report)
    assert verdict.level == LEVEL_WARNING
    assert any("ends with an assistant message" in line for line in verdict.advice)
    report.verdict = verdict
    assert "prompts giving the answer away: 1 of 1 rows" in format_report(report)
