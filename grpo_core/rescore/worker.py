"""``python -m grpo_core.rescore.worker REQUEST --out ANSWER --progress FILE``: scores recorded completions with a
reward composition, away from the web process (:mod:`grpo_core.rescore.job` starts it through the child-job
protocol, :mod:`grpo_core.child_jobs`: it reads the count of completions scored from ``FILE`` and may kill the
process group to cancel).

The request (JSON): ``{"specs": [...], "groups": [{"id", "row_index", "completions": [text, ...]}, ...],
(a multi-turn completion is its list of messages instead of a text, as TRL hands it to reward functions)
"rows": {row_index: row}, "chat": bool, "workers": n, "probe_rows": n, "tools": [the recipe's tool names],
"agentic": bool}``. Each group is scored as TRL's ``GRPOTrainer`` calls reward functions (:func:`score_batch`:
``prompts``, ``completions``, ``completion_ids=None``, the row's columns repeated, ``trainer_state=None``); a rule
that raises gives ``None`` for its group's completions and the error is reported (as the trainer's guard does). Plugins are imported only here; code rules run in the sandbox
as in training. With a ``plugin`` rule the groups are spread over ``workers`` processes (every core); a ``code`` rule
already runs each group's completions in parallel sandboxes, one per core, so groups are spread over ``workers //
group size`` processes; text rules run in this process (about 2,000 completions a second). The answer: ``{"names", "weights", "groups":
[{"id", "rewards": [rule][completion]}], "errors": {name: first error}, "probe": [hacking probe results]}``.

Imports no torch.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from grpo_core.child_jobs.answer_file import answer_request
from grpo_core.child_jobs.progress import ProgressWriter
from grpo_core.rewards.compose import _ignore_log_extra, _ignore_log_metric, build_reward_funcs
from grpo_core.rewards.hacking_probe import flagged, probe_row
from grpo_core.rewards.regex_budget import time_budget
from grpo_core.rewards.registry import completion_text, get_rule
from grpo_core.rewards.trajectory_probe import probe_trajectories

PARALLEL_CATEGORIES = ("code", "plugin")
"""Rule categories whose scoring is spread over processes (slow per completion)."""

_FUNCS: tuple[list[Any], list[float], list[str]] | None = None

GROUP_REGEX_BUDGET_S = 2.0
"""Seconds users' regular expressions (``format_regex``, a JSON schema's patterns) may take over one group, all
its completions together (:func:`grpo_core.rewards.regex_budget.time_budget`): a catastrophic pattern scores 0
after that, instead of a second a completion for every completion of the rescoring."""


def _build(specs: Sequence[Mapping[str, Any]]) -> None:
    global _FUNCS
    _FUNCS = build_reward_funcs(specs)


def as_completions(texts: Sequence[Any], chat: bool) -> list[Any]:
    """Recorded completions as TRL hands them to reward functions: text, or one assistant message each; a
    multi-turn completion (already a list of messages) as it is."""
    return [t if isinstance(t, list) else [{"role": "assistant", "content": t}] if chat else t for t in texts]


def score_group_rewards(funcs: Sequence[Any], names: Sequence[str], texts: Sequence[str], row: Mapping[str, Any],
                        chat: bool) -> tuple[list[list[float | None]], dict[str, str]]:
    """``[rule][completion]`` rewards of one group and ``{rule: error}`` for the rules that failed on it."""
    size = len(texts)
    columns = {key: [value] * size for key, value in row.items() if key not in ("prompt", "completion",
                                                                                  "completion_ids")}
    completions = as_completions(texts, chat)
    rewards: list[list[float | None]] = []
    errors: dict[str, str] = {}
    for func, name in zip(funcs, names, strict=True):
        try:
            with time_budget(GROUP_REGEX_BUDGET_S):
                output = list(func(prompts=[row.get("prompt")] * size, completions=completions, completion_ids=None,
                                   trainer_state=None, log_extra=_ignore_log_extra,
                                   log_metric=_ignore_log_metric, **columns))
            if len(output) != size:
                raise ValueError(f"returned {len(output)} rewards for {size} completions")
            rewards.append([None if r is None else float(r) for r in output])
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing rule is its outcome, as in training
            errors[name] = f"{type(exc).__name__}: {exc}"[:300]
            rewards.append([None] * size)
    return rewards, errors


def _score_chunk(chunk: list[tuple[Any, list[str], dict[str, Any]]], chat: bool) -> list[tuple[Any, list, dict]]:
    assert _FUNCS is not None
    funcs, _, names = _FUNCS
    return [(gid, *score_group_rewards(funcs, names, texts, row, chat)) for gid, texts, row in chunk]


class _Counter:
    """Completions scored so far, reported through the job's progress writer (counts at most every 0.2 s)."""

    def __init__(self, progress: ProgressWriter, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def add(self, count: int, *, force: bool = False) -> None:
        self.done += count
        self.progress.report(done=self.done, total=self.total, force=force)


def score_batch(request: Mapping[str, Any], progress: ProgressWriter | None = None) -> dict[str, Any]:
    """The answer to one request (see the module docstring); the count of completions scored goes to ``progress``."""
    specs = request["specs"]
    chat = bool(request.get("chat"))
    rows = {int(k): v for k, v in (request.get("rows") or {}).items()}
    _build(specs)
    assert _FUNCS is not None
    funcs, weights, names = _FUNCS
    items = [(g["id"], list(g["completions"]), rows.get(int(g["row_index"]), {"prompt": g.get("prompt", "")}))
             for g in request["groups"]]
    progress = _Counter(progress or ProgressWriter(None), sum(len(texts) for _, texts, _ in items))
    progress.add(0, force=True)
    categories = {get_rule(str(s.get("rule"))).category for s in specs}
    parallel = bool(categories & set(PARALLEL_CATEGORIES))
    workers = max(1, int(request.get("workers") or os.cpu_count() or 1))
    if "code" in categories and items:
        # a code rule already runs a group's completions in parallel sandboxes, one per core
        # (grpo_core.sandbox.box.run_many): processes only for the cores a group leaves idle
        group_size = max(1, round(sum(len(texts) for _, texts, _ in items) / len(items)))
        workers = max(1, workers // group_size)
    results: dict[Any, tuple[list, dict]] = {}
    if parallel and workers > 1 and len(items) > 1:
        size = max(1, min(4, -(-len(items) // (workers * 2))))  # small chunks: every worker busy, progress moves
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        with ProcessPoolExecutor(max_workers=workers, initializer=_build, initargs=(specs,)) as pool:
            for chunk, scored in zip(chunks, pool.map(_score_chunk, chunks, [chat] * len(chunks)), strict=True):
                for (gid, rewards, errors), (_, texts, _) in zip(scored, chunk, strict=True):
                    results[gid] = (rewards, errors)
                    progress.add(len(texts))
    else:
        for gid, texts, row in items:
            results[gid] = score_group_rewards(funcs, names, texts, row, chat)
            progress.add(len(texts))
    progress.add(0, force=True)
    errors: dict[str, str] = {}
    for _, group_errors in results.values():
        for name, error in group_errors.items():
            errors.setdefault(name, error)
    return {
        "names": names, "weights": weights, "errors": errors,
        "groups": [{"id": gid, "rewards": results[gid][0]} for gid, _, _ in items],
        "probe": _probe(specs, items, int(request.get("probe_rows") or 0),
                        [str(name)[:200] for name in request.get("tools") or ()], request.get("agentic") is True),
    }


def _probe(specs: Sequence[Mapping[str, Any]], items: Sequence[tuple[Any, list[Any], dict[str, Any]]],
           limit: int, tools: Sequence[str] = (), agentic: bool = False) -> list[dict[str, Any]]:
    """The reward-hacking probe (:func:`grpo_core.rewards.hacking_probe.probe_row`) on the first ``limit`` distinct
    rows, their recorded completions as the real ones; for a recipe with tools (``agentic``, or rollouts with tool
    calls among the completions; ``tools``: its tool names) the trajectory probe too
    (:func:`grpo_core.rewards.trajectory_probe.probe_trajectories`); the flagged results only."""
    seen: dict[str, tuple[dict[str, Any], list[Any]]] = {}
    for _, texts, row in items:
        key = json.dumps(row, sort_keys=True, default=str)[:2000]
        if key not in seen and len(seen) < limit and texts:
            seen[key] = (row, list(texts))
    agentic = agentic or bool(tools) or any(isinstance(t, list) for _, texts in seen.values() for t in texts)
    results = []
    for index, (row, completions) in enumerate(seen.values()):
        row_index = int(row.get("_row_index", index))
        try:
            with time_budget(GROUP_REGEX_BUDGET_S):
                # the probe degrades text: the real completions as the text a rule judges
                results += probe_row(specs, row, [completion_text(t) for t in completions], row_index=row_index)
            if agentic:
                with time_budget(GROUP_REGEX_BUDGET_S):
                    results += probe_trajectories(specs, row, completions, tools=tools, row_index=row_index)
        except Exception as exc:  # noqa: BLE001 - the probe is advice; a rule failing on a probe is not fatal
            print(f"hacking probe on a row failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    return [dataclasses.asdict(r) for r in flagged(results)]


def main(argv: Sequence[str] | None = None) -> int:
    return answer_request("python -m grpo_core.rescore.worker", score_batch, argv)


if __name__ == "__main__":
    sys.exit(main())
