"""A model to serve: a run's LoRA adapter merged into the tiny base model by the merge worker (a child process), saved
as a Hugging Face folder (safetensors, tokenizer, generation config) whose greedy completions equal base + adapter."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_core.merge.job import MergeError, merge_run
from grpo_core.runs.files import adapter_dir

PROMPTS = ["What is 12 + 30?", "def add(a, b):", "<think>"]


def _greedy(model, tokenizer, prompt):
    ids = tokenizer(prompt, return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=12, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return out[0].tolist()


def test_merged_folder_loads_and_matches_base_plus_adapter(store, settings, tiny_model_dir):
    run = store.create_run(name="to-merge", config={"model": str(tiny_model_dir)}, dataset_id=None, max_steps=1)
    folder = settings.runs_dir / "run-to-merge"
    store.update_run(run.id, run_dir=str(folder))
    run = store.get_run(run.id)
    with pytest.raises(MergeError, match="no adapter yet"):
        list(merge_run(settings, run))

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    # init_lora_weights=False: B is random too, so the adapter changes the outputs and the merge is visible
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                                 init_lora_weights=False))
    peft_model.save_pretrained(adapter_dir(folder))

    lines = list(merge_run(settings, run, poll_s=0.1))
    merged_dir = lines[-1]
    assert any("applying the adapter" in line for line in lines)
    names = {p.name for p in __import__("pathlib").Path(merged_dir).iterdir()}
    assert {"model.safetensors", "config.json", "generation_config.json", "tokenizer_config.json"} <= names
    assert not any(name.startswith("adapter") for name in names)

    tokenizer = AutoTokenizer.from_pretrained(merged_dir)
    merged = AutoModelForCausalLM.from_pretrained(merged_dir).eval()
    reference = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32), str(adapter_dir(folder))
    ).eval()
    plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    differs = False
    with torch.no_grad():
        for prompt in PROMPTS:
            expected = _greedy(reference, tokenizer, prompt)
            assert _greedy(merged, tokenizer, prompt) == expected
            differs |= _greedy(plain, tokenizer, prompt) != expected
            ids = tokenizer(prompt, return_tensors="pt")
            assert torch.allclose(merged(**ids).logits, reference(**ids).logits, atol=1e-4)
    assert differs, "the adapter should change at least one greedy completion of the base model"

    again = list(merge_run(settings, run, poll_s=0.1))
    assert again[-1] == merged_dir and again[0].startswith("already merged")
    merged_folders = [p for p in (settings.data_dir / "exports").iterdir() if p.is_dir()]
    assert len(merged_folders) == 1, merged_folders
