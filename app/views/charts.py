"""Plotly figures of a run's metrics, built from the long-format points the store returns.

Charts are fed incrementally: :class:`MetricSeries` keeps the points a page has and :meth:`MetricSeries.extend`
adds the rows after the last step seen, so a refresh reads only new rows. A first load of a long run starts from the
store's downsampled history (:meth:`MetricSeries.extend_summary`): one real point per bucket of steps, and the
buckets' min/max drawn as a band around the line, so the overview keeps the extremes and the true last point.
"""

from __future__ import annotations

import bisect
import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.views.chart_options import (
    RAW_OPACITY,
    X_AXIS_TITLES,
    ChartOptions,
    ema,
    run_colour,
    select_panels,
    x_values,
)
from storage import MetricPoint, MetricSummary

#: The panels of the training chart: (title, metric keys drawn in it). ``rewards/*/mean`` joins the first panel, and
#: so do the eval metrics TRL logs at each evaluation (``eval_reward``, ``eval_rewards/<fn>/mean``), dashed.
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
#: Panels added when the run recorded GPU metrics (a CUDA run's worker logs them each step, see
#: ``grpo_core/engine/policy_model.py``: ``gpu_step_metrics``); a CPU run's chart has none.
GPU_PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("GPU memory (MiB; allocated, reserved, peak)",
     ("gpu/memory_allocated_mib", "gpu/memory_reserved_mib", "gpu/memory_peak_mib")),
    ("GPU utilization (%)", ("gpu/utilization",)),
)
#: The SQL LIKE pattern of the GPU metric keys (a chart's first load reads them with the charted keys).
GPU_KEY_PATTERN = "gpu/%"
#: The panel added when the run called tools (TRL logs ``tools/call_frequency``: calls per completion, and
#: ``tools/failure_frequency``: failed calls per call, for a run with ``tools`` or ``environment_factory``).
TOOL_PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tools (calls per completion, failure share)", ("tools/call_frequency", "tools/failure_frequency")),
)
#: The SQL LIKE pattern of TRL's tool metrics.
TOOL_KEY_PATTERN = "tools/%"
COLUMNS = 2
#: Every metric key the training chart draws (besides ``rewards/<fn>/mean``).
CHART_KEYS: tuple[str, ...] = tuple(key for _title, keys in PANELS for key in keys)
#: Height of one row of panels, in pixels; of the one panel drawn expanded.
ROW_PX = 260
EXPANDED_PX = 640
#: A series of at most this many points is drawn with a marker on each.
MARKER_POINTS = 200
#: The training chart's head, top down, in pixels: the title, then the legend (one band per row of entries), then
#: the first row's panel titles, so none of them overlaps another.
TITLE_PX = 40
LEGEND_ROW_PX = 22
PANEL_TITLE_PX = 30
#: Width a row of legend entries may take before it wraps (a page column on a laptop), in pixels.
LEGEND_WIDTH_PX = 900
#: At most about this many ticks on a step axis: the tick interval is the smallest 1, 2, 5, 10, 20, 50... that fits.
MAX_STEP_TICKS = 8
#: Shown in the KL panel when the run has ``beta`` 0: TRL then neither computes nor logs ``kl``.
KL_OFF_TEXT = "KL not computed: beta = 0"
NO_DATA_TEXT = "no data yet"


