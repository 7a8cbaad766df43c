"""The view a link names (``?run=12&step=30&tab=inspect``): parsed, and anything hostile or malformed ignored."""

from __future__ import annotations

import pytest

from app.tabs.navigation import url_view_of
from app.url_state import UrlView, parse_view


def test_a_full_link():
    assert parse_view({"run": "12", "step": "30", "tab": "inspect"}) == UrlView(run=12, step=30, tab="inspect")
    assert parse_view({"tab": "Runs"}) == UrlView(tab="runs")
    assert parse_view({"run": "3", "step": "0"}) == UrlView(run=3, step=0)


@pytest.mark.parametrize("value", ["", "0", "-1", "1e3", "1.5", " 4", "4 ", "0x10", "١٢", "9" * 13,
                                   "12;DROP TABLE runs", "<script>alert(1)</script>", "NaN", "+3", "3\n"])
def test_bad_run_and_step_values_are_ignored(value):
    view = parse_view({"run": value, "step": value if value != "0" else "-0", "tab": "runs"})
    assert view.run is None and view.step is None
    assert view.tab == "runs"  # the rest of the link still applies


@pytest.mark.parametrize("value", ["admin", "inspect/../launch", "", "x" * 1000, "javascript:alert(1)", "INSPECT "])
def test_unknown_tabs_are_ignored(value):
    view = parse_view({"tab": value, "run": "2"})
    assert view.run == 2
    assert view.tab in (None, "inspect")  # "INSPECT " is the inspect tab, nothing else passes


@pytest.mark.parametrize("params", [None, {}, {"run": ["1", "2"]}, {"run": 5}, {"step": object()}])
def test_odd_mappings_give_no_view(params):
    assert parse_view(params) in (UrlView(),)


def test_a_mapping_that_fails_to_read_gives_no_view():
    class Broken(dict):
        def get(self, *args, **kwargs):
            raise RuntimeError("boom")

    assert parse_view(Broken(run="1")) == UrlView()


def test_url_view_of_a_request_and_of_none():
    class Request:
        query_params = {"run": "7", "step": "abc", "tab": "try"}

    assert url_view_of(Request()) == {"run": 7, "step": None, "tab": "try"}
    assert url_view_of(None) == {"run": None, "step": None, "tab": None}
