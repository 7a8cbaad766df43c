"""The helpers that tests in more than one module share (plain values and functions; fixtures live in the
conftest.py files). A test module imports from here or from the other non-test modules of ``tests/`` (tiny_model.py,
store_helpers.py, servers.py, ...), never from another test module (``tests/unit/test_test_imports.py`` checks it).

* training: :data:`EXAMPLE`, :data:`REWARDS`, :func:`tiny_config` (a two-step run of the tiny local model),
  :func:`wait_for` (poll, ticking a launcher);
* the public API: :data:`FINISHED` (the statuses a run ends in);
* the store: :data:`OLD_SCHEMA`, :func:`old_store` (a store of the previous version, written with plain SQL);
* the preflight: :func:`rule_stats`, :func:`preflight_report`; chat templates: :data:`R1_DISTILL`;
* the views: :data:`NOW`, :func:`run_info` (a ``RunInfo`` with defaults);
* the browser (Playwright, imported when called): :func:`pick`, :func:`open_rule_details`, :func:`fill_field`,
  :func:`set_number`, :func:`set_text`; the sweep from the Launch tab: :data:`GRID`, :func:`fill_the_launch_form`,
  :func:`launch_the_sweep`, :func:`expect_the_sweep_table_completed`.
"""

from __future__ import annotations

import sqlite3
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import text

from grpo_core.preflight.report import PreflightReport, RuleStats
from grpo_core.processes import process_alive
from grpo_core.run_config import RunConfig
from grpo_core.training.launcher import Launcher
from storage import RunInfo, RunStatus, Store, SweepInfo, sqlite_url

EXAMPLE = str(Path(__file__).resolve().parents[1] / "examples" / "arithmetic.jsonl")


REWARDS = [
    {"rule": "numeric_answer", "weight": 1.0},
    {"rule": "format_regex", "weight": 0.5, "params": {"pattern": r"\d"}},
    {"rule": "length", "weight": 0.25, "params": {"min_tokens": 1, "max_tokens": 6}},
]


def tiny_config(model_dir: Path, **overrides) -> RunConfig:
    values = {
        "model": str(model_dir),
        "dataset_path": EXAMPLE,
        "rewards": REWARDS,
        "max_steps": 2,
        "max_completion_length": 12,
        "num_generations": 4,
        "per_device_train_batch_size": 8,
        "temperature": 1.0,
        "learning_rate": 1e-3,
    }
    values.update(overrides)
    return RunConfig.model_validate(values)


def wait_for(predicate, timeout_s: float, interval_s: float = 0.5, launcher: Launcher | None = None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if launcher is not None:
            launcher.tick()
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"condition not met within {timeout_s} s")


FINISHED = {"completed", "failed", "cancelled"}


