"""Will a run fit? Peak memory of a run config on its device, by arithmetic on the model's shape, before launch.

Pure arithmetic in the web process (no torch): the model's shape comes from its folder's ``config.json`` and the
tensor headers of its ``*.safetensors`` files (:func:`model_shape_from_folder`), or from a GGUF file's metadata and
tensor table (:func:`model_shape_from_gguf`, the ``gguf`` package, numpy only). :func:`estimate_peak_memory` adds:

* **weights**: parameters x bytes of the dtype the worker loads them in (bfloat16 on a GPU that has it, float32 on
  the CPU; a GGUF is converted to float32, :func:`grpo_core.engine.policy_model.convert_gguf`);
* **trainable state**: LoRA's A and B matrices (float32, PEFT casts adapters up) on every targeted linear layer, or
  all weights without LoRA, each with its gradient and AdamW's two moments;
* **reference model**: a second copy of the weights when ``beta > 0`` without LoRA (with LoRA TRL disables the
  adapter instead);
* **activations**: ``per_device_train_batch_size`` x (prompt + ``max_completion_length``) tokens through every layer
  kept for the backward pass (with LoRA dropout also a dropped copy of every adapted layer's input) (about
  ``ACTIVATION_FACTOR`` x hidden values a token per layer, Korthikanti et al. 2022, arXiv 2205.05198, with
  ``ATTENTION_COPIES`` attention-score-sized tensors; only the layer inputs with ``gradient_checkpointing``);
* **logits and vocabulary-sized buffers**: the completion logits (float32, with their log-softmax and gradient:
  ``LOGIT_COPIES`` copies) and float32 values over the vocabulary for every token of the sequences
  (``SEQUENCE_VOCAB_COPIES`` of the training micro-batch's, ``GENERATION_VOCAB_COPIES`` of the generation batch's;
  fitted, see below);
* **KV cache** of generation: 2 x layers x KV heads x head dim x tokens of the generation batch
  (``per_device_train_batch_size`` x ``steps_per_generation``, TRL's default ``gradient_accumulation_steps``), in the
  weights' dtype;
* **runtime**: the Python, torch and tokenizer baseline of a worker (``RUNTIME_BYTES``; on a GPU the CUDA context),
  measured on this project's workers by ``benchmarks/bench_memory.py``;
* **loading overhead** (``LOAD_OVERHEAD_SHARE`` of the weights) and a **margin** of ``MARGIN_SHARE`` of the sum, so
  that the estimate errs high.

Calibrated against measured peaks (``ACTIVATION_FACTOR``, ``ATTENTION_COPIES``, the vocabulary copies and the
loading overhead are fitted, not counted) with the prompt lengths as the model gets them
(:func:`grpo_core.models.prompt_tokens.longest_prompt_tokens`): the agent recipe (20.7 GiB resident at batch 8 and
622-token sequences, 6.8 GiB at batch 2 x gradient accumulation 4), the code recipe (17.1-17.3 GiB,
docs/code-recipe.md), the quick start and SmolLM2 runs of ``bench_memory.py``, a random Llama and the tiny model; on
those LoRA runs the estimate is 0-15% above the measured peak with the prompts counted by the tokenizer (0-10% on the
recipes and SmolLM2 runs), up to 18% above with them estimated from characters (docs/run-config.md tables,
``bench_memory.py --recipes`` side by side). Left out:
vLLM's memory pool (``use_vllm``), several processes (each needs the estimate), fragmentation of the CUDA caching
allocator.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psutil

GIB = 1024**3
MIB = 1024**2
#: Values kept per token per layer for the backward pass, in units of the hidden size (attention and MLP inputs,
#: norms, projections; Korthikanti et al. 2022 count 34 bytes/token/hidden in 16-bit, i.e. 17 values; 18 fits the
#: measured rows with :data:`SEQUENCE_VOCAB_COPIES`, docs/run-config.md "Calibration").
ACTIVATION_FACTOR = 18
#: Completion logits kept over the vocabulary in float32: logits, their log-softmax, their gradient.
LOGIT_COPIES = 3
#: A worker's baseline resident memory before the model: Python, torch, transformers, TRL, the tokenizer (CPU);
#: the peak RSS of a 2-step CPU run of the 30k-parameter tiny model, measured by benchmarks/bench_memory.py.
RUNTIME_BYTES_CPU = 540 * MIB
#: A GPU worker's device memory before the model: the CUDA context and cuBLAS workspace.
RUNTIME_BYTES_CUDA = 600 * MIB
#: Tokens the chat template adds around a prompt (SmolLM2's system and role markers).
CHAT_TEMPLATE_TOKENS = 40
#: Attention-score-sized tensors (batch x heads x sequence^2, per layer) a training step holds at its peak. Fitted, not
#: counted (docs/run-config.md "Calibration"): 7 copies, fitted on sequences of 81-258 tokens, overshot the agent
#: recipe's 622-token sequences by 69% (35.1 vs 20.7 GiB measured); one copy and :data:`SEQUENCE_VOCAB_COPIES` fit
#: every measured row from 57 to 622 tokens a sequence.
ATTENTION_COPIES = 1
#: Float32 values over the vocabulary kept per token of every sequence (prompt and completion) of the training
#: micro-batch (:data:`SEQUENCE_VOCAB_COPIES`) and of the generation batch (:data:`GENERATION_VOCAB_COPIES`), in units
#: of the vocabulary size. Fitted, not counted: the measured peaks grow with batch x sequence x vocabulary beyond what
#: the counted parts hold (TRL 1.16 scores only completion positions through its fused LM head, so these are not the
#: scoring pass's logits; which buffers hold them is not measured). With them, SmolLM2 (vocabulary 49,152) and the
#: random Llama (vocabulary 320) fit with one activation factor (without, the best fit is 27% high on one of them);
#: the agent recipe at batch 2 x gradient accumulation 4 (a generation batch of 8) puts one copy on the generation
#: batch.
SEQUENCE_VOCAB_COPIES = 6
GENERATION_VOCAB_COPIES = 1
#: Memory a worker holds while it loads the weights, as a share of them: the safetensors pages mapped while the model
#: is built, the tokenizer (SmolLM2: 155-166 MiB left over on three runs of 513 MiB of float32 weights).
LOAD_OVERHEAD_SHARE = 0.3
#: The estimate errs high by this share of its sum: repeats of the same CPU run differ by about 10% in peak resident
#: memory (benchmarks/bench_memory.py), and a run that dies for memory costs far more than one left waiting.
MARGIN_SHARE = 0.1

#: The estimate's error, measured (docs/run-config.md, benchmarks/bench_memory.py --recipes): shown with every estimate.
ESTIMATE_ERROR = ("errs high: 0-15% above the measured peak of LoRA runs on the CPU with the prompts counted by the "
                  "model's tokenizer (measured: the agent recipe +6% at batch 8, +9% at batch 2 x gradient "
                  "accumulation 4, the code recipe +0-2%, the quick start +0%, the tiny model +3-15% over repeats), "
                  "up to 18% above with the prompts estimated from characters (the tokenizer not on disk yet), "
                  "15-40% with full weights; GPU estimates are not yet checked against a measurement")

_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


class MemoryEstimateError(ValueError):
    """The model's shape cannot be read without loading it (a hub id not downloaded, a folder without weights)."""


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs of a decoder-only transformer.

    Attributes:
        num_params: parameters (from the tensor headers).
        hidden_size, num_layers, num_heads, num_kv_heads, head_dim, intermediate_size, vocab_size: the config's.
    """

    num_params: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int

    def lora_params(self, rank: int, target_modules: str = "all-linear") -> int:
        """LoRA parameters ``rank x (in + out)`` on the targeted linear layers of every decoder layer (LLaMA-style
        names: q/k/v/o_proj, gate/up/down_proj; ``all-linear`` = all seven, as PEFT picks them, lm_head excluded)."""
        h, kv, inter = self.hidden_size, self.num_kv_heads * self.head_dim, self.intermediate_size
        q = self.num_heads * self.head_dim
        shapes = {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
                  "gate_proj": (h, inter), "up_proj": (h, inter), "down_proj": (inter, h)}
        names = list(shapes) if target_modules.strip() == "all-linear" else [
            n.strip() for n in target_modules.split(",") if n.strip()]
        per_layer = sum(rank * (shapes[n][0] + shapes[n][1]) for n in names if n in shapes)
        return per_layer * self.num_layers

    def lora_input_width(self, target_modules: str = "all-linear") -> int:
        """Sum of the input widths of the targeted linear layers of one decoder layer: LoRA's dropout keeps a
        dropped copy of each input for the backward pass."""
        h, q = self.hidden_size, self.num_heads * self.head_dim
        widths = {"q_proj": h, "k_proj": h, "v_proj": h, "o_proj": q, "gate_proj": h, "up_proj": h,
                  "down_proj": self.intermediate_size}
        names = list(widths) if target_modules.strip() == "all-linear" else [
            n.strip() for n in target_modules.split(",") if n.strip()]
        return sum(widths[n] for n in names if n in widths)


@dataclass(frozen=True)
class MemoryEstimate:
    """The estimate's parts, in bytes; :attr:`total` is their sum."""

    device: str
    weights: int
    trainable: int
    reference: int
    activations: int
    logits: int
    kv_cache: int
    runtime: int
    loading: int = 0
    margin: int = 0

    @property
    def total(self) -> int:
        """Estimated peak, bytes."""
        return (self.weights + self.trainable + self.reference + self.activations + self.logits + self.kv_cache
                + self.runtime + self.loading + self.margin)

    def parts(self) -> list[tuple[str, int]]:
        """``(label, bytes)`` of every part, in the order of the module docstring."""
        return [("weights", self.weights), ("trainable state (grads, AdamW)", self.trainable),
                ("reference model", self.reference), ("activations", self.activations),
                ("logits and vocabulary-sized buffers", self.logits), ("generation KV cache", self.kv_cache),
                ("runtime baseline", self.runtime), ("model loading overhead", self.loading),
                (f"margin (+{MARGIN_SHARE:.0%}, run-to-run spread)", self.margin)]


