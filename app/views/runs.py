"""HTML and table views of runs and groups (pure functions of store records; no Gradio)."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from app.views.trajectories import TURN_CSS, turns_html, turns_summary_html
from grpo_core.rewards.compose import REWARD_ERRORS_KEY
from grpo_core.rewards.logged import REWARD_COLUMNS_KEY
from grpo_core.runs.provenance import short_hash
from grpo_core.runs.script_runs import describe_origin
from storage import CompletionRecord, GroupRecord, RunInfo, RunStatus
from storage.run_images import GROUP_IMAGES_KEY

STATUS_COLOURS = {
    RunStatus.QUEUED: "#6b7280",
    RunStatus.RUNNING: "#2563eb",
    RunStatus.COMPLETED: "#16a34a",
    RunStatus.FAILED: "#dc2626",
    RunStatus.CANCELLED: "#a16207",
}

GROUP_CSS = """
.grpo-group { border: 1px solid #d1d5db; border-radius: 8px; padding: 10px; margin-bottom: 14px; }
.grpo-prompt { white-space: pre-wrap; font-family: ui-monospace, monospace; font-size: 13px;
  background: #f3f4f6; padding: 8px; border-radius: 6px; max-height: 160px; overflow: auto; }
.grpo-meta { font-size: 12px; color: #4b5563; margin: 6px 0; }
.grpo-completions { display: grid; gap: 8px; grid-template-columns: repeat(auto-fit, minmax(220px, 1fr)); }
.grpo-completion { border-radius: 6px; padding: 8px; border: 1px solid #e5e7eb; }
.grpo-completion.pos { background: #ecfdf5; border-color: #34d399; }
.grpo-completion.neg { background: #fef2f2; border-color: #f87171; }
.grpo-completion.zero { background: #f9fafb; }
.grpo-completion pre { white-space: pre-wrap; word-break: break-word; font-size: 12px; margin: 6px 0;
  max-height: 220px; overflow: auto; }
.grpo-completion table { font-size: 12px; border-collapse: collapse; width: 100%; }
.grpo-completion td { padding: 1px 4px; border-top: 1px solid #e5e7eb; }
.grpo-adv { font-weight: 700; }
.grpo-badge { display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 8px; background: #fde68a; }
.grpo-fold summary { cursor: pointer; font-size: 12px; color: #2563eb; }
.grpo-completion[data-ref] { cursor: pointer; }
.grpo-completion[data-ref]:hover { box-shadow: 0 0 0 2px #93c5fd; }
"""

#: Completions longer than this many characters show their start and fold the rest in a ``<details>``.
FOLD_CHARS = 600


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _age(when: datetime | None, now: datetime | None = None) -> str:
    if when is None:
        return "never"
    seconds = ((now or datetime.now(timezone.utc)) - when).total_seconds()
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def run_label(run: RunInfo) -> str:
    """``#id name (status)`` for dropdowns."""
    return f"#{run.id} {run.name} ({run.status.value})"


def duration(run: RunInfo, now: datetime | None = None) -> str:
    """Wall time of a run so far, as ``1 min 5 s``."""
    if run.started_at is None:
        return ""
    end = run.finished_at or now or datetime.now(timezone.utc)
    seconds = max(0.0, (end - run.started_at).total_seconds())
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def runs_table(runs: list[RunInfo], last_rewards: dict[int, float | None]) -> list[list[Any]]:
    """Rows of the runs table: id, name, status, step i/N, reward (the recent mean given), model, started, duration."""
    rows = []
    for run in runs:
        started = run.started_at.astimezone().strftime("%Y-%m-%d %H:%M") if run.started_at else ""
        rows.append(
            [
                run.id,
                run.name,
                run.status.value,
                f"{run.current_step}/{run.max_steps}",
                _fmt(last_rewards.get(run.id)),
                str(run.config.get("model", "")),
                started,
                duration(run),
                ", ".join(run.tags),
            ]
        )
    return rows


#: The Runs table's reward is the mean of the latest this many logged steps: one step's reward of a few groups is noise
#: (about ±0.1 at the quick start's 2 groups of 4), a recent mean says where the run is.
RECENT_REWARD_STEPS = 10
RUNS_TABLE_HEADERS = ["id", "name", "status", "step", f"reward (mean of last {RECENT_REWARD_STEPS} steps)", "model",
                      "started", "duration", "tags"]

#: A running run whose last heartbeat is older than this many seconds is flagged (its worker beats every 5 s).
HEARTBEAT_STALE_S = 30.0


def heartbeat_silence(run: RunInfo, now: datetime | None = None) -> float | None:
    """Seconds since a running run's last heartbeat when over :data:`HEARTBEAT_STALE_S`, else ``None``."""
    if run.status != RunStatus.RUNNING or run.heartbeat_at is None:
        return None
    seconds = ((now or datetime.now(timezone.utc)) - run.heartbeat_at).total_seconds()
    return seconds if seconds > HEARTBEAT_STALE_S else None


#: The Runs tab's status card when there is no run yet (HTML: the card is a ``gr.HTML``, where Markdown's ``**`` would
#: show as asterisks).
NO_RUNS_HTML = ('<div id="run-status" class="grpo-empty" data-status="none">No runs yet: launch one from the '
                "<b>Launch</b> tab.</div>")


def cancel_state(run: RunInfo | None) -> tuple[bool, str]:
    """Whether Cancel applies to ``run``, and the line that says why not (``""`` when it does).

    Cancel applies to a queued run and to a running one whose cancel was not yet asked; a finished run (completed,
    failed, cancelled) has nothing to cancel.
    """
    if run is None:
        return False, "Choose a run first."
    if run.status.is_final:
        return False, f"Run #{run.id} is {run.status.value}: there is nothing to cancel."
    if run.cancel_requested:
        return False, f"Run #{run.id} is already stopping: its cancel was asked; it stops at the end of its step."
    return True, ""


def run_status_html(run: RunInfo, log_tail: str = "", now: datetime | None = None, *, page_link: bool = True) -> str:
    """A status card: status, step, phase, heartbeat age (flagged "no heartbeat for N s" after
    :data:`HEARTBEAT_STALE_S`), GPUs, the checkpoint a queued run resumes from, tags, notes, the "reproduce" block
    (:func:`provenance_html`), error and, for failed runs, the log's last lines. ``page_link``: a link to the run's
    own page (``run?run=<id>``, :mod:`app.run_page`), opened in a new browser tab, the address to share."""
    colour = STATUS_COLOURS[run.status]
    parts = [
        f'<div id="run-status" data-status="{run.status.value}">',
        f'<b>#{run.id} {html.escape(run.name)}</b> · <span style="color:{colour};font-weight:700">'
        f"{run.status.value}</span> · step {run.current_step}/{run.max_steps}",
    ]
    if page_link:
        parts.append(f' · <a class="grpo-run-link" href="./run?run={int(run.id)}" target="_blank" rel="noopener">'
                     "run page</a>")
    if run.status == RunStatus.RUNNING:
        phase = f" · {html.escape(run.phase)}" if run.phase else ""
        parts.append(f"{phase} · heartbeat {_age(run.heartbeat_at, now)}")
        silence = heartbeat_silence(run, now)
        if silence is not None:
            parts.append(
                f' · <span class="grpo-stale" style="color:#dc2626;font-weight:700">no heartbeat for {silence:.0f} s'
                "</span>"
            )
        if run.cancel_requested:
            parts.append(" · <i>cancel requested, stopping at the next step</i>")
    if run.started_at:
        parts.append(f" · {duration(run, now)}")
    if run.gpus:
        parts.append(f" · GPUs {html.escape(run.gpus)}")
    if run.owner:
        parts.append(f" · owner {html.escape(run.owner)}")
    if run.alert_error:
        parts.append(f' · <span class="grpo-alert-error" style="color:#b45309">⚠ {html.escape(run.alert_error)}</span>')
    if run.status == RunStatus.QUEUED and run.phase:
        parts.append(f" · {html.escape(run.phase)}")
    if run.status == RunStatus.QUEUED and run.resume_from:
        parts.append(f" · resumes from {html.escape(Path(run.resume_from).name)}")
    if run.tags:
        badge = "display:inline-block;font-size:11px;padding:0 6px;border-radius:8px;background:#e0e7ff"
        parts.append(" · " + " ".join(f'<span class="grpo-tag" style="{badge}">{html.escape(t)}</span>'
                                       for t in run.tags))
    if run.notes:
        parts.append(f'<div style="white-space:pre-wrap;font-size:13px">{html.escape(run.notes)}</div>')
    if describe_origin(run):  # a run recorded from a user's own training script (grpo_core.integrations)
        parts.append(f'<div class="grpo-script-run" style="font-size:12px">{html.escape(describe_origin(run))}</div>')
    if run.run_dir:
        parts.append(f'<div style="font-size:12px;color:#6b7280">folder: {html.escape(run.run_dir)}</div>')
    parts.append(provenance_html(run.provenance))
    if run.error:
        parts.append(
            '<pre style="white-space:pre-wrap;background:#fef2f2;padding:6px;border-radius:6px;max-height:300px;'
            f'overflow:auto">{html.escape(run.error)}</pre>'
        )
    elif log_tail and run.status == RunStatus.FAILED:
        parts.append(f"<pre>{html.escape(log_tail)}</pre>")
    parts.append("</div>")
    return "".join(parts)


def _part(record: dict[str, Any], key: str) -> dict[str, Any]:
    """``record[key]`` when it is a mapping, else ``{}`` (a stored provenance's part, as a script sent it)."""
    value = record.get(key)
    return value if isinstance(value, dict) else {}


def _short_digest(value: Any) -> str:
    """:func:`~grpo_core.runs.provenance.short_hash` of a stored hash; "–" for anything but text."""
    return short_hash(value) if isinstance(value, str) else "–"


def provenance_html(provenance: dict[str, Any] | None) -> str:
    """The compact "reproduce" block of a run's status card: dataset sha256, model identity and each plugin file's
    sha256 (shortened to 12 hex digits), the library versions and the device its worker recorded (:mod:`grpo_core.runs.provenance`); ``""`` for a
    run without a record (not started yet, or trained by an older version). The record is a script's to write (the
    ingest API stores any JSON object): a part of another shape, or a value that is not text, shows as missing."""
    if not isinstance(provenance, dict) or not provenance:
        return ""
    dataset = _part(provenance, "dataset").get("sha256")
    model = _part(provenance, "model")
    versions = _part(provenance, "versions")
    device = _part(provenance, "device")
    plugins = _part(provenance, "plugins")
    items = [f"dataset sha256 <code>{html.escape(_short_digest(dataset))}</code>",
             f"model {html.escape(str(model.get('kind', '?')))} "
             f"<code>{html.escape(_short_digest(model.get('identity')))}</code>"]
    items += [f"plugin {html.escape(Path(path).name)} <code>{html.escape(_short_digest(digest))}</code>"
              for path, digest in plugins.items()]
    if versions:
        items.append(html.escape(", ".join(f"{name} {version}" for name, version in versions.items())))
    if device:
        count = device.get("count", 1)
        where = f"{device.get('type', '?')} ({device.get('name', '?')}{f' ×{count}' if count != 1 else ''}"
        where += f", {device['threads']} threads)" if device.get("threads") else ")"
        items.append(html.escape(where))
    return ('<div class="grpo-provenance" style="font-size:12px;color:#4b5563">reproduce: '
            + " · ".join(items) + "</div>")


def _advantage_class(advantage: float | None) -> str:
    if advantage is None or abs(advantage) < 1e-6:
        return "zero"
    return "pos" if advantage > 0 else "neg"


def fold_html(text: str, *, fold_chars: int = FOLD_CHARS, max_chars: int = 4000) -> str:
    """``text`` escaped in ``<pre>``; beyond ``fold_chars`` characters the rest folds into a closed ``<details>``.

    Text beyond ``max_chars`` characters is cut with a note of its full length; empty text shows "(empty)".
    """
    if not text:
        return "<pre><i>(empty)</i></pre>"
    shown = text if len(text) <= max_chars else text[:max_chars] + f"\n… ({len(text)} characters)"
    if len(shown) <= fold_chars:
        return f"<pre>{html.escape(shown)}</pre>"
    head, rest = shown[:fold_chars], shown[fold_chars:]
    return (
        f"<pre>{html.escape(head)}</pre>"
        f'<details class="grpo-fold"><summary>show the rest ({len(text)} characters in all)</summary>'
        f"<pre>{html.escape(rest)}</pre></details>"
    )


def reward_error_map(group: GroupRecord) -> dict[str, dict[str, str]]:
    """``{completion index: {reward function: error}}`` of a recorded group (see
    :data:`grpo_core.rewards.compose.REWARD_ERRORS_KEY`); empty when every reward function ran."""
    errors = group.extra.get(REWARD_ERRORS_KEY) or {}
    return errors if isinstance(errors, dict) else {}


def reward_column_map(group: GroupRecord) -> dict[str, dict[str, object]]:
    """``{completion index: {column: value}}``: what the run's reward functions logged through TRL's ``log_extra``
    for each completion (:data:`grpo_core.rewards.logged.REWARD_COLUMNS_KEY`); empty when none, or when the stored
    value is not that shape."""
    logged = group.extra.get(REWARD_COLUMNS_KEY) or {}
    if not isinstance(logged, dict):
        return {}
    return {str(k): v for k, v in logged.items() if isinstance(v, dict)}


def groups_html(groups: list[GroupRecord], *, sort_by_advantage: bool = True, max_chars: int = 4000,
                pictures: Mapping[tuple[str, int], str] | None = None, turns: bool = True) -> str:
    """The groups of a step: each prompt with its G completions side by side, coloured by the advantage's sign.

    Each completion shows its rank, advantage, total reward, every rule's reward, the columns reward functions
    logged for it (``log_extra``), token count and a truncation badge; a multi-turn completion its turns as distinct
    blocks (:func:`app.views.trajectories.turns_html`); text beyond :data:`FOLD_CHARS` characters folds
    (:func:`fold_html`), text beyond ``max_chars`` is cut
    with a note. ``pictures`` maps ``(split, row_index)`` to the HTML of that prompt's images
    (:func:`app.views.images.images_html`), shown under the prompt. ``turns=False`` shows a multi-turn completion
    as a one-line summary of its turns (:func:`app.views.trajectories.turns_summary_html`) and its final answer.
    """
    if not groups:
        return '<div class="grpo-empty">No groups recorded for this step yet.</div>'
    out = [f"<style>{GROUP_CSS}{TURN_CSS}</style>"]
    for number, group in enumerate(groups, start=1):
        totals = [c.total_reward for c in group.completions if c.total_reward is not None]
        spread = (max(totals) - min(totals)) if totals else 0.0
        signal = "" if spread > 1e-9 else ' · <span class="grpo-badge">all rewards equal: no learning signal</span>'
        extra = ", ".join(f"{html.escape(k)}={html.escape(_short(v))}" for k, v in group.extra.items()
                          if k not in (REWARD_ERRORS_KEY, REWARD_COLUMNS_KEY, GROUP_IMAGES_KEY))
        errors = reward_error_map(group)
        logged = reward_column_map(group)
        out.append(
            f'<div class="grpo-group" data-step="{group.step}" data-row="{group.row_index}" '
            f'data-split="{html.escape(group.split)}" data-group-id="{group.id if group.id is not None else ""}">'
        )
        # an eval group is a held-out prompt scored at an evaluation: no gradient step was taken on it
        split = ' · <span class="grpo-badge">eval (held out)</span>' if group.split == "eval" else ""
        out.append(
            f'<div class="grpo-meta">group {number} · dataset row {group.row_index} · step {group.step}{split}'
            f"{' · ' + extra if extra else ''}{signal}</div>"
        )
        out.append(f'<div class="grpo-prompt">{html.escape(group.prompt)}</div>')
        out.append((pictures or {}).get((group.split, group.row_index), ""))  # the prompt's images, beside its G
        out.append('<div class="grpo-completions">')
        completions = list(group.completions)
        if sort_by_advantage:
            completions.sort(key=lambda c: -(c.advantage if c.advantage is not None else float("-inf")))
        for c in completions:
            badge = ' <span class="grpo-badge">truncated</span>' if c.truncated else ""
            failed = errors.get(str(c.index)) or {}
            for name, message in (failed.items() if isinstance(failed, dict) else ()):
                # the rule raised: its reward is missing (TRL: NaN, left out of the total), not a 0
                badge += (f' <span class="grpo-badge grpo-badge-error" title="{html.escape(str(message))}">'
                          f"reward error: {html.escape(str(name))}</span>")
            rules = "".join(
                f"<tr><td>{html.escape(name)}</td><td style='text-align:right'>{_fmt(value)}</td></tr>"
                for name, value in c.rewards.items()
            )
            rules += "".join(  # what the reward functions logged for this completion (log_extra)
                f"<tr class='grpo-logged'><td>{html.escape(str(name))}</td><td style='text-align:right'>"
                f"{html.escape(_short(value))}</td></tr>"
                for name, value in (logged.get(str(c.index)) or {}).items()
            )
            # a card with a stored group opens its token view when clicked (app.tabs.inspect.tokens)
            ref = (f' data-ref="{group.id}:{c.index}" title="click: this completion\'s tokens (log-probability, KL, '
                   'entropy)"' if group.id is not None else "")
            out.append(
                f'<div class="grpo-completion {_advantage_class(c.advantage)}" data-advantage="{_fmt(c.advantage, 4)}"'
                f"{ref}>"
                f'<div><span class="grpo-adv">advantage {_fmt(c.advantage)}</span> · total {_fmt(c.total_reward)}'
                f"{badge}</div>"
                f"{_completion_body(c, turns, max_chars)}"
                f"<table>{rules}<tr><td>tokens</td><td style='text-align:right'>{c.num_tokens or '–'}</td></tr>"
                f"<tr><td>completion</td><td style='text-align:right'>#{c.index}</td></tr></table></div>"
            )
        out.append("</div></div>")
    return "".join(out)


def _completion_body(completion: CompletionRecord, turns: bool, max_chars: int) -> str:
    """A card's text: a multi-turn completion's turns as blocks (or, ``turns=False``, their summary line and the final
    answer), a single-turn one's text folded."""
    if turns:
        return turns_html(completion.turns, max_chars=max_chars) or fold_html(completion.text, max_chars=max_chars)
    return turns_summary_html(completion.turns) + fold_html(completion.text, max_chars=max_chars)


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: The ASCII punctuation a backslash makes literal in Markdown (CommonMark's escapable set, ``:`` and ``/`` so that no
#: address is linked automatically), less ``&`` and ``;`` of the entities ``&lt;``, ``&gt;`` and ``&amp;``.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|~'\"=:/$%^?,@])")


def md_text(value: Any) -> str:
    """A stored value (a run's or dataset's name, a column: whatever a login or a script wrote) as literal text inside
    a Markdown component: HTML-escaped (``<``, ``>``, ``&``), Markdown's punctuation backslash-escaped and line breaks
    made spaces, so that it can draw no element, link, image or emphasis on another login's page (Gradio's sanitizer
    keeps ``<img src>`` and links)."""
    text = " ".join(str(value).split())
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", html.escape(text, quote=False))
