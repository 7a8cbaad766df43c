"""Samples a run's base model and its trained weights on the same prompt, side by side, scored by the run's rules.

``python -m grpo_core.sample REQUEST.json --out RESULT.json`` loads the base model (the run's ``model`` field,
converted from GGUF once like the worker does), samples ``num_samples`` completions, then applies the trained
weights (a PEFT adapter, or full weights when the run trained without LoRA) and samples again with the same seed
and settings, and scores both sets with the run's reward rules exactly as the trainer would
(:func:`grpo_core.rewards.compose.score_group`). Prompts are tokenized the way TRL's ``GRPOTrainer`` does: chat
messages through the tokenizer's chat template with the generation prompt, plain text as is.

Two halves live here: :func:`build_request` and :func:`sample_in_subprocess` run in the web process and import no
torch; :func:`sample` and :func:`main` run in the subprocess and import torch, transformers and PEFT when called.
What it leaves out: batching several prompts, and vLLM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from grpo_core.artifacts import resolve_weights, run_folder
from grpo_core.config import parse_run_config
from grpo_core.rewards.registry import completion_text, get_rule
from grpo_core.settings import Settings
from storage import RunInfo

SAMPLE_TIMEOUT_S = 600.0
BASE = "base"
TRAINED = "trained"


class SampleError(RuntimeError):
    """Sampling failed; the message carries the reason (the end of the subprocess's output)."""


class SampleRequest(BaseModel):
    """What to sample: the model, the trained weights, the prompt and its dataset row, the rules, the settings.

    Lengths are in tokens. ``prompt`` is text or a list of chat messages (``{"role", "content"}``); ``row`` holds
    the dataset row's other columns (``answer``, ``tests``, ...) that the reward rules read.
    """

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="The run's model field: 'SmolLM2-135M-Instruct', a folder, a .gguf or a hub id.")
    weights: str | None = Field(None, description="Folder of the trained adapter or checkpoint; None: base only.")
    prompt: str | list[dict[str, Any]]
    row: dict[str, Any] = Field(default_factory=dict)
    rewards: list[dict[str, Any]] = Field(default_factory=list, description="The run's RewardSpec dumps.")
    num_samples: int = Field(2, ge=1, le=16)
    max_new_tokens: int = Field(64, ge=1, le=4096)
    temperature: float = Field(0.9, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    model_cache_dir: str = Field(description="Where GGUF models are converted to safetensors (the data dir's).")


# ------------------------------------------------------------------------------------------- web process side
def prompt_from_text(text: str, chat: bool) -> str | list[dict[str, Any]]:
    """The prompt a user typed, as the run's dataset holds prompts.

    A JSON list of ``{"role", "content"}`` objects is a message list as is; other text is one user message when the
    run trained on chat prompts (``chat``), else plain text.

    Raises:
        ValueError: the text is blank.
    """
    if not text or not text.strip():
        raise ValueError("the prompt is empty")
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list) and value and all(isinstance(m, dict) and "content" in m for m in value):
            return value
    return [{"role": "user", "content": text}] if chat else text


def prompt_to_text(prompt: Any) -> str:
    """A dataset prompt for a text box: text as is, a message list as indented JSON (what :func:`prompt_from_text`
    reads back)."""
    if isinstance(prompt, str):
        return prompt
    return json.dumps(prompt, ensure_ascii=False, indent=1)


def build_request(
    settings: Settings,
    run: RunInfo,
    *,
    prompt: str | list[dict[str, Any]],
    row: Mapping[str, Any] | None = None,
    weights: str | None = "latest",
    num_samples: int = 2,
    max_new_tokens: int | None = None,
    temperature: float | None = None,
    seed: int = 0,
) -> SampleRequest:
    """A :class:`SampleRequest` for ``run``: its model, the chosen weights in its folder and its reward rules.

    Args:
        weights: ``latest``, ``adapter`` or ``checkpoint-<step>`` (see :func:`grpo_core.artifacts.resolve_weights`);
            ``None`` samples the base model only.
        max_new_tokens, temperature: default the run's ``max_completion_length`` and ``temperature``.

    Raises:
        ValueError: a reward rule reads a column ``row`` lacks (the message names both).
        grpo_core.artifacts.ArtifactError: the run has no such weights.
        grpo_core.config.ConfigError: the run's stored config does not validate.
    """
    config = parse_run_config(run.config, source=f"run {run.id} config")
    row = {k: v for k, v in dict(row or {}).items() if k != "prompt"}
    for spec in config.rewards:
        missing = [c for c in get_rule(spec.rule).columns if c not in row]
        if missing:
            raise ValueError(
                f"reward rule {spec.rule} reads the column {missing[0]!r}; give it in the row's columns "
                f"(load a dataset row, or add it to the JSON)"
            )
    folder = None if weights is None else resolve_weights(run_folder(settings, run), weights)
    return SampleRequest(
        model=config.model,
        weights=None if folder is None else str(folder),
        prompt=prompt,
        row=row,
        rewards=[spec.model_dump(mode="json") for spec in config.rewards],
        num_samples=num_samples,
        max_new_tokens=max_new_tokens or config.max_completion_length,
        temperature=config.temperature if temperature is None else temperature,
        top_p=config.top_p,
        seed=seed,
        device=config.device,
        model_cache_dir=str(settings.model_cache_dir),
    )


