"""Tests for grpo_core.trl_fields and the run config's TRL knobs: ``trl_args`` checked against the snapshot of TRL's
``GRPOConfig`` fields (unknown names refused with the closest real one, dashboard-owned fields with the reason), the
snapshot matching the installed TRL, and every knob reaching ``GRPOConfig`` through
:func:`grpo_core.engine.trl_args.to_grpo_config` (this test imports TRL; the web process never does)."""

from __future__ import annotations

import dataclasses

import pytest

from grpo_core.run_config import ConfigError, parse_run_config, parse_run_config_text
from grpo_core.trl_fields import OWNED_FIELDS, check_trl_args, describe_trl_field, load_trl_fields


def test_snapshot_matches_the_installed_trl():
    import trl
    from trl import GRPOConfig

    version, fields = load_trl_fields()
    assert version == trl.__version__, "regenerate with python -m grpo_core.engine.trl_fields"
    assert set(fields) == {f.name for f in dataclasses.fields(GRPOConfig) if f.init and not f.name.startswith("_")}
    for name in OWNED_FIELDS:
        assert name in fields, f"{name} is refused as dashboard-owned but TRL has no such field"


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
