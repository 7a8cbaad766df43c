"""What the run doctor reports (:class:`Finding`, :class:`Severity`), the metric series it reads, and the small
helpers every check shares (a check's one finding, finite numbers, streaks of logged steps, step ranges)."""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from storage import MetricPoint

#: ``key -> (steps, values)``, steps ascending, ``None`` for NaN/inf/NULL (:attr:`app.views.charts.MetricSeries.data`).
Series = Mapping[str, tuple[Sequence[int], Sequence[float | None]]]


class Severity(str, enum.Enum):
    """How urgent a finding is: ``error`` (the run cannot learn), ``warning`` (it learns badly), ``info``."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True)
class Finding:
    """One thing the doctor noticed.

    Attributes:
        code: stable identifier: ``zero_std``, ``clipped``, ``kl``, ``reward_zero``, ``nan``, ``nan_rule``,
            ``loss_zero``, ``learning``, ``reward_undecided``, ``reward_slow``, ``reward_flat``, ``reward_falling``,
            ``reward_plateau``, ``entropy_collapse``, ``entropy_surge``, ``length_long``, ``length_short``,
            ``rule_dominates``, ``task_rule_falling``, ``rule_errors``, ``grad_zero``, ``grad_vanishing``,
            ``policy_static``, ``beta_zero_std``, ``eval_flat``, ``clip_high``, ``sampling_mismatch``,
            ``grad_spike``, ``tools_stopped``, ``tool_failures``, ``iteration_limit``, ``reward_without_tool``.
        severity: see :class:`Severity`.
        title: one line, with the numbers.
        advice: plain words: what it means and what to change.
        steps: the logged steps involved, ascending.
        examples: short illustrations (example completions with the rules that scored them), possibly empty.
    """

    code: str
    severity: Severity
    title: str
    advice: str
    steps: tuple[int, ...] = ()
    examples: tuple[str, ...] = ()


def found(
    code: str,
    severity: Severity,
    *,
    title: str,
    advice: str,
    steps: Iterable[int] = (),
    examples: Iterable[str] = (),
) -> list[Finding]:
    """A check's answer when it found one thing: ``[Finding(code, severity, title, advice, steps, examples)]``, with
    ``steps`` (ascending, e.g. a generator over a window of ``(step, value)`` points) and ``examples`` made tuples."""
    return [Finding(code, severity, title, advice, tuple(steps), tuple(examples))]


def series_from_points(points: Iterable[MetricPoint]) -> dict[str, tuple[list[int], list[float | None]]]:
    """Long-format store points (ordered by step) as :data:`Series`; a repeated ``(key, step)`` keeps the first."""
    series: dict[str, tuple[list[int], list[float | None]]] = {}
    for point in points:
        steps, values = series.setdefault(point.key, ([], []))
        if steps and steps[-1] >= point.step:
            continue
        steps.append(point.step)
        values.append(point.value)
    return series


def _number(value: float | None) -> float | None:
    """``value`` when it is a finite number, else ``None``."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _points(series: Series, key: str) -> list[tuple[int, float | None]]:
    steps, values = series.get(key, ((), ()))
    # a finite float (what the store gives: NaN and inf come back as None) is taken as it is; ``v - v`` is NaN for
    # inf and NaN
    return [(int(s), v if type(v) is float and v - v == 0.0 else _number(v)) for s, v in zip(steps, values, strict=False)]


def _streaks(points: list[tuple[int, float | None]], predicate, min_length: int) -> list[list[int]]:
    """Maximal runs of consecutive logged points satisfying ``predicate`` (NaN breaks a run), at least
    ``min_length`` long; each as its steps."""
    streaks, current = [], []
    for step, value in points:
        if value is not None and predicate(value):
            current.append(step)
            continue
        if len(current) >= min_length:
            streaks.append(current)
        current = []
    if len(current) >= min_length:
        streaks.append(current)
    return streaks


def _config_value(config: Mapping[str, Any], key: str) -> str:
    return f" (now {config[key]})" if key in config else ""


def step_ranges(steps: Iterable[int], max_ranges: int | None = None) -> str:
    """Steps as compact ranges: ``[1, 2, 3, 7, 9, 10]`` -> ``"1–3, 7, 9–10"``; empty -> ``""``.

    With ``max_ranges``, at most that many ranges are written, the first and the latest halves, with how many are
    left out between them: ``"1–3, 7, … 40 more …, 2201, 2204–2206"``.
    """
    ordered = sorted(set(steps))
    parts: list[str] = []
    start = prev = None
    for step in [*ordered, None]:
        if start is not None and (step is None or step != prev + 1):
            parts.append(str(start) if start == prev else f"{start}–{prev}")
            start = None
        if step is not None and start is None:
            start = step
        prev = step
    if max_ranges is not None and len(parts) > max_ranges:
        head, tail = (max_ranges + 1) // 2, max_ranges // 2
        parts = [*parts[:head], f"… {len(parts) - head - tail} more …", *(parts[-tail:] if tail else [])]
    return ", ".join(parts)


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_zero(value: float | None) -> bool:
    return value is not None and abs(value) < 1e-12
