"""Tests for grpo_core.run_config: RunConfig defaults, the YAML round trip, error messages, and the mapping onto TRL's
GRPOConfig and PEFT's LoraConfig (these two import TRL and PEFT)."""

from __future__ import annotations

import pytest

from grpo_core.engine.trl_args import to_grpo_config, to_lora_config
from grpo_core.rewards.compose import RewardSpec
from grpo_core.run_config import (
    DEFAULT_MODEL,
    ConfigError,
    RunConfig,
    load_run_config,
    parse_run_config,
    parse_run_config_text,
)


def test_defaults():
    config = RunConfig()
    assert config.model == DEFAULT_MODEL
    assert config.num_generations == 4
    assert config.beta == 0.02
    assert config.learning_rate == 1e-4  # the quick start's recipe (LoRA learns visibly in 60 steps at this rate)
    assert config.max_completion_length == 24
    assert config.temperature == 1.0
    assert config.max_steps == 60
    assert config.use_lora is True
    assert config.lora_r == 16
    assert config.lora_target_modules == "all-linear"
    assert [(spec.rule, spec.weight) for spec in config.rewards] == [("numeric_answer", 1.0), ("format_regex", 0.5)]
    assert config.prompts_per_step == 2  # 8 completions per step / groups of 4


def test_defaults_are_not_shared_between_instances():
    first, second = RunConfig(), RunConfig()
    first.rewards.append(RewardSpec(rule="length"))
    assert len(second.rewards) == 2


def test_yaml_round_trip(tmp_path):
    config = RunConfig(
        name="round trip",
        model="org/model",
        dataset_id=3,
        rewards=[
            RewardSpec(rule="numeric_answer", weight=1.0),
            RewardSpec(rule="format_regex", weight=-0.5, params={"pattern": r"^\d+\s*$"}, name="fmt"),
        ],
        num_generations=8,
        per_device_train_batch_size=16,
        beta=0.0,
        loss_type="grpo",
        use_lora=False,
        lora_target_modules="q_proj, v_proj",
    )
    path = tmp_path / "run.yaml"
    path.write_text(config.to_yaml(), encoding="utf-8")
    assert load_run_config(path) == config


def test_yaml_of_defaults_round_trips(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(RunConfig().to_yaml(), encoding="utf-8")
    assert load_run_config(path) == RunConfig()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"num_generation": 4}, r"num_generation: Extra inputs are not permitted"),
        ({"beta": -1}, r"beta: Input should be greater than or equal to 0"),
        ({"learning_rate": "fast"}, r"learning_rate: "),
        ({"temperature": 0}, r"temperature: "),
        ({"loss_type": "ppo"}, r"loss_type: "),
        ({"num_generations": 1}, r"num_generations: "),
        ({"num_generations": 3}, r"multiple of num_generations = 3"),
        ({"per_device_train_batch_size": 6, "num_generations": 4}, r"6 completions per step \(per_device_train_batch_size 6"),
        ({"rewards": []}, r"rewards: .*at least one reward rule"),
        ({"rewards": [{"rule": "numeric_answer", "wieght": 1}]}, r"rewards\.0\.wieght"),
    ],
    ids=[
        "unknown",
        "negative-beta",
        "lr-text",
        "temperature-0",
        "loss-type",
        "G-1",
        "G-3",
        "batch-6",
        "no-rewards",
        "spec",
    ],
)
def test_parse_errors_name_source_and_field(data, expected):
    with pytest.raises(ConfigError, match=r"^my source: .*" + expected):
        parse_run_config(data, source="my source")


def test_batch_divisible_across_processes_and_accumulation():
    # 6 per device x 2 processes = 12 completions: groups of 4 fit although 6 alone would not.
    config = RunConfig(per_device_train_batch_size=6, num_processes=2, num_generations=4)
    assert config.prompts_per_step == 3


def test_assignment_is_validated():
    config = RunConfig()
    with pytest.raises(ValueError, match="num_generations"):
        config.num_generations = 3


