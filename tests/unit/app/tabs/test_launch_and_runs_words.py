"""The Launch and Runs tabs' words: the quick start's time hint says what a busy machine does to it, the batch error
speaks of "completions per step" as the form does, and the Runs table's reward is a recent mean that says so."""

from __future__ import annotations

import pytest

from app.tabs.launch.layout import busy_sentence, quick_start_note
from app.tabs.runs.tab import runs_frame
from app.views.runs import RECENT_REWARD_STEPS, RUNS_TABLE_HEADERS
from grpo_core.run_config import ConfigError, parse_run_config
from tests.store_helpers import record_metrics


def test_the_time_hint_speaks_of_a_busy_machine():
    quiet = quick_start_note(load=(0.5, 2))
    assert "on two quiet CPU cores" in quiet and "on a busy machine a step takes several times longer" in quiet
    assert "busy now" not in quiet
    busy = busy_sentence((8.2, 2))
    assert "This machine is busy now (load 8.2 on 2 CPUs): expect about 4.1× those times." in busy


def test_a_quick_start_whose_time_was_not_measured_claims_no_minutes(monkeypatch):
    import dataclasses

    from app.tabs.launch import layout

    note = quick_start_note(load=(0.5, 2))
    assert "about 8 min on two quiet CPU cores" in note and "about 45 min" in note and "about 75 min" in note
    unmeasured = dataclasses.replace(layout.QUICK_STARTS[2], seconds_per_step=None,
                                     time_note="time per step not measured on quiet cores yet")
    monkeypatch.setattr(layout, "QUICK_STARTS", (*layout.QUICK_STARTS[:2], unmeasured))
    agent = quick_start_note(load=(0.5, 2)).split("**Agent quick start**")[1].split(";")[0]
    assert "not measured on quiet cores yet" in agent and " min" not in agent


def test_the_template_note_shows_the_call_markup_as_code_not_as_html():
    """Markdown drops ``<tool_call>`` as an unknown HTML tag: the note must carry it in a code span."""
    import re

    note = quick_start_note(load=(0.5, 2))
    assert "calls as `<tool_call>{...}</tool_call>`" in note
    assert not re.search(r"<tool_call>", re.sub(r"`[^`]*`", "", note))  # no markup left outside code spans


def test_the_batch_error_uses_the_forms_words():
    with pytest.raises(ConfigError) as caught:
        parse_run_config({"num_generations": 3, "per_device_train_batch_size": 8})
    message = str(caught.value)
    assert "8 completions per step (per_device_train_batch_size 8" in message
    assert "must be a multiple of num_generations = 3" in message and "try 9 completions per step" in message


def test_the_runs_table_reward_is_a_recent_mean_and_says_so(ctx):
    header = RUNS_TABLE_HEADERS[4]
    assert header == f"reward (mean of last {RECENT_REWARD_STEPS} steps)"
    run = ctx.store.create_run(name="r", config={}, dataset_id=None, max_steps=30)
    ctx.store.claim_run(run.id, worker_pid=1)
    for step in range(1, 21):
        record_metrics(ctx.store, run.id, step, {"reward": 1.0 if step == 20 else 0.0 if step > 10 else 5.0}, 0.0)
    ctx.store.heartbeat(run.id, step=20)
    frame = runs_frame(ctx)
    assert float(frame[header].iloc[0]) == pytest.approx(0.1)  # steps 11-20: nine 0.0 and one 1.0, not the last 1.0
