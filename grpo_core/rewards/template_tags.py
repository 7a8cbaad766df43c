"""Tags a chat template opens before the completion starts, and format rules that know about them.

Reasoning models' chat templates end the generation prompt with an opened ``<think>`` (DeepSeek-R1 and its
distills: ``<｜Assistant｜><think>\\n``; Qwen3-style thinking templates of some fine-tunes). TRL decodes only the
generated tokens, so a well-formed completion then starts inside the thought and has no ``<think>`` of its own:
a format rule that requires one gave 0 to every completion (open-r1#560, trl#6966). The format rules
(``think_answer_format``, and ``format_regex`` when its pattern mentions ``<think>``) take the parameter
``template_opened_think``: ``yes`` (score the completion as if it began with ``<think>\\n``), ``no``, or ``auto``
(the default: the launcher sets ``yes`` or ``no`` from the model's chat template before the run, see
:func:`resolve_template_tags`; an unresolved ``auto`` counts as ``no``).

Reading a template needs no transformers: the template text comes from the model folder's
``tokenizer_config.json`` / ``chat_template.jinja`` or the GGUF file's ``tokenizer.chat_template`` metadata, and is
rendered with jinja2 as transformers compiles it (:mod:`grpo_core.models.prompt_lengths`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

OPENED_THINK_PARAM = "template_opened_think"
OPENED_THINK_CHOICES = ("auto", "yes", "no")
THINK_PREFIX = "<think>\n"
_PROBE = "\u2063probe\u2063"
_OPENED_THINK_RE = re.compile(r"<think>\s*$")


def template_opens_think(chat_template: str | None, special_tokens: Mapping[str, str] | None = None) -> bool:
    """Whether ``chat_template``'s generation prompt ends with an unclosed ``<think>``.

    The template is rendered for one user message with ``add_generation_prompt=True`` (as TRL renders a chat prompt)
    and the text after the message is looked at. A template that cannot be rendered falls back to a look at its
    text: ``<think>`` written after ``add_generation_prompt`` and no ``</think>`` after it.
    """
    if not chat_template:
        return False
    from grpo_core.models.prompt_lengths import ModelText, render_chat_prompt

    model_text = ModelText(folder=Path("."), chat_template=chat_template, special_tokens=dict(special_tokens or {}))
    try:
        rendered = render_chat_prompt([{"role": "user", "content": _PROBE}], model_text)
    except Exception:  # noqa: BLE001 - a template may raise anything (raise_exception, undefined names)
        tail = chat_template.rsplit("add_generation_prompt", 1)[-1] if "add_generation_prompt" in chat_template else ""
        return "<think>" in tail and "</think>" not in tail.split("<think>")[-1]
    if _PROBE not in rendered:
        return False
    return _OPENED_THINK_RE.search(rendered.rsplit(_PROBE, 1)[-1]) is not None


def gguf_chat_template(path: str | Path) -> str | None:
    """The ``tokenizer.chat_template`` metadata of a GGUF file, ``None`` when absent or unreadable (no ``gguf``)."""
    try:
        return _gguf_chat_template(str(path), Path(path).stat().st_mtime_ns)
    except OSError:
        return None


@lru_cache(maxsize=8)
def _gguf_chat_template(path: str, mtime_ns: int) -> str | None:
    try:
        from gguf import GGUFReader

        found = GGUFReader(str(path)).fields.get("tokenizer.chat_template")
        return bytes(found.parts[found.data[0]]).decode("utf-8") if found is not None else None
    except Exception:  # noqa: BLE001 - a missing package or a damaged file: the template is unknown
        return None


def model_chat_template(model: str, model_cache_dir: Path | None = None) -> tuple[str | None, dict[str, str]]:
    """``(chat template, special tokens)`` of a run's ``model`` field, read from disk only: a model folder's files
    (or a GGUF's converted folder), else a GGUF file's metadata; ``(None, {})`` when unknown (a hub id)."""
    from grpo_core.models.prompt_lengths import model_text_folder, read_model_text
    from grpo_core.models.source import ModelSourceError, describe_model

    folder = model_text_folder(model, model_cache_dir)
    if folder is None and model and Path(model).is_dir():  # a prepared model folder (the worker's model_path)
        folder = Path(model)
    if folder is not None:
        model_text = read_model_text(folder)
        return model_text.chat_template, model_text.special_tokens
    try:
        source = describe_model(model)
    except ModelSourceError:
        return None, {}
    if source.kind == "folder":
        model_text = read_model_text(source.location)
        return model_text.chat_template, model_text.special_tokens
    if source.kind == "gguf":
        return gguf_chat_template(source.location), {}
    return None, {}


def opened_think_prefix(setting: str, text: str) -> str:
    """``text`` as the format rules read it: with ``<think>\\n`` in front when ``setting`` is ``yes`` and the completion
    does not open the tag itself (a completion that repeats the template's ``<think>`` is read as it is)."""
    if setting == "yes" and not text.lstrip().startswith("<think>"):
        return THINK_PREFIX + text
    return text


def uses_opened_think(rule: str, params: Mapping[str, Any]) -> bool:
    """Whether a spec of ``rule`` with ``params`` has the ``template_opened_think`` parameter left at ``auto``."""
    from grpo_core.rewards.registry import get_rule

    try:
        names = {param.name for param in get_rule(rule).params}
    except ValueError:
        return False
    return OPENED_THINK_PARAM in names and params.get(OPENED_THINK_PARAM, "auto") in ("auto", "", None)


def resolve_template_tags(specs: Sequence[Any], opens_think: bool) -> list[Any]:
    """``specs`` (``RewardSpec`` objects or dicts) with every ``template_opened_think: auto`` set to ``yes`` or ``no``.

    Args:
        specs: a run's reward rules.
        opens_think: whether the prompts the model gets end with an opened ``<think>``: the chat template opens one
            (:func:`template_opens_think`) and the prompts are chat prompts (text prompts skip the template).
    """
    resolved = []
    for spec in specs:
        rule, params = _rule_of(spec), _params_of(spec)
        if not uses_opened_think(rule, params):
            resolved.append(spec)
            continue
        params = {**params, OPENED_THINK_PARAM: "yes" if opens_think else "no"}
        if isinstance(spec, Mapping):
            resolved.append({**spec, "params": params})
        else:
            resolved.append(spec.model_copy(update={"params": params}))
    return resolved


def resolve_for_model(
    specs: Sequence[Any], model: str, rows: Sequence[Mapping[str, Any]], model_cache_dir: Path | None = None
) -> tuple[list[Any], bool]:
    """``(specs resolved, opens_think)`` for ``model`` (a run's model field or a local folder) and the dataset
    ``rows``: the template's ``<think>`` counts only when the first row's prompt is a chat prompt (a message list)."""
    chat = bool(rows) and isinstance(rows[0].get("prompt"), list)
    opens = False
    if chat and any(uses_opened_think(_rule_of(s), _params_of(s)) for s in specs):
        template, specials = model_chat_template(model, model_cache_dir)
        opens = template_opens_think(template, specials)
    return resolve_template_tags(specs, opens), opens


def _rule_of(spec: Any) -> str:
    return str(spec.get("rule") if isinstance(spec, Mapping) else spec.rule)


def _params_of(spec: Any) -> Mapping[str, Any]:
    return (spec.get("params") if isinstance(spec, Mapping) else spec.params) or {}
