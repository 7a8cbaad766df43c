"""The Launch tab's handlers: what its buttons do, given the form keyed by field name
(:mod:`app.tabs.launch.form`); :func:`app.tabs.launch.tab.create_launch_tab` connects them to the layout.

Each handler takes the app context, the login's request (``None`` without a login) and ``values``, a mapping of the
form's field names (and the bench's, ``bench_row``, ``bench_completions``, ...) to their values, and returns what
its docstring's ``Outputs:`` names. Errors a user can fix come back as the message to show, never raised.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import gradio as gr
import pandas as pd

from app.catalog_sync import dataset_choices
from app.context import AppContext, boundary_of, check_webhooks
from app.tabs.launch.form import (
    NO_RULE,
    RULE_SLOTS,
    config_to_form,
    form_omissions,
    form_rules,
    form_to_config,
    reward_specs,
    rule_defaults_json,
    rule_help,
    slot_field,
)
from app.tabs.launch.tools import (
    BENCH_HEADERS,
    RULE_TABLE_HEADERS,
    bench_coverage_markdown,
    bench_specs,
    clone_drift_notes,
    dataset_row_for_bench,
    stream_preflight,
)
from app.views.runs import md_text
from app.views.tables import empty_frame
from grpo_core.access.boundary import Boundary
from grpo_core.bounded_parse import load_json
from grpo_core.child_jobs.slots import SlotsBusy
from grpo_core.reward_check.job import has_plugins, score_group_isolated
from grpo_core.rewards import RewardSpec, score_group
from grpo_core.rewards.hacking_probe import PADDED_ANSWER, flagged, probe_row
from grpo_core.rewards.regex_budget import time_budget
from grpo_core.run_config import ConfigError, RunConfig, parse_run_config
from grpo_core.submit.queue import submit_run
from grpo_core.submit.quick_starts import quick_start
from grpo_core.submit.validate import validate_checked_config

# The try-out bench and the probe score in the web process: one group at a time, of a bounded size, and the users'
# regular expressions (format_regex, a JSON schema's patterns) of one scoring take this long at most together.
BENCH_MAX_COMPLETIONS = 256
BENCH_MAX_CHARS = 2_000_000
BENCH_REGEX_BUDGET_S = 5.0
Values = Mapping[str, Any]


def preview(values: Values) -> str:
    """Inputs: the form. Outputs: the run config as YAML, or ``# invalid: <why>``."""
    try:
        return form_to_config(values).to_yaml()
    except (ConfigError, ValueError) as exc:
        return f"# invalid: {exc}"


def submit(ctx: AppContext, request: Any, config: RunConfig, boundary: Boundary) -> tuple[str, int]:
    """Queue ``config`` as a run owned by the login; the status line and the new run's id.
    :func:`grpo_core.submit.queue.submit_run` checks it against the login's ``boundary`` and validates it, once, and
    returns the run with the validation's warnings.

    Raises:
        ConfigError, SlotsBusy: as :func:`grpo_core.submit.queue.submit_run`.
    """
    submitted = submit_run(ctx.store, config, model_cache_dir=ctx.settings.model_cache_dir,
                           owner=getattr(request, "username", None), boundary=boundary)
    ctx.launcher.tick()
    note = "".join(f"\n\n⚠️ {w}" for w in submitted.warnings)
    return (f"✅ Run **#{submitted.run.id} {md_text(submitted.run.name)}** queued: {config.max_steps} steps, "
            f"{config.num_generations} completions per prompt; the **Runs** tab shows it.{note}", submitted.run.id)


def launch(ctx: AppContext, request: Any, values: Values) -> tuple[str, int | None]:
    """Inputs: the form. Outputs: the launch status (Markdown), the new run's id (``None`` when not launched)."""
    try:
        boundary = boundary_of(ctx, request)
        config = form_to_config(values)
        check_webhooks(ctx, request, [config.webhook_url])
        return submit(ctx, request, config, boundary)  # the boundary is checked there, once
    except (ConfigError, ValueError, SlotsBusy) as exc:  # SlotsBusy: the login's plugin checks (nothing started)
        return f"❌ **Not launched.** {exc}", None