@dataclass
class MetricSeries:
    """The metric points of one run a page has seen: ``key -> (steps, values)``, steps ascending.

    ``last_step`` is the highest step seen (-1 before any); :attr:`cursor` is the cursor for ``Store.metrics_since``.
    ``envelope`` holds, for keys loaded from a downsampled history whose buckets span several steps, the band of
    their min and max: ``key -> (steps, lows, highs)``, two entries per bucket (its first and last step).
    """

    run_id: int | None = None
    last_step: int = -1
    data: dict[str, tuple[list[int], list[float | None]]] = field(default_factory=dict)
    wall: dict[int, float] = field(default_factory=dict)
    envelope: dict[str, tuple[list[int], list[float | None], list[float | None]]] = field(default_factory=dict)
    #: The keys whose whole (downsampled) history was read; a key seen only in incremental reads has its recent points.
    loaded: set[str] = field(default_factory=set)
    #: Every key the run had recorded at the first load (``Store.metric_keys``), loaded or not.
    known: set[str] = field(default_factory=set)

    def extend(self, points: Iterable[MetricPoint]) -> int:
        """Append points (ordered by step); returns how many were new."""
        return self.extend_rows((point.step, point.key, point.value, point.wall_time) for point in points)

    def extend_rows(self, rows: Iterable[tuple[int, str, float | None, float]]) -> int:
        """:meth:`extend` for ``(step, key, value, wall_time)`` tuples (``Store.metric_rows``); returns how many
        were new."""
        added, data, wall, last_step = 0, self.data, self.wall, self.last_step
        for step, key, value, wall_time in rows:
            series = data.get(key)
            if series is None:
                series = data[key] = ([], [])
            steps = series[0]
            if steps and steps[-1] >= step:
                continue
            steps.append(step)
            series[1].append(value)
            if step not in wall:
                wall[step] = wall_time
            if step > last_step:
                last_step = step
            added += 1
        self.last_step = last_step
        return added

    def extend_summary(self, summaries: Iterable[MetricSummary]) -> int:
        """Add a downsampled history (``Store.metric_summary``): each bucket's last point (a recorded value, so a
        key's last point is its true last one) joins the series as :meth:`extend` would add it, and the buckets'
        min/max become the key's :attr:`envelope` when any bucket spans more than one step. Returns how many points
        were new."""
        added = 0
        for summary in summaries:
            added += self.extend(
                MetricPoint(step, summary.key, value, wall)
                for step, value, wall in zip(summary.last_steps, summary.last_values, summary.wall_times, strict=True)
            )
            if any(first < last for first, last in zip(summary.first_steps, summary.last_steps, strict=True)):
                steps, lows, highs = [], [], []
                for first, last, low, high in zip(summary.first_steps, summary.last_steps, summary.mins,
                                                  summary.maxs, strict=True):
                    steps += [first, last]
                    lows += [low, low]
                    highs += [high, high]
                self.envelope[summary.key] = (steps, lows, highs)
            self.loaded.add(summary.key)
        return added

    def load_history(self, summaries: Iterable[MetricSummary]) -> int:
        """Add the downsampled history of keys the page has only seen in incremental reads (a section opened after
        the first load): each key's recent points are kept after its history's last step, the rest replaced by the
        history (:meth:`extend_summary`). Returns how many points were new."""
        added = 0
        for summary in summaries:
            recent_steps, recent_values = self.data.pop(summary.key, ([], []))
            self.envelope.pop(summary.key, None)
            added += self.extend_summary([summary])
            steps, values = self.data.setdefault(summary.key, ([], []))
            for step, value in zip(recent_steps, recent_values, strict=True):
                if not steps or step > steps[-1]:
                    steps.append(step)
                    values.append(value)
        return added

    def keep_last(self, steps: int) -> None:
        """Forget the points (and their envelope) more than ``steps`` steps before :attr:`last_step`, so a view that
        reads only recent history (the run doctor) stays bounded however long the run."""
        first = self.last_step - steps
        for key, (key_steps, values) in list(self.data.items()):
            cut = bisect.bisect_right(key_steps, first)
            if cut:
                self.data[key] = (key_steps[cut:], values[cut:])
        for step in [s for s in self.wall if s <= first]:
            del self.wall[step]
        self.envelope.clear()

    @property
    def cursor(self) -> int:
        """The step to read after: one before :attr:`last_step`, so the last step is read again (TRL logs an
        evaluation's ``eval_*`` metrics at the same step just after the training ones); :meth:`extend` skips what it
        has."""
        return self.last_step - 1 if self.last_step >= 0 else -1

    def last(self, key: str) -> float | None:
        """The latest value of ``key`` (None if never logged)."""
        values = self.data.get(key, ([], []))[1]
        return values[-1] if values else None

    def has_gpu_metrics(self) -> bool:
        """Whether the run recorded GPU metrics (``gpu/...``: a CUDA run)."""
        return any(key.startswith("gpu/") for key in self.data)

    def has_tool_metrics(self) -> bool:
        """Whether the run recorded TRL's tool metrics (``tools/...``: a run that calls tools)."""
        return any(key.startswith("tools/") for key in self.data)

    def reward_rule_keys(self) -> list[str]:
        """``rewards/<fn>/mean`` keys, sorted."""
        return sorted(k for k in self.data if k.startswith("rewards/") and k.endswith("/mean"))

    def eval_reward_keys(self) -> list[str]:
        """The eval split's reward keys TRL logs: ``eval_reward`` then ``eval_rewards/<fn>/mean``, sorted."""
        rules = sorted(k for k in self.data if k.startswith("eval_rewards/") and k.endswith("/mean"))
        return (["eval_reward"] if "eval_reward" in self.data else []) + rules


