"""Whether a model's chat template can carry a tool-calling run, checked the way TRL's ``GRPOTrainer`` will (worker
side: imports transformers and TRL).

TRL 1.16 refuses ``tools=`` / ``environment_factory=`` when the template cannot render a full tool-calling
conversation (``trl.chat_template_utils.supports_tool_calling``: user -> assistant with ``tool_calls`` -> tool, the
call's name and arguments and the tool's content all present), and it parses the model's calls with a response
schema it only knows for the templates it ships (``add_response_schema``). :func:`tool_calling_problem` asks both
before a run is launched and, when the template fails, names the template that can: TRL's training template for it
(``get_training_chat_template``), when that one renders tool calls.

A ChatML model whose own template cannot render tools (SmolLM2-135M-Instruct: ``<|im_start|>role\n...<|im_end|>``
with no tools, no tool calls) gets TRL's Qwen2.5 template, which writes the same ChatML tokens and renders tools
into the system message and calls as ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` (Hermes format,
which TRL parses): :func:`use_tool_chat_template`, called by the training and preflight workers of a run with tools
before :func:`tool_calling_problem`. The Launch tab's agent quick start says so.
"""

from __future__ import annotations

import copy

# CHATML_TOOL_TEMPLATE: the name of the template use_tool_chat_template sets on a ChatML model, as the Launch tab and
# logs say it; defined beside the web side's prompt-length check, which renders prompts with that template too
from grpo_core.models.prompt_lengths import CHATML_TOOL_TEMPLATE

__all__ = ["CHATML_TOOL_TEMPLATE", "tool_calling_problem", "tool_template_report", "training_template_name",
           "use_tool_chat_template"]
_CHATML_TOKENS = ("<|im_start|>", "<|im_end|>")


def _is_chatml(tokenizer) -> bool:
    """Whether ``tokenizer``'s template writes ChatML turns and its vocabulary has both ChatML tokens as single
    tokens (so the Qwen2.5 template's turns tokenize as the model was tuned on)."""
    template = getattr(tokenizer, "chat_template", None)
    if not isinstance(template, str) or not all(token in template for token in _CHATML_TOKENS):
        return False
    vocab = tokenizer.get_vocab()
    return all(token in vocab for token in _CHATML_TOKENS)


def _training_template_renders_tools(tokenizer) -> bool:
    """Whether TRL ships a training template for ``tokenizer`` (``get_training_chat_template``) that renders a
    tool-calling conversation (``supports_tool_calling``); ``tokenizer`` itself is left as it is."""
    from trl.chat_template_utils import get_training_chat_template, supports_tool_calling

    try:
        training = get_training_chat_template(tokenizer)
    except (ValueError, TypeError):
        return False
    if training is None:
        return False
    patched = copy.copy(tokenizer)
    patched.chat_template = training
    return bool(supports_tool_calling(patched))


def use_tool_chat_template(tokenizer) -> str | None:
    """Give a ChatML ``tokenizer`` whose own template cannot render a tool-calling conversation (TRL's
    ``supports_tool_calling``), and for which TRL has no training template that can, TRL's Qwen2.5 template (set on
    ``tokenizer`` in place); returns :data:`CHATML_TOOL_TEMPLATE` then, else ``None`` (nothing changed: the model's
    own template renders tools, TRL will set its training template, or the model is not ChatML and
    :func:`tool_calling_problem` says what to do)."""
    from trl.chat_template_utils import qwen2_5_chat_template, supports_tool_calling

    if not _is_chatml(tokenizer) or supports_tool_calling(tokenizer) or _training_template_renders_tools(tokenizer):
        return None
    tokenizer.chat_template = qwen2_5_chat_template
    return CHATML_TOOL_TEMPLATE


def tool_calling_problem(tokenizer) -> str | None:
    """``None`` when TRL can train ``tokenizer``'s model with tools; else what is wrong and what to do, in one
    sentence or two."""
    from trl.chat_template_utils import add_response_schema, supports_tool_calling

    if getattr(tokenizer, "chat_template", None) is None:
        return ("the tokenizer has no chat template, so TRL cannot render tools or tool calls; use a chat model "
                "(e.g. a Qwen2.5 or Qwen3 instruct model)")
    if not supports_tool_calling(tokenizer):
        if _training_template_renders_tools(tokenizer):
            return ("the model's chat template cannot render a tool-calling conversation (TRL's "
                    "supports_tool_calling); TRL's training template for it can: set "
                    "trl.chat_template_utils.get_training_chat_template(tokenizer) as the tokenizer's "
                    "chat_template")
        return ("the model's chat template cannot render a tool-calling conversation (TRL's supports_tool_calling) "
                "and TRL ships no training template for it; use a model whose template renders tools (Qwen2.5, "
                "Qwen3, Llama 3.1/3.2, GPT-OSS: see trl/chat_templates/)")
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        try:
            add_response_schema(copy.copy(tokenizer))
        except ValueError:
            return ("TRL cannot parse this chat template's tool calls (no response template for it: "
                    "trl.chat_template_utils.add_response_schema); set the tokenizer's response_template, or use a "
                    "model whose template TRL ships (trl/chat_templates/)")
    return None


def training_template_name(tokenizer) -> str | None:
    """The name of the template TRL swaps in for multi-turn rollouts, or ``None`` when it keeps the model's own.

    TRL's ``GRPOTrainer`` with tools renders each tool result after the prompt and the model's call with
    ``self.chat_template``: the model's template when it is prefix-preserving
    (``is_chat_template_prefix_preserving``), else ``get_training_chat_template(tokenizer)``, one of the files TRL
    ships in ``trl/chat_templates/`` (named here by its file, ``qwen3_training.jinja``; ``"TRL's training template"``
    when no file holds that text).
    """
    from pathlib import Path

    import trl
    from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving

    try:
        if is_chat_template_prefix_preserving(tokenizer):
            return None
        training = get_training_chat_template(tokenizer)
    except (ValueError, TypeError):
        return None
    if training is None:
        return None
    for path in sorted((Path(trl.__file__).parent / "chat_templates").glob("*.jinja")):
        if path.read_text(encoding="utf-8") == training:
            return path.name
    return "TRL's training template"


def tool_template_report(tokenizer) -> dict[str, str | bool | None]:
    """What the Launch form says of a model's chat template for a run with tools (JSON-able).

    Returns:
        ``{"problem": str | None, "training_template": str | None, "dashboard_template": bool}``: :func:`tool_calling_problem`'s sentence
        (``None``: TRL can train it with tools), and, when it can, :data:`CHATML_TOOL_TEMPLATE` when the run's worker
        sets it (:func:`use_tool_chat_template`, applied to ``tokenizer`` here as the worker will), else
        :func:`training_template_name` (``None``: the model's own template renders every turn).
    """
    set_by_dashboard = use_tool_chat_template(tokenizer)  # what the run's worker will do
    problem = tool_calling_problem(tokenizer)
    if problem:
        return {"problem": problem, "training_template": None, "dashboard_template": False}
    return {"problem": None, "training_template": set_by_dashboard or training_template_name(tokenizer),
            "dashboard_template": set_by_dashboard is not None}
