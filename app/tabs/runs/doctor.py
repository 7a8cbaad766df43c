"""The Runs tab's run-doctor panel: :func:`grpo_core.doctor.diagnose` on the selected run, refreshed by the tab's
timer. The panel keeps its own metric series in a ``gr.State`` and reads only new steps on each tick."""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import gradio as gr

from app.context import AppContext
from app.views.charts import MetricSeries
from grpo_core.doctor import Finding, Severity, diagnose, series_keys, step_ranges
from grpo_core.doctor.thresholds import RECENT_STEPS
from storage import StoreError

#: How many of the latest groups the doctor reads: for its examples, the causes of zero-std groups, the pass rate
#: per step and each reward rule's share of the variance (a few steps' worth at the default 2 groups per step).
SAMPLE_GROUPS = 32

DOCTOR_CSS = """
.doctor { border: 1px solid #d1d5db; border-radius: 8px; padding: 8px 12px; margin: 6px 0; }
.doctor-head { font-weight: 700; margin-bottom: 4px; }
.doctor-finding { border-left: 4px solid #9ca3af; padding: 4px 10px; margin: 6px 0; }
.doctor-finding.error { border-color: #dc2626; background: #fef2f2; }
.doctor-finding.warning { border-color: #d97706; background: #fffbeb; }
.doctor-finding.info { border-color: #2563eb; background: #eff6ff; }
.doctor-finding.good { border-color: #16a34a; background: #f0fdf4; }
.doctor-advice { font-size: 13px; margin: 2px 0; }
.doctor-steps { font-size: 12px; color: #4b5563; }
.doctor-finding ul { font-size: 12px; margin: 2px 0 2px 18px; padding: 0; }
.doctor-finding li { font-family: ui-monospace, monospace; white-space: pre-wrap; word-break: break-word; }
"""

_ICONS = {Severity.ERROR: "⛔", Severity.WARNING: "⚠️", Severity.INFO: "ℹ️"}
_NOUNS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
#: Findings that say the run is doing well (``learning``: the reward rises significantly): shown in green.
GOOD_CODES = frozenset({"learning"})


def _in_order(findings: Sequence[Finding]) -> list[Finding]:
    """Most severe first (stable), one per code: the panel reads top-down even if handed an unsorted list."""
    rank = {severity: index for index, severity in enumerate(Severity)}
    unique = {f.code: f for f in reversed(findings)}  # the first of a repeated code wins
    return sorted((f for f in findings if unique[f.code] is f), key=lambda f: rank[f.severity])


def _logged_steps(count: int) -> str:
    return f"{count} logged step" + ("" if count == 1 else "s")


def doctor_html(findings: Sequence[Finding], num_steps: int) -> str:
    """The doctor's report: one block per finding (severity colour, title, advice, steps, examples), escaped, most
    severe first and one per code; the head counts them by severity.

    ``num_steps`` is how many steps have metrics; 0 says "nothing logged yet", no findings says all looks healthy.
    """
    findings = _in_order(findings)
    codes = ",".join(f.code for f in findings)
    out = [f'<style>{DOCTOR_CSS}</style><div class="doctor" data-findings="{html.escape(codes)}">']
    if num_steps == 0:
        out.append('<div class="doctor-head">Run doctor</div><div class="doctor-advice">No metrics logged yet.</div>')
    elif not findings:
        out.append(
            f'<div class="doctor-head">Run doctor · {_logged_steps(num_steps)}</div>'
            '<div class="doctor-advice">✅ Nothing looks wrong: groups carry signal, the reward is not stuck, '
            "completions fit, KL is calm, the gradient reaches the model and every metric is a number.</div>"
        )
    else:
        counts = Counter(f.severity for f in findings)
        tally = ", ".join(
            f"{counts[severity]} {_NOUNS[severity]}{'s' if counts[severity] > 1 else ''}"
            for severity in Severity
            if counts[severity]
        )
        out.append(f'<div class="doctor-head">Run doctor · {_logged_steps(num_steps)} · {tally}</div>')
        if not counts[Severity.ERROR] and not counts[Severity.WARNING]:
            out.append('<div class="doctor-advice">✅ No problem found.</div>')
    for finding in findings:
        good = finding.code in GOOD_CODES
        kind = "good" if good else finding.severity.value
        icon = "📈" if good else _ICONS[finding.severity]
        out.append(
            f'<div class="doctor-finding {kind}" data-code="{html.escape(finding.code)}" '
            f'data-severity="{finding.severity.value}"><b>{icon} {html.escape(finding.title)}</b>'
            f'<div class="doctor-advice">{html.escape(finding.advice)}</div>'
        )
        if finding.steps:
            shown = step_ranges(finding.steps, max_ranges=STEP_RANGES_SHOWN)
            out.append(f'<div class="doctor-steps">steps {html.escape(shown)}</div>')
        if finding.examples:
            out.append("<ul>" + "".join(f"<li>{html.escape(e)}</li>" for e in finding.examples) + "</ul>")
        out.append("</div>")
    out.append("</div>")
    return "".join(out)