def _clean(values: Sequence[float | None]) -> list[float | None]:
    return [v if v is not None and math.isfinite(v) else None for v in values]


#: A trace of at least this many points gets its x, y and customdata as numpy arrays: plotly then checks and copies
#: them as one block, not value by value (bench_web.py: most of the first chart's server time for a long run).
ARRAY_POINTS = 64


def _plot_array(values: Sequence) -> object:
    """``values`` as a trace takes them: a list when short; else a numpy array of the numbers (object dtype when one
    is ``None``, a gap, so it stays ``None``); text (wall-time axes) stays a list."""
    values = list(values)
    if len(values) < ARRAY_POINTS or not all(v is None or isinstance(v, int | float) for v in values):
        return values
    return np.array(values, dtype=object) if any(v is None for v in values) else np.asarray(values)


def step_dtick(first: int, last: int) -> int:
    """Tick interval for a step axis from ``first`` to ``last``: the smallest of 1, 2, 5, 10, 20, 50, ... that gives
    at most :data:`MAX_STEP_TICKS` ticks, so steps read as integers (never 1.5)."""
    span = max(1, last - first)
    magnitude = 1
    while True:
        for factor in (1, 2, 5):
            if span / (factor * magnitude) <= MAX_STEP_TICKS:
                return factor * magnitude
        magnitude *= 10


def _integer_steps(figure: go.Figure, steps: Iterable[int], **axis) -> None:
    """Integer ticks on the step axes (``axis`` picks them, as ``update_xaxes`` does)."""
    steps = list(steps)
    dtick = step_dtick(min(steps), max(steps)) if steps else 1
    figure.update_xaxes(tickmode="linear", tick0=0, dtick=dtick, tickformat="d", **axis)


def _legend_rows(names: Sequence[str]) -> int:
    """Rows a horizontal legend of ``names`` takes, estimated at 7 px a character plus 40 px for the line sample."""
    rows, used = 1, 0
    for name in names:
        width = 7 * len(name) + 40
        if used and used + width > LEGEND_WIDTH_PX:
            rows, used = rows + 1, 0
        used += width
    return rows


#: Fill of the min/max band of a downsampled key.
ENVELOPE_FILL = "rgba(100, 116, 139, 0.22)"


#: At most this many buckets of a min/max band are drawn: about the width of a panel in pixels (two columns on a
#: 1440 px page), so a band of 1,000 buckets costs half the points and looks the same (bench_web.py).
ENVELOPE_BUCKETS = 500


def _least(values: Sequence[float | None]) -> float | None:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return min(finite) if finite else None


def _most(values: Sequence[float | None]) -> float | None:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return max(finite) if finite else None


