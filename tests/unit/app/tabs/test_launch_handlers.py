"""The Launch tab's handlers, given the form keyed by field name: the try-out bench and the probe show a bad rule
slot's own error (parameters, gate, weight), Launch queues the run through one validation, and a quick start then
Launch queues exactly its recipe."""

from __future__ import annotations

import re

import pytest

from app.tabs.launch import handlers
from app.tabs.launch.form import FORM_FIELDS, RULE_SLOTS, ZERO_MEANS_UNSET, config_to_form, slot_field
from grpo_core.datasets.library import AGENT_TASKS_EXAMPLE, CODE_TASKS_EXAMPLE, QUICK_START_EXAMPLE, delete_dataset
from grpo_core.rewards import get_rule
from grpo_core.run_config import RunConfig, parse_run_config
from grpo_core.submit.quick_starts import quick_start

COMPLETIONS = "82\n---\nThe answer is 82.\n---\n81"



def _bench_values(rule: str, params: str, *, gate: str = "", weight: object = 1.0, slot: int = 2) -> dict:
    """The bench's inputs with ``numeric_answer`` in slot 1 and the bad rule in ``slot``."""
    values = {"bench_row": '{"answer": 82}', "bench_prompt": "", "bench_completions": COMPLETIONS,
              "model": "SmolLM2-135M-Instruct", "dataset_id": None}
    for index in range(1, RULE_SLOTS + 1):
        values |= {slot_field("rule", index): "(none)", slot_field("weight", index): 1.0,
                   slot_field("params", index): "{}", slot_field("gate", index): ""}
    values |= {"rule_1": "numeric_answer", slot_field("rule", slot): rule, slot_field("params", slot): params,
               slot_field("gate", slot): gate, slot_field("weight", slot): weight}
    return values


# (rule, parameters JSON, gate, weight, what the message must say): each a bad rule slot of its own kind
BAD_SLOTS = [
    ("length", '{"max_tokens": "many"}', "", 1.0, r"reward rule 2 \(length\): parameter 'max_tokens'"),
    ("length", '{"max_tokens": -1}', "", 1.0, r"reward rule 2 \(length\): parameter 'max_tokens': must be >= 0"),
    ("numeric_answer", '{"nope": 1}', "", 1.0, "rule 'numeric_answer' has no parameter 'nope'"),
    ("think_answer_format", '{"template_opened_think": "maybe"}', "", 1.0, "'maybe' is not one of"),
    ("format_regex", '{"pattern": "("}', "", 1.0, "parameter 'pattern': invalid regular expression"),
    ("length", '{"max_tokens": ', "", 1.0, r"reward rule 2 \(length\): parameters, line 1, column \d+: not valid JSON"),
    ("length", "[1, 2]", "", 1.0, r"reward rule 2 \(length\): parameters must be a JSON object"),
    ("length", "{}", "numeric_answer > 1", 1.0, r"reward rule 2 \(length\): gate 'numeric_answer > 1'"),
    ("length", "{}", "", "heavy", "could not convert string to float: 'heavy'"),
]


@pytest.mark.parametrize(("rule", "params", "gate", "weight", "message"), BAD_SLOTS)
def test_the_bench_shows_a_bad_rule_slots_error(ctx, rule, params, gate, weight, message):
    values = _bench_values(rule, params, gate=gate, weight=weight)
    table, status = handlers.bench(ctx, None, values)
    assert table.empty and list(table.columns) == ["completion", "total", "advantage"]  # named, not "1 2 3"
    assert status.startswith("❌")
    assert "unpack" not in status
    assert re.search(message, status), status


@pytest.mark.parametrize(("rule", "params", "gate", "weight", "message"), BAD_SLOTS)
def test_the_probe_shows_a_bad_rule_slots_error(ctx, rule, params, gate, weight, message):
    _, status = handlers.probe(ctx, None, _bench_values(rule, params, gate=gate, weight=weight))
    assert status.startswith("❌") and "unpack" not in status
    assert re.search(message, status), status


@pytest.mark.parametrize(("row", "completions", "message"), [
    ("[1]", COMPLETIONS, "dataset row: must be a JSON object"),
    ('{"answer": ', COMPLETIONS, "dataset row"),
    ('{"answer": 82}', "\n---\n".join(["x"] * (handlers.BENCH_MAX_COMPLETIONS + 1)), f"more than the {handlers.BENCH_MAX_COMPLETIONS}"),
])
def test_the_bench_refuses_a_bad_row_or_group(ctx, row, completions, message):
    values = _bench_values("length", "{}") | {"bench_row": row, "bench_completions": completions}
    table, status = handlers.bench(ctx, None, values)
    assert table.empty and status.startswith("❌") and message in status


def test_the_bench_scores_the_named_slots(ctx):
    values = _bench_values("length", '{"max_tokens": 4}', weight=None, slot=4)
    table, status = handlers.bench(ctx, None, values)
    assert status == "3 completions scored."
    assert list(table.columns) == ["completion", "numeric_answer", "length", "total", "advantage"]
    assert table["numeric_answer"].tolist() == [1.0, 1.0, 0.0]
    # a blank weight counts 0 on the bench: the total is the answer rule's alone
    assert table["total"].tolist() == table["numeric_answer"].tolist()