OLD_SCHEMA = """
CREATE TABLE datasets (
    id INTEGER NOT NULL, name VARCHAR(200) NOT NULL, source_name VARCHAR(300) NOT NULL, format VARCHAR(16) NOT NULL,
    num_rows INTEGER NOT NULL, columns JSON NOT NULL, prompt_kind VARCHAR(16) NOT NULL, path TEXT NOT NULL,
    created_at DATETIME NOT NULL, PRIMARY KEY (id), UNIQUE (name)
);
CREATE TABLE runs (
    id INTEGER NOT NULL, name VARCHAR(200) NOT NULL, status VARCHAR(16) NOT NULL, config JSON NOT NULL,
    dataset_id INTEGER, created_at DATETIME NOT NULL, started_at DATETIME, finished_at DATETIME,
    heartbeat_at DATETIME, worker_pid INTEGER, output_dir TEXT, log_path TEXT, error TEXT,
    current_step INTEGER NOT NULL, max_steps INTEGER NOT NULL, phase VARCHAR(200), cancel_requested BOOLEAN NOT NULL,
    resume_from TEXT, notes TEXT, tags JSON, gpus VARCHAR(200), PRIMARY KEY (id),
    CONSTRAINT ck_runs_status CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
    FOREIGN KEY(dataset_id) REFERENCES datasets (id) ON DELETE SET NULL
);
CREATE INDEX ix_runs_status ON runs (status);
CREATE TABLE groups (
    id INTEGER NOT NULL, run_id INTEGER NOT NULL, step INTEGER NOT NULL, prompt_index INTEGER NOT NULL,
    prompt TEXT NOT NULL, extra JSON NOT NULL, PRIMARY KEY (id),
    FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE
);
CREATE INDEX ix_groups_run_step ON groups (run_id, step);
CREATE INDEX ix_groups_run_prompt ON groups (run_id, prompt_index, step);
CREATE TABLE completions (
    id INTEGER NOT NULL, group_id INTEGER NOT NULL, "index" INTEGER NOT NULL, text TEXT NOT NULL,
    rewards JSON NOT NULL, total_reward FLOAT, advantage FLOAT, num_tokens INTEGER, truncated BOOLEAN NOT NULL,
    PRIMARY KEY (id), FOREIGN KEY(group_id) REFERENCES groups (id) ON DELETE CASCADE
);
INSERT INTO runs (id, name, status, config, created_at, output_dir, log_path, current_step, max_steps,
                  cancel_requested)
VALUES (1, 'old run', 'completed', '{"max_steps": 2}', '2026-01-01 00:00:00', '/data/runs/run-00001',
        '/data/runs/run-00001/train.log', 2, 2, 0);
INSERT INTO groups (id, run_id, step, prompt_index, prompt, extra) VALUES (1, 1, 1, 7, 'What is 3 + 4?', '{}');
INSERT INTO groups (id, run_id, step, prompt_index, prompt, extra) VALUES (2, 1, 2, 7, 'What is 3 + 4?', '{}');
INSERT INTO completions (id, group_id, "index", text, rewards, total_reward, advantage, num_tokens, truncated)
VALUES (1, 1, 0, '7', '{"numeric_answer": 1.0}', 1.0, 0.5, 2, 0);
"""


def old_store(path) -> str:
    connection = sqlite3.connect(path)
    connection.executescript(OLD_SCHEMA)
    connection.commit()
    connection.close()
    return sqlite_url(path)


def rule_stats(
    name: str,
    weight: float = 1.0,
    *,
    count: int = 16,
    low: float = 0.0,
    high: float = 1.0,
    nonzero: float = 0.5,
    varies: float = 0.75,
    rule: str | None = None,
) -> RuleStats:
    return RuleStats(
        name=name,
        rule=rule or name,
        weight=weight,
        count=count,
        mean=(low + high) / 2,
        std=0.5,
        min=low if count else None,
        max=high if count else None,
        none_share=0.0 if count else 1.0,
        nonzero_share=nonzero,
        varies_share=varies,
    )


def preflight_report(
    *, zero_std: float = 0.0, truncation: float = 0.0, unscorable: float = 0.0, rules: list[RuleStats] | None = None,
    num_prompts: int = 4, finish_gain: float | None = None,
) -> PreflightReport:
    return PreflightReport(
        model="m",
        num_prompts=num_prompts,
        finish_gain=finish_gain,
        num_generations=4,
        max_completion_length=64,
        temperature=0.9,
        top_p=1.0,
        rules=rules or [rule_stats("numeric_answer"), rule_stats("length", 0.2)],
        zero_std_share=zero_std,
        truncation_rate=truncation,
        mean_completion_tokens=10.0,
        unscorable_share=unscorable,
        mean_total=0.5,
        std_total=0.4,
        examples=[],
    )


# The generation prompts of the templates as shipped (shortened to what matters here).

R1_DISTILL = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}{{ '<｜User｜>' + m['content'] }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<｜Assistant｜><think>\\n' }}{% endif %}"
)


NOW = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)


def run_info(**overrides) -> RunInfo:
    fields = {
        "id": 7,
        "name": "demo",
        "status": RunStatus.RUNNING,
        "config": {"model": "org/model"},
        "dataset_id": 1,
        "created_at": NOW - timedelta(minutes=5),
        "started_at": NOW - timedelta(seconds=65),
        "finished_at": None,
        "heartbeat_at": NOW - timedelta(seconds=3),
        "worker_pid": 123,
        "run_dir": None,
        "log_path": None,
        "error": None,
        "current_step": 4,
        "max_steps": 10,
        "phase": "training",
        "cancel_requested": False,
    }
    fields.update(overrides)
    return RunInfo(**fields)