def screen_envelope(band: tuple[list[int], list[float | None], list[float | None]],
                    max_buckets: int = ENVELOPE_BUCKETS) -> tuple[list[int], list[float | None], list[float | None]]:
    """A min/max band (:attr:`MetricSeries.envelope`: two entries per bucket, its first and last step) with at most
    ``max_buckets`` buckets: neighbouring buckets merged, each merged bucket spanning from its first bucket's first
    step to its last bucket's last step, with the least of their lows and the most of their highs, so no extreme is
    lost (a band no wider than a screen's pixels, as a plot decimates by pixel column). Unchanged when it has at most
    ``max_buckets`` buckets."""
    steps, lows, highs = band
    buckets = len(steps) // 2
    if buckets <= max_buckets or max_buckets < 1:
        return band
    per = math.ceil(buckets / max_buckets)
    out_steps: list[int] = []
    out_lows: list[float | None] = []
    out_highs: list[float | None] = []
    for first in range(0, buckets, per):
        last = min(buckets, first + per) - 1
        low, high = _least(lows[2 * first:2 * last + 2]), _most(highs[2 * first:2 * last + 2])
        out_steps += [steps[2 * first], steps[2 * last + 1]]
        out_lows += [low, low]
        out_highs += [high, high]
    return out_steps, out_lows, out_highs


