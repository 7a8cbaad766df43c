"""The run doctor's checks on whether, and how fast, the policy moves: gradient zero or vanishing while groups carry
signal, the policy not leaving the reference model, and KL judged against beta, its own history and the reward.

Each check takes ``(series, groups, config)`` and returns its findings (see :func:`grpo_core.doctor.diagnose`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from grpo_core.doctor.findings import Finding, Series, Severity, _config_value, _number, _points, _streaks, found
from grpo_core.doctor.progress import reward_falling, reward_rising
from grpo_core.doctor.registry import doctor_check
from grpo_core.doctor.thresholds import (
    GRAD_MIN_STEPS,
    GRAD_VANISH_RATIO,
    GRAD_ZERO,
    KL_HISTORY,
    KL_MAX_NATS,
    KL_PENALTY_SHARE,
    KL_RECENT,
    KL_SPIKE_FACTOR,
    KL_SPIKE_FLOOR,
    KL_STATIC,
    LORA_LR_LOW,
    LORA_LR_SUGGESTED,
    SIGNAL_STD_MIN,
    TREND_MIN_STEPS,
    TREND_P_VALUE,
    TREND_WINDOW,
)
from grpo_core.doctor.trends import _trend
from storage import GroupRecord


def _mean_std(series: Series, steps: Sequence[int] | None = None) -> float | None:
    """Mean ``reward_std`` over ``steps`` (all logged steps when ``None``); ``None`` when it was not logged there."""
    wanted = None if steps is None else set(steps)
    values = [v for s, v in _points(series, "reward_std") if v is not None and (wanted is None or s in wanted)]
    return statistics.fmean(values) if values else None


def _frozen_causes(config: Mapping[str, Any]) -> str:
    targets = config.get("lora_target_modules")
    target = f" (now {targets!r})" if targets is not None and config.get("use_lora", True) else ""
    return (
        "Causes: the trainable parameters are frozen or detached from the loss (requires_grad off, a custom "
        "model whose forward pass skips the adapter, an input that does not require grad under gradient "
        f"checkpointing); lora_target_modules{target} naming modules outside the forward pass or nothing "
        "trainable; or learning_rate 0 in the optimiser or its schedule. A higher learning rate cannot help: a zero "
        "gradient times any rate is zero. Check the worker log's trainable-parameter count."
    )


@doctor_check(30)
def _gradient(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """``grad_norm`` exactly 0 (:data:`GRAD_ZERO`) for :data:`GRAD_MIN_STEPS` logged steps in a row, or vanished
    to :data:`GRAD_VANISH_RATIO` of its start, while the groups' rewards differ (``reward_std`` above
    :data:`SIGNAL_STD_MIN`): the loss has advantages to follow but no parameter moves."""
    points = _points(series, "grad_norm")
    zero = _streaks(points, lambda v: v <= GRAD_ZERO, GRAD_MIN_STEPS)
    if zero:
        steps = tuple(s for streak in zero for s in streak)
        spread = _mean_std(series, steps)
        if spread is not None and spread > SIGNAL_STD_MIN:
            return found(
                "grad_zero", Severity.ERROR,
                title=(
                    f"The model is not training: grad_norm is 0 at {len(steps)} logged steps while reward_std is "
                    f"{spread:.2g} (completions of a group differ, so advantages are not 0)"
                ),
                advice=_frozen_causes(config),
                steps=steps,
            )
        return []
    finite = [(s, v) for s, v in points if v is not None]
    if len(finite) < TREND_MIN_STEPS:
        return []
    start = statistics.median(v for _, v in finite[:5])
    latest = finite[-GRAD_MIN_STEPS:]
    end = statistics.median(v for _, v in latest)
    spread = _mean_std(series, [s for s, _ in latest])
    if start <= 0 or end > GRAD_VANISH_RATIO * start or spread is None or spread <= SIGNAL_STD_MIN:
        return []
    return found(
        "grad_vanishing", Severity.WARNING,
        title=(
            f"The gradient is vanishing: grad_norm {start:.3g} → {end:.3g} while reward_std is {spread:.2g}"
        ),
        advice="The groups still carry signal but almost none reaches the parameters. " + _frozen_causes(config),
        steps=(s for s, _ in latest),
    )


@doctor_check(40)
def _policy_static(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """KL never above :data:`KL_STATIC` after :data:`TREND_MIN_STEPS` logged steps, or the logged ``learning_rate``
    0 at every step (also without a KL, at beta 0), with learning signal (and a non-zero gradient: that is
    :func:`_gradient`'s): the optimiser's steps do not change what the policy samples."""
    kl = [(s, v) for s, v in _points(series, "kl") if v is not None]
    rates = [v for _, v in _points(series, "learning_rate") if v is not None]
    zero_rate = len(rates) >= GRAD_MIN_STEPS and max(rates) <= 0
    if not zero_rate and (len(kl) < TREND_MIN_STEPS or max(v for _, v in kl) > KL_STATIC):
        return []
    spread = _mean_std(series)
    if spread is None or spread <= SIGNAL_STD_MIN:
        return []  # no signal: zero_std says why
    grads = [v for _, v in _points(series, "grad_norm") if v is not None]
    if grads and all(v <= GRAD_ZERO for v in grads[-GRAD_MIN_STEPS:]):
        return []  # grad_zero says it
    rate = _number(config.get("learning_rate"))
    if zero_rate:
        cause = (
            "The logged learning_rate is 0 at every step: the gradient is computed but never applied. Check the "
            "learning rate and its schedule (warm-up, scheduler)."
        )
    elif rate is not None and rate < LORA_LR_LOW and config.get("use_lora", True):
        cause = (
            f"learning_rate {rate:g} is too low for a LoRA adapter: its updates are too small to change any sampled "
            f"token. Try {LORA_LR_SUGGESTED:g} (an adapter starts at zero and wants about 10x the full fine-tuning "
            "rate; 'LoRA Without Regret', Schulman et al. 2025)."
        )
    else:
        cause = (
            "The learning rate looks usable, so the update does not reach the outputs. " + _frozen_causes(config)
        )
    return found(
        "policy_static", Severity.WARNING,
        title=(
            f"The policy is not moving: KL to the reference model at most {max(v for _, v in kl):.2g} over "
            f"{len(kl)} logged steps while reward_std is {spread:.2g}" if kl and not zero_rate
            else f"The policy is not moving: the logged learning_rate is 0 at all {len(rates)} steps while "
            f"reward_std is {spread:.2g}"
        ),
        advice=cause,
        steps=(s for s, _ in (kl if kl and not zero_rate else _points(series, "learning_rate"))),
    )


@doctor_check(140)
def _kl(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """KL judged against the run: the penalty ``beta * kl`` reaching :data:`KL_PENALTY_SHARE` (KL above
    :data:`KL_MAX_NATS` without a beta); a spike of :data:`KL_SPIKE_FACTOR` over the run's own recent median; or a
    significant rise while the reward falls. An ordinary drift of a learning policy is none of these."""
    points = [(s, v) for s, v in _points(series, "kl") if v is not None]
    if len(points) < KL_RECENT:
        return []
    recent = statistics.median(v for _, v in points[-KL_RECENT:])
    beta = _number(config.get("beta"))
    limit = KL_PENALTY_SHARE / beta if beta and beta > 0 else KL_MAX_NATS
    limit = min(limit, KL_MAX_NATS)
    reasons = []
    if recent > limit:
        held = f"beta {beta:g} × KL = {beta * recent:.2g} per token" if beta else f"over {KL_MAX_NATS:g} nats"
        reasons.append(f"KL {recent:.3g} is past what the penalty tolerates ({held})")
    history = points[:-KL_RECENT][-KL_HISTORY:]
    if len(history) >= KL_RECENT:
        before = statistics.median(v for _, v in history)
        if recent >= KL_SPIKE_FLOOR and recent >= KL_SPIKE_FACTOR * max(before, 1e-12):
            reasons.append(
                f"KL jumped to {recent:.3g} from a median of {before:.2g} over the {len(history)} logged steps before"
            )
    window = points[-TREND_WINDOW:]
    if (
        len(window) >= TREND_MIN_STEPS
        and recent >= KL_SPIKE_FLOOR
        and _trend(window).p_rising < TREND_P_VALUE
        and reward_falling(series, window[0][0])
    ):
        reasons.append(f"KL keeps rising (to {recent:.3g}) while the reward falls")
    if not reasons:
        return []
    gaining = reward_rising(series, window[0][0])
    return found(
        "kl", Severity.WARNING,
        title="KL is blowing up: " + "; ".join(reasons),
        advice=(
            "The policy is running away from the reference model"
            + (" while the reward still rises: likely a rule being gamed" if gaining else "")
            + ". Causes: a step size too large for the model (learning_rate"
            f"{_config_value(config, 'learning_rate')}), a KL term too weak to hold it (beta"
            f"{_config_value(config, 'beta')}), or reward hacking (read the latest completions in Inspect). "
            "Lower the learning rate, raise beta, or resume from a checkpoint before the jump."
        ),
        steps=(s for s, _ in points[-KL_HISTORY:]),
    )
