"""The floor of a link's first chart: the least page Gradio and plotly (both fixed by the design) can make to draw
the Runs tab's first chart. One ``gr.Blocks`` holding one plot (``#runs-plot``, the Runs tab's compact plot) and one
page-load event whose answer is the chart the dashboard's page load draws for the run (the same
``refresh_series`` read and ``training_figure``, sent as :func:`app.views.plot_payload.figure_json`).

``bench_web.py --side-by-side --floor`` serves it beside the dashboard and trackio and times its link in the same
Chromium, round by round: our link against the floor is what the dashboard's own page costs; the floor against
trackio's link is what the stack can reach at all.

Usage: ``python benchmarks/web_floor.py --data-dir DIR --port PORT`` (the data directory ``bench_web.prepare``
made; the first run of its store is drawn).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gradio as gr  # noqa: E402

from app.tabs.runs.plots import compact_plot  # noqa: E402
from app.tabs.runs.tab import refresh_series  # noqa: E402
from app.views.charts import training_figure  # noqa: E402
from storage import Store, sqlite_url  # noqa: E402


def build_floor(store: Store) -> gr.Blocks:
    """One plot, drawn by one page-load event with the first run's chart (as the dashboard's first view)."""
    ctx = SimpleNamespace(store=store)

    def first_chart():
        run = store.list_runs()[0]
        series, _ = refresh_series(ctx, run.id, None)
        return training_figure(series, f"#{run.id} {run.name}", run.config.get("beta"))

    with gr.Blocks(title="floor") as blocks:
        plot = compact_plot(label="training metrics", elem_id="runs-plot")
        blocks.load(first_chart, outputs=plot, show_progress="hidden")
    first_chart().to_json()  # plotly's first use paid at start, as the dashboard does (create_chart_warmup)
    return blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    store = Store(sqlite_url(args.data_dir / "grpo.db"))
    blocks = build_floor(store)
    blocks.queue(default_concurrency_limit=8)
    blocks.launch(server_name="127.0.0.1", server_port=args.port, quiet=True)


if __name__ == "__main__":
    main()
