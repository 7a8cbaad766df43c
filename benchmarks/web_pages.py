"""Timing a dashboard's page in headless Chromium (``/usr/bin/chromium`` via Playwright): a link to a run until its
first chart is drawn, a click on the Runs tab, a metric section opened, and the rounds of ``bench_web.py
--side-by-side`` (our link, trackio's, the floor page's, an earlier commit's, each in a fresh page of one browser, in
turn, so a change of the machine's load hits all alike). What "drawn" means is each page's own test: plotly's trace
list holding points for ours and the floor's, a painted vega canvas for trackio's.
"""

from __future__ import annotations

import time

CHROMIUM = "/usr/bin/chromium"

#: True once the Runs chart is drawn with data (plotly's own trace list).
CHART_DRAWN = "() => { const d = document.querySelector('#runs-plot .js-plotly-plot');" \
              " return !!(d && d._fullData && d._fullData.some(t => t.x && t.x.length > 0)); }"


def time_chart(browser, url: str, tries: int, link_timeout_s: float = 15) -> tuple[list[float], list[float]]:
    """Seconds from a click on the Runs tab (page already loaded) to its first chart drawn, and from opening a link
    to the run's Runs view (``?run=1&tab=runs``) to its chart drawn; ``tries`` fresh pages each."""
    from playwright.sync_api import expect

    tab_click, deep_link = [], []
    for _ in range(tries):
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(60_000)
        page.goto(url)
        expect(page.get_by_role("tab", name="Runs")).to_be_visible(timeout=60_000)
        page.wait_for_timeout(1500)  # the page settled: what remains is the tab's own work
        started = time.perf_counter()
        page.get_by_role("tab", name="Runs").click()
        page.wait_for_function(CHART_DRAWN, polling=20)
        tab_click.append(time.perf_counter() - started)
        page.close()
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        started = time.perf_counter()
        page.goto(url + "?run=1&tab=runs")
        try:
            page.wait_for_function(CHART_DRAWN, polling=20, timeout=link_timeout_s * 1000)
            deep_link.append(time.perf_counter() - started)
        except Exception:  # noqa: BLE001 - a dashboard that ignores links never draws it: reported as such
            deep_link.append(float("inf"))
        page.close()
    return tab_click, deep_link


def _section_drawn(section: str) -> str:
    return (f"() => {{ const d = document.querySelector('#runs-section-plot-{section} .js-plotly-plot');"
            " return !!(d && d._fullData && d._fullData.some(t => t.x && t.x.length > 0)); }")


def time_sections(page, sections: tuple[str, ...] = ("policy", "custom")) -> dict[str, float]:
    """Seconds from a click on each section's heading (the Runs tab open, its chart drawn) to its charts drawn."""
    timings = {}
    for section in sections:
        heading = page.locator(f"#runs-section-{section} button").first
        if not heading.is_visible():
            continue
        heading.scroll_into_view_if_needed()
        started = time.perf_counter()
        heading.click()
        page.wait_for_function(_section_drawn(section), polling=20, timeout=60_000)
        timings[section] = time.perf_counter() - started
    return timings


#: True once trackio's page has drawn a line plot (vega renders to a canvas inside ``.plot``).
TRACKIO_DRAWN = "() => { const c = document.querySelector('.plot canvas');" \
                " return !!(c && c.width > 0 && c.height > 0); }"


def side_by_side(ours: str, theirs: str, tries: int = 3, theirs_timeout_s: float = 120,
                 floor: str | None = None, base: str | None = None) -> dict[str, list[float]]:
    """``tries`` rounds, each in fresh Chromium pages, one after the other so a change of the machine's load hits
    all alike: the link to the run's own page (``run?run=1``, what alerts and the Runs tab hand out) to its first
    chart, the dashboard's link to the run (``?run=1&tab=runs``) to its first chart, a click on our Runs tab (page
    loaded first) to its first chart, the ``floor`` page's link (``web_floor.py``: one plot, one load event) to the same
    chart when given, the ``base`` page's link (the unchanged page, ``--against``) when given, trackio's link to
    the same data to its first chart (``inf`` past ``theirs_timeout_s``). Returns ``name -> seconds of each round``."""
    from playwright.sync_api import sync_playwright

    times: dict[str, list[float]] = {"page": [], "ours": [], "tab": [], "trackio": [], "floor": [], "base": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        for _ in range(tries):
            times["page"].append(time_link(browser, ours + "run?run=1", CHART_DRAWN, theirs_timeout_s))
            tab_click, deep_link = time_chart(browser, ours, 1, link_timeout_s=theirs_timeout_s)
            times["ours"] += deep_link
            times["tab"] += tab_click
            if base is not None:
                times["base"].append(time_link(browser, base + "?run=1&tab=runs", CHART_DRAWN, theirs_timeout_s))
            if floor is not None:
                times["floor"].append(time_link(browser, floor + "?run=1&tab=runs", CHART_DRAWN, theirs_timeout_s))
            times["trackio"].append(time_link(browser, theirs, TRACKIO_DRAWN, theirs_timeout_s))
        browser.close()
    return times


def time_link(browser, url: str, drawn: str, timeout_s: float) -> float:
    """Seconds from opening ``url`` in a fresh page to ``drawn`` true (``inf`` past ``timeout_s``)."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    started = time.perf_counter()
    page.goto(url)
    try:
        page.wait_for_function(drawn, polling=20, timeout=timeout_s * 1000)
        seconds = time.perf_counter() - started
    except Exception:  # noqa: BLE001 - never drawn in time: reported as such
        seconds = float("inf")
    page.close()
    return seconds


def time_links(ours: str, theirs: str, tries: int = 3) -> tuple[list[float], list[float]]:
    """Seconds from opening each link in a fresh Chromium page to its first chart drawn, ours and trackio's taken in
    turn (so a change of load hits both alike)."""
    from playwright.sync_api import sync_playwright

    mine, trackio = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        for _ in range(tries):
            for url, drawn, out in ((ours, CHART_DRAWN, mine), (theirs, TRACKIO_DRAWN, trackio)):
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                started = time.perf_counter()
                page.goto(url)
                try:
                    page.wait_for_function(drawn, polling=20, timeout=60_000)
                    out.append(time.perf_counter() - started)
                except Exception:  # noqa: BLE001 - never drawn: reported as such
                    out.append(float("inf"))
                page.close()
        browser.close()
    return mine, trackio