def pick(page, elem_id: str, option: str) -> None:
    """Choose ``option`` in the Gradio dropdown ``#elem_id``."""
    page.locator(f"#{elem_id} input").click()
    page.get_by_role("option", name=option).first.click()


def click_chart_point(page, plot: str, step: int, clicked) -> None:
    """Click with the mouse the point at ``step`` of the first trace holding it in the plotly chart under ``plot`` (a
    CSS selector; plotly's own axis mapping gives the pixel), until ``clicked()`` (a Playwright assertion) passes: a
    page still laying out moves the chart, so a click that missed the point is measured and made again, 3 times at
    most (the last assertion's failure is raised)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(3):
        # the point must be inside the viewport for the mouse to reach it: the chart may sit below the fold
        page.evaluate(f"() => document.querySelector('{plot} .js-plotly-plot').scrollIntoView({{block: 'start'}})")
        x, y = page.evaluate(
            f"""() => {{
              const d = document.querySelector('{plot} .js-plotly-plot');
              const trace = d._fullData.find(t => t.x && Array.from(t.x).includes({step}));
              const xa = d._fullLayout[trace.xaxis.replace('x', 'xaxis')];
              const ya = d._fullLayout[trace.yaxis.replace('y', 'yaxis')];
              const i = Array.from(trace.x).indexOf({step});
              const box = d.getBoundingClientRect();
              return [box.left + xa._offset + xa.l2p(trace.x[i]), box.top + ya._offset + ya.l2p(trace.y[i])];
            }}"""
        )
        page.mouse.move(x, y)
        page.mouse.click(x, y)
        try:
            clicked()
            return
        except (AssertionError, PlaywrightTimeout):
            if attempt == 2:
                raise


def open_rule_details(page, index: int) -> None:
    """Unfold rule slot ``index``'s parameters, gate and help (folded under the rule by default)."""
    page.locator(f"#rule-details-{index}").get_by_text("parameters, gate and what the rule does").first.click()
    page.locator(f"#params-{index} .cm-content").wait_for()


def fill_field(page, box, value: str) -> None:
    """Type ``value`` into a Gradio field and leave it, once the field is mounted and holds its own value.

    A field inside an accordion that was just opened mounts and then sets its initial value: text typed before
    that is overwritten, so wait for it to be visible and settled, and check the value stuck.
    """
    from playwright.sync_api import expect

    box.wait_for(state="visible")
    page.wait_for_timeout(300)
    box.fill(value)
    box.press("Tab")
    expect(box).to_have_value(value)


def set_number(page, elem_id: str, value: str) -> None:
    fill_field(page, page.locator(f"#{elem_id} input"), value)


def set_text(page, elem_id: str, value: str) -> None:
    fill_field(page, page.locator(f"#{elem_id} textarea, #{elem_id} input").first, value)


GRID = "learning_rate: 1e-3, 1e-2\nbeta: 0.0, 0.04"  # 4 points


def fill_the_launch_form(page, tiny_model_dir, name: str) -> None:
    """The Launch tab's form for one-step runs of the tiny model, with its Sweep accordion open."""
    page.get_by_role("tab", name="Launch").click()
    set_text(page, "launch-model", str(tiny_model_dir))  # the dataset is the arithmetic example, chosen already
    set_text(page, "launch-name", name)
    set_number(page, "hp-max_steps", "1")
    set_number(page, "hp-max_completion_length", "12")
    page.get_by_text("Sweep: one run per point of a grid of fields").click()