def bench_inputs(values: Values) -> tuple[dict[str, Any], list[str], list[RewardSpec]]:
    """``(row, completions, specs)`` of the bench: ``bench_row`` (a JSON object; ``prompt`` set to ``""`` when
    missing), ``bench_completions`` (split on lines of ``---``) and the form's rule slots (a blank weight is 0).

    Raises:
        ValueError: with the message to show: the row is not a JSON object, too many completions or characters, a
            slot's parameters or gate is invalid (naming the slot), or no rule is chosen.
    """
    row = load_json(values.get("bench_row") or "{}", source="dataset row", error=ValueError)
    if not isinstance(row, dict):
        raise ValueError("dataset row: must be a JSON object")
    text = values.get("bench_completions") or ""
    if len(text) > BENCH_MAX_CHARS:
        raise ValueError(f"completions: {len(text):,} characters, more than the {BENCH_MAX_CHARS:,} the bench scores "
                         "at once")
    completions = [c.strip("\n") for c in text.split("\n---\n")]
    if len(completions) > BENCH_MAX_COMPLETIONS:
        raise ValueError(f"completions: {len(completions)} of them, more than the {BENCH_MAX_COMPLETIONS} of one "
                         "group the bench scores")
    try:
        specs = reward_specs(values, blank_weight=0.0)
    except (ConfigError, ValueError) as exc:
        raise ValueError(str(exc)) from None
    if not specs:
        raise ValueError("choose at least one reward rule")
    row.setdefault("prompt", "")
    return row, completions, specs


def _error_line(exc: Exception) -> str:
    """``❌ <Type>: <message>`` for an error a rule raised while scoring (its type named once)."""
    message, prefix = str(exc), f"{type(exc).__name__}: "
    return f"❌ {message if message.startswith(prefix) else prefix + message}"


LINE_BREAK = "⏎"
"""How a table cell shows a completion's line break (a table cell's HTML would fold it into a space)."""


