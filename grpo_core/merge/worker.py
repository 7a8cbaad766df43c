"""Merge a run's LoRA adapter into its base model and save a Hugging Face folder that transformers and vLLM load.

``python -m grpo_core.merge.worker --model MODEL --weights WEIGHTS --dest DEST --cache-dir CACHE`` loads the base
model in float32 on the CPU (a GGUF is converted first, :func:`grpo_core.engine.policy_model.prepare_model`), applies the
PEFT adapter in ``WEIGHTS`` and folds it in (PEFT's ``merge_and_unload``: ``W + B A * alpha / r``), then writes
``DEST`` with ``model.safetensors``, ``config.json``, ``generation_config.json`` and the tokenizer. Without LoRA
``WEIGHTS`` already holds full weights: they are saved the same way. It writes to ``DEST.partial`` and renames, so a
folder at ``DEST`` is always complete. Progress lines start with ``progress:`` (read by :mod:`grpo_core.merge.job`).
Runs in a child process only (imports torch, transformers and peft).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path


def _progress(message: str) -> None:
    print(f"progress: {message}", flush=True)


def merge_adapter(model: str, weights: str | Path, dest: str | Path, cache_dir: str | Path) -> Path:
    """Write the merged model of ``model`` + the adapter (or full weights) in ``weights`` to ``dest``. Returns ``dest``.

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
    base_path = prepare_model(model, Path(cache_dir), _progress)
    if (weights / "adapter_config.json").is_file():
        from peft import PeftModel

        _progress(f"loading the base model {base_path}")
        base = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32, trust_remote_code=False)
        _progress(f"applying the adapter {weights}")
        merged = PeftModel.from_pretrained(base, str(weights)).merge_and_unload()
    else:
        _progress(f"loading the full weights {weights} (the run trained without LoRA)")
        merged = AutoModelForCausalLM.from_pretrained(str(weights), dtype=torch.float32,
                                                      trust_remote_code=False)
    _progress("saving the merged model (safetensors)")
    merged.save_pretrained(partial, safe_serialization=True)
    tokenizer_source = str(weights) if (weights / "tokenizer_config.json").is_file() else base_path
    AutoTokenizer.from_pretrained(tokenizer_source, trust_remote_code=False).save_pretrained(partial)
    try:
        generation = GenerationConfig.from_pretrained(base_path)
    except OSError:
        generation = GenerationConfig.from_model_config(merged.config)
    generation.save_pretrained(partial)
    os.replace(partial, dest)
    _progress(f"done: {dest}")
    return dest


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (1 with the reason on standard error)."""
    parser = argparse.ArgumentParser(prog="python -m grpo_core.merge.worker", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--weights", required=True)
    parser.add_argument("--dest", required=True)
    parser.add_argument("--cache-dir", required=True)
    args = parser.parse_args(argv)
    try:
        merge_adapter(args.model, args.weights, args.dest, args.cache_dir)
    except Exception as exc:  # noqa: BLE001 - the parent reads the reason from the log
        print(f"error: {exc.__class__.__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
