"""Tests for grpo_core.trl_fields and the run config's TRL knobs: ``trl_args`` checked against the snapshot of TRL's
``GRPOConfig`` fields (unknown names refused with the closest real one, dashboard-owned fields with the reason), the
snapshot matching the installed TRL, and every knob reaching ``GRPOConfig`` through
:func:`grpo_core.engine.trl_args.to_grpo_config` (this test imports TRL; the web process never does)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from grpo_core.run_config import ConfigError, RunConfig, parse_run_config, parse_run_config_text
from grpo_core.trl_fields import (
    GRPO_SECTIONS,
    OWNED_FIELDS,
    PASS_THROUGH_FIELDS,
    SNAPSHOT_PATH,
    check_trl_args,
    describe_trl_field,
    load_trl_fields,
)


def test_snapshot_matches_the_installed_trl():
    import trl
    from trl import GRPOConfig

    from grpo_core.engine.trl_fields import snapshot

    version, fields = load_trl_fields()
    assert version == trl.__version__, "regenerate with python -m grpo_core.engine.trl_fields"
    assert set(fields) == {f.name for f in dataclasses.fields(GRPOConfig) if f.init and not f.name.startswith("_")}
    for name in OWNED_FIELDS:
        assert name in fields, f"{name} is refused as dashboard-owned but TRL has no such field"
    shipped = json.loads(SNAPSHOT_PATH.read_text(encoding="utf-8"))
    assert shipped == snapshot(), "the shipped snapshot is stale: python -m grpo_core.engine.trl_fields"


def test_every_grpo_field_of_the_installed_trl_is_on_the_form_or_passed_through():
    """A GRPOConfig field TRL adds (one it declares itself) fails here until the form shows it (a run config field
    under a heading) or it is named as reachable through trl_args (PASS_THROUGH_FIELDS) or set by the dashboard."""
    from transformers import TrainingArguments
    from trl import GRPOConfig

    from app.tabs.launch.form import FORM_FIELDS

    inherited = {f.name for f in dataclasses.fields(TrainingArguments)}
    own = {f.name for f in dataclasses.fields(GRPOConfig) if f.init and f.name not in inherited}
    assert {name for name, field in load_trl_fields()[1].items() if field.grpo} == own
    handled = set(FORM_FIELDS) | set(RunConfig.model_fields) | PASS_THROUGH_FIELDS | set(OWNED_FIELDS)
    assert not own - handled, f"TRL's GRPO fields neither on the form nor passed through: {sorted(own - handled)}"
    assert not PASS_THROUGH_FIELDS - own, "a pass-through name TRL no longer has"
    check_trl_args({name: load_trl_fields()[1][name].default for name in PASS_THROUGH_FIELDS
                    if load_trl_fields()[1][name].default is not None})  # each one accepted as trl_args
    for _heading, names in GRPO_SECTIONS:
        for name in names:
            assert name in FORM_FIELDS and name in own | {"epsilon"}
            # the run config's default and help are TRL's (epsilon keeps its own, clearer, help)
            assert RunConfig.model_fields[name].default == load_trl_fields()[1][name].default, name


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"loss_type": "ppo"}, "loss_type must be one of grpo, dr_grpo, dapo, bnpo, cispo, sapo, luspo, vespo"),
        ({"importance_sampling_level": "group"}, "importance_sampling_level must be one of token, sequence"),
        ({"scale_rewards": "std"}, "scale_rewards must be one of group, batch, none"),
        ({"trl_args": {"vllm_importance_sampling_mode": "seq"}}, "vllm_importance_sampling_mode must be one of"),
        ({"top_entropy_quantile": 1.5}, "top_entropy_quantile"),
        ({"off_policy_mask_threshold": -0.5}, "off_policy_mask_threshold"),
        ({"vllm_importance_sampling_clip_min": 3.0, "vllm_importance_sampling_clip_max": 2.0},
         r"vllm_importance_sampling_clip_min \(3.0\) must be less than"),
        ({"vllm_importance_sampling_mode": "token_truncate", "vllm_importance_sampling_clip_max": None},
         "needs vllm_importance_sampling_clip_min or"),
        ({"use_adaptive_entropy": True, "entropy_coef_min": 0.5, "entropy_coef_max": 0.1}, "must not exceed"),
    ],
)
def test_grpo_fields_are_checked_before_launch_with_the_reason(values, message):
    with pytest.raises(ConfigError, match=message):
        parse_run_config(values)


def test_the_form_reads_and_writes_the_grpo_fields():
    from app.tabs.launch.form import config_to_form, form_to_config, grpo_help_markdown

    config = parse_run_config({"loss_type": "cispo", "epsilon_high": 5.0, "delta": 1.5, "entropy_coef": 0.01,
                               "use_adaptive_entropy": True, "off_policy_mask_threshold": 0.5,
                               "vllm_importance_sampling_mode": "token_mask", "dataset_id": 1})
    form = config_to_form(config)
    assert form["loss_type"] == "cispo" and form["delta"] == 1.5
    back = form_to_config(form)  # (the rules come back with their parameters' defaults filled in)
    assert back.model_dump(exclude={"rewards"}) == config.model_dump(exclude={"rewards"})
    form["delta"] = 0  # an emptied box: off (TRL's None)
    assert form_to_config(form).delta is None
    form["loss_type"] = "nope"
    with pytest.raises(ConfigError, match="loss_type must be one of"):
        form_to_config(form)
    text = grpo_help_markdown(("loss_type",))
    assert "Dr. GRPO" in text and "`dr_grpo`" in text and "default `'dapo'`" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"mask_truncated_completion": True}, "did you mean mask_truncated_completions"),
        ({"num_generation_eval": 2}, "did you mean num_generations_eval"),
        ({"zzzz": 1}, "zzzz is not a GRPOConfig field of TRL"),
        ({"output_dir": "/tmp/x"}, "output_dir is set by the dashboard: the dashboard writes checkpoints"),
        ({"logging_strategy": "epoch"}, "logging_strategy is set by the dashboard"),
        ({"report_to": ["wandb"]}, "use the run config's report_to"),
        ({"num_generations_eval": "two"}, "num_generations_eval expects"),
    ],
)
def test_bad_trl_args_are_refused_with_the_reason(args, message):
    with pytest.raises(ConfigError, match=message):
        parse_run_config({"trl_args": args})


def test_trl_args_of_run_config_fields_move_to_the_field():
    config = parse_run_config({"trl_args": {"mask_truncated_completions": True, "num_generations_eval": 2}})
    assert config.mask_truncated_completions is True
    assert config.trl_args == {"num_generations_eval": 2}
    with pytest.raises(ConfigError, match="beta is given twice"):
        parse_run_config({"beta": 0.1, "trl_args": {"beta": 0.2}})


def test_trl_args_round_trip_through_yaml():
    config = parse_run_config({"trl_args": {"num_generations_eval": 2, "top_entropy_quantile": 0.8}})
    assert parse_run_config_text(config.to_yaml()) == config
    assert check_trl_args({"top_entropy_quantile": 0.8}) == {"top_entropy_quantile": 0.8}


def test_describe_gives_type_default_and_help():
    text = describe_trl_field("mask_truncated_completions")
    assert text.startswith("mask_truncated_completions (bool, default False): ")
    assert "truncated" in text
    assert describe_trl_field("no_such_field") == ""


def test_eval_needs_one_source():
    with pytest.raises(ConfigError, match="eval_fraction or eval_dataset_id"):
        parse_run_config({"eval_fraction": 0.2, "eval_dataset_id": 3})
    assert parse_run_config({"eval_fraction": 0.2}).evaluates
    assert not parse_run_config({}).evaluates


def test_every_knob_reaches_grpo_config(tmp_path):
    from grpo_core.engine.trl_args import to_grpo_config

    config = parse_run_config(
        {
            "trl_args": {"mask_truncated_completions": True, "num_generations_eval": 2},
            "multi_objective_aggregation": "normalize_then_sum",
            "epsilon_high": 0.28,
            "importance_sampling_level": "sequence",
            "steps_per_generation": 2,
            "top_k": 20,
            "min_p": 0.05,
            "repetition_penalty": 1.1,
            "lr_scheduler_type": "cosine",
            "report_to": ["tensorboard"],
            "eval_fraction": 0.25,
            "eval_steps": 3,
        }
    )
    args = to_grpo_config(config, tmp_path, use_cpu=True, evaluate=True)
    grpo = to_grpo_config(parse_run_config({"loss_type": "sapo", "sapo_temperature_neg": 1.2, "entropy_coef": 0.02,
                                            "top_entropy_quantile": 0.2, "use_bias_correction_kl": False,
                                            "off_policy_mask_threshold": 0.5}), tmp_path, use_cpu=True)
    assert (grpo.loss_type, grpo.sapo_temperature_neg, grpo.entropy_coef) == ("sapo", 1.2, 0.02)
    assert (grpo.top_entropy_quantile, grpo.use_bias_correction_kl, grpo.off_policy_mask_threshold) == (0.2, False, 0.5)
    assert args.mask_truncated_completions is True
    assert args.num_generations_eval == 2
    assert args.multi_objective_aggregation == "normalize_then_sum"
    assert args.epsilon_high == 0.28
    assert args.importance_sampling_level == "sequence"
    assert args.steps_per_generation == 2
    assert (args.top_k, args.min_p, args.repetition_penalty) == (20, 0.05, 1.1)
    assert args.lr_scheduler_type == "cosine"
    assert args.report_to == ["tensorboard"]
    assert args.eval_strategy == "steps" and args.eval_steps == 3
    assert args.per_device_eval_batch_size % config.num_generations == 0
    plain = to_grpo_config(parse_run_config({}), tmp_path, use_cpu=True)
    assert plain.report_to == [] or plain.report_to == "none" or plain.report_to == ["none"]
    assert plain.eval_strategy == "no"


def test_num_train_epochs_caps_max_steps():
    from grpo_core.engine.trl_args import max_steps_for

    config = parse_run_config({"max_steps": 100, "num_train_epochs": 2, "per_device_train_batch_size": 8})
    assert config.prompts_per_step == 2
    assert max_steps_for(config, 10) == 10  # ceil(2 × 10 / 2)
    assert max_steps_for(config, 1000) == 100  # max_steps is the cap
    assert max_steps_for(parse_run_config({"max_steps": 7}), 1000) == 7


def test_trl_args_may_replace_the_workers_other_choices(tmp_path):
    from grpo_core.engine.trl_args import to_grpo_config

    config = parse_run_config({"trl_args": {"log_completions": True, "per_device_eval_batch_size": 12}})
    args = to_grpo_config(config, tmp_path, use_cpu=True)
    assert args.log_completions is True and args.per_device_eval_batch_size == 12


def test_compare_lists_the_grpo_fields_two_runs_differ_in():
    from app.tabs.runs.compare import config_differences

    base = parse_run_config({}).model_dump(mode="json")
    other = parse_run_config({"loss_type": "dr_grpo", "importance_sampling_level": "sequence",
                              "delta": 1.5}).model_dump(mode="json")
    table = config_differences({"#1 base": base, "#2 gspo": other})
    assert list(table["field"]) == ["delta", "importance_sampling_level", "loss_type"]
    assert [str(v) for v in table["#2 gspo"]] == ["1.5", "sequence", "dr_grpo"]
    assert [str(v) for v in table["#1 base"]] == ["None", "token", "dapo"]
