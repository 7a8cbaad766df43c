"""The run doctor: why a GRPO run learns or not, read from its metrics and a sample of its groups.

:func:`diagnose` looks at TRL's logged metrics (``frac_reward_zero_std``, ``completions/clipped_ratio``, ``kl``,
``reward``, ``loss``, ...) and the most recent sampled groups, and returns plain-words findings, each with the
steps involved and what to change in the run config. Pure: no torch, no gradio, no store access.

The checks and their thresholds (module constants in :mod:`~grpo_core.doctor.thresholds`; calibrated on the labelled
corpus ``tests/doctor/corpus/``, measured by ``benchmarks/bench_doctor.py``; reference in ``docs/doctor.md``):

- **learning** (information): the reward rises, by a one-sided Mann-Kendall test (p < 0.05) with Sen's slope's 95%
  interval above 0 and the last 10 logged rewards above the first 10 on average, over the latest 50 logged steps or over the whole run read: "reward up from X to Y", the test
  and its numbers. **too early to tell**: no trend yet, and the test could not have seen a meaningful rise (half the
  mean within-group ``reward_std``, at least 0.05) with 80% power (:func:`~grpo_core.doctor.trends.detectable_rise`).
  **reward not improving** (warning) only when it could; **falling** when it falls significantly by that much;
  **levelled off** after a rise.
- **no learning signal**: ``frac_reward_zero_std`` above 0.5 for 3 or more logged steps in a row, with the cause:
  too easy or too hard from the sampled groups, or from the reward level (DAPO, Yu et al. 2025, arXiv 2503.14476).
- **truncated completions**: ``completions/clipped_ratio`` above 0.3; a warning only when the cuts block the reward
  (nearly all cut, not falling, the reward not rising, the few finished ones not scoring more), else information.
- **KL**: against the run, not a fixed bound: ``beta * kl`` reaching 0.1 (a tenth of a unit advantage; 10 nats
  without a beta), a jump to 10x the median of the 10 logged steps before, or a significant rise while the reward
  falls. An ordinary drift (the quick start: 0.03 to 0.10) is none of these.
- **gradient zero** (error) or **vanishing** (warning) while ``reward_std`` shows the groups differ: frozen or
  detached parameters, a wrong ``lora_target_modules``, ``learning_rate`` 0; never "raise the learning rate".
- **policy not moving**: KL never above 1e-5 after 10 logged steps with signal: the learning rate (too low for
  LoRA, or 0 in the logged schedule) or frozen parameters.
- **task rule falling under a rising total** (warning): the heaviest rule falls by 0.1 or more while another rises.
- **entropy surging** (warning): entropy up to 2x its start on a significant rise while the reward does not rise.
- **reward-function errors**: ``rewards/<fn>/errors`` above 0: which rule, how many, at which steps.
- **reward flat at zero**: ``reward`` exactly 0 for 3 or more logged steps in a row, with example completions and
  the rules that gave them 0.
- **NaN or inf**: a metric that has numbers at some steps and NaN/inf (the store's NULL) at others.
- **loss exactly 0**: explained; it is expected in GRPO (see :func:`~grpo_core.doctor.health._loss_zero`).
- **entropy collapse**: entropy fallen to a quarter of the run's start (a significant fall) while the reward is not
  rising.
- **completion length drift**: ``completions/mean_length`` trending up to 90% of ``max_completion_length``, or down
  to a quarter of its start.
- **one rule carries the signal**: one reward rule explains 80% or more of the within-group variance of the
  weighted total reward across the sampled groups while it is not the task rule (:func:`rule_variance_shares`).
- **beta with zero-std groups**: ``beta > 0`` while more than half the groups had zero std over the last 5 steps.
- **ratio pinned at the high clip** (warning): ``clip_ratio/high_mean`` at 0.2 or more over the latest 3 logged
  steps: the policy moves too fast between generation and update.
- **trainer and generator disagree** (warning, vLLM): ``sampling/sampling_logp_difference/mean`` at 0.05 nats or
  more, or ``sampling/importance_sampling_ratio/mean`` outside [0.8, 1.25].
- **grad_norm spikes** (warning): a point 10x the median of the 10 logged points before it, among the latest 50.
- **train up, eval flat**: the training ``reward`` rises between the first and last of 3 or more evaluations while
  ``eval_reward`` (TRL's eval split metric) gains less than a quarter of that.

- **tool calling** (:mod:`~grpo_core.doctor.tools`): the policy **stopped calling tools**
  (``tools/call_frequency`` from 0.2 or more to below 0.02 for the last 3 logged steps), **most calls fail**
  (``tools/failure_frequency`` at 0.5 or more for 3 logged steps), rollouts **end at the tool-calling limit** (a
  quarter of the sampled completions end on a call without a result), the task rule **pays as well without the
  tool** (information).

Left out: trends that need a baseline across runs (is the reward rising fast *enough*), and learning-rate
schedules.
Each check registers itself with :func:`~grpo_core.doctor.registry.doctor_check` (its order among the checks) in its
subject's module; :func:`diagnose` runs :func:`~grpo_core.doctor.registry.all_checks`. Layout:
:mod:`~grpo_core.doctor.findings` (what a finding is, the series read), :mod:`~grpo_core.doctor.thresholds`
(every threshold with its reason), :mod:`~grpo_core.doctor.trends` (Mann-Kendall, its power, Sen's interval),
:mod:`~grpo_core.doctor.groups` (reading sampled groups), and the checks: :mod:`~grpo_core.doctor.progress` (the
reward verdict), :mod:`~grpo_core.doctor.policy` (gradient, policy movement, KL), :mod:`~grpo_core.doctor.signals` (high clip,
vLLM mismatch, gradient spikes), :mod:`~grpo_core.doctor.drift`
(entropy surge, task rule falling, reward-function errors), :mod:`~grpo_core.doctor.health` and
:mod:`~grpo_core.doctor.learning`. Before a run: the preflight report, :mod:`~grpo_core.preflight.report` (what a few
sampled groups show) and :mod:`~grpo_core.preflight.verdict` (will the run learn?).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from grpo_core.doctor import drift, health, learning, policy, signals, tools  # noqa: F401  (each registers its checks on import)
from grpo_core.doctor.findings import _ORDER, Finding, Series, Severity, series_from_points, step_ranges
from grpo_core.doctor.groups import completion_outcome, reward_weights, rule_variance_shares, task_rule
from grpo_core.doctor.registry import DoctorCheck, all_checks, doctor_check
from grpo_core.doctor.thresholds import RULE_ERRORS_SUFFIX, SERIES_KEYS, TREND_MIN_STEPS
from grpo_core.doctor.trends import Trend, mann_kendall
from storage import GroupRecord

__all__ = [
    "TREND_MIN_STEPS",
    "DoctorCheck",
    "Finding",
    "Series",
    "Severity",
    "Trend",
    "completion_outcome",
    "diagnose",
    "doctor_check",
    "mann_kendall",
    "reward_weights",
    "rule_variance_shares",
    "series_from_points",
    "series_keys",
    "step_ranges",
    "task_rule",
]


def series_keys(config: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The metric keys whose values :func:`diagnose` reads for a run of ``config``: :data:`SERIES_KEYS` and, per
    reward function of the config (:func:`reward_weights`), its ``rewards/<fn>/mean`` and ``rewards/<fn>/errors``."""
    names = reward_weights(config or {})
    per_rule = [key for name in names for key in (f"rewards/{name}/mean", f"rewards/{name}{RULE_ERRORS_SUFFIX}")]
    return (*SERIES_KEYS, *per_rule)


