"""A tiny-model run with a held-out eval fraction: TRL evaluates every ``eval_steps`` steps, the recorder stores the
eval metrics under TRL's names (``eval_reward``, ``eval_rewards/<fn>/mean``) at the eval steps, and the eval groups
with ``split="eval"`` beside the train groups of the same step, from the held-out rows only."""

from __future__ import annotations

import pytest

from grpo_core.datasets.rows import eval_row_indices
from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from storage import RunStatus
from tests.helpers import tiny_config


@pytest.mark.backends("sqlite")
def test_eval_fraction_records_eval_reward_at_the_eval_steps(store, settings, tiny_model_dir):
    config = tiny_config(tiny_model_dir, max_steps=4, eval_fraction=0.01, eval_steps=2,
                         trl_args={"mask_truncated_completions": True})
    assert config.mask_truncated_completions is True
    run = submit_run(store, config).run
    assert Launcher(store, settings).wait_idle(timeout_s=300), "the run did not finish"
    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error

    by_key: dict[str, dict[int, float | None]] = {}
    for point in store.metrics_since(run.id):
        by_key.setdefault(point.key, {})[point.step] = point.value
    assert sorted(by_key["eval_reward"]) == [2, 4]
    assert all(v is not None for v in by_key["eval_reward"].values())
    for rule in ("numeric_answer", "format_regex", "length"):
        assert sorted(by_key[f"eval_rewards/{rule}/mean"]) == [2, 4]
    assert sorted(by_key["reward"]) == [1, 2, 3, 4]  # the train reward keeps its own points

    held_out = set(eval_row_indices(400, 0.01, config.seed))
    assert len(held_out) == 4
    groups = store.groups_at(run.id, 2)
    train = [g for g in groups if g.split == "train"]
    evals = [g for g in groups if g.split == "eval"]
    assert len(train) == 2 and not {g.row_index for g in train} & held_out
    assert {g.row_index for g in evals} == held_out  # every held-out row, one group of G each
    for group in evals:
        assert [c.index for c in group.completions] == [0, 1, 2, 3]
        assert "answer" in group.extra
    assert {g.split for g in store.groups_at(run.id, 3)} == {"train"}
