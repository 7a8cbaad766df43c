"""A tiny local Llama trained one real step (with a checkpoint) is exported and sampled: the exported YAML re-trains
headless into a fresh data directory, and ``python -m grpo_core.try_model.worker`` samples the base model and the trained
adapter (final or checkpoint) side by side, scored by the run's rules, in a subprocess."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import zipfile

import pandas as pd
import pytest

from grpo_core.run_config import load_run_config
from grpo_core.runs.export import export_run
from grpo_core.settings import load_settings
from grpo_core.submit.queue import submit_run
from grpo_core.training.worker import train_run
from grpo_core.try_model.job import TryModelError, build_request, try_in_subprocess
from storage import RunStatus, Store, sqlite_url
from tests.helpers import REWARDS, tiny_config

WEIGHTS = [r["weight"] for r in REWARDS]
NAMES = [r["rule"] for r in REWARDS]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model_dir):
    """(settings, store, run): one step of the tiny model trained in this process, a checkpoint saved at step 1."""
    root = tmp_path_factory.mktemp("export-sample")
    settings = load_settings(data_dir=root / "data", db_url=sqlite_url(root / "data" / "grpo.db"))
    settings.ensure_dirs()
    store = Store(settings.db_url)
    run = submit_run(store, tiny_config(tiny_model_dir, max_steps=1, save_steps=1, name="to-export")).run
    status = train_run(store, settings, run.id)
    assert status == RunStatus.COMPLETED, store.get_run(run.id).error
    yield settings, store, store.get_run(run.id)
    store.close()


def test_export_writes_metrics_groups_and_adapter_of_a_trained_run(trained):
    settings, store, run = trained
    result = export_run(store, settings, run.id)
    metrics = pd.read_csv(result.metrics)
    assert metrics["step"].tolist() == [1]
    for key in ("reward", "kl", "loss", "rewards/numeric_answer/mean"):
        assert key in metrics.columns
    groups = pd.read_parquet(result.groups)
    assert len(groups) == 8  # 2 groups of 4
    assert {f"reward_{n}" for n in NAMES} <= set(groups.columns)
    first = groups.iloc[0]
    expected = sum(first[f"reward_{n}"] * w for n, w in zip(NAMES, WEIGHTS, strict=True))
    assert math.isclose(first["total_reward"], expected, abs_tol=1e-6)
    assert abs(groups.groupby("row_index")["advantage"].sum()).max() < 1e-3
    assert "adapter/adapter_config.json" in zipfile.ZipFile(result.adapter).namelist()


def test_exported_yaml_retrains_headless_into_a_fresh_data_dir(trained, tmp_path):
    settings, store, run = trained
    result = export_run(store, settings, run.id)
    config = load_run_config(result.config)
    assert config.dataset_path == result.dataset.name  # relative to the YAML, which travels with its dataset
    fresh = tmp_path / "elsewhere"
    completed = subprocess.run(
        [sys.executable, "-m", "app", "train", str(result.config), "--data-dir", str(fresh)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # not the export folder: the dataset path must resolve against the YAML's folder
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    other = Store(sqlite_url(fresh / "grpo.db"))
    try:
        [rerun] = other.list_runs()
        assert rerun.status == RunStatus.COMPLETED and rerun.name == "to-export"
        assert other.group_steps(rerun.id) == [1]
        assert rerun.config["dataset_path"] == str(result.dataset)
        assert {k: v for k, v in rerun.config.items() if k not in ("dataset_path", "dataset_id")} == {
            k: v for k, v in run.config.items() if k not in ("dataset_path", "dataset_id")
        }
    finally:
        other.close()


@pytest.mark.parametrize("weights", ["latest", "checkpoint-1"])
def test_sample_base_and_trained_side_by_side(trained, weights):
    settings, store, run = trained
    request = build_request(
        settings,
        run,
        prompt=[{"role": "user", "content": "What is 20 + 22?"}],
        row={"answer": 42},
        weights=weights,
        num_samples=3,
        max_new_tokens=6,
        seed=7,
    )
    result = try_in_subprocess(request, timeout_s=240)
    assert json.loads(json.dumps(result)) == result  # plain JSON
    assert result["device"] == "cpu" and result["names"] == NAMES and result["weights"] == WEIGHTS
    assert result["prompt_text"].endswith("<|im_start|>assistant\n")  # the chat template, as TRL renders it
    assert set(result["sides"]) == {"base", "trained"}
    assert result["sides"]["trained"]["label"] == f"trained: {'adapter' if weights == 'latest' else weights}"
    for side in result["sides"].values():
        completions = side["completions"]
        assert len(completions) == 3
        for completion in completions:
            assert 1 <= completion["num_tokens"] <= 6
            assert set(completion["rewards"]) == set(NAMES)
            total = sum(completion["rewards"][n] * w for n, w in zip(NAMES, WEIGHTS, strict=True))
            assert math.isclose(completion["total"], total, abs_tol=1e-9)
        assert math.isclose(side["mean_total"], sum(c["total"] for c in completions) / 3, abs_tol=1e-9)


def test_sample_failure_reports_the_reason(trained, tmp_path):
    settings, store, run = trained
    request = build_request(settings, run, prompt="2 + 2 =", row={"answer": 4}, weights="latest", max_new_tokens=2)
    broken = request.model_copy(update={"weights": str(tmp_path)})  # an empty folder: neither adapter nor model
    with pytest.raises(TryModelError, match="neither a PEFT adapter nor a model"):
        try_in_subprocess(broken, timeout_s=240)


def test_greedy_sampling_repeats_its_one_answer(trained):
    settings, store, run = trained
    request = build_request(settings, run, prompt="What is 1 + 1?", row={"answer": 2}, weights=None,
                            num_samples=2, max_new_tokens=4, temperature=0.0)
    result = try_in_subprocess(request, timeout_s=240)
    assert set(result["sides"]) == {"base"}  # no weights: the base model only
    first, second = result["sides"]["base"]["completions"]
    assert first == second