def launch_the_sweep(page, store: Store) -> SweepInfo:
    """Launch the 4-point :data:`GRID` from the open Sweep accordion; the sweep the store then holds."""
    from playwright.sync_api import expect

    set_text(page, "sweep-grid", GRID)
    button = page.locator("#sweep-button")
    expect(button).to_have_text("Launch sweep (4 runs)")
    expect(page.locator("#sweep-shape")).to_contain_text("4 runs: learning_rate (2) × beta (2)")
    button.click()
    expect(page.locator("#sweep-status")).to_contain_text("4 runs")
    (sweep,) = store.list_sweeps()
    assert len(sweep.run_ids) == 4
    expect(page.locator("#sweep-status")).to_contain_text(f"sweep:{sweep.id}")
    return sweep


def expect_the_sweep_table_completed(page, store: Store, sweep: SweepInfo) -> list[RunInfo]:
    """In the Runs tab's Sweeps view, wait for the sweep's 4 rows to read ``completed``; its runs from the store."""
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Runs").click()
    rows = page.locator("#sweep-table [role=row].virtual-row")  # the body rows of gradio's virtual table
    expect(rows).to_have_count(4)
    for index in range(4):
        expect(rows.nth(index)).to_contain_text("completed", timeout=480_000)
    header = page.locator("#sweep-table thead").inner_text()
    assert "learning_rate" in header and "beta" in header and "final reward" in header
    runs = store.sweep_runs(sweep.id)
    assert [r.status for r in runs] == [RunStatus.COMPLETED] * 4
    table = page.locator("#sweep-table").inner_text()
    assert "0.001" in table and "0.01" in table and "0.04" in table
    return runs


# What the fault tests share: every step recorded exactly once, and the worker gone before a resume.


def metric_counts(store, run_id: int) -> dict[int, dict[str, int]]:
    """``{step: {key: rows}}`` straight from the table (the unique constraint aside, duplicates would show here)."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT step, key, COUNT(*) FROM metrics WHERE run_id = :r GROUP BY step, key"), {"r": run_id}
        ).all()
    counts: dict[int, dict[str, int]] = {}
    for step, key, n in rows:
        counts.setdefault(step, {})[key] = n
    return counts


def assert_steps_recorded_once(store, run_id: int, steps: int, groups_per_step: int = 2) -> None:
    counts = metric_counts(store, run_id)
    assert sorted(counts) == list(range(1, steps + 1))
    for step, keys in counts.items():
        assert "reward" in keys and "loss" in keys, f"step {step} lacks metrics: {sorted(keys)}"
        assert set(keys.values()) == {1}, f"step {step} has duplicated metric rows"
    assert store.group_steps(run_id) == list(range(1, steps + 1))
    for step in range(1, steps + 1):
        assert len(store.groups_at(run_id, step)) == groups_per_step, f"step {step}"


def wait_until_worker_gone(store, launcher: Launcher, run_id: int) -> None:
    """Resume refuses while the previous worker is still exiting (its interpreter shutting down)."""
    pid = store.get_run(run_id).worker_pid
    wait_for(lambda: not process_alive(pid), 60, interval_s=0.2, launcher=launcher)


# What the image-dataset tests share: small pictures, made here, and hostile ones.


def png_bytes(colour: tuple[int, int, int] = (200, 30, 30), size: tuple[int, int] = (12, 8)) -> bytes:
    """A small RGB PNG of one colour."""
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, format="PNG")
    return out.getvalue()


def png_bomb(width: int = 60000, height: int = 60000) -> bytes:
    """A PNG of a few dozen bytes whose header claims ``width`` x ``height`` pixels (a decompression bomb): a 1 x 1
    PNG with its IHDR chunk's size rewritten and its CRC computed again."""
    import struct
    import zlib

    data = bytearray(png_bytes(size=(1, 1)))
    start = 8 + 4  # signature, then the IHDR chunk's length
    data[start + 4: start + 12] = struct.pack(">II", width, height)
    data[start + 17: start + 21] = struct.pack(">I", zlib.crc32(bytes(data[start: start + 17])))
    return bytes(data)


