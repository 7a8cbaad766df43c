"""Gradio-free views of a rescoring (:func:`grpo_core.rescore.compare.compare_scorings`'s result): the headline,
the per-step table with both scorings side by side, the figure of mean reward and zero-std share per step, the
changed groups with both scorings of every completion, the reward-hacking probe under the new rules, a progress bar.
Every value from the run (prompts, completions, rule names) is HTML-escaped."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import pandas as pd

from storage.records import RescoringInfo

TEXT_CUT = 400
"""Characters of a completion shown in a changed group."""

CHANGED_CSS = """
.rescore-changed { max-width: 100%; overflow-x: auto; }
.rescore-group table { width: 100%; table-layout: fixed; border-collapse: collapse; }
.rescore-group th:first-child, .rescore-group td:first-child { width: 2.5em; }
.rescore-group td { vertical-align: top; overflow-wrap: anywhere; word-break: break-word; padding: 2px 6px; }
.rescore-group pre { white-space: pre-wrap; word-break: break-word; overflow-wrap: anywhere; margin: 0;
  max-height: 220px; overflow: auto; }
"""
"""The changed groups' layout: every column inside the panel at any width (a fixed table layout whose cells wrap
long rule names and completions), the panel itself scrolling sideways if a cell still cannot fit."""


def _num(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{float(value):.{digits}f}"


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * float(value):.0f}%"


def progress_html(info: RescoringInfo | None) -> str:
    """A progress bar of completions scored, with the rescoring's status (and error when it failed)."""
    if info is None:
        return ""
    total = max(info.total, 1)
    label = f"rescoring #{info.id}: {info.status}, {info.done:,} / {info.total:,} completions"
    error = f"<pre class='rescore-error'>{html.escape(info.error)}</pre>" if info.error else ""
    return (f"<div id='rescore-progress-{info.id}' data-status='{info.status}'>{html.escape(label)}<br>"
            f"<progress max='{total}' value='{min(info.done, total)}' style='width:100%'></progress>{error}</div>")


def summary_html(result: Mapping[str, Any]) -> str:
    """The headline: mean reward and share of groups without signal under both scorings, the sign changes."""
    s = result["summary"]
    rows = [("mean reward", _num(s["reward_before"]), _num(s["reward_after"])),
            ("groups without signal (frac_reward_zero_std)", _pct(s["frac_reward_zero_std_before"]),
             _pct(s["frac_reward_zero_std_after"]))]
    body = "".join(f"<tr><td>{html.escape(a)}</td><td>{b}</td><td>{c}</td></tr>" for a, b, c in rows)
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in result.get("warnings") or [])
    errors = "".join(f"<li>rule {html.escape(k)} failed: {html.escape(v)}</li>"
                     for k, v in (result.get("errors") or {}).items())
    notes = f"<ul class='rescore-notes'>{warnings}{errors}</ul>" if warnings or errors else ""
    return (f"<div class='rescore-summary'><p>{result['num_groups']} groups, {result['num_completions']} "
            f"completions re-scored with {html.escape(', '.join(result['rules']))} "
            f"(scale_rewards: {html.escape(str(result.get('scale_rewards')))}). "
            f"<b>{s['groups_changed']} groups change</b>, <b>{s['sign_changes']} advantages change sign</b>.</p>"
            f"<table><tr><th></th><th>the run</th><th>new rules</th></tr>{body}</table>{notes}</div>")


def steps_html(result: Mapping[str, Any]) -> str:
    """Per step: mean reward, share without signal and each rule's mean, the run's then the new rules'."""
    names = list(dict.fromkeys(n for step in result["steps"] for n in step["rules"]))
    head = "".join(f"<th>rewards/{html.escape(n)}/mean</th>" for n in names)
    rows = []
    for step in result["steps"]:
        rules = "".join(
            f"<td>{_num(step['rules'].get(n, {}).get('before'))} → {_num(step['rules'].get(n, {}).get('after'))}</td>"
            for n in names)
        rows.append(f"<tr><td>{step['step']}</td><td>{step['groups']}</td>"
                    f"<td>{_num(step['reward_before'])} → {_num(step['reward_after'])}</td>"
                    f"<td>{_pct(step['frac_reward_zero_std_before'])} → {_pct(step['frac_reward_zero_std_after'])}</td>"
                    f"{rules}</tr>")
    return (f"<table class='rescore-steps'><tr><th>step</th><th>groups</th><th>reward (run → new)</th>"
            f"<th>frac_reward_zero_std</th>{head}</tr>{''.join(rows)}</table>")