def shown_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters for a table cell, each line break shown as :data:`LINE_BREAK`, so that
    "82\\nbecause" does not read as "82 because"."""
    return text[:limit].replace("\r\n", "\n").replace("\r", "\n").replace("\n", LINE_BREAK)


def bench(ctx: AppContext, request: Any, values: Values) -> tuple[pd.DataFrame, str]:
    """Inputs: ``bench_row``, ``bench_completions``, ``model``, ``dataset_id`` and the rule slots. Outputs: the score
    table (emptied on an error: the last table scored other rules), the status."""
    try:
        row, completions, specs = bench_inputs(values)
        specs = boundary_of(ctx, request).check_rewards(specs)  # before any plugin is imported
    except ValueError as exc:
        return empty_frame(BENCH_HEADERS), f"❌ {exc}"
    specs, opens_think = bench_specs(ctx, specs, values.get("model"), values.get("dataset_id"), request)
    try:
        # plugins are user code: scored in a child process, never in the web process
        with time_budget(BENCH_REGEX_BUDGET_S):  # users' regular expressions, in this process
            score = (score_group_isolated if has_plugins(specs) else score_group)(specs, completions, row)
    except Exception as exc:  # noqa: BLE001 - any rule error is shown, not raised
        return empty_frame(BENCH_HEADERS), _error_line(exc)
    table = {"completion": [shown_text(c, 80) for c in completions]}
    for name, rewards in zip(score.names, score.rewards, strict=True):
        table[name] = [None if r is None or r != r else round(r, 6) for r in rewards]
    table["total"] = [round(t, 6) for t in score.total]
    table["advantage"] = [round(a, 4) for a in score.advantages]
    note = " The chat template opens `<think>`: format rules read completions as starting inside it." if (
        opens_think) else ""
    return pd.DataFrame(table), f"{len(completions)} completions scored.{note}"


def _probe_line(result) -> str:
    """One flagged probe of the bench as a Markdown list item: what it earns and from which rule."""
    if result.probe in PADDED_ANSWER:
        reward = result.rewards.get(result.rule or "")
        return (f"- **{result.probe}** (the answer with junk text) earns {'-' if reward is None else f'{reward:.3g}'} "
                f"on the format rule `{result.rule}`: it pays a reply that is not the answer alone")
    if result.paid_by_task:
        reward = result.rewards.get(result.rule or "")
        earned = "-" if reward is None else f"{reward:.3g}"
        return (f"- **{result.probe}** earns {earned} on the task rule `{result.rule}`: a degenerate completion should "
                "earn nothing for the task")
    if result.best_real is None:
        return f"- **{result.probe}**: rule `{result.rule}`"
    return (f"- **{result.probe}** scores {result.total:.3g}, the best of these completions {result.best_real:.3g}: "
            f"rule `{result.rule}` rewards it")


def probe(ctx: AppContext, request: Any, values: Values) -> tuple[Any, str]:
    """Inputs: ``bench_row``, ``bench_prompt``, ``bench_completions`` (the real ones) and the rule slots. Outputs:
    the probe table (left as is on an error), the status."""
    try:
        row, completions, specs = bench_inputs(values)
        specs = boundary_of(ctx, request).check_rewards(specs)  # before any plugin is imported
        prompt = values.get("bench_prompt")
        if prompt and not row.get("prompt"):
            row["prompt"] = prompt
        with time_budget(BENCH_REGEX_BUDGET_S):
            # plugins are user code: scored in a child process, never in the web process
            results = probe_row(specs, row, completions,
                                scorer=score_group_isolated if has_plugins(specs) else score_group)
    except Exception as exc:  # noqa: BLE001 - any rule error is shown, not raised
        return gr.skip(), f"❌ {exc}"
    table = pd.DataFrame({
        "probe": [r.probe for r in results],
        "completion": [shown_text(r.text, 40) for r in results],
        "total": [r.total for r in results],
        "best real": [r.best_real for r in results],
        "wins": ["⚠️ yes" if r.flagged else "" for r in results],
        "rule responsible": [r.rule or "" for r in results],
    })
    lines = [_probe_line(r) for r in flagged(results)]
    status = ("⚠️ **Reward hacking:** degenerate completions are paid for the task or score at or above the best "
              "real one (gate or reweight the rule):\n" + "\n".join(lines) if lines else
              f"✅ No degenerate completion earns a task reward or scores at or above the best of these "
              f"{len(completions)} completions.")
    return table, status


def pick_row(ctx: AppContext, values: Values) -> tuple[Any, Any, str]:
    """Inputs: ``dataset_id``, ``bench_row_number`` and the rule slots. Outputs: the bench's row JSON, the row's
    prompt, the bench status (with the answer rules that cannot judge some rows of the dataset)."""
    dataset_id, number = values.get("dataset_id"), values.get("bench_row_number")
    try:
        row_json, prompt = dataset_row_for_bench(ctx, dataset_id, number)
    except ValueError as exc:
        return gr.skip(), gr.skip(), f"❌ {exc}"
    coverage = bench_coverage_markdown(ctx, dataset_id, form_rules(values))
    return row_json, prompt, f"Row {int(number)} loaded: its columns are the bench's dataset row.{coverage}"


def preflight(ctx: AppContext, request: Any, values: Values) -> Iterator[tuple[Any, Any]]:
    """Inputs: ``preflight_prompts`` and the form. Outputs: the verdict (Markdown) and the per-rule table, streamed."""
    try:
        boundary = boundary_of(ctx, request)
        config = boundary.check_config(form_to_config(values))  # the worker gets the real paths checked
        validate_checked_config(ctx.store, config, model_cache_dir=ctx.settings.model_cache_dir,
                                login=getattr(request, "username", None))
    except (ConfigError, ValueError, SlotsBusy) as exc:
        yield f"❌ **Preflight not started.** {exc}", gr.skip()
        return
    yield from stream_preflight(ctx, config, values.get("preflight_prompts"))


def filled_form(ctx: AppContext, config: RunConfig) -> dict[str, Any]:
    """The form's fields for ``config`` by name (:func:`app.tabs.launch.form.config_to_form`), its dataset as an
    update of the dropdown with the current choices (``gr.skip()`` for none), and each slot's ``help_i``."""
    form = config_to_form(config)
    form["dataset_id"] = (gr.update(choices=dataset_choices(ctx), value=form["dataset_id"])
                          if form["dataset_id"] is not None else gr.skip())
    for index in range(1, RULE_SLOTS + 1):
        form[slot_field("help", index)] = rule_help(form[slot_field("rule", index)])
    return form


STALE_RESULTS = ("status", "bench_table", "bench_status", "preflight_verdict", "preflight_table", "memory_estimate",
                 "sweep_status")
"""What a refilled form makes stale: the last launch's status (with its warnings, e.g. on prompt length), the bench's
scores and probe, the preflight's verdict and table, the memory estimate, the last sweep's status: they described the
form before."""