#: Most step ranges a finding lists (the first and the latest; a long run's flagged steps would fill the page).
STEP_RANGES_SHOWN = 12


@dataclass
class DoctorState:
    """What one page's doctor panel has: the run's series of the keys the checks read
    (:func:`~grpo_core.doctor.series_keys`), where the other keys were NaN (``key -> (steps, whether it
    was a number at other steps)``, ``Store.metric_nan_steps``), and the last HTML it sent."""

    series: MetricSeries = field(default_factory=MetricSeries)
    nan_steps: dict[str, tuple[list[int], bool]] = field(default_factory=dict)
    html: str = ""

    def add_nan_steps(self, found: dict[str, tuple[list[int], bool]]) -> None:
        """Merge a later read of ``Store.metric_nan_steps`` (a step read again is counted once)."""
        for key, (steps, numbered) in found.items():
            known, was_numbered = self.nan_steps.get(key, ([], False))
            self.nan_steps[key] = (sorted(set(known) | set(steps)), was_numbered or numbered)

    def keep_last(self, steps: int) -> None:
        """:meth:`MetricSeries.keep_last` for the series and the NaN steps."""
        self.series.keep_last(steps)
        first = self.series.last_step - steps
        for key, (of_key, numbered) in list(self.nan_steps.items()):
            self.nan_steps[key] = ([s for s in of_key if s > first], numbered)


def doctor_report(ctx: AppContext, run_id: int, state: DoctorState | None) -> tuple[str, DoctorState]:
    """Diagnose run ``run_id``: bring the state's series up to date (only steps after the last seen; at first the
    latest :data:`~grpo_core.doctor.thresholds.RECENT_STEPS` steps, and no more are kept; the values of the keys the
    checks read, and where the others were NaN), read the latest groups and the run's config, and render. Raises StoreError when the run does not exist."""
    run = ctx.store.get_run(run_id)
    if state is None or state.series.run_id != run_id:
        state = DoctorState(series=MetricSeries(run_id=run_id))
        after = max(-1, (run.current_step or 0) - RECENT_STEPS)  # the latest steps only, however long the run
    else:
        after = state.series.cursor
    # the values of the keys the checks read (with each reward function's mean and error count); of the others only
    # where they were NaN (a long run logs ~40 keys)
    keys = series_keys(run.config)
    state.series.extend_rows(ctx.store.metric_rows(run_id, after, keys=keys))
    state.add_nan_steps(ctx.store.metric_nan_steps(run_id, after, exclude=keys))
    state.keep_last(RECENT_STEPS)
    groups = ctx.store.recent_groups(run_id, limit=SAMPLE_GROUPS)
    nan_steps = {key: steps for key, (steps, numbered) in state.nan_steps.items() if numbered}
    findings = diagnose(state.series.data, groups, run.config, nan_steps=nan_steps)
    return doctor_html(findings, num_steps=len(state.series.wall)), state


def create_doctor_panel(
    ctx: AppContext, *, timer: gr.Timer, selected: gr.Dropdown
) -> dict[str, gr.components.Component]:
    """Build the doctor's panel (``#run-doctor``) inside the current ``gr.Blocks``, refreshed for the ``selected`` run
    on every ``timer`` tick and when the selection changes (an unchanged report is not re-sent). Returns ``panel``.
    """
    panel = gr.HTML(elem_id="run-doctor")
    state = gr.State(None)

    def on_tick(run_id: int | None, current: DoctorState | None):
        """Inputs: selected run, doctor state. Outputs: panel, doctor state."""
        if run_id is None:
            return "", None
        try:
            page, current_state = doctor_report(ctx, int(run_id), current)
        except StoreError:
            return "", None
        if current is not None and page == current.html and current is current_state:
            return gr.skip(), current_state
        current_state.html = page
        return page, current_state

    timer.tick(on_tick, inputs=[selected, state], outputs=[panel, state], show_progress="hidden")
    selected.change(on_tick, inputs=[selected, state], outputs=[panel, state], show_progress="hidden")
    return {"panel": panel}