def test_the_bench_and_probe_tables_show_line_breaks(ctx):
    values = _bench_values("length", "{}") | {"bench_completions": "82\nbecause I said so\n---\n82"}
    table, _ = handlers.bench(ctx, None, values)
    assert table["completion"].tolist() == ["82⏎because I said so", "82"]
    table, _ = handlers.probe(ctx, None, values)
    shown = dict(zip(table["probe"], table["completion"], strict=True))
    assert shown["answer_then_line"].startswith("82⏎") and "\n" not in "".join(shown.values())


def test_the_bench_needs_a_rule(ctx):
    values = _bench_values("(none)", "{}") | {"rule_1": "(none)"}
    table, status = handlers.bench(ctx, None, values)
    assert table.empty and status == "❌ choose at least one reward rule"


def test_launch_queues_the_form_validating_once(ctx, monkeypatch):
    """Launch leaves validation to ``submit_run`` (which validates once and returns the run with its warnings)."""
    def no_second_validation(*args, **kwargs):
        raise AssertionError("the Launch handler validated the config itself")

    monkeypatch.setattr(handlers, "validate_run_config", no_second_validation, raising=False)
    monkeypatch.setattr(handlers, "validate_checked_config", no_second_validation, raising=False)
    ticks = []
    monkeypatch.setattr(ctx.launcher, "tick", lambda: ticks.append(1))  # queued, no worker started here
    dataset = ctx.store.find_dataset(QUICK_START_EXAMPLE)
    form = config_to_form(RunConfig(dataset_id=dataset.id, name="from the form", max_steps=3))
    status, run_id = handlers.launch(ctx, None, form)
    assert status.startswith("✅"), status
    [run] = ctx.store.list_runs()
    assert run_id == run.id  # the tab shows this run in the Runs tab
    assert status.startswith(f"✅ Run **#{run.id} from the form** queued: 3 steps"), status
    assert run.config["max_steps"] == 3 and run.config["dataset_id"] == dataset.id
    assert ticks == [1]  # the launcher looks at the queue at once


def test_launch_refuses_a_bad_form_naming_the_field(ctx):
    form = config_to_form(RunConfig(dataset_id=ctx.store.find_dataset(QUICK_START_EXAMPLE).id)) | {"params_1": "[]"}
    status, run_id = handlers.launch(ctx, None, form)
    assert run_id is None
    assert status.startswith("❌ **Not launched.** reward rule 1") and "JSON object" in status
    assert ctx.store.list_runs() == []


# ------------------------------------------------------------------------------------------------ quick starts


def _launched_values(filled: dict) -> dict:
    """The form as the browser sends it after a quick start filled it: each field's value (a dropdown's update
    gives its value), nothing else changed."""
    return {name: value["value"] if isinstance(value, dict) and value.get("__type__") == "update" else value
            for name, value in filled.items() if name in FORM_FIELDS}


def _with_rule_defaults(config: RunConfig) -> RunConfig:
    """``config`` with each rule's parameters completed by the rule's defaults (what the form's slots show)."""
    specs = [spec.model_copy(update={"params": {**get_rule(spec.rule).defaults(), **spec.params}})
             for spec in config.rewards]
    return config.model_copy(update={"rewards": specs})


def test_code_quick_start_then_launch_queues_exactly_the_recipe(ctx, monkeypatch):
    monkeypatch.setattr(ctx.launcher, "tick", lambda: None)  # queued, no worker started here
    chosen = quick_start("code")
    dataset = ctx.store.find_dataset(CODE_TASKS_EXAMPLE)
    filled = handlers.quick_start_form(ctx, "code")
    assert set(FORM_FIELDS) <= set(filled)  # the whole form, not some of it
    assert filled["dataset_id"]["value"] == dataset.id and (f"{CODE_TASKS_EXAMPLE} ({dataset.num_rows} rows)",
                                                           dataset.id) in filled["dataset_id"]["choices"]
    assert filled["clone"] is None and filled["clone_status"].startswith("Form filled with the **code quick start**")
    # the four gated rules, each slot's help shown, and the slots that show are those four
    assert [filled[slot_field("rule", i)] for i in range(1, RULE_SLOTS + 1)] == [
        "code_tests", "code_runtime", "code_style", "length"]
    assert [filled[slot_field("gate", i)] for i in range(1, RULE_SLOTS + 1)] == [
        "", "code_tests >= 0.01", "code_tests >= 0.01", "code_tests >= 0.01"]
    assert all(filled[slot_field("help", i)] for i in range(1, RULE_SLOTS + 1))
    assert handlers.shown_after_clone(filled, [True, True, False, False]) == [True] * RULE_SLOTS

    status, run_id = handlers.launch(ctx, None, _launched_values(filled))
    assert status.startswith("✅"), status
    queued = parse_run_config(ctx.store.get_run(run_id).config)
    assert queued == chosen.for_dataset(dataset.id)
    recipe = chosen.recipe()
    assert queued.model_dump(exclude={"dataset_id", "dataset_path"}) == recipe.model_dump(
        exclude={"dataset_id", "dataset_path"})