def steps_frame(result: Mapping[str, Any]) -> pd.DataFrame:
    """Long format for a line plot: ``step``, ``value``, ``series`` (reward and frac_reward_zero_std, run and new).

    ``step`` is the step number as text: a plot reads a text column as categories, one tick per recorded step, where
    a number column got fractional ticks ("1.5") between steps that only exist as whole numbers; :func:`step_order`
    gives the ticks' order."""
    records = []
    for step in result["steps"]:
        for key, series in (("reward_before", "reward (run)"), ("reward_after", "reward (new rules)"),
                            ("frac_reward_zero_std_before", "frac_reward_zero_std (run)"),
                            ("frac_reward_zero_std_after", "frac_reward_zero_std (new rules)")):
            if step[key] is not None:
                records.append({"step": str(int(step["step"])), "value": float(step[key]), "series": series})
    return pd.DataFrame.from_records(records, columns=["step", "value", "series"])


def step_order(result: Mapping[str, Any]) -> list[str]:
    """The steps of :func:`steps_frame`, ascending as numbers (``"2"`` before ``"10"``), for the plot's ``sort``."""
    return [str(s) for s in sorted({int(step["step"]) for step in result["steps"]})]


def group_choices(result: Mapping[str, Any]) -> list[tuple[str, int]]:
    """``(label, position)`` of each changed group, for a dropdown."""
    return [(f"step {g['step']} · row {g['row_index']} · {g['sign_changes']} sign changes · moved "
             f"{g['max_shift']:.2f}", i) for i, g in enumerate(result.get("changed_groups") or [])]


def changed_groups_html(result: Mapping[str, Any]) -> str:
    """Each changed group: its prompt and every completion with both scorings (total, advantage, rules)."""
    groups = result.get("changed_groups") or []
    if not groups:
        return "<p class='rescore-nochange'>No group's advantages change under the new rules.</p>"
    return f"<style>{CHANGED_CSS}</style><div class='rescore-changed'>{''.join(group_html(g) for g in groups)}</div>"


def group_html(group: Mapping[str, Any]) -> str:
    """One changed group side by side: the run's scoring and the new rules' of each completion."""
    rows = []
    for c in group["completions"]:
        before, after = c["before"], c["after"]
        flipped = _sign(before["advantage"]) * _sign(after["advantage"]) < 0
        rules = ", ".join(f"{html.escape(k)} {_num(v, 2)}" for k, v in after["rewards"].items())
        was = ", ".join(f"{html.escape(k)} {_num(v, 2)}" for k, v in before["rewards"].items())
        text = c["text"] if len(c["text"]) <= TEXT_CUT else c["text"][:TEXT_CUT] + "…"
        rows.append(f"<tr class='{'rescore-flip' if flipped else ''}'><td>{c['index']}</td>"
                    f"<td><pre>{html.escape(text)}</pre></td>"
                    f"<td>{_num(before['total'])} / {_num(before['advantage'])}<br><small>{was}</small></td>"
                    f"<td>{_num(after['total'])} / {_num(after['advantage'])}<br><small>{rules}</small></td></tr>")
    return (f"<div class='rescore-group' data-group='{group['group_id']}'><h4>step {group['step']}, row "
            f"{group['row_index']}: {group['sign_changes']} sign changes, advantages move up to "
            f"{group['max_shift']:.2f}</h4><p>{html.escape(str(group['prompt'])[:TEXT_CUT])}</p>"
            f"<table><tr><th>#</th><th>completion</th><th>the run: total / advantage</th>"
            f"<th>new rules: total / advantage</th></tr>{''.join(rows)}</table></div>")


def _sign(value: Any) -> int:
    if value is None:
        return 0
    return (value > 1e-6) - (value < -1e-6)


def _paid_by(probe: Mapping[str, Any]) -> str:
    """The rules that pay a flagged probe: its ``paid_by`` list (the trajectory probes), else its ``rule``."""
    paid = probe.get("paid_by")
    return ", ".join(str(name) for name in paid) if isinstance(paid, list) and paid else str(probe.get("rule"))


def probe_html(result: Mapping[str, Any]) -> str:
    """The reward-hacking probe's flagged probes under the new rules (degenerate completions, and for a recipe with
    tools degenerate trajectories, that score as well as real ones, with the rules that pay them), or a line saying
    none was."""
    flagged = result.get("probe") or []
    if not flagged:
        return "<p class='rescore-probe'>Hacking probe: no degenerate completion scores like a real one under the " \
               "new rules.</p>"
    items = "".join(f"<li><b>{html.escape(str(p['probe']))}</b> ({html.escape(repr(p['text']))}) scores "
                    f"{_num(p['total'])} vs the best real {_num(p['best_real'])}, paid by "
                    f"{html.escape(_paid_by(p))}</li>" for p in flagged)
    return f"<div class='rescore-probe'>Hacking probe under the new rules flags:<ul>{items}</ul></div>"
