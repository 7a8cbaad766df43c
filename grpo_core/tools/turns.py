"""The turns of a multi-turn completion (a rollout with tool calls), as plain bounded JSON values.

TRL's ``GRPOTrainer`` (``tools=``, ``environment_factory=``; ``_tool_call_loop`` in ``trl/trainer/grpo_trainer.py``)
keeps each completion of a tool-calling rollout as a list of messages, in the order they happened::

    [{"role": "assistant", "content": "...", "tool_calls": [{"type": "function",
                                                              "function": {"name": "lookup", "arguments": {...}}}]},
     {"role": "tool", "name": "lookup", "content": "42"},            # a tool's result, as ``str(result)``
     {"role": "tool", "name": "lookup", "content": "{'error': '...'}"},  # a call that raised: ``str({"error": msg})``
     {"role": "assistant", "content": "The answer is 42."}]

A call the model wrote but TRL could not parse (``trl.chat_template_utils.parse_response`` falls back to the decoded
text) stays inside the assistant's ``content``. :func:`turns_of_completion` turns such a list into **turns**, each a
dict with a ``kind``:

* ``{"kind": "assistant", "text": str}``: text the model wrote (tool-call markup taken out);
* ``{"kind": "tool_call", "name": str, "arguments": str, "parsed": bool}``: a call, its arguments as JSON text (as
  the model wrote them when TRL could not parse them; ``parsed`` False then);
* ``{"kind": "tool_result", "name": str, "text": str, "error": bool}``: a tool's result, or its error;
* ``{"kind": "reward", "name": str, "value": float | None}``: an environment's reward (``get_reward()``);
* ``{"kind": "omitted", "count": int}``: turns left out past :data:`MAX_TURNS`.

Every value is bounded (a completion and a tool's output are hostile): at most :data:`MAX_TURNS` turns (the first
ones and the final assistant turn kept), texts cut at :data:`MAX_TURN_CHARS` characters, names at
:data:`MAX_NAME_CHARS`, arguments at :data:`MAX_ARGUMENT_CHARS`; a cut text ends with :data:`CUT_MARK`.
:func:`clean_turns` applies the same limits to turns read back (from the store, the wire), dropping anything else.

Which tokens TRL trained on (its ``tool_mask``: 1 for the model's tokens, 0 for a tool result's) is kept as
run-length spans, :func:`mask_spans`. Pure: imports no torch.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Sequence
from typing import Any

#: Most turns kept of one completion.
MAX_TURNS = 64
#: Longest text of one turn, in characters.
MAX_TURN_CHARS = 16_000
#: Longest tool name, in characters.
MAX_NAME_CHARS = 200
#: Longest arguments of one call (JSON text), in characters.
MAX_ARGUMENT_CHARS = 4_000
#: Most run-length spans of a tool mask kept (a mask alternates once per tool result).
MAX_MASK_SPANS = 2 * MAX_TURNS + 1
#: Appended to a text that was cut.
CUT_MARK = " [...]"

KINDS = ("assistant", "tool_call", "tool_result", "reward", "omitted")

# Markup of a tool call in a model's own text (Qwen/Hermes ``<tool_call>``, Llama 3 ``<|python_tag|>``, Mistral
# ``[TOOL_CALLS]``, ``<function=...>``): an unparsed call is cut out of the assistant's text at these.
_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_CALL_START = re.compile(r"<tool_call>|<\|python_tag\|>|\[TOOL_CALLS\]|<function=")
_CALL_NAME = re.compile(r'"name"\s*:\s*"([^"\\]{1,200})"')


def _cut(text: Any, limit: int) -> str:
    text = text if isinstance(text, str) else ("" if text is None else str(text))
    return text if len(text) <= limit else text[: limit - len(CUT_MARK)] + CUT_MARK


def _content_text(content: Any) -> str:
    """A message's ``content`` as text: a string as is, multimodal blocks' ``text`` joined, anything else ``str``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) if isinstance(b, dict) else "" for b in content[:MAX_TURNS])
    return str(content)[: MAX_TURN_CHARS + 1]


def _arguments_text(arguments: Any) -> tuple[str, bool]:
    """A call's arguments as JSON text, and whether they are a mapping TRL can call the tool with."""
    if isinstance(arguments, dict):
        try:
            return json.dumps(arguments, ensure_ascii=False, default=str)[: MAX_ARGUMENT_CHARS + 1], True
        except (TypeError, ValueError, RecursionError):
            return str(arguments)[: MAX_ARGUMENT_CHARS + 1], False
    return _content_text(arguments), False


