"""Can this model's chat template carry a run with tools? The web half of the check the Launch form shows: the model
field (checked against the login's boundary by the caller) goes to :mod:`grpo_core.tools.worker` in a child process,
which loads only the tokenizer from disk and asks TRL (:mod:`grpo_core.engine.tool_template`, the preflight's own
check). Imports no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from grpo_core.child_jobs.request import ChildJob, ask_worker

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