def sample_in_subprocess(
    request: SampleRequest,
    *,
    timeout_s: float = SAMPLE_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Run ``python -m grpo_core.sample`` on ``request`` in its own process group and return its result.

    The web process stays free of torch; the child is killed (its whole group) after ``timeout_s`` seconds.

    Returns:
        The result mapping described in :func:`sample`.

    Raises:
        SampleError: the child failed, timed out or wrote no result; the message ends with its output's tail.
    """
    with tempfile.TemporaryDirectory(prefix="grpo-sample-", dir=workdir) as tmp:
        request_path, result_path, log_path = Path(tmp) / "request.json", Path(tmp) / "result.json", Path(tmp) / "log"
        request_path.write_text(request.model_dump_json(), encoding="utf-8")
        command = [sys.executable, "-m", "grpo_core.sample", str(request_path), "--out", str(result_path)]
        child_env = {**os.environ, **dict(env or {})}
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=child_env
            )
            try:
                code = process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait()
                raise SampleError(f"sampling took longer than {timeout_s:.0f} s and was stopped") from None
        output = log_path.read_text(encoding="utf-8", errors="replace")
        if code != 0 or not result_path.is_file():
            raise SampleError(f"sampling failed (exit status {code}):\n{output[-3000:]}")
        return json.loads(result_path.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------------ subprocess side
def _device(choice: str) -> str:
    import torch

    if choice == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was asked for but no CUDA GPU is visible to this process")
    return "cuda" if choice in ("cuda", "auto") and torch.cuda.is_available() else "cpu"


def _prompt_ids(tokenizer, prompt: str | list[dict[str, Any]]) -> list[int]:
    """Token ids of the prompt as TRL's ``GRPOTrainer`` builds them."""
    if isinstance(prompt, list):
        ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)
        ids = ids["input_ids"]
        return list(ids[0] if ids and isinstance(ids[0], list) else ids)
    return list(tokenizer(text=prompt)["input_ids"])


def _cut_at_eos(ids: Sequence[int], eos_ids: set[int], pad_id: int | None) -> list[int]:
    """A completion's ids up to and including its first end token (what TRL keeps), padding dropped."""
    kept = []
    for token in ids:
        kept.append(int(token))
        if int(token) in eos_ids:
            break
    while kept and pad_id is not None and kept[-1] == pad_id and pad_id not in eos_ids:
        kept.pop()
    return kept


def _generate(model, tokenizer, prompt_ids: list[int], request: SampleRequest, eos_ids: set[int], device: str):
    import torch

    torch.manual_seed(request.seed)
    if device == "cuda":
        torch.cuda.manual_seed_all(request.seed)
    inputs = torch.tensor([prompt_ids], device=device)
    do_sample = request.temperature > 0
    options: dict[str, Any] = {"do_sample": do_sample, "max_new_tokens": request.max_new_tokens}
    if do_sample:
        options.update(temperature=request.temperature, top_p=request.top_p, top_k=0)
    # Greedy decoding gives one answer however often it is asked; generate it once and repeat it.
    sequences = request.num_samples if do_sample else 1
    with torch.inference_mode():
        output = model.generate(
            input_ids=inputs,
            attention_mask=torch.ones_like(inputs),
            num_return_sequences=sequences,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=sorted(eos_ids),
            **options,
        )
    generated = output[:, len(prompt_ids):].tolist()
    if not do_sample:
        generated = generated * request.num_samples
    completions = []
    for sequence in generated:
        ids = _cut_at_eos(sequence, eos_ids, tokenizer.pad_token_id)
        completions.append(
            {
                "ids": ids,
                "text": tokenizer.decode(ids, skip_special_tokens=True),
                "num_tokens": len(ids),
                "truncated": bool(ids) and len(ids) >= request.max_new_tokens and ids[-1] not in eos_ids,
            }
        )
    return completions