def stale_cleared() -> dict[str, Any]:
    """:data:`STALE_RESULTS` by name, emptied: what a quick start or a cloned run's fill also outputs."""
    return {"status": "", "bench_table": empty_frame(BENCH_HEADERS), "bench_status": "", "preflight_verdict": "",
            "preflight_table": empty_frame(RULE_TABLE_HEADERS), "memory_estimate": "", "sweep_status": ""}


def quick_start_form(ctx: AppContext, key: str) -> dict[str, Any]:
    """Inputs: a quick start's key (:data:`grpo_core.submit.quick_starts.QUICK_STARTS`). Outputs by name: the form
    filled from its recipe on the library's example dataset (:func:`filled_form`: Launch then queues exactly
    :meth:`~grpo_core.submit.quick_starts.QuickStart.for_dataset`), ``clone`` emptied and ``clone_status``; only
    ``clone_status`` when the example is not in the library or the recipe is invalid."""
    try:
        chosen = quick_start(key)
        dataset = ctx.store.find_dataset(chosen.example)
        if dataset is None:
            raise ValueError(f"the dataset {chosen.example!r} is not in the library (its file "
                             f"{chosen.dataset_path.name} is not shipped, or it was deleted)")
        config = chosen.for_dataset(dataset.id)
    except (ConfigError, ValueError) as exc:
        return {"clone_status": f"❌ {exc}"}
    return filled_form(ctx, config) | {
        "clone": None,
        "clone_status": f"Form filled with the **{chosen.label.lower()}**: {config.max_steps} steps on "
                        f"*{chosen.example}*; Launch as it stands, or change what you like."
                        + (f" {chosen.template_note}." if chosen.template_note else ""),
    }


def clone(ctx: AppContext, request: Any, run_id: Any) -> dict[str, Any]:
    """Inputs: a run id. Outputs by name: the form's fields (:func:`app.tabs.launch.form.config_to_form`), the rule
    slots' ``help_i`` and ``clone_status``; a field not given is left as is. A run whose stored config names code or
    files the login may not use is refused (its files unread)."""
    if run_id is None:
        return {"clone_status": ""}
    try:
        run = ctx.store.get_run(int(run_id))
        boundary_of(ctx, request).check_stored(run.config or {}, "clone")
        config = parse_run_config(run.config, source=f"run {run_id} config")
        form = filled_form(ctx, config)
    except (ConfigError, ValueError) as exc:
        return {"clone_status": f"❌ {exc}"}
    form["name"] = f"{config.name or run.name} (clone)"
    notes = "".join(f"\n- ⚠️ {n}" for n in form_omissions(config))
    drift = clone_drift_notes(ctx, run)
    notes += "".join(f"\n- ⚠️ {md_text(n)}" for n in drift)  # a recorded version is a script's text
    if run.provenance and not drift:
        notes += "\n- ✅ the dataset file, the model and the library versions are as when the run trained."
    form["clone_status"] = f"Form filled from run **#{run.id} {md_text(run.name)}**; change what you like and Launch.{notes}"
    return form


def rule_chosen(rule: str) -> tuple[str, str]:
    """Inputs: a slot's rule. Outputs: its parameters (the rule's defaults, JSON), its help (Markdown)."""
    return rule_defaults_json(rule), rule_help(rule)


def slot_cleared(index: int) -> dict[str, Any]:
    """The fields of rule slot ``index`` emptied (what "✕ remove" leaves): no rule, weight 1, no parameters, no gate,
    no help."""
    return {slot_field("rule", index): NO_RULE, slot_field("weight", index): 1.0, slot_field("params", index): "{}",
            slot_field("gate", index): "", slot_field("help", index): ""}


def add_rule_slot(shown: list[bool]) -> tuple[list[bool], int | None]:
    """Inputs: which slots show. Outputs: the same with the first hidden slot shown, and that slot's number (1-based;
    ``None`` when every slot already shows)."""
    shown = list(shown)
    for index, visible in enumerate(shown, start=1):
        if not visible:
            shown[index - 1] = True
            return shown, index
    return shown, None


def shown_after_clone(form: Mapping[str, Any], shown: list[bool]) -> list[bool]:
    """Which slots show once a cloned run's or a quick start's ``form`` (:func:`clone`, :func:`quick_start_form`)
    filled them: those holding a rule (the others hide); ``shown`` as it was when that failed (its form has no
    rules)."""
    if slot_field("rule", 1) not in form:
        return list(shown)
    return [form[slot_field("rule", index)] != NO_RULE for index in range(1, RULE_SLOTS + 1)]
