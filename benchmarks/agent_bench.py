"""The agent task of ``bench_learning.py --task agent``: what a rollout with the calculator did, over the training
run's recorded groups (per 10 steps) and over held-out questions answered by the base model and the adapter with the
tool available (:func:`agent_rollouts.rollouts`, greedy).

A rollout's outcome (:func:`outcome`), in this order: ``right`` (the final turn's number is the answer, by the
``numeric_answer`` rule), ``truncated`` (cut at the token limit), ``malformed call`` (call markup TRL could not
parse), ``no call``, ``wrong after right result`` (the calculator returned the answer, the final turn says something
else), ``wrong call`` (the call computed something else, or failed). Per set of rollouts (:func:`summarize`):
accuracy, the share with a valid (parsed) call, tool calls per rollout, and each outcome's share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

OUTCOMES = ("right", "truncated", "malformed call", "no call", "wrong after right result", "wrong call")


def _number(text: str) -> str:
    return text.strip().replace(",", "")


def outcome(turns: Sequence[dict[str, Any]] | None, answer: Any, right: bool, truncated: bool) -> str:
    """One of :data:`OUTCOMES` for a rollout's ``turns`` (:func:`grpo_core.tools.turns.turns_of_completion`), the
    row's ``answer``, whether the answer rule paid it and whether it was cut at the token limit."""
    from grpo_core.tools.turns import trajectory_summary

    if right:
        return "right"
    if truncated:
        return "truncated"
    summary = trajectory_summary(turns)
    if summary["unparsed"]:
        return "malformed call"
    if not summary["calls"]:
        return "no call"
    results = [_number(str(t.get("content", ""))) for t in turns or [] if t["kind"] == "tool_result"]
    return "wrong after right result" if _number(str(answer)) in results else "wrong call"


def summarize(records: Sequence[tuple[list[dict[str, Any]] | None, Any, bool, bool]]) -> dict[str, float]:
    """``acc``, ``valid call`` (share with a parsed call), ``calls`` (tool calls per rollout) and each outcome's
    share, over ``records`` of ``(turns, answer, right, truncated)``; empty for no records."""
    from grpo_core.tools.turns import trajectory_summary

    if not records:
        return {}
    summaries = [trajectory_summary(turns) for turns, *_ in records]
    kinds = [outcome(*record) for record in records]
    n = len(records)
    return {"acc": sum(right for _, _, right, _ in records) / n,
            "valid call": sum(1 for s in summaries if s["calls"] > s["unparsed"]) / n,
            "calls": sum(s["calls"] for s in summaries) / n,
            **{kind: kinds.count(kind) / n for kind in OUTCOMES}}


def training_windows(store, run_id: int, rows: Sequence[dict[str, Any]], window: int = 10) -> list[dict]:
    """:func:`summarize` of a run's recorded training groups per ``window`` steps (``first``, ``last`` step, ``n``
    rollouts and the figures); ``right`` is ``numeric_answer`` = 1 as recorded, ``rows`` gives each group's answer."""
    groups, after, after_group = [], -1, None
    while True:
        page = store.groups_since(run_id, after, limit=200, after_group=after_group)
        if not page:
            break
        groups += [g for g in page if g.split == "train"]
        after, after_group = page[-1].step, page[-1].id
    windows: dict[int, list] = {}
    for group in groups:
        answer = rows[group.row_index].get("answer") if 0 <= group.row_index < len(rows) else None
        for c in group.completions:
            windows.setdefault((group.step - 1) // window, []).append(
                (c.turns, answer, c.rewards.get("numeric_answer") == 1.0, c.truncated))
    return [{"first": k * window + 1, "last": (k + 1) * window, "n": len(v), **summarize(v)}
            for k, v in sorted(windows.items())]