def diagnose(
    series: Series,
    groups: Sequence[GroupRecord] = (),
    config: Mapping[str, Any] | None = None,
    nan_steps: Mapping[str, Sequence[int]] | None = None,
) -> list[Finding]:
    """Everything the doctor finds in one run, most severe first.

    Args:
        series: the run's metrics, ``key -> (steps, values)`` with TRL's key names; ``None`` or a non-finite value
            is NaN (the store keeps NaN as NULL).
        groups: a sample of recent groups (``Store.recent_groups``), for example completions; may be empty.
        config: the run's config (``RunInfo.config``, a ``RunConfig`` dump), for the numbers in the advice
            (``beta``, ``learning_rate``, ``max_completion_length``, ...); may be missing.
        nan_steps: for keys left out of ``series`` (a reader that reads the values of
            :data:`~grpo_core.doctor.thresholds.SERIES_KEYS` only), the steps where each was NaN, for keys that were
            a number at other steps (``Store.metric_nan_steps``); a key in ``series`` is judged from ``series``.

    Returns:
        The findings; empty when nothing looks wrong (or nothing was logged yet).
    """
    config = config or {}
    findings: dict[str, Finding] = {}
    for check in all_checks():
        if check.wants_nan_steps:
            found = check.func(series, groups, config, nan_steps)
        else:
            found = check.func(series, groups, config)
        for finding in found:
            findings.setdefault(finding.code, finding)  # one block per code in the panel
    # stable: checks keep their order within a severity
    return sorted(findings.values(), key=lambda f: _ORDER[f.severity])
