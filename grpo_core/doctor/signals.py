"""The run doctor's checks of TRL 1.16's newer signals: the importance ratio pinned at the high clip
(``clip_ratio/high_mean``: the policy moving too fast), vLLM's importance-sampling ratio and logp difference
(``sampling/importance_sampling_ratio/*``, ``sampling/sampling_logp_difference/*``: trainer and generator disagree),
and ``grad_norm`` spikes.

Each check takes ``(series, groups, config)`` and returns its findings (see :func:`grpo_core.doctor.diagnose`); a run
that did not log a signal (on-policy, no vLLM) gets nothing from its check.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from grpo_core.doctor.findings import Finding, Series, Severity, _config_value, _points, found
from grpo_core.doctor.registry import doctor_check
from grpo_core.doctor.thresholds import (
    CLIP_HIGH_SHARE,
    GRAD_SPIKE_FACTOR,
    GRAD_SPIKE_HISTORY,
    GRAD_SPIKE_WINDOW,
    SAMPLING_IS_RATIO_BAND,
    SAMPLING_LOGP_DIFF_MAX,
    SIGNAL_RECENT,
)
from storage import GroupRecord

LOGP_DIFF = "sampling/sampling_logp_difference/mean"
IS_RATIO = "sampling/importance_sampling_ratio/mean"


def _recent(series: Series, key: str) -> tuple[float | None, list[int]]:
    """The median of ``key``'s latest :data:`SIGNAL_RECENT` finite points and their steps; ``(None, [])`` when
    fewer were logged."""
    points = [(s, v) for s, v in _points(series, key) if v is not None][-SIGNAL_RECENT:]
    if len(points) < SIGNAL_RECENT:
        return None, []
    return statistics.median(v for _, v in points), [s for s, _ in points]


@doctor_check(43)
def _clip_high(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """``clip_ratio/high_mean`` at or above :data:`CLIP_HIGH_SHARE` over the latest logged steps: so many tokens'
    importance ratios pass ``1 + epsilon_high`` that their gradient is cut; each update moves the policy further than
    the trust region allows (PPO's clipping; DAPO's clip-higher, Yu et al. 2025, arXiv 2503.14476)."""
    share, steps = _recent(series, "clip_ratio/high_mean")
    if share is None or share < CLIP_HIGH_SHARE:
        return []
    high = config.get("epsilon_high") or config.get("epsilon")
    bound = (f" (1 + epsilon_high = {1 + float(high):g})"
             if isinstance(high, int | float) and not isinstance(high, bool) else "")
    return found(
        "clip_high", Severity.WARNING,
        title=f"The importance ratio is pinned at the high clip: {share:.0%} of tokens past the upper bound{bound}",
        advice=(
            "The policy moves too fast between the generation and the update: those tokens' gradients are cut, so the "
            "step follows the rest. Lower learning_rate" + _config_value(config, "learning_rate")
            + ", take fewer updates per generation (num_iterations" + _config_value(config, "num_iterations")
            + ", steps_per_generation" + _config_value(config, "steps_per_generation") + "), or raise epsilon_high"
            + _config_value(config, "epsilon_high") + " (DAPO's clip-higher, 0.28) if the cut is meant to be looser."
        ),
        steps=steps,
    )


@doctor_check(42)
def _sampling_mismatch(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """vLLM's generator and the trainer disagree on the completions' log-probabilities: the mean per-token logp
    difference at or above :data:`SAMPLING_LOGP_DIFF_MAX`, or the mean importance-sampling ratio outside
    :data:`SAMPLING_IS_RATIO_BAND`, over the latest logged steps (TRL logs both only with vLLM)."""
    difference, diff_steps = _recent(series, LOGP_DIFF)
    ratio, ratio_steps = _recent(series, IS_RATIO)
    reasons = []
    if difference is not None and difference >= SAMPLING_LOGP_DIFF_MAX:
        reasons.append(f"the mean per-token logp difference is {difference:.3g} nats")
    low, high = SAMPLING_IS_RATIO_BAND
    if ratio is not None and not low <= ratio <= high:
        reasons.append(f"the mean importance-sampling ratio is {ratio:.3g} (1 when they agree)")
    if not reasons:
        return []
    corrected = config.get("vllm_importance_sampling_correction", True)
    return found(
        "sampling_mismatch", Severity.WARNING,
        title="Trainer and generator disagree: " + "; ".join(reasons),
        advice=(
            "The completions were sampled from a policy that is not the one being trained, so the update is "
            "off-policy. Causes: vLLM and the trainer at different precisions (bf16 sampling against an fp32 "
            "trainer; cast_lm_head_to_fp32), weights not synced to vLLM after the update (vllm_mode"
            + _config_value(config, "vllm_mode") + "), or a different attention kernel. "
            + ("Importance-sampling correction is off (vllm_importance_sampling_correction false): turn it on. "
               if corrected is False else
               "Keep vllm_importance_sampling_correction on; a *_truncate vllm_importance_sampling_mode with "
               "vllm_importance_sampling_clip_max bounds the weights (Yao et al. 2025, truncated importance sampling).")
        ),
        steps=sorted(set(diff_steps) | set(ratio_steps)),
    )


@doctor_check(41)
def _grad_spike(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """``grad_norm`` points among the latest :data:`GRAD_SPIKE_WINDOW` at least :data:`GRAD_SPIKE_FACTOR` times the
    median of the :data:`GRAD_SPIKE_HISTORY` logged points before each."""
    points = [(s, v) for s, v in _points(series, "grad_norm") if v is not None]
    spikes = []
    for index in range(max(GRAD_SPIKE_HISTORY, len(points) - GRAD_SPIKE_WINDOW), len(points)):
        before = statistics.median(v for _, v in points[index - GRAD_SPIKE_HISTORY:index])
        step, value = points[index]
        if before > 0 and value >= GRAD_SPIKE_FACTOR * before:
            spikes.append((step, value, before))
    if not spikes:
        return []
    step, value, before = max(spikes, key=lambda spike: spike[1] / spike[2])
    where = ", ".join(str(s) for s, _, _ in spikes[:8]) + (" ..." if len(spikes) > 8 else "")
    return found(
        "grad_spike", Severity.WARNING,
        title=(f"grad_norm spikes: {value:.3g} at step {step}, {value / before:.0f}x the median of the "
               f"{GRAD_SPIKE_HISTORY} logged steps before ({len(spikes)} spike{'s' if len(spikes) > 1 else ''}: "
               f"step {where})"),
        advice=(
            "A batch pushed the loss somewhere new: a degenerate or very long completion, a reward outlier, or a "
            "step size at the edge of stability; spikes often come before a divergence (KL and entropy jumping). "
            "Open those steps in Inspect (a click on the point). max_grad_norm" + _config_value(config, "max_grad_norm")
            + " caps the update itself; if spikes repeat, lower learning_rate" + _config_value(config, "learning_rate")
            + " or resume from a checkpoint before them."
        ),
        steps=(s for s, _, _ in spikes),
    )
