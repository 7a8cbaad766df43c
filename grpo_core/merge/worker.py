"""Merge a run's LoRA adapter into its base model and save a Hugging Face folder that transformers and vLLM load.

``python -m grpo_core.merge.worker REQUEST --out ANSWER --progress FILE`` (the child-job protocol,
:mod:`grpo_core.child_jobs`; the request: ``{"model", "weights", "dest", "cache_dir"}``) loads the base
model in float32 on the CPU (a GGUF is converted first, :func:`grpo_core.engine.policy_model.prepare_model`), applies the
PEFT adapter in ``WEIGHTS`` and folds it in (PEFT's ``merge_and_unload``: ``W + B A * alpha / r``), then writes
``DEST`` with ``model.safetensors``, ``config.json``, ``generation_config.json`` and the tokenizer. Without LoRA
``WEIGHTS`` already holds full weights: they are saved the same way. It writes to ``DEST.partial`` and renames, so a
folder at ``DEST`` is always complete. Each step is a progress message (shown by :mod:`grpo_core.merge.job`, and
in the log after ``progress:``).
Runs in a child process only (imports torch, transformers and peft).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from grpo_core.child_jobs.answer_file import answer_request


def merge_adapter(model: str, weights: str | Path, dest: str | Path, cache_dir: str | Path,
                  progress: Callable[[str], None] = print) -> Path:
    """Write the merged model of ``model`` + the adapter (or full weights) in ``weights`` to ``dest``, saying each
    step to ``progress``. Returns ``dest``.

    Raises:
        FileExistsError: ``dest`` exists.
        grpo_core.models.source.ModelSourceError: the base model cannot be found or converted.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from grpo_core.engine.policy_model import prepare_model

    weights, dest = Path(weights), Path(dest)
    if dest.exists():
        raise FileExistsError(f"{dest} exists")
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    base_path = prepare_model(model, Path(cache_dir), progress)
    if (weights / "adapter_config.json").is_file():
        from peft import PeftModel

        progress(f"loading the base model {base_path}")
        base = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32, trust_remote_code=False)
        progress(f"applying the adapter {weights}")
        merged = PeftModel.from_pretrained(base, str(weights)).merge_and_unload()
    else:
        progress(f"loading the full weights {weights} (the run trained without LoRA)")
        merged = AutoModelForCausalLM.from_pretrained(str(weights), dtype=torch.float32,
                                                      trust_remote_code=False)
    progress("saving the merged model (safetensors)")
    merged.save_pretrained(partial, safe_serialization=True)
    tokenizer_source = str(weights) if (weights / "tokenizer_config.json").is_file() else base_path
    AutoTokenizer.from_pretrained(tokenizer_source, trust_remote_code=False).save_pretrained(partial)
    try:
        generation = GenerationConfig.from_pretrained(base_path)
    except OSError:
        generation = GenerationConfig.from_model_config(merged.config)
    generation.save_pretrained(partial)
    os.replace(partial, dest)
    progress(f"done: {dest}")
    return dest


def answer(request: Mapping[str, Any], progress: Callable[[str], None]) -> dict[str, str]:
    """The child-job answer: :func:`merge_adapter` of the request ``{"model", "weights", "dest", "cache_dir"}``;
    ``{"folder": dest}``."""
    dest = merge_adapter(str(request["model"]), str(request["weights"]), str(request["dest"]),
                         str(request["cache_dir"]), progress)
    return {"folder": str(dest)}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m grpo_core.merge.worker REQUEST --out ANSWER --progress FILE`` (the child-job
    protocol, :func:`grpo_core.child_jobs.answer_file.answer_request`); exit status 0."""
    return answer_request("python -m grpo_core.merge.worker", answer, argv, echo="progress: ")


if __name__ == "__main__":
    raise SystemExit(main())
