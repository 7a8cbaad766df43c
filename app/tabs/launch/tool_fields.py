"""The Launch tab's "Tools" group: the library's tools (a checkbox each, with its description), the user's own tool
functions and environment class as plugins (TRL's ``tools`` and ``environment_factory``), the iteration limit, and a
line saying whether the model's chat template can carry a run with tools and which template TRL renders the turns
with (the preflight's own check, :mod:`grpo_core.engine.tool_template`, run in a child: :mod:`grpo_core.tools.job`).

Plugin tools and environments pass the login boundary of reward plugins when launched
(:meth:`grpo_core.access.boundary.Boundary.check_config`, in ``submit_run``), then are imported and checked in a child
(:func:`grpo_core.tools.job.check_tool_plugins`); the group says what that boundary allows for the login. Only lays out and words: :func:`app.tabs.launch.tab.create_launch_tab` connects the events.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from app.context import AppContext, boundary_of
from app.tabs.launch.form import TOOL_FIELDS, brief_help
from grpo_core.access.boundary import BoundaryError
from grpo_core.run_config import RunConfig
from grpo_core.tools.job import ToolTemplateError, check_tool_template
from grpo_core.tools.library import library_descriptions

#: The fields whose values say whether a run has tools (the template line shows only then).
TOOL_INPUTS = ("model", "tools", "tool_plugins", "environment")


def uses_tools(tools: Any, tool_plugins: Any, environment: Any) -> bool:
    """Whether the form's tool fields give the policy any tool or an environment."""
    return bool(tools) or bool(str(tool_plugins or "").strip()) or bool(str(environment or "").strip())


def plugin_boundary_markdown(ctx: AppContext) -> str:
    """One line: how plugin tools and environments are named and, served with several logins, what the reward
    plugins' boundary allows them (:mod:`grpo_core.access.boundary`)."""
    line = ("Plugins: name a function (`/path/tools.py:weather`, one a line) or an environment class "
            "(`/path/env.py:Shop`: its public methods are the tools, `reset()` per rollout, optional `get_reward()`); "
            "the worker imports them as TRL's `tools` and `environment_factory`. The launch and the preflight try them "
            "first (each tool needs type hints and a docstring describing its arguments; the class a callable "
            "`reset`).")
    logins = ctx.logins.logins() if ctx.logins is not None else [user for user, _ in ctx.settings.auth]
    if len(logins) < 2:
        return line
    folders = ", ".join(f"`{d}`" for d in ctx.settings.plugin_dirs) or "none"
    packages = ", ".join(f"`{p}`" for p in ctx.settings.plugin_packages) or "none"
    return (f"{line} With logins they pass the boundary of reward plugins: only code in the admin's plugin folders "
            f"({folders}) or allowed packages ({packages}), unless the login is marked `[run-code]`; anything else is "
            "refused at launch.")


def tool_template_markdown(ctx: AppContext, model: str | None, active: bool, request: object = None) -> str:
    """The template line for a run with tools (``""`` without): whether TRL can train ``model``'s chat template with
    tools (``supports_tool_calling`` and a parser for its calls) and, if not, what to use instead; when it can,
    which template renders the turns (the model's own, or the training template TRL swaps in). A model folder the
    login may not name is not read."""
    if not active:
        return ""
    try:
        name = boundary_of(ctx, request).model((model or "").strip() or RunConfig().model, "model")
    except BoundaryError as exc:
        return f"Tool template: not read ({exc})."
    try:
        check = check_tool_template(name, ctx.settings.model_cache_dir, env=ctx.launcher.env)
    except (ToolTemplateError, OSError) as exc:
        return f"⚠️ Tool template: not checked ({str(exc)[:300]})."
    if not check.on_disk:
        return ("Tool template: the tokenizer is not on disk yet; the preflight and the run's start check that the "
                "chat template renders tool calls (TRL's `supports_tool_calling`).")
    if check.problem:
        return f"❌ **The chat template cannot carry tools:** {check.problem}."
    if check.dashboard_template:
        return (f"✅ Tool template: the model's own chat template cannot render tools, so the dashboard sets "
                f"{check.training_template} (the model writes ChatML turns) for the run, the preflight and Try the "
                "model.")
    template = (f"TRL renders the turns with its training template `{check.training_template}` (the model's own is "
                "not prefix-preserving)" if check.training_template else "the model's own template renders every turn")
    return f"✅ Tool template: the chat template renders tool calls and TRL parses them; {template}."


def build_tool_fields(ctx: AppContext, parts: dict[str, Any], field_component) -> None:
    """The group ``launch-tools`` (a closed accordion): ``tools`` (checkboxes labelled with each library tool's
    description), ``tool_plugins``, ``environment``, ``max_tool_calling_iterations``, ``tool_plugin_note`` and
    ``tool_template`` (the template line, empty without tools). ``field_component(field, label, extra)`` builds a
    plain config field."""
    labels = {field: (label, extra) for field, label, extra in TOOL_FIELDS}
    with gr.Accordion("Tools and environment (multi-turn rollouts: TRL's tools, environment_factory)", open=False,
                      elem_id="launch-tools"):
        gr.Markdown("The policy may call tools over several turns: model → tool call → tool result → model, at most "
                    "`max_tool_calling_iterations` rounds. A tool that raises or hangs is a failed call; `python` "
                    "runs only in the sandbox.")
        descriptions = library_descriptions()
        parts["tools"] = gr.CheckboxGroup(
            label=labels["tools"][0], info=brief_help("tools"), value=list(RunConfig().tools),
            choices=[(f"{name}: {text}", name) for name, text in descriptions.items()], elem_id="hp-tools")
        with gr.Row(equal_height=True):
            for field in ("tool_plugins", "environment", "max_tool_calling_iterations"):
                parts[field] = field_component(field, *labels[field])
        # read again at each page load by the Launch tab (CatalogSync.page_value): the auth file may have changed
        parts["tool_plugin_note"] = gr.Markdown(plugin_boundary_markdown(ctx), elem_id="launch-tool-plugins-note")
        parts["tool_template"] = gr.Markdown(elem_id="launch-tool-template")
