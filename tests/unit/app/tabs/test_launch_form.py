"""Tests of the Launch form's mapping to and from a RunConfig (the clone picker fills the form with
``config_to_form``; Launch reads it back with ``form_to_config``)."""

from __future__ import annotations

import json

import pytest

from app.tabs.launch.form import (
    FORM_FIELDS,
    HYPERPARAMETERS,
    NO_RULE,
    RULE_SLOTS,
    config_to_form,
    form_omissions,
    form_to_config,
    slot_field,
)
from grpo_core.rewards import get_rule
from grpo_core.run_config import ConfigError, RunConfig


def _full(rule: str, weight: float, **params) -> dict:
    return {"rule": rule, "weight": weight, "params": {**get_rule(rule).defaults(), **params}}


FORM_CONFIGS = [
    RunConfig(dataset_id=3, rewards=[_full(s.rule, s.weight, **s.params) for s in RunConfig().rewards]),
    RunConfig.model_validate(
        {
            "name": "code run",
            "model": "/models/tiny",
            "dataset_id": 7,
            "rewards": [
                _full("code_tests", 0.7, timeout_s=2.0),
                _full("code_style", 0.1),
                _full("code_runtime", 0.1),
                _full("length", 0.1, max_tokens=192, overlong_buffer=64),
            ],
            "num_generations": 8,
            "per_device_train_batch_size": 16,
            "max_steps": 3,
            "learning_rate": 3e-6,
            "beta": 0.0,
            "max_completion_length": 256,
            "temperature": 1.2,
            "seed": 7,
            "use_lora": False,
            "lora_r": 8,
            "loss_type": "grpo",
            "device": "cpu",
        }
    ),
    RunConfig.model_validate({"dataset_id": 1, "rewards": [_full("format_regex", -0.5, pattern=r"^\d+$")]}),
]


@pytest.mark.parametrize("config", FORM_CONFIGS, ids=["defaults", "everything", "one negative rule"])
def test_config_round_trips_through_the_form(config: RunConfig):
    form = config_to_form(config)
    assert list(form) == FORM_FIELDS
    assert form_to_config(form) == config
    assert form_omissions(config) == []


def test_form_round_trips_through_a_config():
    values = {
        "rule_1": "numeric_answer", "weight_1": 1.0, "params_1": json.dumps({"tolerance": 0.5}),
        "rule_2": NO_RULE, "weight_2": 1.0, "params_2": "{}",
        "rule_3": "length", "weight_3": 0.25,
        "params_3": json.dumps({"min_tokens": 1, "max_tokens": 8, "overlong_buffer": 0}),
        "rule_4": NO_RULE, "weight_4": 1.0, "params_4": "{}",
    }
    hyper = {field: getattr(RunConfig(), field) for field, *_ in HYPERPARAMETERS} | {"max_steps": 5}
    config = form_to_config({"dataset_id": 2, "model": "SmolLM2-135M-Instruct", "name": "mine", **values, **hyper})
    form = config_to_form(config)
    rules = [form[slot_field("rule", i)] for i in range(1, RULE_SLOTS + 1)]
    assert rules == ["numeric_answer", "length", NO_RULE, NO_RULE]  # empty slots last
    assert json.loads(form["params_2"]) == {"min_tokens": 1, "max_tokens": 8, "overlong_buffer": 0}
    assert form["max_steps"] == 5
    assert form_to_config(form) == config


def test_partial_params_come_back_with_their_defaults():
    config = RunConfig.model_validate({"dataset_id": 1, "rewards": [{"rule": "length", "params": {"max_tokens": 9}}]})
    form = config_to_form(config)
    assert json.loads(form["params_1"]) == {**get_rule("length").defaults(), "max_tokens": 9}
    again = form_to_config(form)
    assert again.rewards[0].params["max_tokens"] == 9
    assert get_rule("length").build(again.rewards[0].params)(["a b c"]) == get_rule("length").build(
        config.rewards[0].params
    )(["a b c"])