def _side(label: str, request: SampleRequest, completions: list[dict[str, Any]]) -> dict[str, Any]:
    """One side of the comparison: each completion with its per-rule rewards and weighted total (as the trainer
    would score it), and the mean total (``None`` when no rule applied to any completion)."""
    from grpo_core.rewards.compose import score_group

    chat = isinstance(request.prompt, list)
    texts: list[Any] = [[{"role": "assistant", "content": c["text"]}] if chat else c["text"] for c in completions]
    scored = None
    if request.rewards:
        row = {**request.row, "prompt": request.prompt}
        scored = score_group(request.rewards, texts, row, [c["ids"] for c in completions])
    out = []
    for k, completion in enumerate(completions):
        out.append(
            {
                "text": completion_text(texts[k]),
                "num_tokens": completion["num_tokens"],
                "truncated": completion["truncated"],
                "rewards": {} if scored is None else {n: scored.rewards[i][k] for i, n in enumerate(scored.names)},
                "total": None if scored is None else scored.total[k],
            }
        )
    totals = [c["total"] for c in out if c["total"] is not None]
    return {"label": label, "mean_total": sum(totals) / len(totals) if totals else None, "completions": out}


def sample(request: SampleRequest, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Sample the base model and the trained weights on the request's prompt and score both (imports torch).

    Returns:
        ``{"prompt_text": str, "device": str, "seconds": float, "names": [rule names], "weights": [floats],
        "sides": {"base": side, "trained": side}}`` (``trained`` absent without ``weights``), where ``side`` is
        ``{"label": str, "mean_total": float | None, "completions": [{"text", "num_tokens", "truncated",
        "rewards": {name: float | None}, "total": float | None}]}``. Both sides use the same seed.

    Raises:
        ValueError: a reward rule is invalid, or ``weights`` is not a model or adapter folder.
        grpo_core.model_source.ModelSourceError: the model cannot be found.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_core.model_source import prepare_model
    from grpo_core.rewards.compose import build_reward_funcs

    started = time.monotonic()
    _, weights, names = build_reward_funcs(request.rewards) if request.rewards else ([], [], [])
    device = _device(request.device)
    dtype = torch.bfloat16 if device == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    model_path = prepare_model(request.model, Path(request.model_cache_dir), progress)
    progress(f"loading {model_path} on {device}")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).to(device).eval()
    eos_ids = {t for t in (tokenizer.eos_token_id,) if t is not None}
    generation_eos = getattr(model.generation_config, "eos_token_id", None)
    eos_ids.update([generation_eos] if isinstance(generation_eos, int) else (generation_eos or []))

    prompt_ids = _prompt_ids(tokenizer, request.prompt)
    sides: dict[str, Any] = {}
    progress("sampling the base model")
    base = _generate(model, tokenizer, prompt_ids, request, eos_ids, device)
    sides[BASE] = _side(f"base: {request.model}", request, base)
    if request.weights:
        folder = Path(request.weights)
        progress(f"loading trained weights from {folder}")
        if (folder / "adapter_config.json").is_file():
            from peft import PeftModel

            trained = PeftModel.from_pretrained(model, str(folder)).to(device).eval()
        elif (folder / "config.json").is_file():
            del model
            trained = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype).to(device).eval()
        else:
            raise ValueError(f"{folder} holds neither a PEFT adapter nor a model")
        progress("sampling the trained weights")
        tuned = _generate(trained, tokenizer, prompt_ids, request, eos_ids, device)
        sides[TRAINED] = _side(f"trained: {folder.name}", request, tuned)
    return {
        "prompt_text": tokenizer.decode(prompt_ids, skip_special_tokens=False),
        "device": device,
        "seconds": round(time.monotonic() - started, 3),
        "names": names,
        "weights": weights,
        "sides": sides,
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m grpo_core.sample REQUEST.json --out RESULT.json``; exit status 0 on success,
    1 when sampling failed (the traceback goes to standard error), 2 for an unreadable request."""
    parser = argparse.ArgumentParser(prog="python -m grpo_core.sample", description=__doc__.splitlines()[0])
    parser.add_argument("request", help="JSON file holding a SampleRequest")
    parser.add_argument("--out", required=True, help="where to write the result JSON")
    args = parser.parse_args(argv)
    try:
        request = SampleRequest.model_validate_json(Path(args.request).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"grpo_core.sample: bad request {args.request}: {exc}", file=sys.stderr)
        return 2
    try:
        result = sample(request, progress=lambda message: print(f"[sample] {message}", flush=True))
    except Exception:  # noqa: BLE001 - report any failure through the exit status and the log
        traceback.print_exc()
        return 1
    out = Path(args.out)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
