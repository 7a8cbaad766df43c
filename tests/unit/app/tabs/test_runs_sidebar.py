"""The Runs tab's selection helpers: the run of a clicked row, the runs to overlay, the sweep filter."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from app.tabs.runs.sidebar import ANY_SWEEP, MAX_OVERLAY, clicked_run, in_sweep, overlay_ids


def test_clicked_run_reads_the_rows_id():
    frame = pd.DataFrame({"id": [12, 7], "name": ["a", "b"]})
    assert clicked_run(frame, 0) == 12 and clicked_run(frame, 1) == 7


@pytest.mark.parametrize("row", [-1, 2, None, "0", True, 1.0])
def test_clicked_run_ignores_rows_out_of_range_and_odd_indices(row):
    assert clicked_run(pd.DataFrame({"id": [12, 7]}), row) is None


def test_clicked_run_without_ids():
    assert clicked_run(pd.DataFrame({"name": ["a"]}), 0) is None
    assert clicked_run(pd.DataFrame({"id": ["x"]}), 0) is None
    assert clicked_run(None, 0) is None


def test_overlay_ids_skip_the_selected_run_repeats_and_junk():
    assert overlay_ids([3, "4", 3, 5, None, "x", True, 2.0], 5) == [3, 4, 2]
    assert overlay_ids("3,4", None) == []
    assert len(overlay_ids(list(range(100)), None)) == MAX_OVERLAY


def test_in_sweep():
    runs = [SimpleNamespace(id=1, sweep_id=None), SimpleNamespace(id=2, sweep_id=3), SimpleNamespace(id=3, sweep_id=4)]
    assert [r.id for r in in_sweep(runs, 3)] == [2]
    assert [r.id for r in in_sweep(runs, "4")] == [3]
    assert in_sweep(runs, ANY_SWEEP) == runs == in_sweep(runs, None) == in_sweep(runs, "junk")
    assert in_sweep(runs, 99) == []