def test_form_omissions_name_what_the_form_cannot_hold():
    config = RunConfig.model_validate(
        {
            "dataset_path": "/data/x.jsonl",
            "rewards": [{"rule": "numeric_answer", "name": "correct"}] + [{"rule": "length"}] * 4,
            "top_p": 0.9,
            "max_grad_norm": 0.3,
            "epsilon": 0.3,  # on the form since TRL's GRPO fields are (its "Loss and clipping" heading)
        }
    )
    notes = "\n".join(form_omissions(config))
    assert "only the first 4 reward rules" in notes and "left out: length" in notes
    assert "metric names" in notes and "correct" in notes
    assert "dataset_path /data/x.jsonl" in notes
    assert "top_p=0.9" in notes and "max_grad_norm=0.3" in notes
    assert "epsilon=0.3" not in notes and config_to_form(config)["epsilon"] == 0.3
    assert list(config_to_form(config)) == FORM_FIELDS


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", None), ("  ", None), ("code_tests >= 0.01", ("code_tests", 0.01)), ("length>=1", ("length", 1.0)),
     ("numeric_answer_2 >= -0.5", ("numeric_answer_2", -0.5))],
)
def test_gate_text_parses(text, expected):
    from app.tabs.launch.form import gate_text, parse_gate

    gate = parse_gate(1, "code_style", text)
    assert (None if gate is None else (gate.rule, gate.min)) == expected
    assert parse_gate(1, "code_style", gate_text(gate)) == gate


@pytest.mark.parametrize("text", ["code_tests > 0.01", "code_tests >= lots", ">= 1"])
def test_bad_gate_text_names_the_slot(text):
    from app.tabs.launch.form import parse_gate
    from grpo_core.run_config import ConfigError

    with pytest.raises(ConfigError, match=r"reward rule 2 \(code_style\): gate"):
        parse_gate(2, "code_style", text)


def test_gated_code_recipe_round_trips_through_the_form():
    from pathlib import Path

    from grpo_core.run_config import load_run_config

    config = load_run_config(Path(__file__).resolve().parents[4] / "examples" / "code_gated.yaml")
    config = config.model_copy(update={"dataset_id": 1})
    form = config_to_form(config)
    assert [form[slot_field("gate", i)] for i in range(1, RULE_SLOTS + 1)] == ["", "code_tests >= 0.01", "code_tests >= 0.01", "code_tests >= 0.01"]
    again = form_to_config(form).rewards
    assert [(s.rule, s.weight, s.gate) for s in again] == [(s.rule, s.weight, s.gate) for s in config.rewards]
    assert [s.params for s in again] == [{**get_rule(s.rule).defaults(), **s.params} for s in config.rewards]


def test_advanced_fields_round_trip_through_the_form():
    from app.tabs.launch.form import ADVANCED_FIELDS

    config = RunConfig.model_validate(
        {
            "dataset_id": 2,
            "rewards": [_full("numeric_answer", 1.0)],
            "mask_truncated_completions": True,
            "epsilon_high": 0.28,
            "importance_sampling_level": "sequence",
            "lr_scheduler_type": "cosine",
            "eval_fraction": 0.2,
            "eval_steps": 5,
            "report_to": ["tensorboard"],
            "trl_args": {"num_generations_eval": 2},
        }
    )
    form = config_to_form(config)
    assert {field for field, *_ in ADVANCED_FIELDS} <= set(form)
    assert form["trl_args"] == "num_generations_eval: 2\n"
    assert form_to_config(form) == config
    assert form_omissions(config) == []


def test_trl_args_text_is_checked_with_the_closest_field():
    from app.tabs.launch.form import parse_trl_args_text, trl_args_help

    assert parse_trl_args_text("") == {}
    assert parse_trl_args_text('{"mask_truncated_completions": true}') == {"mask_truncated_completions": True}
    with pytest.raises(ConfigError, match="not valid YAML"):
        parse_trl_args_text("a: [")
    with pytest.raises(ConfigError, match="mapping"):
        parse_trl_args_text("- a")
    assert "did you mean num_generations_eval" in trl_args_help("num_generation_eval: 2")
    assert "set by the dashboard" in trl_args_help("output_dir: /tmp")
    assert trl_args_help("num_generations_eval: 2").startswith("- num_generations_eval (int | None")
    base = {"dataset_id": 1, "model": "m", "name": "", "rule_1": "numeric_answer", "weight_1": 1.0, "params_1": "{}"}
    base |= {field: getattr(RunConfig(), field) for field, *_ in HYPERPARAMETERS}
    config = form_to_config(base | {"trl_args": "mask_truncated_completions: true"})
    assert config.mask_truncated_completions is True and config.trl_args == {}
    empty = {"epsilon_high": 0, "steps_per_generation": 0, "min_p": 0.0}  # what the browser sends for empty boxes
    config = form_to_config(base | empty)
    assert (config.epsilon_high, config.steps_per_generation, config.min_p) == (None, None, None)