def image_parquet(path: Path, rows: list[dict], image_column: str = "images") -> Path:
    """A Parquet file as ``datasets`` writes ``Image`` features: each image a ``{bytes, path}`` struct; a row's
    ``image_column`` value is one struct or a list of them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    first = rows[0][image_column]
    kind = pa.list_(image_type) if isinstance(first, list) else image_type
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    arrays = {key: pa.array(values, type=kind if key == image_column else None) for key, values in columns.items()}
    pq.write_table(pa.table(arrays), path)
    return path


# Each upload layout of an image dataset, two rows: row 0's first picture is red at 40 x 30, row 1's blue at 30 x 40
# (tests/integration/test_image_layouts.py trains them in process, tests/e2e/test_launch_vision.py from the browser).

IMAGE_ASK = "What colour is the picture?"
FIRST_PICTURE_SIZES = [(40, 30), (30, 40)]  # (width, height) of row i's first picture


def _layout_pictures() -> tuple[bytes, bytes]:
    return png_bytes((220, 20, 20), FIRST_PICTURE_SIZES[0]), png_bytes((20, 20, 220), FIRST_PICTURE_SIZES[1])


def _zip_of(path: Path, members: dict[str, bytes | str]) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _jsonl(*rows: dict) -> str:
    import json

    return "".join(json.dumps(row) + "\n" for row in rows)


def layout_save_to_disk(tmp_path: Path) -> tuple[Path, int]:
    """``disk.zip``: a zipped ``save_to_disk`` folder with an ``Image`` feature; ``(upload, pictures per row)``."""
    import io

    from datasets import Dataset, Image
    from PIL import Image as PILImage

    pictures = [PILImage.open(io.BytesIO(data)) for data in _layout_pictures()]
    folder = tmp_path / "colours"
    Dataset.from_dict({"prompt": [IMAGE_ASK, IMAGE_ASK], "image": pictures, "answer": ["red", "blue"]}) \
        .cast_column("image", Image()).save_to_disk(str(folder))
    members = {str(p.relative_to(tmp_path)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    return _zip_of(tmp_path / "disk.zip", members), 1


def layout_parquet(tmp_path: Path) -> tuple[Path, int]:
    """``charts.parquet``: ``Image`` features holding their bytes."""
    red, blue = _layout_pictures()
    rows = [{"prompt": IMAGE_ASK, "image": {"bytes": data, "path": None}, "answer": name}
            for data, name in ((red, "red"), (blue, "blue"))]
    return image_parquet(tmp_path / "charts.parquet", rows, image_column="image"), 1


def layout_jsonl_zip(tmp_path: Path) -> tuple[Path, int]:
    """``vqa.zip``: JSON Lines in a folder whose ``image`` column names pictures beside it."""
    red, blue = _layout_pictures()
    rows = _jsonl({"prompt": IMAGE_ASK, "image": "pics/red.png", "answer": "red"},
                  {"prompt": IMAGE_ASK, "image": "pics/blue.png", "answer": "blue"})
    return _zip_of(tmp_path / "vqa.zip", {"vqa/data.jsonl": rows, "vqa/pics/red.png": red,
                                          "vqa/pics/blue.png": blue}), 1


def layout_csv_zip_several(tmp_path: Path) -> tuple[Path, int]:
    """``pairs.zip``: CSV whose ``images`` column names two pictures a row."""
    red, blue = _layout_pictures()
    text = (f'prompt,images,answer\n{IMAGE_ASK},"[""a.png"", ""b.png""]",red\n'
            f'{IMAGE_ASK},"[""b.png"", ""a.png""]",blue\n')
    return _zip_of(tmp_path / "pairs.zip", {"pairs.csv": text, "a.png": red, "b.png": blue}), 2


def layout_chat_blocks(tmp_path: Path) -> tuple[Path, int]:
    """``chat.zip``: conversational prompts whose content holds a ``{"type": "image", "path": ...}`` block."""
    red, blue = _layout_pictures()

    def chat(first: str) -> list[dict]:
        return [{"role": "user", "content": [{"type": "image", "path": first}, {"type": "text", "text": IMAGE_ASK}]}]

    rows = _jsonl({"prompt": chat("red.png"), "answer": "red"}, {"prompt": chat("blue.png"), "answer": "blue"})
    return _zip_of(tmp_path / "chat.zip", {"data.jsonl": rows, "red.png": red, "blue.png": blue}), 1
