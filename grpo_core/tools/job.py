"""Can this model's chat template carry a run with tools? The web half of the check the Launch form shows: the model
field (checked against the login's boundary by the caller) goes to :mod:`grpo_core.tools.worker` in a child process,
which loads only the tokenizer from disk and asks TRL (:mod:`grpo_core.engine.tool_template`, the preflight's own
check). Imports no torch.

:func:`check_tool_plugins` is the launch's check of a run's tool plugins and environment class, in the same child
(action ``check_plugins``), as :func:`grpo_core.reward_check.job.check_plugins` is for reward plugins.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from grpo_core.child_jobs.request import ChildJob, ask_worker
from grpo_core.child_jobs.slots import PLUGIN_CHECK_SLOTS, JobSlots

#: Wall-clock limit of one check (importing transformers and TRL and loading a tokenizer), seconds.
TOOL_TEMPLATE_TIMEOUT_S = 120.0


class ToolTemplateError(RuntimeError):
    """The check failed or timed out; the message says why (with the end of the child's output)."""


TOOL_TEMPLATE_JOB = ChildJob(
    module="grpo_core.tools.worker",
    error=ToolTemplateError,
    failed="checking the chat template for tools failed",
    timed_out="checking the chat template for tools took longer than {timeout_s} s and was stopped",
)


@dataclass(frozen=True)
class ToolTemplateCheck:
    """The answer: ``on_disk`` False when the tokenizer is not on disk yet (a hub id, a GGUF not yet converted:
    checked at the run's start); ``problem`` what stops TRL from training it with tools (``None``: nothing);
    ``training_template`` the template that renders multi-turn rollouts (``None``: the model's own);
    ``dashboard_template`` True when that is the one the dashboard sets on a ChatML model whose own template cannot
    render tools (``grpo_core.engine.tool_template.use_tool_chat_template``), else TRL's training template."""

    on_disk: bool
    problem: str | None = None
    training_template: str | None = None
    dashboard_template: bool = False


def check_tool_template(model: str, model_cache_dir: Path, *, env: Mapping[str, str] | None = None,
                        timeout_s: float = TOOL_TEMPLATE_TIMEOUT_S) -> ToolTemplateCheck:
    """Ask a child process whether ``model``'s chat template can carry tools (see the module docstring).

    Args:
        model: a run's ``model`` field, already passed through the login's boundary.

    Raises:
        ToolTemplateError: the child failed, timed out, or answered an error.
    """
    answer = ask_worker(TOOL_TEMPLATE_JOB, {"model": model, "model_cache_dir": str(model_cache_dir)},
                        timeout_s=timeout_s, env=env)
    if not isinstance(answer, dict) or "error" in answer:
        raise ToolTemplateError(str(answer.get("error") if isinstance(answer, dict) else answer)[:1000])
    return ToolTemplateCheck(on_disk=bool(answer.get("on_disk")), problem=answer.get("problem") or None,
                             training_template=answer.get("training_template") or None,
                             dashboard_template=answer.get("dashboard_template") is True)


#: Wall-clock limit of the plugin check (importing transformers' schema helper and the user's modules), seconds.
TOOL_PLUGIN_CHECK_TIMEOUT_S = 60.0

TOOL_PLUGIN_CHECK_JOB = ChildJob(
    module="grpo_core.tools.worker",
    error=ValueError,
    failed="trying the tool plugins and the environment failed",
    timed_out="the tool plugins and the environment did not answer within {timeout_s} s and were stopped",
    answered="checking the tool plugins and the environment failed: {error}",
)


def check_tool_plugins(tool_plugins: Sequence[str], environment: str, *,
                       timeout_s: float = TOOL_PLUGIN_CHECK_TIMEOUT_S, slots: JobSlots | None = PLUGIN_CHECK_SLOTS,
                       login: str | None = None) -> list[dict]:
    """Import a run's tool plugins and environment class in a child process and check that TRL can use them
    (:mod:`grpo_core.engine.tool_plugin_check`): a tool's JSON schema, the environment's class, its callable
    ``reset`` and its methods' schemas. Returns at once (no child, no slot, ``[]``) when there is neither. The child
    holds one of ``slots`` for ``login`` while it runs (``None``: no pool).

    Returns:
        the JSON schemas TRL renders into the prompt for the plugins and the environment's methods, in its order
        (:data:`MAX_SCHEMAS` at most, each a JSON object of at most :data:`MAX_SCHEMA_CHARS` characters; the
        child runs the user's code, so its answer is checked like any other input).

    Args:
        tool_plugins, environment: a run's fields, already passed through the login's boundary.

    Raises:
        ValueError: the problems found, each located (``tool_plugins: tool 1 'm:f': TRL cannot build its JSON
            schema: ...``, ``environment 'x.py:Env': no class Env in x.py``), joined by ``; ``; or the child failed
            or timed out (the message ends with the tail of its output).
        grpo_core.child_jobs.slots.SlotsBusy: ``login`` holds its share of ``slots``, or the pool is full; no child
            was started.
    """
    if not tool_plugins and not environment:
        return []
    with slots.hold(login) if slots is not None else nullcontext():
        answer = ask_worker(TOOL_PLUGIN_CHECK_JOB, {"action": "check_plugins", "tool_plugins": list(tool_plugins),
                                                   "environment": environment}, timeout_s=timeout_s)
    problems = answer.get("problems") if isinstance(answer, dict) else None
    if not isinstance(problems, list):
        raise ValueError(f"checking the tool plugins and the environment failed: unexpected answer {answer!r:.300}")
    if problems:
        raise ValueError("; ".join(str(problem)[:2000] for problem in problems[:8]))
    return _checked_schemas(answer.get("schemas"))


#: The most tool schemas, and the longest one in JSON characters, a plugin check's answer may carry.
MAX_SCHEMAS = 256
MAX_SCHEMA_CHARS = 50_000


def _checked_schemas(schemas: object) -> list[dict]:
    """The plugin check's schemas: a list of JSON objects within :data:`MAX_SCHEMAS` and :data:`MAX_SCHEMA_CHARS`.

    Raises:
        ValueError: anything else (names what is wrong).
    """
    if schemas is None:
        return []
    if not isinstance(schemas, list) or len(schemas) > MAX_SCHEMAS:
        raise ValueError(f"the tool plugin check answered schemas that are not a list of at most {MAX_SCHEMAS}")
    for schema in schemas:
        if not isinstance(schema, dict) or len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
            raise ValueError(f"the tool plugin check answered a schema that is not a JSON object of at most "
                             f"{MAX_SCHEMA_CHARS:,} characters")
    return schemas