def safetensors_param_count(path: str | Path) -> int:
    """Elements of every tensor in a ``.safetensors`` file, read from its JSON header only (8-byte length first).

    Raises:
        MemoryEstimateError: the file is not a safetensors file.
    """
    with open(path, "rb") as handle:
        raw = handle.read(8)
        if len(raw) != 8:
            raise MemoryEstimateError(f"{path}: not a safetensors file")
        (length,) = struct.unpack("<Q", raw)
        if length > 100 * MIB:
            raise MemoryEstimateError(f"{path}: header of {length} bytes, not a safetensors file")
        try:
            header = json.loads(handle.read(length))
        except ValueError:
            raise MemoryEstimateError(f"{path}: unreadable safetensors header") from None
    total = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        count = 1
        for dim in info["shape"]:
            count *= int(dim)
        total += count
    return total


def model_shape_from_folder(folder: str | Path) -> ModelShape:
    """The shape of a Hugging Face model folder: ``config.json`` and the safetensors headers.

    Raises:
        MemoryEstimateError: no ``config.json``, no ``*.safetensors`` weights, or a config without the sizes.
    """
    folder = Path(folder)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MemoryEstimateError(f"{folder}: cannot read config.json ({exc})") from None
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise MemoryEstimateError(f"{folder}: no *.safetensors weights to count")
    config = config.get("text_config", config)
    try:
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        return ModelShape(
            num_params=sum(safetensors_param_count(f) for f in files),
            hidden_size=hidden,
            num_layers=int(config["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(config.get("head_dim") or hidden // heads),
            intermediate_size=int(config.get("intermediate_size") or 4 * hidden),
            vocab_size=int(config["vocab_size"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MemoryEstimateError(f"{folder}/config.json lacks a size: {exc}") from None


def model_shape_from_gguf(path: str | Path) -> ModelShape:
    """The shape of a GGUF file: its ``<arch>.*`` metadata and the element counts of its tensor table.

    Raises:
        MemoryEstimateError: the ``gguf`` package is missing, or the file lacks the metadata.
    """
    try:
        from gguf import GGUFReader
    except ImportError:
        raise MemoryEstimateError("reading a GGUF file's shape needs the gguf package (pip install gguf)") from None
    try:
        reader = GGUFReader(str(path))
    except (OSError, ValueError) as exc:
        raise MemoryEstimateError(f"{path}: not a readable GGUF file ({exc})") from None

    def field(name: str):
        found = reader.fields.get(name)
        if found is None:
            return None
        value = found.parts[found.data[0]]
        if found.types and found.types[0].name == "STRING":
            return bytes(value).decode("utf-8")
        return int(value[0])

    arch = field("general.architecture")
    try:
        hidden = field(f"{arch}.embedding_length")
        heads = field(f"{arch}.attention.head_count")
        tokens = reader.fields.get("tokenizer.ggml.tokens")
        vocab = field(f"{arch}.vocab_size") or (len(tokens.data) if tokens is not None else 0)
        return ModelShape(
            num_params=sum(int(t.n_elements) for t in reader.tensors),
            hidden_size=hidden,
            num_layers=field(f"{arch}.block_count"),
            num_heads=heads,
            num_kv_heads=field(f"{arch}.attention.head_count_kv") or heads,
            head_dim=field(f"{arch}.attention.key_length") or hidden // heads,
            intermediate_size=field(f"{arch}.feed_forward_length"),
            vocab_size=vocab,
        )
    except (TypeError, ZeroDivisionError) as exc:
        raise MemoryEstimateError(f"{path}: GGUF metadata lacks a size for {arch!r} ({exc})") from None


def estimate_peak_memory(
    shape: ModelShape,
    config: dict,
    *,
    device: str,
    prompt_tokens: int,
    bf16: bool | None = None,
) -> MemoryEstimate:
    """Estimated peak memory of one training process of ``config`` (a RunConfig dump) on ``device``.

    Args:
        device: ``"cpu"`` or ``"cuda"`` (the resolved device, not ``"auto"``).
        prompt_tokens: the longest prompt in tokens as the model gets it: chat template, tools' schemas and tool
            calls included (:func:`grpo_core.models.prompt_tokens.longest_prompt_tokens`).
        bf16: weights in bfloat16; default: on ``cuda`` (the worker's choice on a GPU with bfloat16).
    """
    bf16 = (device == "cuda") if bf16 is None else bf16
    dtype = 2 if bf16 else 4
    batch = int(config.get("per_device_train_batch_size", 8))
    completion = int(config.get("max_completion_length", 64))
    tokens = batch * (prompt_tokens + completion)
    weights = shape.num_params * dtype
    if config.get("use_lora", True):
        trainable_params = shape.lora_params(int(config.get("lora_r", 16)), str(config.get("lora_target_modules",
                                                                                            "all-linear")))
        trainable = trainable_params * 4 * 3  # the fp32 adapter's gradient and AdamW's two moments (weights in 'weights')
        trainable += trainable_params * 4  # the adapter itself
        reference = 0
    else:
        trainable = shape.num_params * dtype * 3
        reference = weights if float(config.get("beta", 0.0)) > 0 else 0
    if config.get("gradient_checkpointing"):
        per_token = shape.hidden_size * (shape.num_layers + ACTIVATION_FACTOR)  # layer inputs + one layer recomputed
        attention = batch * shape.num_heads * (prompt_tokens + completion) ** 2 * ATTENTION_COPIES
    else:
        per_token = shape.hidden_size * shape.num_layers * ACTIVATION_FACTOR
        attention = batch * shape.num_heads * (prompt_tokens + completion) ** 2 * shape.num_layers * ATTENTION_COPIES
    if config.get("use_lora", True) and float(config.get("lora_dropout", 0.05)) > 0:
        # dropout's output (and mask) on every adapted input, kept for the backward pass of the adapter
        per_token += shape.lora_input_width(str(config.get("lora_target_modules", "all-linear"))) * shape.num_layers
    activations = (tokens * per_token + attention) * dtype
    # generation samples the whole generation batch at once: per_device_train_batch_size x steps_per_generation
    # (TRL's default: gradient_accumulation_steps) sequences, each with its KV cache
    steps_per_generation = int(config.get("steps_per_generation") or config.get("gradient_accumulation_steps") or 1)
    generation_tokens = batch * steps_per_generation * (prompt_tokens + completion)
    logits = (batch * completion * LOGIT_COPIES + tokens * SEQUENCE_VOCAB_COPIES
              + generation_tokens * GENERATION_VOCAB_COPIES) * shape.vocab_size * 4
    kv_cache = 2 * shape.num_layers * shape.num_kv_heads * shape.head_dim * generation_tokens * dtype
    runtime = RUNTIME_BYTES_CUDA if device == "cuda" else RUNTIME_BYTES_CPU
    loading = int(LOAD_OVERHEAD_SHARE * weights)
    counted = weights + trainable + reference + activations + logits + kv_cache + runtime + loading
    return MemoryEstimate(device=device, weights=weights, trainable=trainable, reference=reference,
                          activations=activations, logits=logits, kv_cache=kv_cache, runtime=runtime,
                          loading=loading, margin=int(MARGIN_SHARE * counted))


@dataclass(frozen=True)
class FreeMemory:
    """Free memory on a device, bytes; ``where`` says which (``"RAM"`` or ``"GPU 0 (NVIDIA H200)"``)."""

    where: str
    free: int
    total: int


def free_memory(device: str) -> list[FreeMemory]:
    """Free memory of ``device``: RAM (psutil) on ``cpu``; each GPU's from ``nvidia-smi`` (a subprocess, no torch) on
    ``cuda``; empty when ``nvidia-smi`` is missing or fails."""
    if device != "cuda":
        memory = psutil.virtual_memory()
        return [FreeMemory("RAM", int(memory.available), int(memory.total))]
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return []
    try:
        output = subprocess.run(
            [binary, "--query-gpu=index,name,memory.free,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in output.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            try:
                found.append(FreeMemory(f"GPU {parts[0]} ({parts[1]})", int(parts[2]) * MIB, int(parts[3]) * MIB))
            except ValueError:
                continue
    return found


def resolve_device(device: str) -> str:
    """``auto`` as the worker resolves it: ``cuda`` where ``nvidia-smi`` lists a GPU, else ``cpu``."""
    if device != "auto":
        return device
    return "cuda" if free_memory("cuda") else "cpu"


def format_bytes(count: int) -> str:
    """``"1.23 GiB"`` or ``"456 MiB"``."""
    return f"{count / GIB:.2f} GiB" if count >= GIB else f"{count / MIB:.0f} MiB"


def model_shape(model: str) -> ModelShape:
    """The shape of a run config's ``model`` field: a local folder or a GGUF file (the default model's included).

    Raises:
        MemoryEstimateError: a hub id (nothing local to read), or as :func:`model_shape_from_folder` /
            :func:`model_shape_from_gguf`.
        grpo_core.models.source.ModelSourceError: the model field names nothing.
    """
    from grpo_core.models.source import describe_model

    source = describe_model(model)
    if source.kind == "folder":
        return model_shape_from_folder(source.location)
    if source.kind == "gguf":
        return model_shape_from_gguf(source.location)
    raise MemoryEstimateError(f"hub id {source.location}: its size cannot be read before it is downloaded")


def fit_verdict(estimate: MemoryEstimate, free: list[FreeMemory]) -> str:
    """One line: fits, tight (within 10% of the free memory) or does not fit, against the device with most free
    memory; says so when the free memory is unknown."""
    if not free:
        return f"estimated peak {format_bytes(estimate.total)}; free memory unknown (no nvidia-smi)"
    best = max(free, key=lambda f: f.free)
    ratio = estimate.total / best.free if best.free else float("inf")
    head = f"estimated peak {format_bytes(estimate.total)} vs {format_bytes(best.free)} free on {best.where}"
    if ratio > 1:
        return f"❌ does not fit: {head}"
    if ratio > 0.9:
        return f"⚠️ tight: {head}"
    return f"✅ fits: {head}"
