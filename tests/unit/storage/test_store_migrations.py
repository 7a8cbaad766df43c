"""Migration of a store created by the previous version (storage.migrations): ``runs.output_dir`` became
``runs.run_dir`` and ``groups.prompt_index`` became ``groups.row_index`` (with the index that names it); every row
survives. The old store is built with plain SQL, the schema the previous version wrote on SQLite."""

from __future__ import annotations

import json
import sqlite3

from sqlalchemy import inspect as sql_inspect
from sqlalchemy import text

from storage import RunStatus, Store, sqlite_url
from storage.migrations import rename_columns
from tests.helpers import old_store


def test_a_store_of_the_previous_version_is_migrated_with_its_rows(tmp_path):
    url = old_store(tmp_path / "old.db")
    store = Store(url)
    try:
        inspector = sql_inspect(store.engine)
        run_columns = {c["name"] for c in inspector.get_columns("runs")}
        group_columns = {c["name"] for c in inspector.get_columns("groups")}
        assert "run_dir" in run_columns and "output_dir" not in run_columns
        assert "row_index" in group_columns and "prompt_index" not in group_columns
        indexes = {ix["name"]: ix["column_names"] for ix in inspector.get_indexes("groups")}
        assert indexes.get("ix_groups_run_row") == ["run_id", "row_index", "step"]
        assert "ix_groups_run_prompt" not in indexes

        run = store.get_run(1)
        assert (run.name, run.status, run.run_dir) == ("old run", RunStatus.COMPLETED, "/data/runs/run-00001")
        assert run.log_path == "/data/runs/run-00001/train.log"
        groups = store.groups_for_prompt(1, 7)
        assert [(g.step, g.row_index, g.prompt) for g in groups] == [(1, 7, "What is 3 + 4?"), (2, 7, "What is 3 + 4?")]
        assert groups[0].completions[0].rewards == {"numeric_answer": 1.0}
        assert [r.row_index for r in store.prompt_rows(1)] == [7]
        with store.engine.connect() as conn:
            plan = " ".join(
                str(row[-1])
                for row in conn.execute(
                    text("EXPLAIN QUERY PLAN SELECT * FROM groups WHERE run_id = 1 AND row_index = 7 ORDER BY step")
                )
            )
        assert "ix_groups_run_row" in plan
    finally:
        store.close()


def test_the_migration_runs_once(tmp_path):
    url = old_store(tmp_path / "old.db")
    Store(url).close()
    store = Store(url)  # opening the migrated store again changes nothing
    try:
        assert rename_columns(store.engine) == []
        assert store.get_run(1).run_dir == "/data/runs/run-00001"
        with store.engine.connect() as conn:
            assert json.loads(conn.execute(text("SELECT extra FROM groups WHERE id = 2")).scalar()) == {}
    finally:
        store.close()


def test_a_store_without_the_metric_history_gets_it_from_its_metrics_once(tmp_path):
    """A store written before the downsampled metric history: opening it adds the empty tables, and the first chart
    load of a run computes the run's history from its raw points (then keeps it)."""
    path = tmp_path / "old.db"
    old_store(path)
    connection = sqlite3.connect(path)
    connection.executescript("""
        CREATE TABLE metrics (
            id INTEGER NOT NULL, run_id INTEGER NOT NULL, step INTEGER NOT NULL, "key" VARCHAR(200) NOT NULL,
            value FLOAT, wall_time FLOAT NOT NULL, PRIMARY KEY (id),
            CONSTRAINT uq_metrics_run_step_key UNIQUE (run_id, step, "key"),
            FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE
        );
    """)
    connection.executemany(
        "INSERT INTO metrics (run_id, step, key, value, wall_time) VALUES (1, ?, 'reward', ?, ?)",
        [(step, 50.0 if step == 2 else step / 4, 1000.0 + step) for step in range(1, 41)],
    )
    connection.commit()
    connection.close()
    store = Store(sqlite_url(path))
    try:
        store.summary_buckets = 8
        assert {"metric_series", "metric_buckets"} <= set(sql_inspect(store.engine).get_table_names())
        (reward,) = store.metric_summary(1, keys=["reward"])
        assert len(reward) <= 8 and (reward.last_steps[-1], reward.last_values[-1]) == (40, 10.0)
        assert max(reward.maxs) == 50.0 and reward.first_steps[0] == 1  # the spike at step 2 is kept
        with store.engine.connect() as conn:
            stored = conn.execute(text("SELECT COUNT(*) FROM metric_buckets WHERE run_id = 1")).scalar_one()
        assert stored == len(reward)  # computed once and kept
        assert store.metric_summary(1, keys=["reward"]) == [reward]
    finally:
        store.close()


def test_a_store_without_the_turn_columns_gets_them_and_keeps_its_completions(tmp_path):
    # the completions of a store written before multi-turn rollouts were recorded: no turns, no tool_mask
    store = Store(old_store(tmp_path / "old.db"))
    try:
        [group] = store.groups_at(1, 1)
        assert group.completions[0].text == "7" and group.completions[0].turns is None
        assert {"turns", "tool_mask"} <= {c["name"] for c in sql_inspect(store.engine).get_columns("completions")}
    finally:
        store.close()
