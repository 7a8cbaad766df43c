"""The rescoring child job end to end on a store: the recorded groups re-scored in ``python -m
grpo_core.rescore.worker``, compared, stored as a rescoring beside the run (the run's own groups untouched); a
cancel kills the child; bad requests are refused before anything runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from grpo_core.access.boundary import Boundary
from grpo_core.rescore.job import rescore_run, start_rescoring
from grpo_core.rescore.request import RescoreError, parse_request
from tests.rescore_fixtures import NEW_RULES, STEPS, seed_run


def _request(run_id: int, rules=NEW_RULES, **more):
    return parse_request({"run_id": run_id, "rewards": rules, **more})


def test_rescoring_compares_and_leaves_the_run_as_recorded(store, tmp_path):
    run_id = seed_run(store, tmp_path)
    before = [(g.id, [(c.total_reward, c.advantage) for c in g.completions]) for g in store.groups_at(run_id, 2)]
    result = rescore_run(store, _request(run_id), workdir=tmp_path / "work", workers=1)

    assert result["rules"] == ["numeric_answer", "format_regex"]
    assert [s["step"] for s in result["steps"]] == list(range(1, STEPS + 1))
    assert result["num_completions"] == STEPS * 3 * 4
    step = result["steps"][0]
    # each group: right+tags, right, wrong+tags, empty. Before: totals 2, 1, 1, 0 (mean 1); after: 1.5, 1, 0, 0
    assert step["reward_before"] == pytest.approx(1.0)
    assert step["reward_after"] == pytest.approx(0.625)
    assert step["rules"]["format_regex"] == {"before": pytest.approx(0.5), "after": pytest.approx(0.25)}
    assert step["frac_reward_zero_std_before"] == 0.0 == step["frac_reward_zero_std_after"]
    # the wrong-but-tagged completion (advantage 0 before: at the mean) goes negative; the plain right answer
    # (0 before) goes positive: moved, not flipped; no sign changes from 0
    assert result["summary"]["groups_changed"] == STEPS * 3
    changed = result["changed_groups"][0]
    wrong = changed["completions"][2]
    assert wrong["before"]["advantage"] == pytest.approx(0.0, abs=1e-9)
    assert wrong["after"]["advantage"] < -0.5
    assert wrong["after"]["rewards"]["format_regex"] == 0.0  # the gate holds it back
    stored = store.list_rescorings(run_id)
    assert [r.status for r in stored] == ["completed"] and stored[0].result["summary"] == result["summary"]
    after = [(g.id, [(c.total_reward, c.advantage) for c in g.completions]) for g in store.groups_at(run_id, 2)]
    assert after == before
    assert not any((tmp_path / "work").iterdir())  # the child's folder is removed


def test_a_changed_rule_flips_signs_and_steps_and_samples_bound_the_selection(store, tmp_path):
    run_id = seed_run(store, tmp_path)
    inverted = [{"rule": "numeric_answer", "weight": -1.0}]
    result = rescore_run(store, _request(run_id, inverted, first_step=2, last_step=3, sample=4, seed=1),
                         workdir=tmp_path, workers=1)
    assert result["num_groups"] == 4 and {s["step"] for s in result["steps"]} <= {2, 3}
    # right answers paid -1: the tagged right answer (above the mean before) falls below it, the empty one rises
    assert result["summary"]["sign_changes"] == 2 * 4
    top = result["changed_groups"][0]
    assert top["sign_changes"] == 2
    assert [c["after"]["advantage"] > 0 for c in top["completions"]] == [False, False, True, True]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"first_step": 9, "last_step": 12}, "no recorded groups in steps 9-12"),
        ({"first_step": 3, "last_step": 2}, "first_step 3 is after last_step 2"),
        ({"sample": 0}, "sample"),
        ({"sample": 10**9}, "sample"),
        ({"rewards": [{"rule": "no_such_rule"}]}, "no_such_rule"),
        ({"rewards": [{"rule": "reward_model", "params": {"model": "x"}}]}, "reward model"),
        ({"rewards": [{"rule": "format_regex", "gate": {"rule": "missing"}}]}, "missing"),
        ({"rewards": [{"rule": "numeric_answer"}] * 17}, "rewards"),
        ({"rewards": []}, "rewards"),
        ({"scale_rewards": "loud"}, "scale_rewards"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_requests_are_refused_before_anything_runs(store, tmp_path, values, message):
    run_id = seed_run(store, tmp_path)
    with pytest.raises(RescoreError, match=message):
        rescore_run(store, parse_request({"run_id": run_id, "rewards": NEW_RULES, **values}), workdir=tmp_path)
    assert store.list_rescorings(run_id) == []


def test_a_selection_over_the_bounds_is_refused(store, tmp_path, monkeypatch):
    import grpo_core.rescore.job as job
    import grpo_core.rescore.request as request

    run_id = seed_run(store, tmp_path)
    monkeypatch.setattr(request, "MAX_COMPLETIONS", 10)
    with pytest.raises(RescoreError, match="narrow the steps or set sample"):
        job.rescore_run(store, _request(run_id), workdir=tmp_path)
    assert job.rescore_run(store, _request(run_id, sample=2), workdir=tmp_path, workers=1)["num_groups"] == 2


def test_a_login_may_not_rescore_with_a_plugin_outside_its_boundary(store, tmp_path):
    run_id = seed_run(store, tmp_path)
    plugin = tmp_path / "evil.py"
    plugin.write_text("import os\ndef reward(completions, **kw):\n    os.system('touch pwned')\n    return [1.0]*len(completions)\n")
    rules = [{"rule": "plugin", "params": {"target": f"{plugin}:reward"}}]
    boundary = Boundary(enforced=True, plugin_dirs=(tmp_path / "allowed",))
    with pytest.raises(RescoreError, match="not a file of a plugin folder"):
        rescore_run(store, _request(run_id, rules), workdir=tmp_path, boundary=boundary)
    assert not Path("pwned").exists() and store.list_rescorings(run_id) == []


def test_a_rule_that_raises_is_reported_not_fatal(store, tmp_path):
    run_id = seed_run(store, tmp_path)
    plugin = tmp_path / "broken.py"
    plugin.write_text("def reward(completions, **kw):\n    raise RuntimeError('boom')\n")
    rules = [{"rule": "numeric_answer"}, {"rule": "plugin", "params": {"target": f"{plugin}:reward"}}]
    result = rescore_run(store, _request(run_id, rules), workdir=tmp_path, workers=1)
    assert "boom" in result["errors"]["reward"]
    assert result["steps"][0]["rules"]["reward"]["after"] is None


def test_cancel_kills_the_child(store, tmp_path):
    run_id = seed_run(store, tmp_path)
    plugin = tmp_path / "slow.py"
    plugin.write_text("import time\ndef slow(completions, **kw):\n    time.sleep(0.5)\n    return [1.0]*len(completions)\n")
    rules = [{"rule": "plugin", "params": {"target": f"{plugin}:slow"}}]
    info = start_rescoring(store, _request(run_id, rules), workdir=tmp_path / "work", workers=1)
    deadline = time.monotonic() + 60
    while store.get_rescoring(info.id).done == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert 0 < store.get_rescoring(info.id).done < info.total  # progress is reported while it runs
    store.request_rescoring_cancel(info.id)
    while store.get_rescoring(info.id).status == "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    final = store.get_rescoring(info.id)
    assert final.status == "cancelled" and final.result is None
    deadline = time.monotonic() + 10
    while (tmp_path / "work").exists() and any((tmp_path / "work").iterdir()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any((tmp_path / "work").iterdir())


def test_plugin_rules_spread_over_processes_give_the_same_numbers(store, tmp_path):
    run_id = seed_run(store, tmp_path)
    plugin = tmp_path / "short.py"
    plugin.write_text("import os, time\ndef short(completions, **kw):\n    return [1.0 / (1 + len(c)) for c in completions]\n"
                      "def pid(completions, **kw):\n    time.sleep(0.5)  # a group takes a while: one process cannot take them all\n"
                      "    return [float(os.getpid())] * len(completions)\n")
    rules = [{"rule": "numeric_answer"}, {"rule": "plugin", "params": {"target": f"{plugin}:short"}}]
    alone = rescore_run(store, _request(run_id, rules), workdir=tmp_path, workers=1)
    spread = rescore_run(store, _request(run_id, rules), workdir=tmp_path, workers=2)
    for result in (alone, spread):
        result.pop("rescoring_id")
    assert alone == spread
    pids = rescore_run(store, _request(run_id, [{"rule": "plugin", "params": {"target": f"{plugin}:pid"}}]),
                       workdir=tmp_path, workers=2)
    seen = {c["after"]["rewards"]["pid"] for g in pids["changed_groups"] for c in g["completions"]}
    assert len(seen) == 2  # two worker processes scored the groups