def test_invalid_yaml_names_line_and_column(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nbeta: [0.1\nlr: 2\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_run_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "not valid YAML" in message
    assert "line 3" in message and "column" in message


@pytest.mark.parametrize(("content", "kind"), [("- a\n- b\n", "list"), ("just text\n", "str"), ("", "NoneType")])
def test_yaml_that_is_not_a_mapping(tmp_path, content, kind):
    path = tmp_path / "run.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=f"expected a mapping of config fields, got {kind}"):
        load_run_config(path)


def test_yaml_with_a_bad_field_names_the_file_and_field(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("max_steps: 0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"run\.yaml: max_steps: "):
        load_run_config(path)


def test_missing_yaml_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_run_config(tmp_path / "absent.yaml")


def test_config_text_in_yaml_or_json_gives_the_same_config():
    config = RunConfig(name="text", max_steps=3, beta=0.02)
    assert parse_run_config_text(config.to_yaml()) == config
    assert parse_run_config_text(config.model_dump_json()) == config
    assert parse_run_config_text('{"max_steps": 5}').max_steps == 5


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max_steps: [1\n", r"^api, line 2, column 1: not valid YAML"),
        ('{"max_steps": 5', r"^api, line 1, column 16: not valid YAML"),
        ("[1, 2]", "^api: expected a mapping of config fields, got list"),
        ('{"max_steps": 0}', r"^api: max_steps: "),
    ],
)
def test_config_text_errors_name_the_source(text, expected):
    with pytest.raises(ConfigError, match=expected):
        parse_run_config_text(text, source="api")


# ------------------------------------------------------------------------------------------ TRL and PEFT


def test_to_grpo_config_maps_fields(tmp_path):
    config = RunConfig(
        rewards=[RewardSpec(rule="numeric_answer", weight=1.0), RewardSpec(rule="length", weight=-0.25)],
        num_generations=2,
        per_device_train_batch_size=4,
        beta=0.1,
        learning_rate=3e-4,
        max_completion_length=32,
        temperature=0.7,
        max_steps=5,
        seed=7,
        logging_steps=2,
    )
    grpo = to_grpo_config(config, tmp_path / "out", use_cpu=True)
    assert grpo.output_dir == str(tmp_path / "out")
    assert grpo.num_generations == 2
    assert grpo.per_device_train_batch_size == 4
    assert grpo.beta == 0.1
    assert grpo.learning_rate == 3e-4
    assert grpo.max_completion_length == 32
    assert grpo.temperature == 0.7
    assert grpo.max_steps == 5
    assert grpo.seed == 7
    assert grpo.logging_steps == 2
    assert grpo.reward_weights == [1.0, -0.25]
    assert grpo.loss_type == config.loss_type
    assert list(grpo.report_to) in ([], ["none"])
    assert grpo.use_cpu is True
    assert getattr(grpo.save_strategy, "value", grpo.save_strategy) == "no"


def test_to_grpo_config_checkpoints_when_asked(tmp_path):
    grpo = to_grpo_config(RunConfig(save_steps=3), tmp_path, use_cpu=False)
    assert getattr(grpo.save_strategy, "value", grpo.save_strategy) == "steps"
    assert grpo.save_steps == 3
    assert grpo.use_cpu is False


@pytest.mark.parametrize(
    ("targets", "expected"),
    [
        ("all-linear", "all-linear"),
        ("  ", "all-linear"),
        ("q_proj, v_proj ,", {"q_proj", "v_proj"}),
        ("o_proj", {"o_proj"}),
    ],
)
def test_to_lora_config(targets, expected):
    lora = to_lora_config(RunConfig(lora_r=8, lora_alpha=24, lora_dropout=0.1, lora_target_modules=targets))
    assert lora.r == 8
    assert lora.lora_alpha == 24
    assert lora.lora_dropout == 0.1
    assert str(lora.task_type).endswith("CAUSAL_LM")
    # PEFT keeps "all-linear" as a string and turns a list of names into a set.
    assert (lora.target_modules if isinstance(lora.target_modules, str) else set(lora.target_modules)) == expected


def test_to_lora_config_is_none_without_lora():
    assert to_lora_config(RunConfig(use_lora=False)) is None


# ------------------------------------------------------------------------------------------------ vLLM


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"use_vllm": True, "device": "cpu"}, r"use_vllm: vLLM generates on a CUDA GPU; set device to auto or cuda"),
        ({"use_vllm": True, "vllm_tensor_parallel_size": 2}, r"vllm_tensor_parallel_size = 2 must divide "
                                                             r"num_processes = 1"),
        ({"use_vllm": True, "vllm_mode": "server", "vllm_gpu_memory_utilization": 0.5},
         r"vllm_gpu_memory_utilization applies to vllm_mode colocate; .*--gpu_memory_utilization"),
        ({"use_vllm": True, "vllm_mode": "server", "vllm_tensor_parallel_size": 2},
         r"vllm_tensor_parallel_size applies to vllm_mode colocate; .*--tensor_parallel_size"),
        ({"vllm_gpu_memory_utilization": 0}, r"vllm_gpu_memory_utilization: .*greater than 0"),
        ({"vllm_gpu_memory_utilization": 1.5}, r"vllm_gpu_memory_utilization: .*less than or equal to 1"),
        ({"vllm_tensor_parallel_size": 0}, r"vllm_tensor_parallel_size: .*greater than or equal to 1"),
    ],
    ids=["cpu", "tp-divides", "server-memory", "server-tp", "memory-0", "memory-1.5", "tp-0"],
)
def test_vllm_options_are_refused_with_advice(data, expected):
    with pytest.raises(ConfigError, match=expected):
        parse_run_config(data, source="run.yaml")


def test_vllm_options_reach_grpo_config(tmp_path):
    config = RunConfig(use_vllm=True, num_processes=2, vllm_tensor_parallel_size=2, vllm_gpu_memory_utilization=0.5)
    grpo = to_grpo_config(config, tmp_path, use_cpu=False)
    assert (grpo.use_vllm, grpo.vllm_mode) == (True, "colocate")
    assert grpo.vllm_gpu_memory_utilization == 0.5
    assert grpo.vllm_tensor_parallel_size == 2
    lifted = parse_run_config({"trl_args": {"vllm_gpu_memory_utilization": 0.7}})  # one home: the run config field
    assert lifted.vllm_gpu_memory_utilization == 0.7 and lifted.trl_args == {}
    server = RunConfig(use_vllm=True, vllm_mode="server", device="cuda")  # defaults are fine with a server
    assert to_grpo_config(server, tmp_path, use_cpu=False).vllm_mode == "server"
