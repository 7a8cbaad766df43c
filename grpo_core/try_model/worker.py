"""Try the model, the worker half: ``python -m grpo_core.try_model.worker REQUEST.json --out RESULT.json
--progress FILE`` (the child-job protocol, :mod:`grpo_core.child_jobs`).

Loads the base model (the run's ``model`` field, converted from GGUF once like the trainer does, see
:mod:`grpo_core.engine.policy_model`), generates ``num_samples`` completions, then applies the trained weights (a PEFT
adapter, or full weights when the run trained without LoRA) and generates again with the same seed and settings,
and scores both sets with the run's reward rules exactly as the trainer would
(:func:`grpo_core.rewards.compose.score_group`). Prompts are tokenized the way TRL's ``GRPOTrainer`` does: chat
messages through the tokenizer's chat template with the generation prompt, plain text as is; completions end at
the model's end tokens by TRL's rule (:func:`grpo_core.engine.policy_model.end_of_sequence_ids`). A run with tools or an
environment samples multi-turn rollouts with TRL's own tool loop (:mod:`grpo_core.engine.tool_rollout`: model -> tool
call -> tool result -> model, at most ``max_tool_calling_iterations`` rounds, tools run as in training) and returns
each completion's turns. A vision-language model's prompt may carry pictures (the request's ``images``, decoded
again here under the datasets' bounds): the prompt is built as TRL builds it (``prepare_multimodal_messages``, the
processor's chat template, the processor's image inputs); a text-only model refuses them. The request comes from
:mod:`grpo_core.try_model.job` (web side). What it leaves out: batching several prompts, and vLLM.
"""

from __future__ import annotations

import base64
import binascii
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo_core.child_jobs.answer_file import answer_request
from grpo_core.child_jobs.progress import ProgressWriter
from grpo_core.datasets.images import ImageBudget, decode_image
from grpo_core.engine.policy_model import EndOfSequence, end_of_sequence_ids, load_policy, pick_device, policy_dtype
from grpo_core.rewards.registry import completion_text
from grpo_core.try_model.job import BASE, TRAINED, PictureError, TryRequest


def _prompt_ids(tokenizer, prompt: str | list[dict[str, Any]]) -> list[int]:
    """Token ids of the prompt as TRL's ``GRPOTrainer`` builds them."""
    if isinstance(prompt, list):
        ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)
        ids = ids["input_ids"]
        return list(ids[0] if ids and isinstance(ids[0], list) else ids)
    return list(tokenizer(text=prompt)["input_ids"])


def _pictures(request: TryRequest) -> list[Any]:
    """The request's pictures as RGB PIL images, each decoded under :class:`ImageBudget`'s bounds again.

    Raises:
        PictureError: one is not base64, not an accepted image, over the bounds or corrupt (its number says which).
    """
    from PIL import Image

    budget, pictures = ImageBudget(), []
    for number, text in enumerate(request.images, start=1):
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise PictureError(f"picture {number}: not base64 ({exc})") from None
        if len(data) > budget.max_file_bytes:
            raise PictureError(f"picture {number}: {len(data):,} bytes; the limit is {budget.max_file_bytes:,}")
        png, _ = decode_image(data, budget.max_pixels, lambda reason, n=number: PictureError(f"picture {n}: {reason}"))
        with Image.open(io.BytesIO(png), formats=["PNG"]) as picture:
            pictures.append(picture.convert("RGB"))
    return pictures


def _vision_prompt(processor, prompt: list[dict[str, Any]], pictures: list[Any]) -> tuple[list[int], dict[str, Any]]:
    """The prompt's token ids and the processor's other inputs (``pixel_values``, ...) as TRL's ``GRPOTrainer``
    builds a vision-language model's prompt: the pictures put in the messages' image blocks (or before the first
    user message's text) by ``prepare_multimodal_messages``, the processor's chat template, the processor.

    Raises:
        ValueError: the model has no image processor (a text-only model).
    """
    from trl.data_utils import prepare_multimodal_messages

    if not hasattr(processor, "image_processor"):
        raise ValueError("the model is text-only (it has no image processor): it cannot read a picture; remove the "
                         "picture or try a run of a vision-language model")
    messages = prepare_multimodal_messages(prompt, images=pictures)
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    encoded = dict(processor(text=[text], images=[pictures], return_tensors="pt", add_special_tokens=False))
    ids = encoded.pop("input_ids")[0].tolist()
    encoded.pop("attention_mask", None)
    return ids, encoded


