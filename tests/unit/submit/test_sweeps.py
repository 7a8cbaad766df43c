"""Sweeps (grpo_core.submit.sweeps): the grid's text, the checks of every field and value against RunConfig, the expansion
into points, the cap, all-or-nothing submission into a real SQLite store, the store's sweep rows and reward summary,
and the sweep's table."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

import grpo_core.submit.sweeps as sweeps
from app.tabs.launch.sweep import sweep_shape
from grpo_core.run_config import ConfigError, RunConfig, parse_run_config_text
from grpo_core.submit.sweeps import (
    MAX_SWEEP_POINTS,
    SweepError,
    count_points,
    describe_grid,
    failure_lines,
    parse_grid_text,
    parse_sweep_config_text,
    plan_sweep,
    submit_sweep,
    sweep_table,
)
from storage import RunStatus, Store, StoreError
from tests.store_helpers import record_metrics

EXAMPLE = str(Path(__file__).resolve().parents[3] / "examples" / "arithmetic.jsonl")
REWARDS = [{"rule": "numeric_answer", "weight": 1.0}]


def _base(**overrides) -> RunConfig:
    return RunConfig.model_validate({"dataset_path": EXAMPLE, "rewards": REWARDS, "max_steps": 2, **overrides})


# ---------------------------------------------------------------------------------------------- the grid's text


@pytest.mark.parametrize(
    ("grid_text", "expected"),
    [
        ("learning_rate: 1e-5, 1e-4\nbeta: 0.0, 0.04",
         {"learning_rate": ["1e-5", "1e-4"], "beta": [0.0, 0.04]}),
        ("beta: [0.0, 0.04]\nnum_generations: 4", {"beta": [0.0, 0.04], "num_generations": [4]}),
        ("sweep: {learning_rate: [0.001, 0.0001], loss_type: 'grpo, dapo'}",
         {"learning_rate": [0.001, 0.0001], "loss_type": ["grpo", "dapo"]}),
        ("sweep:\n  use_lora: true, false\n", {"use_lora": [True, False]}),
    ],
)
def test_grid_text_as_lines_yaml_lists_or_a_sweep_block(grid_text, expected):
    assert parse_grid_text(grid_text) == expected


@pytest.mark.parametrize(
    ("grid_text", "message"),
    [
        ("", "the grid is empty"),
        ("   \n", "the grid is empty"),
        ("just words", "write the grid as `field: value, value, ...` lines"),
        ("beta: [0.0,\n", "line 2, column 1: not valid YAML"),
        ("beta: 0.0, , 0.04", "beta has an empty value"),
        ("beta: []", "beta has an empty value"),
        ("sweep: {beta: [0.0]}\nmax_steps: 3", "only the grid goes here, not other fields (max_steps)"),
    ],
)
def test_unreadable_grid_text_is_refused_with_the_reason(grid_text, message):
    with pytest.raises(SweepError) as caught:
        parse_grid_text(grid_text)
    assert message in str(caught.value)


def test_a_run_config_with_its_sweep_block_or_a_separate_grid():
    config, grid = parse_sweep_config_text(f"dataset_path: {EXAMPLE}\nname: lr\nsweep:\n  beta: [0.0, 0.04]\n")
    assert config.name == "lr" and config.dataset_path == EXAMPLE
    assert grid == {"beta": [0.0, 0.04]}
    config, grid = parse_sweep_config_text("max_steps: 3\n", "beta: 0.0, 0.04")
    assert config.max_steps == 3 and grid == {"beta": [0.0, 0.04]}
    with pytest.raises(SweepError, match="no grid: add a `sweep:` block"):
        parse_sweep_config_text("max_steps: 3\n")
    with pytest.raises(SweepError, match="give the grid once"):
        parse_sweep_config_text("sweep: {beta: [0.0]}\n", "beta: 0.1")
    with pytest.raises(ConfigError, match="max_steps"):  # the config beside the block is validated too
        parse_sweep_config_text("max_steps: 0\nsweep: {beta: [0.0]}\n")


# ------------------------------------------------------------------------------------- checks and expansion


def test_the_grid_expands_to_every_combination_first_field_slowest_with_typed_values_and_names():
    plan = plan_sweep(_base(name="lr-beta"), parse_grid_text("learning_rate: 1e-5, 1e-4\nbeta: 0, 0.04\n"
                                                              "num_generations: 4"))
    assert plan.grid == {"learning_rate": [1e-05, 1e-04], "beta": [0.0, 0.04], "num_generations": [4]}
    assert plan.varied == ["learning_rate", "beta"]
    assert [(c.learning_rate, c.beta, c.num_generations) for c in plan.configs] == [
        (1e-05, 0.0, 4), (1e-05, 0.04, 4), (1e-04, 0.0, 4), (1e-04, 0.04, 4)]
    assert [c.name for c in plan.configs] == [
        "lr-beta · learning_rate=1e-05 beta=0", "lr-beta · learning_rate=1e-05 beta=0.04",
        "lr-beta · learning_rate=0.0001 beta=0", "lr-beta · learning_rate=0.0001 beta=0.04"]
    # every other field is the base's
    assert {c.dataset_path for c in plan.configs} == {EXAMPLE} and {c.max_steps for c in plan.configs} == {2}
    assert count_points(plan.grid) == 4
    assert describe_grid(plan.grid) == "4 runs: learning_rate (2) × beta (2); fixed: num_generations"


@pytest.mark.parametrize(
    ("grid_text", "message"),
    [
        ("learnig_rate: 1e-5, 1e-4", "sweep: learnig_rate is not a run config field; did you mean learning_rate?"),
        ("learning_rate: 1e-5, -1", "sweep: learning_rate = -1: Input should be greater than 0"),
        ("num_generations: 4, 1", "sweep: num_generations = 1: Input should be greater than or equal to 2"),
        ("loss_type: grpo, ppo", "sweep: loss_type = 'ppo': Value error, loss_type must be one of grpo, dr_grpo, dapo, "
                                  "bnpo, cispo, sapo, luspo, vespo"),
        ("max_steps: 2, two", "sweep: max_steps = 'two': Input should be a valid integer"),
        ("name: a, b", "sweep: name cannot be varied"),
        ("beta: 0, 0.0", "sweep: beta lists 0 twice"),
        # fields that only fail together: the point is named by its values
        ("num_generations: 4, 3", "sweep point num_generations=3: config: Value error, 8 completions per step "
                                  "(per_device_train_batch_size 8 × num_processes 1 × gradient_accumulation_steps 1) "
                                  "must be a multiple of num_generations = 3"),
    ],
)
def test_every_field_and_value_is_checked_and_named(grid_text, message):
    with pytest.raises(SweepError) as caught:
        plan_sweep(_base(), parse_grid_text(grid_text))
    assert message in str(caught.value)


def test_a_point_is_checked_as_a_whole_not_each_value_against_the_base():
    # num_generations 16 does not divide the base's 8 completions per step, but it divides every point's batch
    plan = plan_sweep(_base(), {"num_generations": [16], "per_device_train_batch_size": [16, 32]})
    assert [(c.num_generations, c.per_device_train_batch_size) for c in plan.configs] == [(16, 16), (16, 32)]


def test_a_list_field_is_swept_by_whole_values_stored_as_json(store):
    grid = {"rewards": [REWARDS, [{"rule": "numeric_answer", "weight": 2.0}]], "report_to": [[], ["tensorboard"]]}
    plan = plan_sweep(_base(), grid)
    assert [c.rewards[0].weight for c in plan.configs] == [1.0, 1.0, 2.0, 2.0]
    assert [c.report_to for c in plan.configs] == [[], ["tensorboard"], [], ["tensorboard"]]
    sweep = submit_sweep(store, _base(), grid).sweep
    assert store.get_sweep(sweep.id).grid["rewards"][1] == [
        {"rule": "numeric_answer", "weight": 2.0, "params": {}, "name": None, "gate": None}]


def test_more_points_than_the_cap_are_refused_and_the_cap_itself_is_allowed():
    assert MAX_SWEEP_POINTS == 64
    allowed = {"seed": list(range(16)), "beta": [0.0, 0.01, 0.02, 0.04]}
    assert len(plan_sweep(_base(), allowed).configs) == 64
    with pytest.raises(SweepError) as caught:
        plan_sweep(_base(), {**allowed, "temperature": [0.7, 1.0]})
    assert str(caught.value) == ("sweep: 16 seed × 4 beta × 2 temperature = 128 runs; at most 64 per sweep: drop "
                                 "values or split it into several sweeps")


def test_the_form_shows_the_number_of_runs_or_why_the_grid_is_refused():
    assert sweep_shape("learning_rate: 1e-5, 1e-4\nbeta: 0.0, 0.04") == (
        "4 runs: learning_rate (2) × beta (2) (at most 64)", "Launch sweep (4 runs)")
    message, label = sweep_shape("betta: 0.0, 0.04")
    # (delta: TRL's two-sided clipping bound, a run config field too)
    assert message == "❌ sweep: betta is not a run config field; did you mean beta or delta?" and label == "Launch sweep"


# ------------------------------------------------------------------------------------------------ submission


def test_a_sweep_queues_one_run_per_point_with_its_id_tag_and_values(store, monkeypatch):
    calls = []
    real = sweeps.validate_checked_config  # the boundary is checked per point before, once each
    monkeypatch.setattr(sweeps, "validate_checked_config", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    launched = submit_sweep(store, _base(name="grid"), parse_grid_text("learning_rate: 1e-5, 1e-4\nbeta: 0.0, 0.04"),
                            owner="alice")
    sweep, runs = launched.sweep, launched.runs
    assert len(runs) == 4 and sweep.run_ids == [r.id for r in runs]
    assert len(calls) == 1  # the points differ in hyperparameters only: the dataset is read and checked once
    for run in runs:
        stored = store.get_run(run.id)
        assert stored.status == RunStatus.QUEUED and stored.sweep_id == sweep.id
        assert stored.tags == [f"sweep:{sweep.id}"] and stored.owner == "alice"
        assert stored.name == stored.config["name"] and stored.name.startswith("grid · learning_rate=")
    assert [(r.config["learning_rate"], r.config["beta"]) for r in store.sweep_runs(sweep.id)] == [
        (1e-05, 0.0), (1e-05, 0.04), (1e-04, 0.0), (1e-04, 0.04)]
    assert store.get_sweep(sweep.id).grid == {"learning_rate": [1e-05, 1e-04], "beta": [0.0, 0.04]}
    assert [s.id for s in store.list_sweeps()] == [sweep.id]
    # a run launched on its own belongs to no sweep
    assert store.create_run(name="alone", config={}, dataset_id=None, max_steps=1).sweep_id is None


def test_one_invalid_point_launches_nothing(store, tmp_path):
    missing = str(tmp_path / "missing.jsonl")
    grid = {"dataset_path": [EXAMPLE, missing], "beta": [0.0, 0.04]}
    with pytest.raises(ConfigError) as caught:
        submit_sweep(store, _base(), grid)
    assert f"sweep point dataset_path={missing} beta=0: dataset_path: {missing} does not exist" in str(caught.value)
    assert "nothing was launched" in str(caught.value)
    assert store.list_runs() == [] and store.list_sweeps() == []


def test_each_environment_a_sweep_names_is_checked_and_one_trl_cannot_use_launches_nothing(store, tmp_path):
    (tmp_path / "envs.py").write_text("class Good:\n    def reset(self, **kwargs):\n        pass\n\n\n"
                                      "class Bad:\n    pass\n", encoding="utf-8")
    grid = {"environment": [f"{tmp_path}/envs.py:Good", f"{tmp_path}/envs.py:Bad"]}
    with pytest.raises(ConfigError, match=r"environment '.*envs\.py:Bad': the environment class Bad has no callable "
                                          r"reset.*nothing was launched"):
        submit_sweep(store, _base(), grid)
    assert store.list_runs() == [] and store.list_sweeps() == []


def test_the_store_queues_a_sweep_in_one_transaction(store):
    with pytest.raises(StoreError):
        store.create_sweep(name="empty", grid={}, runs=[])
    with pytest.raises(IntegrityError):  # the second run names no dataset of the store: the whole sweep rolls back
        store.create_sweep(name="broken", grid={"beta": [0, 1]}, runs=[
            {"name": "a", "config": {}, "dataset_id": None, "max_steps": 1},
            {"name": "b", "config": {}, "dataset_id": 999, "max_steps": 1},
        ])
    assert store.list_runs() == [] and store.list_sweeps() == []


def test_deleted_runs_leave_the_sweep_and_its_table(store):
    sweep, runs = store.create_sweep(name="s", grid={"beta": [0.0, 0.04]}, runs=[
        {"name": f"s {b}", "config": {"beta": b}, "dataset_id": None, "max_steps": 3} for b in (0.0, 0.04)])
    store.delete_run(runs[0].id)
    assert store.get_sweep(sweep.id).run_ids == [runs[1].id]
    assert [r.id for r in store.sweep_runs(sweep.id)] == [runs[1].id]
    with pytest.raises(StoreError):
        store.get_sweep(sweep.id + 1)


def test_final_and_best_reward_per_run(store):
    sweep, runs = store.create_sweep(name="s", grid={"beta": [0.0, 0.04, 0.1]}, runs=[
        {"name": f"s {b}", "config": {"beta": b, "learning_rate": 1e-5}, "dataset_id": None, "max_steps": 3}
        for b in (0.0, 0.04, 0.1)])
    for step, value in enumerate([0.2, 0.9, 0.5], start=1):
        record_metrics(store, runs[0].id, step, {"reward": value, "kl": 10.0}, wall_time=float(step))
    record_metrics(store, runs[1].id, 1, {"reward": float("nan")}, wall_time=1.0)
    record_metrics(store, runs[1].id, 2, {"reward": 0.3}, wall_time=2.0)
    summary = store.final_and_best([r.id for r in runs], "reward")
    assert summary == {runs[0].id: (0.5, 0.9), runs[1].id: (0.3, 0.3)}  # the third has no reward yet
    store.claim_run(runs[0].id)
    store.heartbeat(runs[0].id, step=3)
    store.finish_run(runs[0].id, RunStatus.COMPLETED)
    headers, rows = sweep_table(store.get_sweep(sweep.id), store.sweep_runs(sweep.id), summary)
    assert headers == ["run", "status", "step", "beta", "final reward", "best reward"]
    assert rows == [
        [f"#{runs[0].id}", "completed", "3/3", "0", 0.5, 0.9],
        [f"#{runs[1].id}", "queued", "2/3", "0.04", 0.3, 0.3],  # recording a step moves current_step
        [f"#{runs[2].id}", "queued", "0/3", "0.1", None, None],
    ]


def test_failure_lines_name_each_failed_run_with_the_first_line_of_its_error(store):
    sweep, runs = store.create_sweep(name="f", grid={"beta": [0.0, 0.04, 0.1]}, runs=[
        {"name": f"f {b}", "config": {"beta": b}, "dataset_id": None, "max_steps": 3} for b in (0.0, 0.04, 0.1)])
    for run in runs:
        store.claim_run(run.id)
    store.finish_run(runs[0].id, RunStatus.COMPLETED)
    error = "\nCUDA out of memory: tried to allocate 2 GiB\nTraceback ..."
    store.finish_run(runs[1].id, RunStatus.FAILED, error=error)
    store.finish_run(runs[2].id, RunStatus.FAILED, error="x" * 400)
    lines = failure_lines(store.sweep_runs(sweep.id), max_chars=50)
    assert lines == [
        f"#{runs[1].id} failed: CUDA out of memory: tried to allocate 2 GiB",
        f"#{runs[2].id} failed: " + "x" * 47 + "...",
    ]


def test_an_older_store_gets_the_sweep_column_and_table(settings):
    old = Store(settings.db_url)
    run = old.create_run(name="from-an-older-version", config={}, dataset_id=None, max_steps=1)
    with old.engine.begin() as conn:
        conn.execute(text("ALTER TABLE runs DROP COLUMN sweep_id"))
        conn.execute(text("DROP TABLE sweeps"))
    old.close()
    store = Store(settings.db_url)  # the migration runs here
    try:
        assert store.get_run(run.id).sweep_id is None
        sweep, runs = store.create_sweep(name="s", grid={"beta": [0.0]}, runs=[
            {"name": "s", "config": {}, "dataset_id": None, "max_steps": 1}])
        assert store.get_run(runs[0].id).sweep_id == sweep.id
    finally:
        store.close()


# ------------------------------------------------------------------------------------------------ headless


def test_headless_sweep_queues_every_point_or_refuses_the_whole_file(settings, tmp_path, capsys):
    from app.cli.main import main

    path = tmp_path / "sweep.yaml"
    common = ["--data-dir", str(settings.data_dir), "--db", settings.db_url]
    path.write_text(f"dataset_path: {EXAMPLE}\nname: cli\nsweep:\n  beta: [0.0, 0.04]\n  learning_rate: [1e-5, -1]\n")
    assert main(["sweep", str(path), *common, "--queue-only"]) == 2
    assert "sweep: learning_rate = -1: Input should be greater than 0" in capsys.readouterr().err
    path.write_text("dataset_path: arithmetic.jsonl\nname: cli\nsweep:\n  beta: [0.0, 0.04]\n")
    (tmp_path / "arithmetic.jsonl").write_text(Path(EXAMPLE).read_text())  # found beside the YAML file
    assert main(["sweep", str(path), *common, "--queue-only", "--max-steps", "3"]) == 0
    assert "2 runs queued" in capsys.readouterr().out
    store = Store(settings.db_url)
    try:
        (sweep,) = store.list_sweeps()
        runs = store.sweep_runs(sweep.id)
        assert [(r.status, r.config["beta"], r.max_steps) for r in runs] == [
            (RunStatus.QUEUED, 0.0, 3), (RunStatus.QUEUED, 0.04, 3)]
        assert {r.config["dataset_path"] for r in runs} == {str(tmp_path / "arithmetic.jsonl")}
    finally:
        store.close()
    # the train command points at the sweep command
    assert main(["train", str(path), *common]) == 2
    assert "runs with `grpo-dashboard sweep`" in capsys.readouterr().err



def test_a_field_written_twice_is_refused_with_its_line():
    with pytest.raises(SweepError, match=r"line 2, column 1: .*'beta' is given twice"):
        parse_grid_text("beta: 0.0, 0.04\nbeta: 0.1\n")
    with pytest.raises(ConfigError, match=r"line 4, column 3: .*'beta' is given twice"):
        parse_sweep_config_text("max_steps: 1\nsweep:\n  beta: [0.0]\n  beta: [0.1]\n")
    with pytest.raises(ConfigError, match=r"line 2, column 1: .*'max_steps' is given twice"):
        parse_run_config_text("max_steps: 1\nmax_steps: 2\n")
    assert parse_grid_text("beta: 0.0\nlearning_rate: 0.0001\n") == {"beta": [0.0], "learning_rate": [1e-4]}