def _call_turn(call: Any) -> dict[str, Any]:
    """One of TRL's ``tool_calls`` entries (nested ``function`` or flat) as a ``tool_call`` turn."""
    if not isinstance(call, dict):
        return {"kind": "tool_call", "name": "", "arguments": _cut(call, MAX_ARGUMENT_CHARS), "parsed": False}
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    arguments, parsed = _arguments_text(function.get("arguments"))
    name = function.get("name")
    parsed = parsed and isinstance(name, str) and call.get("type", "function") == "function"
    return {"kind": "tool_call", "name": _cut(name, MAX_NAME_CHARS), "arguments": _cut(arguments, MAX_ARGUMENT_CHARS),
            "parsed": parsed}


def _unparsed_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Split an assistant text into its prose and the tool calls written in it that TRL could not parse."""
    match = _CALL_START.search(text)
    if match is None:
        return text, []
    calls = [m.group(1).strip() for m in _CALL_BLOCK.finditer(text)] or [text[match.end():].strip()]
    prose = _CALL_BLOCK.sub("", text) if "<tool_call>" in text else text[: match.start()]
    turns = []
    for raw in calls[:MAX_TURNS]:
        name = ""
        try:
            value = json.loads(raw)
            if isinstance(value, dict) and isinstance(value.get("name"), str):
                name = value["name"]
        except (ValueError, RecursionError):
            found = _CALL_NAME.search(raw[:MAX_ARGUMENT_CHARS])
            name = found.group(1) if found else ""
        turns.append({"kind": "tool_call", "name": _cut(name, MAX_NAME_CHARS),
                      "arguments": _cut(raw, MAX_ARGUMENT_CHARS), "parsed": False})
    return prose.strip(), turns


def is_error_result(content: Any) -> bool:
    """Whether a tool message's content is TRL's record of a failed call: ``str({"error": message})`` (a tool that
    raised, an unknown tool, an unsupported call type), or a tool that returned such a mapping itself."""
    if isinstance(content, dict):
        return set(content) == {"error"}
    if not isinstance(content, str) or not content.startswith("{'error': ") or len(content) > 100_000:
        return False
    try:
        value = ast.literal_eval(content)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return False
    return isinstance(value, dict) and set(value) == {"error"}


def _error_text(content: Any) -> str:
    if isinstance(content, dict):
        return _content_text(content.get("error"))
    try:
        return str(ast.literal_eval(content)["error"])
    except (ValueError, SyntaxError, MemoryError, RecursionError, KeyError, TypeError):
        return _content_text(content)


def is_multi_turn(completion: Any) -> bool:
    """Whether a completion has turns beyond one assistant message: a tool call (parsed or not) or a tool result."""
    if not isinstance(completion, (list, tuple)):
        return False
    for message in completion:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool" or message.get("tool_calls"):
            return True
        if message.get("role") == "assistant" and _CALL_START.search(_content_text(message.get("content"))):
            return True
    return False


def turns_of_completion(completion: Any, rewards: dict[str, float | None] | None = None) -> list[dict[str, Any]] | None:
    """The turns of one completion (see the module docstring), or ``None`` for a single-turn completion (a string,
    or one assistant message without a tool call), which is recorded as its text alone.

    Args:
        completion: one entry of TRL's ``completions``: a string or a list of messages.
        rewards: environment rewards (name -> value; TRL names an environment's ``get_reward`` after its class),
            appended as ``reward`` turns.

    Returns:
        At most :data:`MAX_TURNS` bounded turns, in order.
    """
    if not is_multi_turn(completion):
        return None
    turns: list[dict[str, Any]] = []
    for message in completion:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "tool":
            content = message.get("content")
            error = is_error_result(content)
            text = _error_text(content) if error else _content_text(content)
            turns.append({"kind": "tool_result", "name": _cut(message.get("name"), MAX_NAME_CHARS),
                          "text": _cut(text, MAX_TURN_CHARS), "error": error})
            continue
        text = _content_text(message.get("content"))
        calls = message.get("tool_calls")
        unparsed: list[dict[str, Any]] = []
        if not calls:
            text, unparsed = _unparsed_calls(text)
        if text:
            turns.append({"kind": "assistant", "text": _cut(text, MAX_TURN_CHARS)})
        if isinstance(calls, list):
            turns.extend(_call_turn(call) for call in calls[: MAX_TURNS * 2])
        turns.extend(unparsed)
    for name, value in (rewards or {}).items():
        turns.append({"kind": "reward", "name": _cut(name, MAX_NAME_CHARS), "value": _finite(value)})
    return _bounded(turns)


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int past a float (a hostile 10**400)
        return None
    return number if math.isfinite(number) else None


def _bounded(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most :data:`MAX_TURNS` turns: the first ones, an ``omitted`` count, and the last assistant turn with the
    reward turns after it."""
    if len(turns) <= MAX_TURNS:
        return turns
    tail_start = len(turns)
    while tail_start > 0 and turns[tail_start - 1]["kind"] == "reward":
        tail_start -= 1
    last_assistant = next((i for i in range(tail_start - 1, -1, -1) if turns[i]["kind"] == "assistant"), None)
    tail = ([turns[last_assistant]] if last_assistant is not None else []) + turns[tail_start:]
    tail = tail[-(MAX_TURNS // 2):]
    head = turns[: MAX_TURNS - 1 - len(tail)]
    omitted = len(turns) - len(head) - len(tail)
    return head + [{"kind": "omitted", "count": omitted}] + tail


def clean_turns(value: Any) -> list[dict[str, Any]] | None:
    """Turns read back (the store, the HTTP wire: hostile), reduced to the shape and limits of
    :func:`turns_of_completion`: unknown kinds and keys dropped, texts cut, at most :data:`MAX_TURNS`. ``None``
    for anything that is not a list."""
    if not isinstance(value, list):
        return None
    cleaned = []
    for turn in value[: MAX_TURNS]:
        if not isinstance(turn, dict) or turn.get("kind") not in KINDS:
            continue
        kind = turn["kind"]
        if kind == "assistant":
            cleaned.append({"kind": kind, "text": _cut(turn.get("text"), MAX_TURN_CHARS)})
        elif kind == "tool_call":
            cleaned.append({"kind": kind, "name": _cut(turn.get("name"), MAX_NAME_CHARS),
                            "arguments": _cut(turn.get("arguments"), MAX_ARGUMENT_CHARS),
                            "parsed": turn.get("parsed") is True})
        elif kind == "tool_result":
            cleaned.append({"kind": kind, "name": _cut(turn.get("name"), MAX_NAME_CHARS),
                            "text": _cut(turn.get("text"), MAX_TURN_CHARS), "error": turn.get("error") is True})
        elif kind == "reward":
            cleaned.append({"kind": kind, "name": _cut(turn.get("name"), MAX_NAME_CHARS),
                            "value": _finite(turn.get("value"))})
        else:
            count = turn.get("count")
            cleaned.append({"kind": kind, "count": count if isinstance(count, int) and count >= 0 else 0})
    return cleaned


def mask_spans(mask: Sequence[Any] | None) -> list[list[int]] | None:
    """TRL's ``tool_mask`` of one completion (1: a token the model wrote and the loss trains on; 0: a tool result's
    token) as run-length spans ``[[trained, length], ...]`` in token order; ``None`` for no mask or one that trains
    on every token. At most :data:`MAX_MASK_SPANS` spans (the last one covers the rest)."""
    if mask is None:
        return None
    values = [1 if int(v) else 0 for v in mask]
    if all(values):
        return None
    spans: list[list[int]] = []
    for value in values:
        if spans and spans[-1][0] == value:
            spans[-1][1] += 1
        else:
            spans.append([value, 1])
    if len(spans) > MAX_MASK_SPANS:
        rest = sum(length for _, length in spans[MAX_MASK_SPANS - 1:])
        spans = spans[: MAX_MASK_SPANS - 1] + [[spans[MAX_MASK_SPANS - 1][0], rest]]
    return spans


def clean_spans(value: Any) -> list[list[int]] | None:
    """Mask spans read back (hostile), kept only when they are ``[[0|1, length >= 1], ...]`` within the limits."""
    if not isinstance(value, list) or not value or len(value) > MAX_MASK_SPANS:
        return None
    spans = []
    for span in value:
        if (not isinstance(span, (list, tuple)) or len(span) != 2 or span[0] not in (0, 1)
                or not isinstance(span[1], int) or isinstance(span[1], bool) or not 1 <= span[1] <= 10_000_000):
            return None
        spans.append([int(span[0]), int(span[1])])
    return spans


def trained_flags(spans: Sequence[Sequence[int]] | None, num_tokens: int) -> list[bool]:
    """Per token of a completion of ``num_tokens`` tokens, whether TRL trained on it (from :func:`mask_spans`;
    every token without spans; a token past the spans counts as trained, as TRL pads the mask with 1)."""
    flags: list[bool] = []
    for trained, length in spans or ():
        flags.extend([bool(trained)] * min(length, max(0, num_tokens - len(flags))))
    return flags + [True] * max(0, num_tokens - len(flags))


def final_assistant_text(completion: Any) -> str:
    """The text of the model's final assistant turn: what an answer rule judges. A string completion is returned as
    is; for messages, the ``content`` of the last assistant message, with any tool-call markup cut out, so that
    neither a tool's output nor a call's arguments can pay the rule. ``""`` when there is none."""
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if not is_multi_turn(completion):
        return "\n".join(_content_text(m.get("content")) if isinstance(m, dict) else str(m) for m in completion)
    for message in reversed(list(completion)):
        if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
            text = _content_text(message.get("content"))
            return text if message.get("tool_calls") else _unparsed_calls(text)[0]
    return ""


def trajectory_summary(turns: Sequence[dict[str, Any]] | None) -> dict[str, Any]:
    """What a completion's turns did: ``calls`` (tool calls), ``failures`` (failed results and unparsed calls),
    ``unparsed`` (calls TRL could not parse), ``ended_on_call`` (its last call got no result: the rollout stopped at
    ``max_tool_calling_iterations`` or at the completion length) and ``tools`` (names called, in order)."""
    calls = [t for t in turns or () if t.get("kind") == "tool_call"]
    results = [t for t in turns or () if t.get("kind") == "tool_result"]
    unparsed = sum(1 for t in calls if not t.get("parsed"))
    last_kind = next((t.get("kind") for t in reversed(list(turns or ())) if t.get("kind") in ("assistant", "tool_call",
                                                                                             "tool_result")), None)
    return {"calls": len(calls), "failures": sum(1 for t in results if t.get("error")) + unparsed,
            "unparsed": unparsed, "ended_on_call": last_kind == "tool_call" and any(t.get("parsed") for t in calls),
            "tools": [str(t.get("name", "")) for t in calls]}


def messages_from_turns(turns: Any) -> list[dict[str, Any]]:
    """A recorded trajectory back as the messages TRL hands reward functions (the shape of the module docstring), so
    that its turns can be scored again (the reward workbench): assistant texts with their parsed calls as
    ``tool_calls``, a call that did not parse written back into the assistant's text as ``<tool_call>...</tool_call>``
    (so it still counts as unparsed), each result as a tool message (an error as TRL writes it,
    ``str({"error": ...})``). Reward and ``omitted`` turns are left out. ``turns`` is cleaned first (hostile)."""
    messages: list[dict[str, Any]] = []

    def assistant() -> dict[str, Any]:
        if not messages or messages[-1]["role"] != "assistant":
            messages.append({"role": "assistant", "content": ""})
        return messages[-1]

    for turn in clean_turns(turns) or []:
        kind = turn["kind"]
        if kind == "assistant":
            last = assistant()
            if last.get("tool_calls") or last["content"]:  # a new assistant turn after a call or text
                messages.append({"role": "assistant", "content": turn["text"]})
            else:
                last["content"] = turn["text"]
        elif kind == "tool_call":
            last = assistant()
            arguments: Any = None
            if turn["parsed"]:
                try:
                    arguments = json.loads(turn["arguments"])
                except (ValueError, RecursionError):
                    arguments = None
            if isinstance(arguments, dict):
                last.setdefault("tool_calls", []).append(
                    {"type": "function", "function": {"name": turn["name"], "arguments": arguments}})
            else:
                last["content"] += f"<tool_call>{turn['arguments']}</tool_call>"
        elif kind == "tool_result":
            content = str({"error": turn["text"]}) if turn["error"] else turn["text"]
            messages.append({"role": "tool", "name": turn["name"], "content": content})
    return messages
