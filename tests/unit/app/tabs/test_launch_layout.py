"""The Launch form shows what applies: rule slots only for chosen rules (+ add rule / remove), the GPU fields only on
a machine with GPUs, vLLM's settings only while vLLM generation is on, the sandbox line only with a code rule."""

from __future__ import annotations

import gradio as gr
import pytest

from app.tabs.launch import handlers
from app.tabs.launch import layout as launch_layout
from app.tabs.launch.form import DEFAULT_SLOTS, NO_RULE, RULE_SLOTS, slot_field
from app.tabs.launch.layout import uses_code_rule
from app.tabs.launch.tab import create_launch_tab


def _build(ctx, monkeypatch, gpus):
    monkeypatch.setattr(launch_layout, "machine_gpus", lambda: gpus)
    with gr.Blocks() as blocks:
        with gr.Tabs():
            with gr.Tab("Launch", id="launch"):
                parts = create_launch_tab(ctx)
            with gr.Tab("Runs", id="runs"):
                gr.Markdown("runs")
    return parts, blocks


def _inside(component, layout) -> bool:
    """Whether ``component`` sits (at any depth) in ``layout``."""
    parent = component.parent
    while parent is not None and parent is not layout:
        parent = parent.parent
    return parent is layout


def _handler(blocks, *, name: str | None = None, output=None):
    """The one event function named ``name``, or the one whose only output is ``output``."""
    found = [f.fn for f in blocks.fns.values()
             if (name is not None and getattr(f.fn, "__name__", "") == name)
             or (output is not None and [o._id for o in f.outputs] == [output._id])]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize(("gpus", "shown"), [([], False), (["0", "1"], True)])
def test_gpu_fields_show_only_on_a_machine_with_gpus(ctx, monkeypatch, gpus, shown):
    parts, blocks = _build(ctx, monkeypatch, gpus)
    assert parts["gpu_fields"].visible is shown
    assert parts["vllm_fields"].visible is False  # vLLM generation is off by default
    for field in ("device", "num_processes", "gpus", "use_vllm"):
        assert _inside(parts[field], parts["gpu_fields"])
    toggle = _handler(blocks, output=parts["vllm_fields"])
    assert toggle(True)["visible"] is shown  # vLLM's settings: with vLLM generation on, on a machine with GPUs
    assert toggle(False)["visible"] is False


def test_only_the_default_rules_slots_show(ctx, monkeypatch):
    parts, _ = _build(ctx, monkeypatch, [])
    for index in range(1, RULE_SLOTS + 1):
        expected = index <= len(DEFAULT_SLOTS) and DEFAULT_SLOTS[index - 1][0] != NO_RULE
        assert parts[slot_field("rule_group", index)].visible is expected
    assert parts["rule_add"].visible is True
    assert parts["sandbox_line"].visible is uses_code_rule(rule for rule, *_ in DEFAULT_SLOTS) is False


def test_add_remove_and_clone_decide_which_slots_show():
    assert handlers.add_rule_slot([True, True, False, False]) == ([True, True, True, False], 3)
    assert handlers.add_rule_slot([False, True, True, True]) == ([True, True, True, True], 1)
    assert handlers.add_rule_slot([True] * 4) == ([True] * 4, None)
    cleared = handlers.slot_cleared(2)
    assert cleared["rule_2"] == NO_RULE and cleared["params_2"] == "{}" and cleared["gate_2"] == ""
    form = {slot_field("rule", i): rule for i, rule in enumerate(["a", NO_RULE, "b", NO_RULE], start=1)}
    assert handlers.shown_after_clone(form, [True] * 4) == [True, False, True, False]
    assert handlers.shown_after_clone({"clone_status": "❌ no"}, [True, False, False, True]) == [True, False, False,
                                                                                               True]


def test_a_code_rule_brings_the_sandbox_line():
    assert uses_code_rule(["numeric_answer", NO_RULE]) is False
    assert uses_code_rule([NO_RULE, "code_tests"]) is True
    assert uses_code_rule(["code_runtime"]) is True
    assert uses_code_rule(["no such rule", ""]) is False


def test_a_launch_goes_to_the_runs_tab_with_the_new_run(ctx, monkeypatch):
    parts, blocks = _build(ctx, monkeypatch, [])
    on_launch = _handler(blocks, name="on_launch")
    monkeypatch.setattr(handlers, "launch", lambda ctx, request, values: ("✅ queued", 7))
    status, run_id, tabs = on_launch(None, {})
    assert (status, run_id) == ("✅ queued", 7)
    assert isinstance(tabs, gr.Tabs) and tabs.selected == "runs"
    monkeypatch.setattr(handlers, "launch", lambda ctx, request, values: ("❌ **Not launched.** no", None))
    status, run_id, tabs = on_launch(None, {})
    assert status.startswith("❌") and run_id == gr.skip() and tabs == gr.skip()  # stays on the form
