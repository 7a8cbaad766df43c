"""The Runs tab's figures as the browser receives them: typed arrays that decode to the figure's values, customdata
left out only where it repeats x, and min/max bands merged to screen resolution without losing an extreme."""

from __future__ import annotations

import base64
import json
import math

import numpy as np

from app.views.chart_options import ChartOptions
from app.views.charts import MetricSeries, screen_envelope, training_figure
from app.views.plot_payload import figure_json


def _decoded(values):
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return values


def _series(steps: int) -> MetricSeries:
    values = [math.sin(step / 7) if step % 50 else None for step in range(1, steps + 1)]
    return MetricSeries(run_id=1, last_step=steps, data={"reward": (list(range(1, steps + 1)), values)},
                        wall={step: 1000.0 + step for step in range(1, steps + 1)})


def test_figure_json_decodes_to_the_figures_values_and_drops_only_repeated_customdata():
    series = _series(300)
    for options, drops in ((ChartOptions(), True), (ChartOptions(x_axis="relative"), False)):
        figure = training_figure(series, "#1 run", options=options)
        line = next(t for t in figure.data if t.name.startswith("reward"))
        sent = next(t for t in json.loads(figure_json(figure))["data"] if t["name"] == line.name)
        assert _decoded(sent["x"]) == list(line.x)
        y = _decoded(sent["y"])
        assert [None if math.isnan(v) else v for v in y] == [v if v is None else np.float32(v) for v in line.y]
        assert ("customdata" not in sent) is drops  # on a step axis the click reads x, the same steps
        if not drops:
            assert _decoded(sent["customdata"]) == list(line.customdata)
    assert list(line.customdata) == list(range(1, 301))  # the figure itself keeps what it had


def test_screen_envelope_keeps_every_extreme_and_the_span():
    buckets = 1000
    steps = [s for b in range(buckets) for s in (5 * b + 1, 5 * b + 5)]
    lows = [v for b in range(buckets) for v in (-b % 17, -b % 17)]
    highs = [v for b in range(buckets) for v in (b % 23, b % 23)]
    highs[1234] = highs[1235] = 999.0
    merged_steps, merged_lows, merged_highs = screen_envelope((steps, lows, highs), 300)
    assert len(merged_steps) // 2 <= 300 and merged_steps[0] == 1 and merged_steps[-1] == 5000
    assert max(merged_highs) == 999.0 and min(merged_lows) == min(lows)
    assert screen_envelope((steps[:20], lows[:20], highs[:20]), 300) == (steps[:20], lows[:20], highs[:20])
