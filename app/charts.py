"""Plotly figures of a run's metrics, built from the long-format points the store returns.

Charts are fed incrementally: :class:`MetricSeries` keeps the points a page has and :meth:`MetricSeries.extend`
adds the rows after the last step seen, so a refresh reads only new rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from storage import MetricPoint

#: The panels of the training chart: (title, metric keys drawn in it). ``rewards/*/mean`` joins the first panel.
PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reward (total and per rule)", ("reward",)),
    ("reward_std", ("reward_std",)),
    ("kl", ("kl",)),
    ("loss", ("loss",)),
    ("entropy", ("entropy",)),
    ("completions/mean_length (tokens)", ("completions/mean_length",)),
    ("completions/clipped_ratio (truncated)", ("completions/clipped_ratio",)),
    ("frac_reward_zero_std", ("frac_reward_zero_std",)),
)
COLUMNS = 2
#: Every metric key the training chart draws (besides ``rewards/<fn>/mean``).
CHART_KEYS: tuple[str, ...] = tuple(key for _title, keys in PANELS for key in keys)


@dataclass
class MetricSeries:
    """The metric points of one run a page has seen: ``key -> (steps, values)``, steps ascending.

    ``last_step`` is the highest step seen (-1 before any), the cursor for ``Store.metrics_since``.
    """

    run_id: int | None = None
    last_step: int = -1
    data: dict[str, tuple[list[int], list[float | None]]] = field(default_factory=dict)
    wall: dict[int, float] = field(default_factory=dict)

    def extend(self, points: Iterable[MetricPoint]) -> int:
        """Append points (ordered by step); returns how many were new."""
        added = 0
        for point in points:
            steps, values = self.data.setdefault(point.key, ([], []))
            if steps and steps[-1] >= point.step:
                continue
            steps.append(point.step)
            values.append(point.value)
            self.wall.setdefault(point.step, point.wall_time)
            self.last_step = max(self.last_step, point.step)
            added += 1
        return added

    def last(self, key: str) -> float | None:
        """The latest value of ``key`` (None if never logged)."""
        values = self.data.get(key, ([], []))[1]
        return values[-1] if values else None

    def reward_rule_keys(self) -> list[str]:
        """``rewards/<fn>/mean`` keys, sorted."""
        return sorted(k for k in self.data if k.startswith("rewards/") and k.endswith("/mean"))


def _clean(values: Sequence[float | None]) -> list[float | None]:
    return [v if v is not None and math.isfinite(v) else None for v in values]


def training_figure(series: MetricSeries, title: str = "") -> go.Figure:
    """A grid of line charts (x: step) of the run's key GRPO metrics; empty panels say "no data yet"."""
    rows = math.ceil(len(PANELS) / COLUMNS)
    figure = make_subplots(
        rows=rows, cols=COLUMNS, subplot_titles=[p[0] for p in PANELS], vertical_spacing=0.09, horizontal_spacing=0.08
    )
    for index, (_title, keys) in enumerate(PANELS):
        row, col = index // COLUMNS + 1, index % COLUMNS + 1
        keys = list(keys) + (series.reward_rule_keys() if index == 0 else [])
        for key in keys:
            if key not in series.data:
                continue
            steps, values = series.data[key]
            name = key if key != "reward" else "reward (weighted total)"
            figure.add_trace(
                go.Scatter(
                    x=steps,
                    y=_clean(values),
                    mode="lines+markers",
                    name=name,
                    legendgroup=key,
                    showlegend=index == 0,
                    line={"width": 3 if key == "reward" else 1.5},
                    marker={"size": 5},
                ),
                row=row,
                col=col,
            )
        figure.update_xaxes(title_text="step", row=row, col=col)
    figure.update_layout(
        height=260 * rows,
        margin={"l": 40, "r": 20, "t": 60, "b": 40},
        title={"text": title},
        legend={"orientation": "h", "y": 1.04, "x": 0},
        template="plotly_white",
    )
    return figure


def compare_figure(
    runs: dict[str, MetricSeries], key: str, smoothing: float = 0.0, x_axis: str = "step"
) -> go.Figure:
    """One metric of several runs overlaid, smoothed by an exponential moving average.

    Args:
        runs: label -> series.
        key: the metric (TRL's name).
        smoothing: EMA weight of the past in [0, 1) as TensorBoard's slider (0 = raw).
        x_axis: ``"step"``, or ``"wall"``: seconds since the run's first point (the earliest ``wall_time`` in its
            series), so runs started at different times line up.

    Raises:
        ValueError: ``x_axis`` is neither ``"step"`` nor ``"wall"``.
    """
    if x_axis not in ("step", "wall"):
        raise ValueError(f"x_axis must be 'step' or 'wall', got {x_axis!r}")
    figure = go.Figure()
    for label, series in runs.items():
        steps, values = series.data.get(key, ([], []))
        x: list[float] | list[int] = steps
        if x_axis == "wall":
            origin = min(series.wall.values(), default=0.0)
            x = [series.wall.get(step, origin) - origin for step in steps]
        figure.add_trace(go.Scatter(x=x, y=ema(_clean(values), smoothing), mode="lines", name=label))
    figure.update_layout(
        title={"text": key},
        xaxis_title="step" if x_axis == "step" else "seconds since the run's first point",
        height=360,
        template="plotly_white",
        margin={"l": 40, "r": 20, "t": 50, "b": 40},
    )
    return figure


def ema(values: Sequence[float | None], weight: float) -> list[float | None]:
    """Debiased exponential moving average (TensorBoard's smoothing); ``None`` values pass through."""
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
