"""The longest prompt of a run in tokens, as the model will get it: what the memory estimate
(:mod:`grpo_core.models.memory_estimate`) sizes the batch's sequences with. Web process: no transformers, no torch.

TRL renders a chat prompt with the run's chat template, the run's tools (their JSON schemas) in it, and the earlier
turns' ``tool_calls`` as the template writes them (``GRPOTrainer._generate``: ``apply_chat_template(prompts,
tools=self.tools, chat_template=self.chat_template, add_generation_prompt=True)``). :func:`longest_prompt_tokens`
counts that:

* **counted** when the model's tokenizer is on disk (a folder, a converted GGUF): every prompt rendered in the bounded
  child with the template the run uses (:func:`grpo_core.models.prompt_lengths.run_model_text`) and the tools, then
  tokenized with ``tokenizers`` (:func:`grpo_core.models.prompt_lengths.check_prompt_lengths`);
* **estimated** from characters otherwise (the default GGUF before its first run, a hub id): :func:`estimated_tokens`,
  which counts every message's text, each ``tool_calls`` entry's name and JSON arguments, the tools' JSON schemas and
  the template's own tokens, and errs high (digits a token each, other characters :data:`CHARS_PER_TOKEN` a token, a
  template's turn markers and tool preamble at their largest among common templates).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Characters a token for text other than digits, low (BPE vocabularies take about 3.5 to 4.5 characters of English a
#: token, and about 3 of JSON), so that the estimate errs high.
CHARS_PER_TOKEN = 3.0
#: Tokens a chat template adds for one message: its role and turn markers (ChatML's ``<|im_start|>role\n`` and
#: ``<|im_end|>\n``: 5 to 6 with SmolLM2's tokenizer).
TOKENS_PER_MESSAGE = 6
#: Tokens a template adds once: a BOS token, the generation prompt (``<|im_start|>assistant\n``: 3).
TEMPLATE_TOKENS = 8
#: Tokens of the default system prompt a template writes when the prompt has none (SmolLM2's 24, Qwen2.5's 19).
DEFAULT_SYSTEM_TOKENS = 30
#: Tokens a template adds around a tool call or a tool result (``<tool_call>\n...\n</tool_call>``,
#: ``<tool_response>``).
TOKENS_PER_TOOL_TURN = 8
#: Tokens of a template's tools preamble (Qwen2.5's "# Tools ... <tools></tools> ... <tool_call>" instructions are 107
#: tokens with SmolLM2's tokenizer).
TOOLS_PREAMBLE_TOKENS = 110


@dataclass(frozen=True)
class LongestPrompt:
    """The longest prompt of a run's rows.

    Attributes:
        tokens: its length in tokens, as the model gets it, a row's images included (each at
            :func:`grpo_core.models.vision.image_tokens` when counted, ``DEFAULT_IMAGE_TOKENS`` when estimated); 0
            without rows.
        counted: True when counted with the model's tokenizer; False when :func:`estimated_tokens` estimated it.
        how: one phrase for the user: how it was counted and with which template and tools.
    """

    tokens: int
    counted: bool
    how: str


def _text_tokens(text: str) -> int:
    digits = sum(ch.isdigit() for ch in text)
    return digits + math.ceil((len(text) - digits) / CHARS_PER_TOKEN)


def _content_text(content: Any) -> str:
    """A message's content as text: a string as is, a list of parts' ``text`` joined (an image part is counted by
    :mod:`grpo_core.models.vision`), anything else as JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) if isinstance(part, Mapping) else str(part) for part in content)
    return "" if content is None else json.dumps(content, ensure_ascii=False, default=str)


def estimated_tokens(prompt: Any, tools: Sequence[Mapping[str, Any]] | None = None) -> int:
    """A prompt's tokens estimated from its characters, erring high (see the module docstring).

    Args:
        prompt: a text prompt, or a list of messages (``role``, ``content``, an assistant's ``tool_calls`` with
            ``function.name`` and ``function.arguments``, a tool message's ``name``).
        tools: the run's tools as JSON schemas (rendered into the system prompt of a chat prompt); ``None``: none.
    """
    if isinstance(prompt, str):
        return _text_tokens(prompt)
    messages = prompt if isinstance(prompt, list) else []
    tokens = TEMPLATE_TOKENS
    if not any(isinstance(m, Mapping) and m.get("role") == "system" for m in messages):
        tokens += DEFAULT_SYSTEM_TOKENS
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        tokens += TOKENS_PER_MESSAGE + _text_tokens(_content_text(message.get("content")))
        if message.get("role") == "tool":
            tokens += TOKENS_PER_TOOL_TURN + _text_tokens(str(message.get("name") or ""))
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            function = call.get("function", call) if isinstance(call, Mapping) else {}
            written = {"name": function.get("name"), "arguments": function.get("arguments")} \
                if isinstance(function, Mapping) else function
            tokens += TOKENS_PER_TOOL_TURN + _text_tokens(json.dumps(written, ensure_ascii=False, default=str))
    if tools:
        tokens += TOOLS_PREAMBLE_TOKENS + sum(_text_tokens(json.dumps(dict(schema), ensure_ascii=False, default=str))
                                              for schema in tools)
    return tokens


