"""Multi-turn rollouts with tools outside training, as TRL 1.16's ``GRPOTrainer._tool_call_loop`` runs them: for the
agent quick start's pilot and held-out evaluation (``bench_learning.py --task agent``).

One batch of conversations advances turn by turn: the model writes (greedy or sampled), TRL's ``parse_response``
reads the turn with the template's response parser (``add_response_schema``), given the rendered prompt as ``prefix``
as TRL gives it (transformers' new-style parser reads no call without it); a turn with parsed ``tool_calls`` runs
each call (a tool that raises gives ``{"error": ...}``, as TRL records it) and the conversation goes on, up to
``max_iterations`` rounds of calls; a turn without a parsed call ends it. Like TRL, ``max_completion_length`` bounds
the whole completion, tool results included: a round whose results would pass it is dropped and the rollout ends on
its call. Each rollout comes back as TRL hands it to the reward functions (a list of assistant and tool messages),
so the dashboard's own rules (``turns_of_completion``, ``trajectory_summary``, ``numeric_answer``) read it as in
training.

Left out: several tools' calls run concurrently, environments (``environment_factory``), images.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Rollout:
    """One conversation's completion: ``messages`` (assistant and tool messages, TRL's shape), ``tokens`` (model and
    tool-result tokens so far), ``truncated`` (the last turn hit the token budget without an end token)."""

    prompt: list[dict[str, Any]]
    messages: list[dict[str, Any]] = field(default_factory=list)
    tokens: int = 0
    truncated: bool = False
    done: bool = False


def run_tool_calls(calls: Sequence[dict[str, Any]], tools: dict[str, Callable[..., Any]]) -> list[dict[str, Any]]:
    """The tool messages for a turn's parsed ``calls`` (TRL's ``{"role": "tool", "name", "content"}``); a call that
    raises, names an unknown tool or passes bad arguments gets ``str({"error": message})`` as TRL writes it."""
    results = []
    for call in calls:
        function = call.get("function", call)
        name = function.get("name", "unknown")
        try:
            if name not in tools:
                raise ValueError(f"Tool {name} not found.")
            result: Any = tools[name](**(function.get("arguments") or {}))
        except Exception as exc:  # noqa: BLE001 - any tool failure is a failed call, as in TRL
            result = {"error": str(exc)}
        results.append({"role": "tool", "name": name, "content": str(result)})
    return results


def rollouts(model, tokenizer, prompts: Sequence[list[dict[str, Any]]], tools: Sequence[Callable[..., Any]], *,
             max_completion_length: int, max_iterations: int = 2, temperature: float | None = None,
             batch_size: int = 32) -> list[Rollout]:
    """Roll out every prompt (a list of chat messages) with ``tools``; ``temperature`` ``None`` is greedy.

    ``tokenizer`` must render tools (:func:`grpo_core.engine.tool_template.use_tool_chat_template` first); its
    response parser is added here when missing (TRL's ``add_response_schema``).

    Raises:
        ValueError: TRL has no response parser for the tokenizer's template.
    """
    import torch
    from trl.chat_template_utils import add_response_schema, parse_response

    from grpo_core.engine.policy_model import end_of_sequence_ids

    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        add_response_schema(tokenizer)
    end = end_of_sequence_ids(model, tokenizer)
    by_name = {tool.__name__: tool for tool in tools}
    tokenizer.padding_side = "left"
    states = [Rollout(prompt=list(p)) for p in prompts]
    for round_ in range(max_iterations + 1):
        active = [s for s in states if not s.done]
        for start in range(0, len(active), batch_size):
            batch_states = active[start:start + batch_size]
            texts = [tokenizer.apply_chat_template(s.prompt + s.messages, tools=list(tools), add_generation_prompt=True,
                                                   tokenize=False) for s in batch_states]
            batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            budget = max(max_completion_length - s.tokens for s in batch_states)
            sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0} if temperature \
                else {"do_sample": False}
            with torch.inference_mode():
                output = model.generate(**batch, max_new_tokens=max(1, budget), pad_token_id=tokenizer.pad_token_id,
                                        eos_token_id=list(end.ids), **sampling)
            prefixes = [row[mask.bool()].tolist() for row, mask in zip(batch["input_ids"], batch["attention_mask"],
                                                                         strict=True)]
            for state, ids, prefix in zip(batch_states, output[:, batch["input_ids"].shape[1]:].tolist(), prefixes,
                                          strict=True):
                ids, _ = end.cut(ids)  # up to and with the end token, padding dropped
                ids = ids[:max_completion_length - state.tokens]
                state.tokens += len(ids)
                state.truncated = not ids or ids[-1] not in end.ids and ids[-1] != end.pad_id
                message = parse_response(tokenizer, ids, prefix=prefix, tools=list(tools))  # as TRL: the prompt
                state.messages.append(message)
                calls = message.get("tool_calls")
                if not calls or state.truncated or round_ == max_iterations:
                    state.done = True
                    continue
                results = run_tool_calls(calls, by_name)
                suffix = _suffix_tokens(tokenizer, state, results, tools)
                if state.tokens + suffix >= max_completion_length:
                    state.done = True  # TRL drops the round's results: the rollout ends on its call
                    continue
                state.tokens += suffix
                state.messages.extend(results)
    return states


def _suffix_tokens(tokenizer, state: Rollout, results: list[dict[str, Any]], tools) -> int:
    """Tokens the tool results add between the model's turns (their rendering up to the next assistant header)."""
    before = tokenizer.apply_chat_template(state.prompt + state.messages, tools=list(tools), tokenize=False)
    after = tokenizer.apply_chat_template(state.prompt + state.messages + results, tools=list(tools),
                                          add_generation_prompt=True, tokenize=False)
    return len(tokenizer(after[len(before):] if after.startswith(before) else after,
                         add_special_tokens=False)["input_ids"])
