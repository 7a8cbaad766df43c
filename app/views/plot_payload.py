"""A plotly figure as the browser receives it, compact: its traces' numbers as plotly.js's typed arrays (base64 of the
raw values, ``{"dtype", "bdata"}``) rather than decimal text, and no customdata that repeats x. Gradio-free; the
Runs tab's plots send it (``app.tabs.runs.plots.compact_plot``). bench_web.py: the overview of a 5,000-step run with
its min/max bands was 884 KB of JSON as plotly writes it.
"""

from __future__ import annotations

import base64
import math

import numpy as np
import plotly.graph_objects as go
from _plotly_utils.utils import to_typed_array_spec
from plotly.io.json import to_json_plotly


def _narrowed(spec: dict, floats: str) -> dict:
    """A typed-array spec of float64 (``"f8"``) as float32 when ``floats`` is ``"f4"`` and every finite value fits;
    any other spec unchanged."""
    if floats != "f4" or spec.get("dtype") != "f8" or "shape" in spec:
        return spec
    array = np.frombuffer(base64.b64decode(spec["bdata"]), dtype=np.float64)
    finite = array[np.isfinite(array)]
    if finite.size and np.abs(finite).max() >= 1e37:
        return spec
    return to_typed_array_spec(array.astype(np.float32))


def _packed(values: object, floats: str) -> object:
    """``values`` as plotly.js's typed-array spec (``{"dtype", "bdata"}``: base64 of the raw numbers) when it is a list
    (or array) of numbers and ``None`` (``None`` -> NaN, drawn as a gap); anything else (dates, text, lists of fewer
    than 16) unchanged. Integers stay exact (int8..int32); other numbers are ``floats`` (``"f4"`` or ``"f8"``),
    ``"f8"`` when a value is beyond float32's range."""
    if isinstance(values, dict):
        return _narrowed(values, floats)
    if isinstance(values, np.ndarray):
        values = values.tolist()
    if not isinstance(values, list | tuple) or len(values) < 16:
        return values
    if not all(v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in values):
        return values
    if all(isinstance(v, int) for v in values) and all(-2**31 <= v < 2**31 for v in values):
        return to_typed_array_spec(np.asarray(values, dtype=np.int64))
    array = np.asarray([math.nan if v is None else v for v in values], dtype=np.float64)
    return _narrowed(to_typed_array_spec(array), floats)


def _same(first: object, second: object) -> bool:
    """Whether two trace arrays (lists, tuples or numpy arrays) hold the same values."""
    if first is None or second is None:
        return False
    try:
        return len(first) == len(second) and bool(np.array_equal(np.asarray(first), np.asarray(second)))
    except (TypeError, ValueError):
        return False


def figure_json(figure: go.Figure) -> str:
    """The JSON of ``figure`` as plotly.js reads it, compact: the x, y and customdata of its traces as typed arrays
    (:func:`_packed`: y as float32, what a chart shows, a third of the bytes of decimal text), and a trace's
    customdata left out when it equals its x (the steps on a step axis: the point click reads ``point.x`` then,
    ``app.tabs.runs.tab.CHART_CLICK_JS``). The figure itself is not changed."""
    repeated = {index for index, trace in enumerate(figure.data)
                if _same(getattr(trace, "customdata", None), getattr(trace, "x", None))}
    spec = figure.to_plotly_json()
    for index, trace in enumerate(spec.get("data", [])):
        if index in repeated:
            trace.pop("customdata", None)
        for name, floats in (("x", "f8"), ("y", "f4"), ("customdata", "f8")):
            if name in trace:
                trace[name] = _packed(trace[name], floats)
    return to_json_plotly(spec)