def test_processes_gpus_and_vllm_options_round_trip_through_the_form():
    config = RunConfig.model_validate(
        {
            "dataset_id": 2,
            "rewards": [_full("numeric_answer", 1.0)],
            "num_processes": 2,
            "gpus": "0,1",
            "use_vllm": True,
            "vllm_gpu_memory_utilization": 0.45,
            "vllm_tensor_parallel_size": 2,
        }
    )
    form = config_to_form(config)
    assert (form["num_processes"], form["gpus"]) == (2, "0,1")
    assert form["vllm_tensor_parallel_size"] == 2
    assert form_to_config(form) == config
    assert form_omissions(config) == []
    # as the browser sends them: a Number's float, the hidden GPU box's empty text (auto)
    form |= {"num_processes": 2.0, "gpus": ""}
    assert form_to_config(form).gpus == "" and form_to_config(form).num_processes == 2
    form["num_processes"] = 3.0
    with pytest.raises(ConfigError, match="vllm_tensor_parallel_size = 2 must divide num_processes = 3"):
        form_to_config(form)


def test_the_launch_form_starts_from_the_quick_start_dataset(settings):
    from app.server import build_blocks, create_context
    from grpo_core.datasets.library import QUICK_START_EXAMPLE

    ctx = create_context(settings)
    try:
        blocks = build_blocks(ctx)
        [dataset] = [block for block in blocks.blocks.values() if block.elem_id == "launch-dataset"]
        assert dataset.value == ctx.store.find_dataset(QUICK_START_EXAMPLE).id
    finally:
        ctx.store.close()


def test_field_kinds_and_choices_come_from_the_run_config():
    import typing

    from app.tabs.launch.form import field_choices, field_kind

    kinds = {"use_lora": "checkbox", "num_generations": "integer", "learning_rate": "number", "loss_type": "dropdown",
             "report_to": "multiselect", "epsilon_high": "number", "steps_per_generation": "integer",
             "eval_dataset_id": "dataset", "trl_args": "mapping", "gpus": "gpus"}
    assert {field: field_kind(field) for field in kinds} == kinds
    for field in ("device", "lr_scheduler_type", "vllm_mode"):
        assert field_choices(field) == list(typing.get_args(RunConfig.model_fields[field].annotation))
    # TRL's text fields of a closed set: the values the installed TRL documents (the snapshot), as dropdowns
    assert field_choices("loss_type") == ["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"]
    assert field_choices("importance_sampling_level") == ["token", "sequence"]
    assert field_kind("vllm_importance_sampling_mode") == "dropdown" and field_kind("delta") == "number"
    assert field_choices("report_to") == ["trackio", "tensorboard", "wandb"]
    with pytest.raises(ValueError, match="learning_rate: the run config declares no choices"):
        field_choices("learning_rate")


def test_the_launch_tab_offers_the_configs_choices_and_reads_the_form_by_name(settings):
    """The built tab's dropdowns list what RunConfig declares, with its help; its preview handler, given the form as
    Gradio gives a set of inputs (a dict by component, in any order), reads each value by its field's name."""
    import gradio as gr
    import yaml

    from app.server import create_context
    from app.tabs.launch.form import ADVANCED_FIELDS, GPU_FIELDS, VLLM_FIELDS, field_choices, field_kind
    from app.tabs.launch.tab import create_launch_tab

    ctx = create_context(settings)
    try:
        with gr.Blocks() as blocks:
            parts = create_launch_tab(ctx)
        for field, *_ in HYPERPARAMETERS + GPU_FIELDS + VLLM_FIELDS + ADVANCED_FIELDS:
            if field_kind(field) in ("dropdown", "multiselect"):
                assert [value for _, value in parts[field].choices] == field_choices(field)
                assert parts[field].info == RunConfig.model_fields[field].description
        config = RunConfig.model_validate({"dataset_id": 1, "max_steps": 7, "beta": 0.0, "loss_type": "grpo",
                                           "rewards": [_full("length", 0.5), _full("numeric_answer", 2.0)]})
        form = config_to_form(config)
        data = {parts[name]: form[name] for name in reversed(FORM_FIELDS)}
        [preview] = [f.fn for f in blocks.fns.values() if getattr(f.fn, "__name__", "") == "on_preview"]
        shown = yaml.safe_load(preview(data))
        assert (shown["max_steps"], shown["beta"], shown["loss_type"]) == (7, 0.0, "grpo")
        assert [(r["rule"], r["weight"]) for r in shown["rewards"]] == [("length", 0.5), ("numeric_answer", 2.0)]
    finally:
        ctx.store.close()
