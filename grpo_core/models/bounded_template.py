"""Chat templates rendered in a bounded child process: a template is code a model folder brings.

A chat template is a jinja program from a model folder (``chat_template.jinja``, ``tokenizer_config.json``, a GGUF's
metadata), and a model folder may come from a login (a zipped dataset folder lands in the data directory, which is a
model root). jinja evaluates constant expressions while it *compiles* (``{{ 9**9**9 }}``, ``{{ 'a'|center(10**9) }}``
are computed before any sandbox check), and a loop runs as long as the template says: rendered in the web process,
either one stalls or exhausts it for every login. :func:`render_chat_prompts` renders a batch of prompts in
``python -m grpo_core.models.bounded_template``, a child process that:

* gets at most :data:`MAX_TEMPLATE_CHARS` of template and compiles it in jinja's sandbox (as transformers does:
  ``ImmutableSandboxedEnvironment``, ``trim_blocks``, ``lstrip_blocks``, loop controls, ``tojson``,
  ``raise_exception``, ``strftime_now``) with the optimizer off, so nothing is folded at compile time;
* lives under ``RLIMIT_AS`` (:data:`MAX_MEMORY_BYTES`) and ``RLIMIT_CPU``, and is killed after
  :data:`TIMEOUT_S` of wall time (plus :data:`PER_PROMPT_S` a prompt);
* answers at most :data:`MAX_RENDERED_CHARS` a prompt.

The parent imports no jinja; the child imports jinja2 only (no torch). Source of the template environment:
``render_jinja_template`` in transformers' ``utils/chat_template_utils.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

#: Longest template accepted, in characters (real chat templates are a few kilobytes; the largest ~30 KB).
MAX_TEMPLATE_CHARS = 200_000
#: Wall-clock seconds a batch may take, plus :data:`PER_PROMPT_S` for each prompt.
TIMEOUT_S = 10.0
PER_PROMPT_S = 0.01
#: Address space of the child, in bytes.
MAX_MEMORY_BYTES = 1024 * 1024 * 1024
#: Longest rendered prompt kept, in characters; a longer one is refused.
MAX_RENDERED_CHARS = 1_000_000


class TemplateError(ValueError):
    """The template cannot be rendered within the bounds, or refused a prompt; the message says which."""


def render_chat_prompts(template: str, prompts: Sequence[Sequence[Mapping[str, Any]]],
                        special_tokens: Mapping[str, str] | None = None, *,
                        tools: Sequence[Mapping[str, Any]] | None = None,
                        add_generation_prompt: bool = True) -> list[str | TemplateError]:
    """Each message list of ``prompts`` through ``template`` with the generation prompt added (as TRL renders a
    chat prompt), in a bounded child process (see the module docstring).

    Args:
        tools: the run's tools as JSON schemas (``{"type": "function", "function": {...}}``, what transformers'
            ``get_json_schema`` makes of a tool function), rendered by the template as TRL's
            ``apply_chat_template(..., tools=...)`` has them rendered; ``None`` or empty: no tools (TRL passes
            ``tools=None`` for an empty list).
        add_generation_prompt: append the assistant turn's opening (TRL does before generating).

    Returns:
        one item per prompt: the rendered text, or a :class:`TemplateError` saying why that prompt was refused.

    Raises:
        TemplateError: the template is too long, does not compile, or the child ran out of time or memory (the
            whole batch is refused).
    """
    if not isinstance(template, str) or len(template) > MAX_TEMPLATE_CHARS:
        raise TemplateError(f"the chat template is over {MAX_TEMPLATE_CHARS:,} characters")
    if not prompts:
        return []
    request = json.dumps({"template": template, "specials": dict(special_tokens or {}),
                          "tools": [dict(t) for t in tools] if tools else None,
                          "add_generation_prompt": bool(add_generation_prompt),
                          "prompts": [[dict(m) for m in messages] for messages in prompts]}, default=str)
    timeout = TIMEOUT_S + PER_PROMPT_S * len(prompts)
    try:
        done = subprocess.run([sys.executable, "-m", __name__], input=request.encode("utf-8"), capture_output=True,
                              timeout=timeout, check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise TemplateError(f"the chat template took over {timeout:g} s to render; it was stopped") from None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise TemplateError("the chat template could not be rendered within its memory and time bounds")
    if answer.get("error"):
        raise TemplateError(str(answer["error"])[:2000])
    results: list[str | TemplateError] = []
    for item in answer.get("rendered", []):
        results.append(item["text"] if "text" in item else TemplateError(str(item.get("error"))[:2000]))
    if len(results) != len(prompts):
        raise TemplateError("the chat template renderer answered the wrong number of prompts")
    return results


# ------------------------------------------------------------------------------------------------------ child
def _limit_resources(cpu_seconds: float) -> None:
    import resource

    for limit, value in ((resource.RLIMIT_AS, MAX_MEMORY_BYTES), (resource.RLIMIT_CPU, int(cpu_seconds) + 1)):
        try:
            resource.setrlimit(limit, (value, value))
        except (ValueError, OSError):  # a lower hard limit already holds
            pass


def _environment():
    from datetime import datetime

    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, optimized=False,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def _child() -> None:
    request = json.loads(sys.stdin.buffer.read())
    prompts = request["prompts"]
    _limit_resources(TIMEOUT_S + PER_PROMPT_S * len(prompts))
    try:
        compiled = _environment().from_string(request["template"])
    except Exception as exc:  # noqa: BLE001 - a template may fail to compile in any way
        print(json.dumps({"error": f"the model's chat template does not compile: {exc}"}))
        return
    rendered = []
    for messages in prompts:
        try:
            text = compiled.render(messages=messages, add_generation_prompt=request.get("add_generation_prompt", True),
                                   tools=request.get("tools") or None, documents=None, **request["specials"])
        except Exception as exc:  # noqa: BLE001 - raise_exception, undefined names, sandbox refusals
            rendered.append({"error": f"the model's chat template refused the prompt: {exc}"})
            continue
        if len(text) > MAX_RENDERED_CHARS:
            rendered.append({"error": f"the chat template rendered over {MAX_RENDERED_CHARS:,} characters"})
        else:
            rendered.append({"text": text})
    sys.stdout.write(json.dumps({"rendered": rendered}))


if __name__ == "__main__":
    _child()
