"""A multi-turn completion's trajectory (a rollout with tool calls) as distinct turn blocks, and the Inspect filters
on what the rollouts did (pure functions of store records; no Gradio).

The turns (:mod:`grpo_core.tools.turns`) come back from the store and are cleaned again before they are drawn:
every text (assistant text, a call's name and arguments, a tool's output) is HTML-escaped, since a completion and a
tool's output are hostile. Each turn is a ``<div class="grpo-turn" data-kind="...">``: the model's text, a tool call
(its name and arguments as the model wrote them; ``data-parsed="0"`` when TRL could not parse it), a tool result
(``data-error="1"`` for a failed call) and an environment's reward.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from grpo_core.tools.turns import clean_turns, trajectory_summary
from storage import CompletionRecord, GroupRecord

TURN_CSS = """
.grpo-turn { border-left: 3px solid #9ca3af; padding: 2px 6px; margin: 4px 0; font-size: 12px; }
.grpo-turn pre { margin: 2px 0; }
.grpo-turn[data-kind="assistant"] { border-color: #2563eb; }
.grpo-turn[data-kind="tool_call"] { border-color: #7c3aed; background: #f5f3ff; }
.grpo-turn[data-kind="tool_result"] { border-color: #059669; background: #f0fdf4; }
.grpo-turn[data-kind="reward"] { border-color: #d97706; }
.grpo-turn.failed { border-color: #dc2626; background: #fef2f2; }
.grpo-turn .turn-label { font-weight: 600; color: #374151; }
.grpo-turn-summary { border-left: 3px solid #7c3aed; padding: 2px 6px; margin: 4px 0; font-size: 12px; }
.grpo-turn-summary.failed { border-color: #dc2626; }
"""

#: The trajectory filters of the Inspect tab: (label, key), each keeping the groups with at least one such completion.
TRAJECTORY_FILTERS: tuple[tuple[str, str], ...] = (
    ("with a tool call", "called_tool"),
    ("with a failed tool call", "tool_failed"),
    ("with a completion without a tool call", "no_tool_call"),
    ("stopped at the tool-calling limit", "iteration_limit"),
)
TRAJECTORY_FILTER_KEYS = frozenset(key for _, key in TRAJECTORY_FILTERS)


def completion_summary(completion: CompletionRecord) -> dict[str, Any]:
    """What a recorded completion's rollout did (:func:`grpo_core.tools.turns.trajectory_summary` of its cleaned
    turns); a single-turn completion made no call."""
    return trajectory_summary(clean_turns(completion.turns) or [])


def completion_matches(completion: CompletionRecord, key: str) -> bool:
    """Whether ``completion`` is one that the trajectory filter ``key`` looks for.

    Raises:
        ValueError: ``key`` is not a key of :data:`TRAJECTORY_FILTERS`.
    """
    if key not in TRAJECTORY_FILTER_KEYS:
        raise ValueError(f"unknown trajectory filter {key!r}; expected one of {sorted(TRAJECTORY_FILTER_KEYS)}")
    summary = completion_summary(completion)
    return {"called_tool": summary["calls"] > 0, "tool_failed": summary["failures"] > 0,
            "no_tool_call": summary["calls"] == 0, "iteration_limit": summary["ended_on_call"]}[key]


def filter_trajectories(groups: Sequence[GroupRecord], key: str) -> list[GroupRecord]:
    """The groups with at least one completion that the trajectory filter ``key`` looks for, in their order.

    Raises:
        ValueError: ``key`` is not a key of :data:`TRAJECTORY_FILTERS`.
    """
    return [g for g in groups if any(completion_matches(c, key) for c in g.completions)]


def _text(text: str, max_chars: int) -> str:
    shown = text if len(text) <= max_chars else text[:max_chars] + f"\n… ({len(text)} characters)"
    return f"<pre>{html.escape(shown)}</pre>"


def _tool_block(kind: str, data: str, label: str, name: str, note: str, text: str, *, failed: bool,
                max_chars: int) -> str:
    """A tool call's or a tool result's block: ``data`` its ``data-*`` attribute, ``name`` the tool (escaped here),
    ``note`` HTML after the name, ``failed`` marks it red."""
    return (f'<div class="grpo-turn{" failed" if failed else ""}" data-kind="{kind}" {data}>'
            f'<span class="turn-label">{label}</span> <code>{html.escape(name)}</code>{note}'
            f"{_text(text, max_chars)}</div>")


def turns_html(turns: Any, *, max_chars: int = 4000) -> str:
    """A completion's turns as distinct blocks, in order (see the module docstring); ``""`` when there are none.

    Args:
        turns: the turns as stored (cleaned here: hostile).
        max_chars: each text is cut past this many characters, with a note.
    """
    blocks = []
    for turn in clean_turns(turns) or []:
        kind = turn["kind"]
        if kind == "assistant":
            blocks.append('<div class="grpo-turn" data-kind="assistant"><span class="turn-label">assistant</span>'
                          f"{_text(turn['text'], max_chars)}</div>")
        elif kind == "tool_call":
            parsed = turn["parsed"]
            note = "" if parsed else ' <span class="grpo-badge grpo-badge-error">not parsed: failed call</span>'
            blocks.append(_tool_block("tool_call", f'data-parsed="{int(parsed)}"', "tool call", turn["name"] or "?",
                                      note, turn["arguments"], failed=not parsed, max_chars=max_chars))
        elif kind == "tool_result":
            error = turn["error"]
            blocks.append(_tool_block("tool_result", f'data-error="{int(error)}"', "tool error" if error else
                                      "tool result", turn["name"], "", turn["text"], failed=error, max_chars=max_chars))
        elif kind == "reward":
            value = "–" if turn["value"] is None else f"{turn['value']:.3f}"
            blocks.append(f'<div class="grpo-turn" data-kind="reward"><span class="turn-label">environment reward'
                          f"</span> <code>{html.escape(turn['name'])}</code> {value}</div>")
        else:
            blocks.append(f'<div class="grpo-turn" data-kind="omitted">… {turn["count"]} turns not kept …</div>')
    if not blocks:
        return ""
    return f'<div class="grpo-trajectory">{"".join(blocks)}</div>'


def turns_summary_html(turns: Any) -> str:
    """A completion's turns as one line instead of their blocks: how many assistant turns and tool calls (by tool),
    how many failed, whether it stopped on a call without a result; ``""`` for a single-turn completion. Where many
    trajectories are listed (one prompt across steps: 50 groups of G), their turns' texts (tens of kB each) are
    left to the views of one step or one pair (the step view, the diff).

    The block is ``<div class="grpo-turn-summary" data-turns data-calls data-failures data-ended-on-call>``, marked
    ``failed`` when a call failed; tool names are HTML-escaped (hostile)."""
    cleaned = clean_turns(turns)
    if not cleaned:
        return ""
    summary = trajectory_summary(cleaned)
    assistant = sum(1 for turn in cleaned if turn["kind"] == "assistant")
    tools: dict[str, int] = {}
    for name in summary["tools"]:
        tools[name or "?"] = tools.get(name or "?", 0) + 1
    called = ", ".join(f"{html.escape(name)} ×{count}" for name, count in tools.items())
    parts = [f"{assistant} assistant turn{'s' if assistant != 1 else ''}",
             f"{summary['calls']} tool call{'s' if summary['calls'] != 1 else ''}" + (f" ({called})" if called else "")]
    if summary["failures"]:
        parts.append(f"{summary['failures']} failed")
    if summary["ended_on_call"]:
        parts.append("stopped on a call without a result")
    return (f'<div class="grpo-turn-summary{" failed" if summary["failures"] else ""}" data-turns="{len(cleaned)}" '
            f'data-calls="{summary["calls"]}" data-failures="{summary["failures"]}" '
            f'data-ended-on-call="{int(summary["ended_on_call"])}">{" · ".join(parts)} · final answer:</div>')


def trajectory_text(completion: CompletionRecord) -> str:
    """A completion as plain text for the diff: a single-turn one's text; a multi-turn one's turns, one block each
    (``[tool call lookup] {"key": ...}``, ``[tool result lookup] 42``, ``[tool error ...]``, ``[reward Env] 1.0``),
    so that two trajectories diff turn by turn."""
    turns = clean_turns(completion.turns)
    if not turns:
        return completion.text
    lines = []
    for turn in turns:
        kind = turn["kind"]
        if kind == "assistant":
            lines.append(turn["text"])
        elif kind == "tool_call":
            lines.append(f"[tool call {turn['name'] or '?'}{'' if turn['parsed'] else ', not parsed'}] "
                         f"{turn['arguments']}")
        elif kind == "tool_result":
            lines.append(f"[tool {'error' if turn['error'] else 'result'} {turn['name']}] {turn['text']}")
        elif kind == "reward":
            lines.append(f"[reward {turn['name']}] {turn['value']}")
        else:
            lines.append(f"[{turn['count']} turns not kept]")
    return "\n".join(lines)
