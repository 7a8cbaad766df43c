"""Loading the policy model: the device, the model and tokenizer, their end-of-sequence ids, and GGUF conversion.

One home for what the trainer (:mod:`grpo_core.engine.trainer`), the preflight (:mod:`grpo_core.preflight.worker`)
and Try the model (:mod:`grpo_core.try_model.worker`) all do before they generate: resolve the run's ``model`` field
to something ``from_pretrained`` reads (:func:`prepare_model`, converting the packaged SmolLM2 GGUF once), pick the
device (:func:`pick_device`), load the model and tokenizer the same way (:func:`load_policy`: bfloat16 on a GPU that
supports it, float32 otherwise; a tokenizer without a pad token pads with its end-of-sequence token), and agree on
the tokens that end a completion (:func:`end_of_sequence_ids`, TRL's rule). Imports torch and transformers when
called; worker processes only.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_core.models.source import ModelSourceError, describe_model
from grpo_core.models.vision import is_vision_model


def pick_device(choice: str) -> str:
    """``"cuda"`` when asked for or when ``auto`` finds a GPU, else ``"cpu"`` (``choice``: a run's ``device``:
    ``auto``, ``cpu`` or ``cuda``).

    Raises:
        RuntimeError: ``cuda`` was asked for and no GPU is visible.
    """
    import torch

    if choice == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' was asked for but no CUDA GPU is visible to this process")
        return "cuda"
    if choice == "auto" and torch.cuda.is_available():
        return "cuda"
    return "cpu"


def share_cpu_threads(device: str, environ: dict[str, str] | None = None) -> int | None:
    """On the CPU, set torch's intra-op threads as ``GRPO_WORKER_CPU_THREADS`` asks (the launcher sets it for a
    worker beside the web process; :func:`grpo_core.training.cpu_share.cpu_threads`: ``auto`` leaves a core);
    returns the threads set, or ``None`` when torch's are kept: on a GPU, without the variable, at ``all``, or when
    ``OMP_NUM_THREADS`` is set (it wins, as torch itself reads it).

    Raises:
        ValueError: the variable holds something :func:`grpo_core.training.cpu_share.parse_cpu_threads` refuses.
    """
    from grpo_core.training.cpu_share import ENV_WORKER_CPU_THREADS, cpu_threads

    env = os.environ if environ is None else environ
    raw = env.get(ENV_WORKER_CPU_THREADS)
    if device != "cpu" or raw is None or env.get("OMP_NUM_THREADS"):
        return None
    import torch

    threads = cpu_threads(raw, torch.get_num_threads())
    if threads is not None:
        torch.set_num_threads(threads)
    return threads


def describe_device(device: str) -> dict[str, Any]:
    """The device a run trains on, for its provenance record (:mod:`grpo_core.runs.provenance`).

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


def policy_dtype(device: str):
    """The weights' dtype on ``device``: ``torch.bfloat16`` on a GPU that supports it, else ``torch.float32``."""
    import torch

    return torch.bfloat16 if device == "cuda" and torch.cuda.is_bf16_supported() else torch.float32


GPU_METRIC_KEYS = ("gpu/memory_allocated_mib", "gpu/memory_reserved_mib", "gpu/memory_peak_mib", "gpu/utilization")
"""The per-step GPU metrics a CUDA run records (:func:`gpu_step_metrics`), charted by the Runs tab when present."""


def gpu_step_metrics(reset_peak: bool = True) -> dict[str, float]:
    """This process's GPU at a logged step, as metrics (CUDA only; ``{}`` without a CUDA GPU).

    Returns:
        ``gpu/memory_allocated_mib``: memory held by tensors now (``torch.cuda.memory_allocated``, MiB);
        ``gpu/memory_reserved_mib``: held by PyTorch's caching allocator (``memory_reserved``, MiB);
        ``gpu/memory_peak_mib``: the most allocated since the previous call (``max_memory_allocated``, MiB; the
        peak counter is reset after reading when ``reset_peak``); ``gpu/utilization``: percent of the last sample
        period the GPU was busy (``torch.cuda.utilization``, NVML), left out where NVML cannot be read. These are
        the current device's numbers: under several processes, rank 0's GPU (the process that records).
    """
    import torch

    if not torch.cuda.is_available():
        return {}
    mib = 1024 * 1024
    metrics = {
        "gpu/memory_allocated_mib": torch.cuda.memory_allocated() / mib,
        "gpu/memory_reserved_mib": torch.cuda.memory_reserved() / mib,
        "gpu/memory_peak_mib": torch.cuda.max_memory_allocated() / mib,
    }
    if reset_peak:
        torch.cuda.reset_peak_memory_stats()
    try:
        metrics["gpu/utilization"] = float(torch.cuda.utilization())
    except Exception:  # noqa: BLE001 - no NVML (pynvml missing, driver refuses): the other metrics still count
        pass
    return metrics