def heldout(model, tokenizer, rows: Sequence[dict[str, Any]], config) -> tuple[dict[str, float], list]:
    """Greedy rollouts of ``rows`` with the run's tools (``config``: its ``tools``, ``max_completion_length``,
    ``max_tool_calling_iterations``), scored as in training; :func:`summarize` and the rollouts' messages."""
    from agent_rollouts import rollouts

    from grpo_core.rewards.answer import make_numeric_answer
    from grpo_core.tools.library import library_tools
    from grpo_core.tools.turns import turns_of_completion

    states = rollouts(model, tokenizer, [r["prompt"] for r in rows], library_tools(config.tools),
                      max_completion_length=config.max_completion_length,
                      max_iterations=config.max_tool_calling_iterations or 2)
    completions = [s.messages for s in states]
    right = make_numeric_answer()(completions, answer=[r["answer"] for r in rows])
    records = [(turns_of_completion(s.messages), r["answer"], score == 1.0, s.truncated)
               for s, r, score in zip(states, rows, right, strict=True)]
    return summarize(records), completions


def measure(results: dict[int, dict], base_model, tokenizer, rows, recipe, model_path, db_url: str,
            window: int = 10) -> list:
    """Fill each seed's result (``run_id``, ``adapter``, ``heldout``) with ``agent`` (base and adapter held-out
    figures, training windows) and ``calls_met`` (valid calls above 80% over the last window), and its held-out
    accuracies as ``bench_learning.print_table`` reads them; returns the base model's held-out completions."""
    import json
    from pathlib import Path

    import torch
    from peft import PeftModel

    from grpo_core.engine.policy_model import load_policy
    from grpo_core.engine.tool_template import use_tool_chat_template
    from storage import Store

    use_tool_chat_template(tokenizer)
    torch.manual_seed(0)
    base, base_completions = heldout(base_model.eval(), tokenizer, rows, recipe)
    train_rows = [json.loads(line) for line in Path(recipe.dataset_path).read_text(encoding="utf-8").splitlines()
                  if line.strip()]
    store = Store(db_url)
    for result in results.values():
        model, tokenizer = load_policy(model_path, "cpu")
        use_tool_chat_template(tokenizer)
        tuned = PeftModel.from_pretrained(model, result["adapter"]).eval()
        figures, completions = heldout(tuned, tokenizer, rows, recipe)
        windows = training_windows(store, result["run_id"], train_rows, window)
        result["agent"] = {"base": base, "adapter": figures, "windows": windows}
        result["calls_met"] = bool(windows) and windows[-1]["valid call"] > 0.8
        result["heldout"].append({"label": "", "file": "agent_tasks.jsonl", "base": base["acc"],
                                  "adapter": figures["acc"], "base_completions": base_completions[:10],
                                  "completions": completions[:10]})
    store.close()
    return base_completions


def print_tables(results: dict[int, dict]) -> None:
    """Held-out base vs adapter per seed, then the training rollouts per 10 steps."""
    columns = ["acc", "valid call", "calls", *OUTCOMES[1:]]
    print("\nheld-out with the tool (greedy): acc, valid call = share with a parsed call, calls per answer, then "
          "why the others fail (share of questions)")
    print("seed  model    " + "  ".join(f"{c:>9}" for c in columns))
    for seed, r in results.items():
        for model in ("base", "adapter"):
            figures = r["agent"][model]
            print(f"{seed:>4}  {model:<7}  " + "  ".join(
                f"{figures[c]:>9.2f}" if c == "calls" else f"{figures[c]:>9.0%}" for c in columns))
    print("\ntraining rollouts per 10 steps (recorded groups): the same figures")
    print("seed  steps     n  " + "  ".join(f"{c:>9}" for c in columns))
    for seed, r in results.items():
        for w in r["agent"]["windows"]:
            print(f"{seed:>4}  {w['first']:>2}-{w['last']:<3} {w['n']:>4}  " + "  ".join(
                f"{w[c]:>9.2f}" if c == "calls" else f"{w[c]:>9.0%}" for c in columns))
