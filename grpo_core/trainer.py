"""Builds TRL's ``GRPOTrainer`` from a :class:`~grpo_core.config.RunConfig` (imports torch, transformers, TRL).

TRL is the training engine; this module only assembles its inputs: the dataset (with a ``_row_index`` column so
each recorded group knows its row), the policy model and tokenizer, the reward functions and weights, the LoRA
config, and the :class:`~grpo_core.recorder.RunRecorder` callback.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_core.config import RunConfig, to_grpo_config, to_lora_config
from grpo_core.recorder import ROW_INDEX_COLUMN, Heartbeat, RolloutTap, RunRecorder
from grpo_core.rewards.compose import build_reward_funcs
from storage import Store


@dataclass
class BuiltTrainer:
    """A ready ``GRPOTrainer`` and the recorder attached to it."""

    trainer: Any
    recorder: RunRecorder
    device: str


def pick_device(config: RunConfig) -> str:
    """``"cuda"`` when asked for or when ``auto`` finds a GPU, else ``"cpu"``.

    Raises:
        RuntimeError: ``device: cuda`` was asked for and no GPU is visible.
    """
    import torch

    if config.device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' was asked for but no CUDA GPU is visible to this process")
        return "cuda"
    if config.device == "auto" and torch.cuda.is_available():
        return "cuda"
    return "cpu"


def describe_device(device: str) -> dict[str, Any]:
    """The device a run trains on, for its provenance record (:mod:`grpo_core.provenance`).

    Returns:
        ``{"type": "cpu" | "cuda", "name", "count", "threads"}``: on CUDA the first visible GPU's name and the number
        of visible GPUs; on the CPU the machine architecture and ``count`` 1. ``threads`` is torch's intra-op thread
        count (CPU reductions, and so the last bits of the losses, can depend on it).
    """
    import platform

    import torch

    if device == "cuda" and torch.cuda.is_available():
        return {"type": "cuda", "name": torch.cuda.get_device_name(0), "count": torch.cuda.device_count(),
                "threads": torch.get_num_threads()}
    return {"type": "cpu", "name": platform.machine() or "unknown", "count": 1, "threads": torch.get_num_threads()}


def to_hf_dataset(rows: Sequence[dict[str, Any]]):
    """A ``datasets.Dataset`` of the prompt rows plus the ``_row_index`` column (0-based row number)."""
    from datasets import Dataset

    return Dataset.from_list([{**row, ROW_INDEX_COLUMN: i} for i, row in enumerate(rows)])


def build_trainer(
    config: RunConfig,
    rows: Sequence[dict[str, Any]],
    *,
    model_path: str,
    output_dir: Path,
    store: Store,
    run_id: int,
    heartbeat: Heartbeat | None = None,
    progress: Callable[[str], None] = print,
) -> BuiltTrainer:
    """Assemble a ``trl.GRPOTrainer`` that records into ``store`` as run ``run_id``.

    Args:
        config: the run config.
        rows: prompt rows (``prompt`` plus the columns the reward rules read).
        model_path: a folder or hub id for ``from_pretrained`` (see :func:`grpo_core.model_source.prepare_model`).
        output_dir: TRL's output folder (checkpoints, final adapter).
        store, run_id: where the recorder writes.
        heartbeat: the worker's heartbeat (its cancel flag stops training at the next step).
        progress: receives one-line status messages.

    Raises:
        ValueError: a reward rule cannot be built (bad parameter), or the dataset is empty.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    if not rows:
        raise ValueError("the dataset has no rows")
    funcs, weights, names = build_reward_funcs(config.rewards)
    device = pick_device(config)
    bf16 = device == "cuda" and torch.cuda.is_bf16_supported()
    progress(f"loading model from {model_path} on {device}")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.bfloat16 if bf16 else torch.float32)

    eos_ids = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    generation_eos = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(generation_eos, int):
        eos_ids.add(generation_eos)
    elif generation_eos:
        eos_ids.update(generation_eos)
    tap = RolloutTap(funcs[0], [t for t in eos_ids if t is not None], config.max_completion_length)
    funcs = [tap, *funcs[1:]]

    recorder = RunRecorder(
        store,
        run_id,
        reward_names=names,
        reward_weights=weights,
        num_generations=config.num_generations,
        rows=list(rows),
        heartbeat=heartbeat,
        tap=tap,
    )
    args = to_grpo_config(config, output_dir, use_cpu=device == "cpu", bf16=bf16)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=to_hf_dataset(rows),
        processing_class=tokenizer,
        peft_config=to_lora_config(config),
        callbacks=[recorder],
    )
    recorder.attach(trainer)
    return BuiltTrainer(trainer=trainer, recorder=recorder, device=device)