def test_agent_quick_start_then_launch_queues_the_recipe_with_its_tool_and_says_which_template(ctx, monkeypatch):
    monkeypatch.setattr(ctx.launcher, "tick", lambda: None)  # queued, no worker started here
    chosen = quick_start("agent")
    dataset = ctx.store.find_dataset(AGENT_TASKS_EXAMPLE)
    filled = handlers.quick_start_form(ctx, "agent")
    assert set(FORM_FIELDS) <= set(filled) and filled["dataset_id"]["value"] == dataset.id
    assert "Qwen2.5 chat template" in filled["clone_status"] and "cannot render tools" in filled["clone_status"]
    assert filled["tools"] == ["calculator"]
    status, run_id = handlers.launch(ctx, None, _launched_values(filled))
    assert status.startswith("✅"), status
    queued = parse_run_config(ctx.store.get_run(run_id).config)
    assert queued == _with_rule_defaults(chosen.for_dataset(dataset.id))
    assert queued.tools == ["calculator"] and queued.max_tool_calling_iterations == chosen.recipe().max_tool_calling_iterations


def test_arithmetic_quick_start_puts_the_form_back_to_the_defaults(ctx, monkeypatch):
    monkeypatch.setattr(ctx.launcher, "tick", lambda: None)
    dataset = ctx.store.find_dataset(QUICK_START_EXAMPLE)
    handlers.quick_start_form(ctx, "code")  # a press of the other one first changes nothing stored
    filled = handlers.quick_start_form(ctx, "arithmetic")
    assert handlers.shown_after_clone(filled, [True] * RULE_SLOTS) == [True, True, False, False]
    # an "off" number box reads 0 as when the form opens, not blank
    assert all(filled[field] == 0 for field in ZERO_MEANS_UNSET if field in filled), {
        field: filled[field] for field in ZERO_MEANS_UNSET if field in filled}
    status, run_id = handlers.launch(ctx, None, _launched_values(filled))
    assert status.startswith("✅"), status
    queued = parse_run_config(ctx.store.get_run(run_id).config)
    expected = _with_rule_defaults(RunConfig(dataset_id=dataset.id))  # the form shows each rule's defaults
    assert queued.model_dump(exclude={"name"}) == expected.model_dump(exclude={"name"})


def test_a_quick_start_whose_example_is_gone_says_so_and_leaves_the_form(ctx, settings):
    dataset = ctx.store.find_dataset(CODE_TASKS_EXAMPLE)
    delete_dataset(ctx.store, settings, dataset.id)
    filled = handlers.quick_start_form(ctx, "code")
    assert list(filled) == ["clone_status"]
    assert filled["clone_status"].startswith("❌") and repr(CODE_TASKS_EXAMPLE) in filled["clone_status"]
    assert handlers.shown_after_clone(filled, [True, False, True, False]) == [True, False, True, False]


def test_a_refilled_form_clears_the_results_of_the_form_before():
    """A quick start or a cloned run refills the form: the last launch's status (its warnings), the bench's rows
    and probe, the preflight's verdict are emptied with it."""
    cleared = handlers.stale_cleared()
    assert set(cleared) == set(handlers.STALE_RESULTS)
    assert cleared["status"] == cleared["bench_status"] == cleared["preflight_verdict"] == ""
    assert cleared["bench_table"].empty and cleared["preflight_table"].empty


def test_the_quick_start_button_empties_the_launch_status(settings):
    from app.server import build_blocks, create_context

    context = create_context(settings)
    try:
        blocks = build_blocks(context)
        [fn] = [f.fn for f in blocks.fns.values()
                if getattr(f.fn, "__qualname__", "").endswith("quick_starter.<locals>.on_quick_start")][:1]
        [status] = [b for b in blocks.blocks.values() if getattr(b, "elem_id", None) == "launch-status"]
        out = fn([True, True, False, False])
        assert out[status] == ""
    finally:
        context.store.close()


def test_a_cloned_runs_recorded_versions_are_text_in_the_clone_status(ctx):
    """A provenance is a script's to write (the ingest API stores any JSON object), and the clone status is Markdown
    on the page of whoever starts from the run: a recorded library version drew an image and a link there
    (Gradio's sanitizer keeps both; round six). The notes are literal text now."""
    config = RunConfig.model_validate({"model": "/nonexistent/model", "dataset_path": "/nonexistent/data.jsonl"})
    run = ctx.store.create_run(name="script", config=config.model_dump(mode="json"), dataset_id=None, max_steps=1,
                               owner="bob")
    planted = "![x](http://evil.example/p.png) [click](http://evil.example/) <img src=http://evil.example/i>"
    ctx.store.update_run(run.id, provenance={"versions": {"trl": planted, "datasets": planted}})
    status = handlers.clone(ctx, None, run.id)["clone_status"]
    assert "library versions changed" in status
    assert "](http" not in status and "<img" not in status and "http://" not in status