def run_uses_tools(config: Mapping[str, Any]) -> bool:
    """Whether a run config (a ``RunConfig`` dump) gives the policy tools: library tools, tool plugins or an
    environment class (TRL's ``tools=`` / ``environment_factory=``)."""
    return bool(config.get("tools") or config.get("tool_plugins") or config.get("environment"))


def run_tool_schemas(config: Mapping[str, Any], plugin_schemas: Sequence[Mapping[str, Any]] = ()) -> list[dict] | None:
    """The JSON schemas TRL renders into a run's prompts: its library tools' (:data:`grpo_core.tools.library.
    LIBRARY_SCHEMAS`), then ``plugin_schemas`` (its tool plugins' and environment's, from
    :func:`grpo_core.tools.job.check_tool_plugins`); ``None`` for a run without tools.

    Raises:
        ValueError: a library tool name the library does not have.
    """
    if not run_uses_tools(config):
        return None
    from grpo_core.tools.library import library_schemas

    return library_schemas([str(name) for name in config.get("tools") or []]) + [dict(s) for s in plugin_schemas]


def plain_phrase(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with Markdown's and HTML's markup characters replaced (a tool's name and a
    template's error message come from users' files and are shown in the Launch tab's Markdown)."""
    return re.sub(r"[^\w .,:;'\-+=/]", "?", text[:limit])


def _tool_phrase(tools: Sequence[Mapping[str, Any]] | None) -> str:
    if tools is None:
        return ""
    names = [plain_phrase(str(s["function"].get("name", "?")) if isinstance(s.get("function"), Mapping) else "?", 64)
             for s in tools if isinstance(s, Mapping)]
    if not names:
        return ", no tool schema"
    if len(names) == 1:
        return f", the {names[0]} tool's schema included"
    more = f" and {len(names) - 6} more" if len(names) > 6 else ""
    return f", the schemas of {len(names)} tools ({', '.join(names[:6])}{more}) included"


def longest_prompt_tokens(
    rows: Sequence[Mapping[str, Any]], config: Mapping[str, Any], model_cache_dir: Path | None, *,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> LongestPrompt:
    """The longest prompt among ``rows`` in tokens as the run's model gets it (see the module docstring); counted
    when the tokenizer is on disk and the template renders every prompt, else estimated.

    Args:
        config: the run config (``model``, ``tools``, ``tool_plugins``, ``environment``).
        tools: the run's tool schemas (:func:`run_tool_schemas`); ``None``: taken from ``config``'s library tools.
    """
    from grpo_core.models.prompt_lengths import check_prompt_lengths, model_text_folder, read_model_text, run_model_text

    if tools is None:
        tools = run_tool_schemas(config)
    if not rows:
        return LongestPrompt(0, False, "no dataset rows")
    folder = model_text_folder(str(config.get("model") or ""), model_cache_dir)
    reason = "the model's tokenizer is not on disk yet (a GGUF is converted at its first run)"
    if folder is not None:
        try:
            model_text, template = run_model_text(read_model_text(folder), uses_tools=tools is not None)
            check = check_prompt_lengths(rows, model_text, 0, tools=tools)
        except Exception as exc:  # noqa: BLE001 - a template or tokenizer that fails: estimate instead, say why
            reason = f"the prompts could not be rendered and tokenized ({plain_phrase(str(exc), 200)})"
        else:
            top = check.longest[0].tokens if check.longest else 0
            return LongestPrompt(top, True, f"counted with the model's tokenizer, rendered with {template}"
                                            f"{_tool_phrase(tools)}")
    from grpo_core.models.vision import DEFAULT_IMAGE_TOKENS

    top = max(estimated_tokens(row.get("prompt"), tools) + DEFAULT_IMAGE_TOKENS * len(row.get("images") or [])
              for row in rows)
    return LongestPrompt(top, False, f"estimated from characters, erring high: {reason}{_tool_phrase(tools)}")