def _generate(model, tokenizer, prompt_ids: list[int], request: TryRequest, end: EndOfSequence, device: str,
              vision: dict[str, Any] | None = None):
    """``request.num_samples`` completions of the prompt; ``vision``: the processor's image inputs for it."""
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
    text_tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a VLM's processor holds its tokenizer
    for name, value in (vision or {}).items():
        options[name] = value.to(device) if hasattr(value, "to") else value
    with torch.inference_mode():
        output = model.generate(
            input_ids=inputs,
            attention_mask=torch.ones_like(inputs),
            num_return_sequences=sequences,
            pad_token_id=text_tokenizer.pad_token_id,
            eos_token_id=list(end.ids),
            **options,
        )
    generated = output[:, len(prompt_ids):].tolist()
    if not do_sample:
        generated = generated * request.num_samples
    completions = []
    for sequence in generated:
        ids, truncated = end.cut(sequence)
        completions.append(
            {
                "ids": ids,
                "text": text_tokenizer.decode(ids, skip_special_tokens=True),
                "num_tokens": len(ids),
                "truncated": truncated,
            }
        )
    return completions


def uses_tools(request: TryRequest) -> bool:
    """Whether the run gives the policy tools or an environment (its rollouts are multi-turn)."""
    return bool(request.tools or request.tool_plugins or request.environment)


def _tool_rollouts(model, tokenizer, prompt_ids: list[int], request: TryRequest, end: EndOfSequence, device: str,
                   tools: dict[str, Any]) -> list[dict[str, Any]]:
    """``num_samples`` multi-turn rollouts with TRL's tool loop (:mod:`grpo_core.engine.tool_rollout`), each as
    :func:`_generate`'s completions plus ``messages``, ``tool_mask`` and ``environment_reward``; ``num_tokens`` counts
    the model's tokens (TRL's completion length with tools)."""
    from grpo_core.engine.tool_rollout import sample_tool_rollouts

    if not isinstance(request.prompt, list):
        raise ValueError("a run with tools needs a chat prompt (a list of messages); tick 'chat' and give messages")

    def generate(ids: list[int], count: int) -> list[tuple[list[int], bool]]:
        sampled = _generate(model, tokenizer, ids, request.model_copy(update={"num_samples": count}), end, device)
        return [(c["ids"], c["truncated"]) for c in sampled]

    rollouts = sample_tool_rollouts(
        model, tokenizer, request.prompt, {**request.row, "prompt": request.prompt}, num_rollouts=request.num_samples,
        tools=tools.get("tools", []), environment_factory=tools.get("environment_factory"), generate=generate,
        max_completion_length=request.max_new_tokens, max_iterations=request.max_tool_calling_iterations)
    return [{"ids": r.completion_ids, "text": "", "num_tokens": sum(r.tool_mask), "truncated": r.truncated,
             "messages": r.messages, "environment_reward": r.environment_reward} for r in rollouts]


def _side(label: str, request: TryRequest, completions: list[dict[str, Any]]) -> dict[str, Any]:
    """One side of the comparison: each completion with its per-rule rewards and weighted total (as the trainer
    would score it), and the mean total (``None`` when no rule applied to any completion)."""
    from grpo_core.engine.reward_models import enable_reward_model_scoring
    from grpo_core.rewards.compose import score_group

    enable_reward_model_scoring()  # a reward_model rule scores here, as the trainer would
    from grpo_core.tools.turns import turns_of_completion

    chat = isinstance(request.prompt, list)
    texts: list[Any] = [c["messages"] if "messages" in c else [{"role": "assistant", "content": c["text"]}] if chat
                        else c["text"] for c in completions]
    scored = None
    if request.rewards:
        row = {**request.row, "prompt": request.prompt}
        scored = score_group(request.rewards, texts, row, [c["ids"] for c in completions])
    out = []
    for k, completion in enumerate(completions):
        rewards = {} if scored is None else {n: scored.rewards[i][k] for i, n in enumerate(scored.names)}
        environment = completion.get("environment_reward") or {}
        total = None if scored is None else scored.total[k]
        for name, value in environment.items():  # TRL adds an environment's reward with weight 1
            rewards[name] = value
            total = value if total is None else (total if value is None else total + value)
        out.append(
            {
                "text": completion_text(texts[k]),
                "num_tokens": completion["num_tokens"],
                "truncated": completion["truncated"],
                "rewards": rewards,
                "total": total,
                "turns": turns_of_completion(texts[k], environment) if "messages" in completion else None,
            }
        )
    totals = [c["total"] for c in out if c["total"] is not None]
    return {"label": label, "mean_total": sum(totals) / len(totals) if totals else None, "completions": out}


