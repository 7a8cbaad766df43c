"""Whether a model's chat template can carry a tool-calling run, checked the way TRL's ``GRPOTrainer`` will (worker
side: imports transformers and TRL).

TRL 1.16 refuses ``tools=`` / ``environment_factory=`` when the template cannot render a full tool-calling
conversation (``trl.chat_template_utils.supports_tool_calling``: user -> assistant with ``tool_calls`` -> tool, the
call's name and arguments and the tool's content all present), and it parses the model's calls with a response
schema it only knows for the templates it ships (``add_response_schema``). :func:`tool_calling_problem` asks both
before a run is launched and, when the template fails, names the template that can: TRL's training template for it
(``get_training_chat_template``), when that one renders tool calls.
"""

from __future__ import annotations

import copy


def tool_calling_problem(tokenizer) -> str | None:
    """``None`` when TRL can train ``tokenizer``'s model with tools; else what is wrong and what to do, in one
    sentence or two."""
    from trl.chat_template_utils import add_response_schema, get_training_chat_template, supports_tool_calling

    if getattr(tokenizer, "chat_template", None) is None:
        return ("the tokenizer has no chat template, so TRL cannot render tools or tool calls; use a chat model "
                "(e.g. a Qwen2.5 or Qwen3 instruct model)")
    if not supports_tool_calling(tokenizer):
        try:
            training = get_training_chat_template(tokenizer)
        except (ValueError, TypeError):
            training = None
        if training is not None:
            patched = copy.copy(tokenizer)
            patched.chat_template = training
            if supports_tool_calling(patched):
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


def tool_template_report(tokenizer) -> dict[str, str | None]:
    """What the Launch form says of a model's chat template for a run with tools (JSON-able).

    Returns:
        ``{"problem": str | None, "training_template": str | None}``: :func:`tool_calling_problem`'s sentence
        (``None``: TRL can train it with tools), and, when it can, :func:`training_template_name` (``None``: the
        model's own template renders every turn).
    """
    problem = tool_calling_problem(tokenizer)
    return {"problem": problem, "training_template": None if problem else training_template_name(tokenizer)}