def _add_envelope(figure: go.Figure, key: str, band: tuple[list[int], list[float | None], list[float | None]],
                  *, row: int, col: int) -> None:
    """The min/max band of a downsampled key (at most :data:`ENVELOPE_BUCKETS` buckets, :func:`screen_envelope`):
    its highs (no line), then its lows filled up to them. Neither takes hover or clicks, so a click on the chart still
    lands on a recorded point."""
    steps, lows, highs = screen_envelope(band)
    common = {"mode": "lines", "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False, "legendgroup": key}
    x = _plot_array(steps)
    figure.add_trace(go.Scatter(x=x, y=_plot_array(_clean(highs)), name=f"{key} max", **common), row=row, col=col)
    figure.add_trace(go.Scatter(x=x, y=_plot_array(_clean(lows)), name=f"{key} min", fill="tonexty",
                                fillcolor=ENVELOPE_FILL, **common), row=row, col=col)


def _add_key_traces(figure: go.Figure, series: MetricSeries, key: str, *, row: int, col: int, options: ChartOptions,
                    run_label: str | None, colour: str | None, in_legend: bool) -> bool:
    """One metric key of one run in one panel: its min/max band (a downsampled history, x by step only), its raw
    points (faint when smoothed) and its smoothed line. Each point carries its step as ``customdata``, so a click
    opens that step whatever the x axis. Returns whether the key has any finite point."""
    steps, values = series.data[key]
    name = {"reward": "reward (weighted total)", "eval_reward": "eval_reward (held-out rows)"}.get(key, key)
    if run_label is not None:
        name = run_label if key == "reward" else f"{run_label} {name}"
    name = html.escape(name, quote=False)  # plotly.js reads tags in names; a key or a run name is recorded input
    cleaned = _clean(values)
    x = x_values(steps, series.wall, options.x_axis)
    if key in series.envelope and options.x_axis == "step" and not options.smoothing:
        _add_envelope(figure, key, series.envelope[key], row=row, col=col)
    line = {"width": 3 if key in ("reward", "eval_reward") else 1.5,
            "dash": "dash" if key.startswith("eval_") else "solid"}
    if colour is not None:
        line["color"] = colour
    common = {"x": _plot_array(x), "customdata": _plot_array(steps), "legendgroup": f"{run_label or ''}{key}"}
    smoothed = options.smoothing > 0
    # markers on a short series (a point to click); a long one is drawn as lines alone: 8 panels of thousands of
    # markers are most of the first chart's drawing time in the browser (bench_web.py)
    figure.add_trace(go.Scatter(
        y=_plot_array(cleaned), mode="lines+markers" if len(steps) <= MARKER_POINTS else "lines", name=f"{name} (raw)" if smoothed else name,
        showlegend=in_legend and not smoothed, opacity=RAW_OPACITY if smoothed else 1.0,
        line=line, marker={"size": 5}, meta="raw" if smoothed else "line", **common), row=row, col=col)
    if smoothed:
        figure.add_trace(go.Scatter(y=_plot_array(ema(cleaned, options.smoothing)), mode="lines", name=name, showlegend=in_legend,
                                    line=line, meta="smoothed", **common), row=row, col=col)
    return any(v is not None for v in cleaned)


def training_figure(series: MetricSeries, title: str = "", beta: float | None = None, *,
                    options: ChartOptions | None = None,
                    overlays: Sequence[tuple[str, MetricSeries]] = (),
                    panels: Sequence[tuple[str, Sequence[str]]] | None = None) -> go.Figure:
    """A grid of line charts (x: step with integer ticks, or time) of the run's key GRPO metrics.

    A panel without points says "no data yet", and the KL panel says "KL not computed: beta = 0" when ``beta`` is
    0 and no ``kl`` was logged (TRL skips the KL term then). A key with an :attr:`MetricSeries.envelope` (a long
    run's downsampled first load) gets its min/max band under its line. The legend (the reward panel's traces) sits
    in its own band between the title and the first row of panels.

    Args:
        series: the run's metric points.
        title: the figure's title.
        beta: the run's ``beta`` (its config), or ``None`` when unknown.
        options: smoothing, x axis, log scale, panel filter, expanded panel (:class:`ChartOptions`; default: raw,
            by step, all panels).
        overlays: ``(label, series)`` of other runs drawn on every panel beside ``series``; then each run has one
            colour (:func:`run_colour`, ``series`` first, labelled by ``title``) on every panel.
        panels: ``(title, keys)`` of the panels to draw (a section of :mod:`app.views.metric_sections`); default:
            :data:`PANELS`, and :data:`GPU_PANELS` when a run recorded GPU metrics (the overview).
    """
    options = options or ChartOptions()
    runs: list[tuple[str | None, MetricSeries, str | None]] = [(None, series, None)]
    if overlays:
        runs = [(title or "selected run", series, run_colour(0))]
        runs += [(label, other, run_colour(i + 1)) for i, (label, other) in enumerate(overlays)]
    has_gpu = any(s.has_gpu_metrics() for _, s, _ in runs)
    if panels is None:
        has_tools = any(s.has_tool_metrics() for _, s, _ in runs)
        panels = PANELS + (TOOL_PANELS if has_tools else ()) + (GPU_PANELS if has_gpu else ())
    panels = select_panels(panels, options)
    columns = 1 if options.expanded and len(panels) == 1 else COLUMNS
    rows = max(1, math.ceil(len(panels) / columns))
    figure = make_subplots(
        rows=rows, cols=columns, subplot_titles=[p[0] for p in panels] or None,
        vertical_spacing=min(0.09 * 4 / rows, 0.3), horizontal_spacing=0.08,
    )
    legend_names: list[str] = []
    all_steps: set[int] = set()
    for index, (panel_title, keys) in enumerate(panels):
        row, col = index // columns + 1, index % columns + 1
        is_reward = panel_title == PANELS[0][0]
        drawn = False
        for label, run_series, colour in runs:
            run_keys = list(keys) + (run_series.reward_rule_keys() + run_series.eval_reward_keys() if is_reward else [])
            for key in run_keys:
                if key not in run_series.data:
                    continue
                in_legend = (is_reward or len(keys) > 1) if label is None else (is_reward and key == "reward")
                if in_legend:
                    legend_names.append(key if label is None else label)
                drawn = _add_key_traces(figure, run_series, key, row=row, col=col, options=options, run_label=label,
                                        colour=colour, in_legend=in_legend) or drawn
                all_steps.update(run_series.data[key][0])
        figure.update_xaxes(title_text=X_AXIS_TITLES[options.x_axis], row=row, col=col)
        if not drawn:
            # In paper coordinates at the panel's centre: plotly.js draws no axes for a panel without traces, so
            # an "x3 domain" reference would not place it.
            axis = "" if index == 0 else str(index + 1)
            x_domain, y_domain = figure.layout[f"xaxis{axis}"].domain, figure.layout[f"yaxis{axis}"].domain
            figure.add_annotation(
                text=KL_OFF_TEXT if tuple(keys) == ("kl",) and beta == 0 else NO_DATA_TEXT,
                xref="paper",
                yref="paper",
                x=sum(x_domain) / 2,
                y=sum(y_domain) / 2,
                xanchor="center",
                yanchor="middle",
                showarrow=False,
                font={"color": "#6b7280", "size": 13},
                name=f"empty-panel-{index}",
            )
    if options.x_axis == "step":
        _integer_steps(figure, all_steps)
    if options.log_y:
        figure.update_yaxes(type="log")
    legend_px = LEGEND_ROW_PX * _legend_rows(legend_names)
    top = TITLE_PX + legend_px + PANEL_TITLE_PX
    row_px = EXPANDED_PX if columns == 1 else ROW_PX
    height = row_px * rows + top - 60
    figure.update_layout(
        height=height,
        margin={"l": 40, "r": 20, "t": top, "b": 40},
        title={"text": html.escape(title, quote=False), "yref": "container", "y": 1.0, "yanchor": "top", "pad": {"t": 10}},
        legend={
            "orientation": "h",
            "yref": "container",
            "y": 1.0 - TITLE_PX / height,
            "yanchor": "top",
            "x": 0,
            "xanchor": "left",
        },
        template="plotly_white",
        meta={"smoothing": options.smoothing, "x_axis": options.x_axis, "log_y": options.log_y,
              "panels": [p[0] for p in panels], "runs": [label or title for label, _, _ in runs]},
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
        figure.add_trace(go.Scatter(x=x, y=ema(_clean(values), smoothing), mode="lines",
                                 name=html.escape(label, quote=False)))  # plotly.js reads tags in names
    if x_axis == "step":
        _integer_steps(figure, (step for series in runs.values() for step in series.data.get(key, ([], []))[0]))
    figure.update_layout(
        title={"text": html.escape(key, quote=False)},
        xaxis_title="step" if x_axis == "step" else "seconds since the run's first point",
        height=360,
        template="plotly_white",
        margin={"l": 40, "r": 20, "t": 50, "b": 40},
    )
    return figure


def step_groups_figure(totals: Sequence[float], steps: Sequence[int], pass_shares: Sequence[float | None],
                       *, step: int, threshold: float) -> go.Figure:
    """Inspect's chart of groups: the histogram of the completion totals at ``step`` (left) and pass@G per step
    (right: the share of groups, 0..1, with at least one completion whose total is above ``threshold``).

    Args:
        totals: the completion totals of ``step``; ``steps`` and ``pass_shares``: one share per recorded step.
    """
    figure = make_subplots(rows=1, cols=2, subplot_titles=(
        f"total reward at step {step} ({len(totals)} completions)", f"pass@G: share of groups with a total > "
        f"{threshold:g}"))
    figure.add_trace(go.Histogram(x=list(totals), nbinsx=20, name="completions", marker_color="#4c78a8"), row=1, col=1)
    figure.add_trace(go.Scatter(x=list(steps), y=_clean(pass_shares), mode="lines+markers", name="pass@G",
                                marker_color="#f58518"), row=1, col=2)
    figure.update_xaxes(title_text="total reward", row=1, col=1)
    figure.update_yaxes(title_text="completions", row=1, col=1)
    figure.update_xaxes(title_text="step", row=1, col=2)
    figure.update_yaxes(title_text="share of groups", range=[0, 1.05], row=1, col=2)
    figure.update_layout(height=ROW_PX + TITLE_PX, showlegend=False, margin={"t": 50, "b": 40, "l": 50, "r": 20})
    return figure