def try_model(request: TryRequest, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Generate with the base model and the trained weights on the request's prompt and score both (imports torch).

    Returns:
        ``{"prompt_text": str, "device": str, "seconds": float, "names": [rule names], "weights": [floats],
        "sides": {"base": side, "trained": side}}`` (``trained`` absent without ``weights``), where ``side`` is
        ``{"label": str, "mean_total": float | None, "completions": [{"text", "num_tokens", "truncated",
        "rewards": {name: float | None}, "total": float | None, "turns": [turn] | None}]}`` (``turns``: a
        multi-turn rollout's, :func:`grpo_core.tools.turns.turns_of_completion`). Both sides use the same seed.

    Raises:
        ValueError: a reward rule is invalid, or ``weights`` is not a model or adapter folder.
        grpo_core.models.source.ModelSourceError: the model cannot be found.
    """
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    from grpo_core.engine.policy_model import prepare_model
    from grpo_core.models.vision import is_vision_model
    from grpo_core.rewards.compose import build_reward_funcs
    from grpo_core.rewards.template_tags import resolve_for_model

    started = time.monotonic()
    pictures = _pictures(request)  # checked before the model loads
    _, weights, names = build_reward_funcs(request.rewards) if request.rewards else ([], [], [])
    device = pick_device(request.device)
    dtype = policy_dtype(device)
    model_path = prepare_model(request.model, Path(request.model_cache_dir), progress)
    if request.rewards:  # template_opened_think: auto, as the run resolves it
        rewards, _ = resolve_for_model(request.rewards, str(model_path), [{"prompt": request.prompt}])
        request = request.model_copy(update={"rewards": rewards})
    progress(f"loading {model_path} on {device}")
    model, tokenizer = load_policy(model_path, device)
    model = model.to(device).eval()
    end = end_of_sequence_ids(model, tokenizer)

    vision = None
    if pictures:
        prompt = request.prompt if isinstance(request.prompt, list) else [{"role": "user", "content": request.prompt}]
        prompt_ids, vision = _vision_prompt(tokenizer, prompt, pictures)
    else:
        prompt_ids = _prompt_ids(tokenizer, request.prompt)
    tools = None
    if uses_tools(request):  # the run's tools, loaded as the trainer loads them (checked at launch)
        from grpo_core.engine.trainer import tool_arguments
        from grpo_core.run_config import RunConfig

        tools = tool_arguments(RunConfig(tools=request.tools, tool_plugins=request.tool_plugins,
                                         environment=request.environment))

    def sample(policy) -> list[dict[str, Any]]:
        if tools is None:
            return _generate(policy, tokenizer, prompt_ids, request, end, device, vision)
        return _tool_rollouts(policy, tokenizer, prompt_ids, request, end, device, tools)

    sides: dict[str, Any] = {}
    progress("sampling the base model")
    base = sample(model)
    sides[BASE] = _side(f"base: {request.model}", request, base)
    if request.weights:
        folder = Path(request.weights)
        progress(f"loading trained weights from {folder}")
        if (folder / "adapter_config.json").is_file():
            from peft import PeftModel

            trained = PeftModel.from_pretrained(model, str(folder)).to(device).eval()
        elif (folder / "config.json").is_file():
            del model
            auto = AutoModelForImageTextToText if is_vision_model(folder) else AutoModelForCausalLM
            trained = auto.from_pretrained(str(folder), dtype=dtype, trust_remote_code=False).to(device).eval()
        else:
            raise ValueError(f"{folder} holds neither a PEFT adapter nor a model")
        progress("sampling the trained weights")
        tuned = sample(trained)
        sides[TRAINED] = _side(f"trained: {folder.name}", request, tuned)
    return {
        "prompt_text": getattr(tokenizer, "tokenizer", tokenizer).decode(prompt_ids, skip_special_tokens=False),
        "device": device,
        "seconds": round(time.monotonic() - started, 3),
        "names": names,
        "weights": weights,
        "sides": sides,
    }


def answer(request: Any, progress: ProgressWriter) -> dict[str, Any]:
    """The child-job answer: :func:`try_model` on the JSON request (a :class:`TryRequest`).

    Raises:
        pydantic.ValidationError: the request is not a TryRequest.
    """
    return try_model(TryRequest.model_validate(request), progress=progress)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m grpo_core.try_model.worker REQUEST.json --out RESULT.json --progress FILE`` (the
    child-job protocol, :func:`grpo_core.child_jobs.answer_file.answer_request`: a failure is an ``{"error": ...}``
    answer, its traceback in the log); exit status 0."""
    return answer_request("python -m grpo_core.try_model.worker", answer, argv, echo="[try] ")


if __name__ == "__main__":
    sys.exit(main())