def load_policy(model_path: str, device: str) -> tuple[Any, Any]:
    """The policy model and its tokenizer from a folder or hub id (see :func:`prepare_model`), in
    :func:`policy_dtype`; the model stays on the CPU (the caller, or TRL's trainer, moves it).

    A tokenizer without a pad token gets its end-of-sequence token as pad token (as TRL's examples do). A folder
    whose ``config.json`` has a ``vision_config`` (:func:`grpo_core.models.vision.is_vision_model`) loads as
    ``AutoModelForImageTextToText`` with its ``AutoProcessor`` in place of the tokenizer.

    Raises:
        OSError: the model cannot be loaded.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if is_vision_model(model_path):  # a vision-language model: its processor (images + text), TRL's VLM path
        from transformers import AutoModelForImageTextToText, AutoProcessor

        processor = AutoProcessor.from_pretrained(model_path, trust_remote_code=False)
        if processor.tokenizer.pad_token is None:
            processor.tokenizer.pad_token = processor.tokenizer.eos_token
        model = AutoModelForImageTextToText.from_pretrained(model_path, dtype=policy_dtype(device),
                                                            trust_remote_code=False)
        return model, processor
    tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=False)  # docs/security.md
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=policy_dtype(device), trust_remote_code=False)
    return model, tokenizer


@dataclass(frozen=True)
class EndOfSequence:
    """The tokens that end a completion, by TRL's rule (``GRPOTrainer``, TRL 1.x).

    Attributes:
        ids: generation stops at any of them: the tokenizer's ``eos_token_id`` first, then the model's
            ``generation_config.eos_token_id`` (TRL's ``eos_token_ids``).
        pad_id: the tokenizer's pad token; a completion whose last token is an end token or the pad token was not
            truncated (TRL's ``completions/clipped_ratio``).
    """

    ids: tuple[int, ...]
    pad_id: int | None

    @property
    def ending_ids(self) -> frozenset[int]:
        """The ids a complete (not truncated) completion may end with: :attr:`ids` and :attr:`pad_id`."""
        return frozenset(self.ids) | ({self.pad_id} if self.pad_id is not None else set())

    def is_truncated(self, ids: Sequence[int]) -> bool:
        """True when a completion does not end with an end or pad token (it hit the length limit; an empty one
        never ended either)."""
        return not ids or int(ids[-1]) not in self.ending_ids

    def cut(self, ids: Sequence[int]) -> tuple[list[int], bool]:
        """A generated sequence up to and including its first end token (TRL masks the rest), trailing padding
        dropped; and whether it was truncated (:meth:`is_truncated`)."""
        kept: list[int] = []
        for token in ids:
            kept.append(int(token))
            if kept[-1] in self.ids:
                return kept, False
        while kept and self.pad_id is not None and kept[-1] == self.pad_id:
            kept.pop()
        return kept, self.is_truncated(list(ids))


def end_of_sequence_ids(model: Any, tokenizer: Any) -> EndOfSequence:
    """The end tokens of a loaded model and tokenizer, collected as TRL's ``GRPOTrainer`` does: the tokenizer's
    ``eos_token_id`` first, then the model's ``generation_config.eos_token_id`` (an int or a list), without repeats;
    the tokenizer's ``pad_token_id`` counts as an ending for truncation only."""
    declared = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    declared = [] if declared is None else [declared] if isinstance(declared, int) else list(declared)
    tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a VLM's processor holds its tokenizer
    ids = [t for t in dict.fromkeys([tokenizer.eos_token_id, *declared]) if t is not None]
    return EndOfSequence(ids=tuple(int(t) for t in ids), pad_id=tokenizer.pad_token_id)


# ------------------------------------------------------------------------------------------------- GGUF
def _file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def convert_gguf(gguf_path: Path, cache_dir: Path, progress: Callable[[str], None] = print) -> Path:
    """Convert a GGUF model to a trainable safetensors folder, once; later calls return the cached folder.

    The folder is ``cache_dir/<gguf stem>-<sha256[:16]>``. Conversion writes to a temporary folder renamed into
    place, under a file lock, so concurrent workers convert at most once and never see half a folder.

    Raises:
        ModelSourceError: transformers cannot read the file (the ``gguf`` package is missing, or the file is bad).
    """
    gguf_path = Path(gguf_path)
    cache_dir.mkdir(parents=True, exist_ok=True)
    progress(f"hashing {gguf_path.name}")
    target = cache_dir / f"{gguf_path.stem}-{_file_sha256(gguf_path)[:16]}"
    if (target / "config.json").is_file():
        return target
    with open(cache_dir / ".convert.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "config.json").is_file():
            return target
        progress(f"converting {gguf_path.name} to safetensors (once; about 30 s on a laptop CPU)")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32
            )
        except ImportError as exc:
            raise ModelSourceError(f"cannot read {gguf_path}: {exc} (pip install gguf)") from exc
        except (OSError, ValueError) as exc:
            raise ModelSourceError(f"cannot read GGUF file {gguf_path}: {exc}") from exc
        # The weights are already dequantised; drop the GGUF quantiser so the model trains and saves like any other.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        partial = cache_dir / f".{target.name}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        os.replace(partial, target)
        progress(f"converted model cached at {target}")
        return target


def prepare_model(name: str, cache_dir: Path, progress: Callable[[str], None] = print) -> str:
    """What to hand ``from_pretrained``: a folder path or a hub id. Converts a GGUF on first use.

    Raises:
        ModelSourceError: as :func:`describe_model` and :func:`convert_gguf`.
    """
    source = describe_model(name)
    if source.kind == "gguf":
        return str(convert_gguf(Path(source.location), cache_dir, progress))
    return source.location
