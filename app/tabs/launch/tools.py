"""Reward-design tools of the Launch tab: the preflight ("will this run learn?"), the clone-a-run picker and the
bench's dataset-row picker. Handlers live in :mod:`app.tabs.launch.handlers`; this module holds what they
call (views of a preflight report, the streaming preflight runner, the bench's row reader), so it stays testable.

The preflight samples from the model, which needs torch: it runs in a subprocess, a child job
(:func:`grpo_core.preflight.job.start_preflight`), and this module only shows its progress and its JSON report.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from app.context import AppContext, boundary_of
from app.views.trajectories import turns_html
from grpo_core.access.boundary import BoundaryError
from grpo_core.datasets.formats import read_normalized, read_normalized_row
from grpo_core.datasets.prompt_dataset import DatasetError
from grpo_core.datasets.rows import dataset_file
from grpo_core.preflight.job import PREFLIGHT_TIMEOUT_S, PreflightError, preflight_report, start_preflight
from grpo_core.preflight.report import LEVEL_OK, LEVEL_PROBLEM, PreflightReport
from grpo_core.rewards.answer_coverage import coverage_lines, dataset_answer_coverage
from grpo_core.rewards.hacking_probe import describe
from grpo_core.rewards.template_tags import (
    model_chat_template,
    resolve_for_model,
    resolve_template_tags,
    template_opens_think,
)
from grpo_core.rewards.trajectory_probe import PROBE_WORDS
from grpo_core.run_config import RunConfig
from grpo_core.runs.provenance import current_environment, describe_differences, plugin_files, provenance_differences
from storage import RunInfo, StoreError

POLL_SECONDS = 1.0
VERDICT_ICONS = {LEVEL_OK: "✅", LEVEL_PROBLEM: "❌"}
#: The bench table's columns before a group is scored (each rule's reward column comes between).
BENCH_HEADERS = ["completion", "total", "advantage"]
RULE_TABLE_HEADERS = ["rule", "weight", "mean", "std", "min", "max", "None", "nonzero", "varies in groups"]


def clone_drift_notes(ctx: AppContext, run: RunInfo) -> list[str]:
    """What changed since ``run`` trained, in plain words, for the clone status: its dataset file (sha256), its
    model (weights hash or hub revision), its plugin files and the library versions, compared with its recorded provenance
    (:func:`grpo_core.runs.provenance.provenance_differences`). Empty for a run without a record or when nothing changed.

    Hashes files in the web process (no torch): a model's hash is cached by path, size and mtime in the model cache
    folder, so only the first look at a new or changed file reads it whole.
    """
    if not run.provenance:
        return []
    model = str(run.config.get("model") or (run.provenance.get("model") or {}).get("name") or "")
    now = current_environment(dataset_file=dataset_file(ctx.store, run.config), model=model,
                              cache_dir=ctx.settings.model_cache_dir,
                              plugins=plugin_files(run.config.get("rewards") or []))
    return describe_differences(provenance_differences(run.provenance, now))


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def rules_frame(report: PreflightReport) -> pd.DataFrame:
    """The per-rule table of a preflight report (shares in percent)."""
    rows = [
        [
            r.name,
            r.weight,
            _round(r.mean),
            _round(r.std),
            _round(r.min),
            _round(r.max),
            f"{r.none_share:.0%}",
            f"{r.nonzero_share:.0%}",
            f"{r.varies_share:.0%}",
        ]
        for r in report.rules
    ]
    return pd.DataFrame(rows, columns=RULE_TABLE_HEADERS)


def verdict_markdown(report: PreflightReport) -> str:
    """The verdict with its advice, the headline numbers and a few example completions, as Markdown."""
    verdict = report.verdict
    lines = []
    if verdict is not None:
        lines.append(f"### {VERDICT_ICONS.get(verdict.level, '⚠️')} {verdict.headline}")
        lines += [f"- {a}" for a in verdict.advice]
    lines += [
        "",
        f"**{report.num_prompts} prompts × {report.num_generations} completions** of `{report.model}` "
        f"(temperature {report.temperature:g}, max {report.max_completion_length} tokens) in {report.seconds:.0f} s: "
        f"groups with all-equal rewards (TRL's `frac_reward_zero_std`) **{report.zero_std_share:.0%}**, truncated "
        f"**{report.truncation_rate:.0%}**, mean length **{report.mean_completion_tokens:.1f} tokens**; the chat "
        f"template {'opens' if report.template_opened_think else 'does not open'} `<think>` in the prompt.",
    ]
    if report.tool_call_frequency is not None:
        failures = report.tool_failure_frequency
        lines += ["", f"**Multi-turn rollouts:** {report.tool_call_frequency:.2f} tool calls per completion (TRL's "
                  f"`tools/call_frequency`), failed calls "
                  f"{'–' if failures is None else f'{failures:.0%}'} (`tools/failure_frequency`)."]
    probes = describe(report.probes)
    in_verdict = verdict is not None and any(a.startswith("reward hacking:") for a in verdict.advice)
    if probes and in_verdict:  # each finding is listed once, in the verdict's advice above
        found = f"⚠️ {len(probes)} finding(s), listed in the verdict above."
    elif probes:
        found = "⚠️ " + "; ".join(probes) + "."
    else:
        found = "✅ no degenerate completion scores at or above the best sampled one."
    tried = "" if report.tool_call_frequency is None else f"; with tools: {PROBE_WORDS}"
    lines += ["", "**Reward-hacking probe** (empty, whitespace, prompt echo, bare code fence, `pass`, answer alone, "
              f"repeated number, padding, wrong answer in format{tried}): " + found]
    if report.examples:
        lines += ["", "<details><summary>example completions (best and worst of a group)</summary>", ""]
        for ex in report.examples:
            rewards = ", ".join(f"{k} {'-' if v is None else f'{v:.3g}'}" for k, v in ex.rewards.items())
            total = "-" if ex.total is None else f"{ex.total:.3g}"
            cut = ", truncated" if ex.truncated else ""
            lines.append(
                f"<p>row {ex.row_index}: total {total}, advantage {ex.advantage:+.2f} ({ex.num_tokens} tokens{cut}; "
                f"{html.escape(rewards)})</p>" + (turns_html(ex.turns, max_chars=400) if ex.turns
                                                  else f"<pre>{html.escape(ex.text[:400])}</pre>")
            )
        lines += ["", "</details>"]
    return "\n".join(lines)


def stream_preflight(
    ctx: AppContext, config: RunConfig, num_prompts: int, *, timeout_s: float = PREFLIGHT_TIMEOUT_S
) -> Iterator[tuple[Any, Any]]:
    """Run a preflight of ``config`` in a subprocess, yielding ``(verdict Markdown, table)`` updates.

    While it runs, the Markdown says "sampling N prompts × G completions…" with the child's newest progress message
    and the table is left as is (``gr.skip()``); at the end the verdict and the per-rule table, or the error. The
    subprocess is killed if the generator is closed (the browser went away) or after ``timeout_s``.
    """
    num_prompts = max(1, int(num_prompts or 1))
    header = f"⏳ sampling {num_prompts} prompts × {config.num_generations} completions from `{config.model}`…"
    yield header, gr.skip()
    try:
        job = start_preflight(ctx.settings, config, num_prompts=num_prompts, env=ctx.launcher.env, timeout_s=timeout_s)
    except OSError as exc:
        yield f"❌ **Preflight not started.** {exc}", gr.skip()
        return
    with job:
        for _ in job.watch(POLL_SECONDS):
            line = job.latest.message or ""
            yield f"{header}\n\n`{line[:200]}` ({job.elapsed_s:.0f} s)" if line else header, gr.skip()
        try:
            report = preflight_report(job)
        except PreflightError as exc:
            yield f"❌ **Preflight failed.**\n\n```\n{str(exc)[-3000:]}\n```", gr.skip()
            return
        yield verdict_markdown(report), rules_frame(report)


def template_think_markdown(ctx: AppContext, model: str | None, request: object = None) -> str:
    """One line for the Launch tab: whether ``model``'s chat template opens ``<think>`` in the prompt, i.e. what a
    format rule's ``template_opened_think: auto`` becomes (read from the template text on disk, never transformers,
    rendered in a bounded child: :mod:`grpo_core.models.bounded_template`). A model folder the login may not name
    (:mod:`grpo_core.access.boundary`) is not read: the line says so, the same whether the folder exists or not."""
    try:
        name = boundary_of(ctx, request).model((model or "").strip(), "model")
    except BoundaryError as exc:
        return f"Chat template: not read ({exc})."
    template, specials = model_chat_template(name, ctx.settings.model_cache_dir)
    if template is None:
        return ("Chat template: not on disk yet (read at the run's start); format rules with "
                "`template_opened_think: auto` follow it then.")
    if template_opens_think(template, specials):
        return ("Chat template: **opens `<think>`** in the prompt, so `template_opened_think: auto` is **yes**: "
                "format rules read completions as starting inside the thought.")
    return "Chat template: does not open `<think>`; `template_opened_think: auto` is **no**."


def _dataset_rows(ctx: AppContext, dataset_id: int | None) -> list[dict[str, Any]]:
    if dataset_id is None:
        return []
    try:
        return read_normalized(Path(ctx.store.get_dataset(int(dataset_id)).path))
    except (StoreError, DatasetError, OSError, ValueError):
        return []


def bench_specs(ctx: AppContext, specs: list[Any], model: str | None, dataset_id: int | None,
                request: object = None) -> tuple[list[Any], bool]:
    """``specs`` with ``template_opened_think: auto`` resolved as the run will (the model's template, the chosen
    dataset's prompt kind; chat prompts when no dataset is chosen), and whether the template opens ``<think>``."""
    rows: list[dict[str, Any]] = [{"prompt": []}]
    if dataset_id is not None:
        try:
            rows = [read_normalized_row(Path(ctx.store.get_dataset(int(dataset_id)).path), 0)]
        except (StoreError, IndexError, DatasetError, OSError, ValueError):
            pass
    try:  # a model folder the login may not name is not read: its template counts as not opening <think>
        name = boundary_of(ctx, request).model((model or "").strip(), "model")
    except BoundaryError:
        return resolve_template_tags(specs, False), False
    return resolve_for_model(specs, name, rows, ctx.settings.model_cache_dir)


def bench_coverage_markdown(ctx: AppContext, dataset_id: int | None, rules: list[str]) -> str:
    """Lines (each after a blank line) naming the answer rules among ``rules`` that cannot judge some rows of the
    chosen dataset; ``""`` when none."""
    rows = _dataset_rows(ctx, dataset_id)
    return "".join(f"\n\n⚠️ {line}" for line in coverage_lines(dataset_answer_coverage(rows, rules)))


def dataset_row_for_bench(ctx: AppContext, dataset_id: int | None, number: Any) -> tuple[str, str]:
    """A dataset row for the try-out bench: ``(row JSON without the prompt, the prompt as text)``.

    Raises:
        ValueError: no dataset chosen, no such dataset or row (the message says which rows exist).
    """
    if dataset_id is None:
        raise ValueError("choose a dataset first")
    if number is None or float(number) != int(float(number)):
        raise ValueError("the row number must be a whole number")
    try:
        dataset = ctx.store.get_dataset(int(dataset_id))
        row = read_normalized_row(Path(dataset.path), int(float(number)))
    except (StoreError, IndexError, DatasetError, OSError) as exc:
        raise ValueError(str(exc)) from None
    prompt = row.pop("prompt", "")
    if isinstance(prompt, list):
        prompt_text = "\n\n".join(
            f"{m.get('role', '?')}: {m.get('content', '')}" if isinstance(m, dict) else str(m) for m in prompt
        )
    else:
        prompt_text = str(prompt)
    return json.dumps(row, indent=1, ensure_ascii=False), prompt_text
