"""How the Runs charts are drawn, as the user set it: smoothing, x axis, log scale, which panels, one panel expanded,
and a colour per run (pure functions; no Gradio).

The controls apply to every panel at once, as trackio's and W&B's do. Smoothing is TensorBoard's debiased EMA
(:func:`ema`); with smoothing on, the raw points stay on the chart, faint, under the smoothed line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: The x axes a chart can use: ``(label, value)`` for a radio; ``step`` (TRL's global step), ``relative`` (seconds
#: since the run's first point, so runs started at different times line up) and ``wall`` (the clock time).
X_AXES: tuple[tuple[str, str], ...] = (("step", "step"), ("relative time (s)", "relative"), ("wall time", "wall"))
X_AXIS_TITLES = {"step": "step", "relative": "seconds since the run's first point", "wall": "wall time (UTC)"}
MAX_SMOOTHING = 0.99
#: The longest panel filter kept (a longer one is cut): a filter is a few words, never a payload.
MAX_FILTER_CHARS = 200
#: One colour per run of an overlay, in the order the runs are listed (plotly's and trackio's qualitative palette).
RUN_COLOURS: tuple[str, ...] = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                                "#7f7f7f", "#bcbd22", "#17becf")
#: Opacity of the raw points drawn under a smoothed line.
RAW_OPACITY = 0.25


@dataclass(frozen=True)
class ChartOptions:
    """The chart controls' values, checked: :meth:`from_inputs` accepts whatever the page sends.

    Attributes:
        smoothing: EMA weight of the past in ``[0, MAX_SMOOTHING]`` (0 = raw).
        x_axis: one of :data:`X_AXES`' values.
        log_y: y axes on a log scale (plotly drops points <= 0 there).
        panel_filter: case-insensitive words; a panel is kept when its title or a metric key holds every word.
        expanded: the title of the one panel drawn large (full width, tall), or ``None``.
    """

    smoothing: float = 0.0
    x_axis: str = "step"
    log_y: bool = False
    panel_filter: str = ""
    expanded: str | None = None

    @classmethod
    def from_inputs(cls, smoothing: object = 0.0, x_axis: object = "step", log_y: object = False,
                    panel_filter: object = "", expanded: object = None) -> ChartOptions:
        """Options from raw component values: a smoothing that is not a finite number counts as 0 and is clamped to
        ``[0, MAX_SMOOTHING]``; an unknown x axis counts as ``step``; a filter that is not text counts as empty."""
        try:
            weight = float(smoothing)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            weight = 0.0
        weight = min(MAX_SMOOTHING, max(0.0, weight)) if math.isfinite(weight) else 0.0
        axis = x_axis if isinstance(x_axis, str) and x_axis in X_AXIS_TITLES else "step"
        text = panel_filter[:MAX_FILTER_CHARS] if isinstance(panel_filter, str) else ""
        panel = expanded if isinstance(expanded, str) and expanded else None
        return cls(smoothing=weight, x_axis=str(axis), log_y=bool(log_y), panel_filter=text, expanded=panel)


def ema(values: Sequence[float | None], weight: float) -> list[float | None]:
    """Debiased exponential moving average (TensorBoard's smoothing); ``None`` values pass through.

    ``out[i] = s_i / (1 - weight**n_i)`` with ``s_i = weight * s_{i-1} + (1 - weight) * x_i`` over the ``n_i``
    values seen so far, so the first point is its own value (no pull towards 0). ``weight <= 0`` returns the values.
    """
    if weight <= 0:
        return list(values)
    out: list[float | None] = []
    last, count = 0.0, 0
    for value in values:
        if value is None:
            out.append(None)
            continue
        last = last * weight + (1 - weight) * value
        count += 1
        out.append(last / (1 - weight**count))
    return out


def x_values(steps: Sequence[int], wall: Mapping[int, float], x_axis: str) -> list:
    """The x of each of ``steps`` on ``x_axis``: the steps; seconds since the earliest ``wall`` time of the run
    (``relative``); or ISO-8601 UTC times (``wall``). A step without a recorded time takes the run's first time.

    Raises:
        ValueError: an unknown ``x_axis``.
    """
    if x_axis == "step":
        return list(steps)
    if x_axis not in X_AXIS_TITLES:
        raise ValueError(f"x_axis must be one of {sorted(X_AXIS_TITLES)}, got {x_axis!r}")
    origin = min(wall.values(), default=0.0)
    seconds = [wall.get(step, origin) for step in steps]
    if x_axis == "relative":
        return [s - origin for s in seconds]
    from datetime import datetime, timezone

    return [datetime.fromtimestamp(s, tz=timezone.utc).isoformat() for s in seconds]


def select_panels(panels: Sequence[tuple[str, Sequence[str]]], options: ChartOptions
                  ) -> list[tuple[str, Sequence[str]]]:
    """The panels to draw: the expanded one alone when it is among ``panels``; else those whose title or a key
    contains every word of the filter (case-insensitive)."""
    if options.expanded:
        chosen = [panel for panel in panels if panel[0] == options.expanded]
        if chosen:
            return chosen
    words = options.panel_filter.casefold().split()
    return [panel for panel in panels
            if all(word in " ".join([panel[0], *panel[1]]).casefold() for word in words)]


def run_colour(position: int) -> str:
    """The colour of the run at ``position`` (0-based) of an overlay; the palette repeats past its end."""
    return RUN_COLOURS[position % len(RUN_COLOURS)]
