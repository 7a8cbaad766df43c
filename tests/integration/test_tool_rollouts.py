"""The preflight and the try-out bench sample real multi-turn rollouts for a run with tools (TRL's own tool loop,
grpo_core/engine/tool_rollout.py) on the tiny tool-calling model: model -> tool call -> tool result -> model, the
turns kept and shown as blocks, the environment's reward added; a tool that hangs or raises is a failed call."""

from __future__ import annotations

import time

import pytest

from grpo_core.engine import tool_rollout
from grpo_core.run_config import RunConfig
from tests.tiny_model import TOOL_QUESTION, TOOL_SYSTEM

PROMPT = [{"role": "system", "content": TOOL_SYSTEM}, {"role": "user", "content": TOOL_QUESTION}]
ENVIRONMENT = '''
import time


class HangingCalculator:
    """The calculator as an environment whose tool hangs: each call is a failed call, never a stalled job."""

    def reset(self, **kwargs):
        self.calls = 0

    def calculator(self, expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: numbers with + - * / // % ** and parentheses, e.g. "(12 + 30) * 2".
        """
        self.calls += 1
        time.sleep(60)
        return "42"

    def get_reward(self) -> float:
        return float(self.calls)
'''


def _kinds(turns):
    return [t["kind"] for t in turns or []]


def test_bounded_tools_fail_instead_of_stalling():
    def hangs(x: int) -> str:
        time.sleep(30)
        return "late"

    def raises(x: int) -> str:
        raise KeyError("no such key")

    started = time.monotonic()
    with pytest.raises(tool_rollout.ToolTimeout, match="did not answer within 0.2 s"):
        tool_rollout.bounded_tool(hangs, 0.2)(1)
    assert time.monotonic() - started < 5
    with pytest.raises(KeyError):
        tool_rollout.bounded_tool(raises, 0.2)(1)
    assert tool_rollout.bounded_tool(lambda x: str(x * 2), 1.0)(21) == "42"
    assert tool_rollout.bounded_tool(hangs).__name__ == "hangs"  # TRL finds a tool by its name


def test_the_preflight_samples_multi_turn_rollouts_with_a_library_tool(tiny_tool_model_dir, tmp_path):
    from app.tabs.launch.tools import verdict_markdown
    from grpo_core.preflight.report import PreflightReport
    from grpo_core.preflight.worker import run_preflight

    config = RunConfig(model=str(tiny_tool_model_dir), dataset_path="rows.jsonl", tools=["calculator"],
                       max_tool_calling_iterations=1, num_generations=2, max_completion_length=64, temperature=1.0,
                       rewards=[{"rule": "numeric_answer"}, {"rule": "tool_called", "params": {"tool": "calculator"}}],
                       device="cpu")
    rows = [{"prompt": PROMPT, "answer": "42"}]
    report = run_preflight(config, rows, model_cache_dir=tmp_path, num_prompts=1, progress=lambda _: None)
    report = PreflightReport.from_dict(report.to_dict())  # as the web side reads the child's JSON
    assert report.tool_call_frequency and report.tool_call_frequency > 0
    assert report.tool_failure_frequency is not None and 0 <= report.tool_failure_frequency <= 1
    called = [ex for ex in report.examples if "tool_result" in _kinds(ex.turns)]
    assert called, [ex.text for ex in report.examples]
    turns = called[0].turns
    call = turns[_kinds(turns).index("tool_call")]
    assert call["name"] == "calculator" and '"expression"' in call["arguments"] and call["parsed"]
    assert turns[_kinds(turns).index("tool_result")]["text"] == "42"  # the library's calculator ran
    assert called[0].rewards["tool_called"] == 1.0
    shown = verdict_markdown(report)
    assert 'data-kind="tool_call"' in shown and 'data-kind="tool_result"' in shown
    assert "tool calls per completion" in shown


def test_the_try_out_bench_samples_an_environment_whose_tool_hangs(tiny_tool_model_dir, tmp_path, monkeypatch):
    from app.tabs.try_model import side_html
    from grpo_core.try_model.job import TryRequest
    from grpo_core.try_model.worker import try_model

    monkeypatch.setattr(tool_rollout, "CALL_TIMEOUT_S", 0.5)
    (tmp_path / "agent_env.py").write_text(ENVIRONMENT)
    request = TryRequest(model=str(tiny_tool_model_dir), prompt=PROMPT, row={"answer": "42"}, device="cpu",
                         rewards=[{"rule": "numeric_answer", "weight": 1.0}], num_samples=3, max_new_tokens=160,
                         temperature=1.0, environment=f"{tmp_path}/agent_env.py:HangingCalculator",
                         max_tool_calling_iterations=1, model_cache_dir=str(tmp_path))
    started = time.monotonic()
    result = try_model(request, progress=lambda _: None)
    assert time.monotonic() - started < 120
    completions = result["sides"]["base"]["completions"]
    called = [c for c in completions if "tool_call" in _kinds(c["turns"])]
    assert called, [c["text"] for c in completions]
    for completion in called:
        failed = [t for t in completion["turns"] if t["kind"] == "tool_result"]
        assert failed and failed[0]["error"] and "did not answer" in failed[0]["text"], completion["turns"]
        assert completion["rewards"]["HangingCalculator"] >= 1.0  # the environment's reward, as TRL adds it
        assert completion["turns"][-1] == {"kind": "reward", "name": "HangingCalculator",
                                           "value": completion["rewards"]["HangingCalculator"]}
    shown = side_html(result["sides"]["base"], "base")
    assert 'class="grpo-turn failed" data-kind="tool_result"' in shown
