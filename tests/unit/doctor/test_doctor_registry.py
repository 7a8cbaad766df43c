"""The doctor's checks are registered where they are written (grpo_core.doctor.registry): diagnose runs every
registered check in its order, a new check needs no list edited, and a clash of names or orders is refused."""

from __future__ import annotations

import pytest

from grpo_core.doctor import Finding, Severity, diagnose, registry
from grpo_core.doctor.registry import all_checks, doctor_check

# The checks as they ran from the tuple in diagnose before the registry, in that order.
EXPECTED = ["_reward_zero", "_nan", "_gradient", "_policy_static",
            # TRL 1.16's newer signals, between the policy's checks and the rules'
            "_grad_spike", "_sampling_mismatch", "_clip_high", "_rule_errors", "_reward_trend",
            "_task_rule_falling", "_entropy_surge", "_zero_std", "_rule_dominates", "_entropy_collapse",
            "_length_drift", "_clipped", "_kl", "_beta_zero_std", "_eval_flat", "_loss_zero",
            # the tool-use checks, registered after the tuple's
            "_tools_stopped", "_tool_failures", "_iteration_limit", "_reward_without_tool"]


def test_every_check_is_registered_in_its_order():
    checks = all_checks()
    assert [c.name for c in checks] == EXPECTED
    assert [c.name for c in checks if c.wants_nan_steps] == ["_nan"]
    assert {c.func.__module__ for c in checks} == {f"grpo_core.doctor.{m}" for m in ("health", "learning", "policy",
                                                                                     "drift", "signals", "tools")}


@pytest.fixture
def scratch_registry(monkeypatch):
    monkeypatch.setattr(registry, "_CHECKS", dict(registry._CHECKS))


def _finding(code: str, severity: Severity = Severity.WARNING) -> Finding:
    return Finding(code=code, severity=severity, title=code, advice="")


def test_a_new_check_runs_by_its_decorator_alone(scratch_registry):
    seen = {}

    @doctor_check(1)
    def _first(series, groups, config):
        seen["config"] = config
        return [_finding("first-check")]

    @doctor_check(10_000, nan_steps=True)
    def _last(series, groups, config, nan_steps):
        seen["nan_steps"] = nan_steps
        return [_finding("first-check", Severity.ERROR), _finding("last-check")]

    findings = diagnose({}, config={"beta": 0.1}, nan_steps={"kl": [3]})
    assert seen == {"config": {"beta": 0.1}, "nan_steps": {"kl": [3]}}
    # the first check's finding keeps its code; the later one with the same code is dropped
    assert [(f.code, f.severity) for f in findings if f.code.endswith("-check")] == [
        ("first-check", Severity.WARNING), ("last-check", Severity.WARNING)]
    assert [c.name for c in all_checks()][0] == "_first" and [c.name for c in all_checks()][-1] == "_last"


def test_a_taken_name_or_order_is_refused(scratch_registry):
    with pytest.raises(ValueError, match="order 10 is already '_reward_zero'"):
        doctor_check(10)(lambda series, groups, config: [])

    def _kl(series, groups, config):
        return []

    with pytest.raises(ValueError, match="named '_kl' is already registered"):
        doctor_check(99_999)(_kl)
