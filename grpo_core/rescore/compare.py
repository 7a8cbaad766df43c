"""The comparison of a run's own scoring of its recorded groups with a rescoring of them. Pure, no torch.

Per step, under both scorings: the mean reward (TRL's ``reward``: the mean of the weighted totals of the scorable
completions), the share of groups without signal (TRL's ``frac_reward_zero_std``, here per recorded group) and each
rule's mean (``rewards/<name>/mean``). Per group: how many completions' advantages change sign, and how far the
advantages move (the largest ``|after - before|``); the groups that change most come first, each with both scorings
of every completion. "Before" is what the run recorded (its totals and the advantages it trained on); its share
without signal is recomputed from the recorded totals with the same ``scale_rewards``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from grpo_core.rescore.advantages import as_float, batch_advantages, nanmean, sign_changed, weighted_totals

MAX_CHANGED_GROUPS = 20
"""The most changed groups a comparison lists."""

TEXT_KEPT = 4000
"""Characters of a completion (and a prompt) a listed group keeps: the stored result stays small."""


def _mean(values: Sequence[float | None]) -> float | None:
    value = nanmean([as_float(v) for v in values])
    return None if math.isnan(value) else value


def _share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def compare_scorings(
    groups: Sequence[Mapping[str, Any]],
    scored: Mapping[str, Any],
    *,
    scale_rewards: str = "group",
    multi_objective_aggregation: str = "sum_then_normalize",
    max_changed: int = MAX_CHANGED_GROUPS,
) -> dict[str, Any]:
    """Compare the recorded scoring of ``groups`` with ``scored`` (the answer of :mod:`grpo_core.rescore.worker`).

    Args:
        groups: recorded groups, each ``{"id", "step", "row_index", "prompt", "completions": [{"index", "text",
            "rewards": {name: value}, "total_reward", "advantage"}]}`` (:func:`app.api.public.group_dict`'s shape).
        scored: ``{"names", "weights", "groups": [{"id", "rewards": [rule][completion]}], ...}``.
        scale_rewards, multi_objective_aggregation: the advantage's (see :mod:`grpo_core.rescore.advantages`).

    Returns:
        ``{"rules", "weights", "num_groups", "num_completions", "steps": [...], "summary": {...},
        "changed_groups": [...]}`` (plain JSON values; ``None`` where a mean has no value).
    """
    names, weights = list(scored["names"]), [float(w) for w in scored["weights"]]
    new_by_id = {g["id"]: g["rewards"] for g in scored["groups"]}
    by_step: dict[int, list[Mapping[str, Any]]] = {}
    for group in groups:
        by_step.setdefault(int(group["step"]), []).append(group)
    steps, changed = [], []
    all_before, all_after, zero_before, zero_after = [], [], [], []
    total_flips = 0
    for step in sorted(by_step):
        step_groups = by_step[step]
        rewards_after = [new_by_id[g["id"]] for g in step_groups]
        totals_after = [weighted_totals(r, weights) for r in rewards_after]
        totals_before = [[c.get("total_reward") for c in g["completions"]] for g in step_groups]
        after = batch_advantages(totals_after, scale_rewards=scale_rewards, rewards=rewards_after, weights=weights,
                                 multi_objective_aggregation=multi_objective_aggregation)
        before = batch_advantages(totals_before, scale_rewards=scale_rewards)
        flat_before = [t for ts in totals_before for t in ts]
        flat_after = [t for ts in totals_after for t in ts]
        all_before += flat_before
        all_after += flat_after
        zero_before += before.zero_std
        zero_after += after.zero_std
        recorded_names = sorted({n for g in step_groups for c in g["completions"] for n in (c.get("rewards") or {})})
        per_rule = {}
        for name in dict.fromkeys([*recorded_names, *names]):
            was = [(c.get("rewards") or {}).get(name) for g in step_groups for c in g["completions"]]
            now = ([r for group_rewards in rewards_after for r in group_rewards[names.index(name)]]
                   if name in names else [])
            per_rule[name] = {"before": _mean(was) if name in recorded_names else None, "after": _mean(now)}
        steps.append({
            "step": step, "groups": len(step_groups),
            "reward_before": _mean(flat_before), "reward_after": _mean(flat_after),
            "frac_reward_zero_std_before": _share(before.zero_std),
            "frac_reward_zero_std_after": _share(after.zero_std),
            "rules": per_rule,
        })
        for g, group_rewards, totals, advantages in zip(step_groups, rewards_after, totals_after, after.advantages,
                                                        strict=True):
            entry = _group_change(g, names, group_rewards, totals, advantages)
            total_flips += entry["sign_changes"]
            changed.append(entry)
    changed.sort(key=lambda e: (-e["sign_changes"], -e["max_shift"], e["step"], e["group_id"]))
    moved = [e for e in changed if e["sign_changes"] or e["max_shift"] > 1e-6]
    return {
        "rules": names, "weights": weights, "scale_rewards": scale_rewards,
        "num_groups": len(groups), "num_completions": len(all_after),
        "steps": steps,
        "summary": {
            "reward_before": _mean(all_before), "reward_after": _mean(all_after),
            "frac_reward_zero_std_before": _share(zero_before), "frac_reward_zero_std_after": _share(zero_after),
            "sign_changes": total_flips, "groups_changed": len(moved),
        },
        "changed_groups": moved[:max(0, max_changed)],
    }


def _group_change(group: Mapping[str, Any], names: Sequence[str], rewards: Sequence[Sequence[float | None]],
                  totals: Sequence[float | None], advantages: Sequence[float]) -> dict[str, Any]:
    completions, flips, shift = [], 0, 0.0
    for k, c in enumerate(group["completions"]):
        was = as_float(c.get("advantage"))
        was = 0.0 if math.isnan(was) else was
        flips += sign_changed(was, advantages[k])
        shift = max(shift, abs(advantages[k] - was))
        completions.append({
            "index": c.get("index", k), "text": str(c.get("text", ""))[:TEXT_KEPT],
            "before": {"total": c.get("total_reward"), "advantage": c.get("advantage"),
                       "rewards": dict(c.get("rewards") or {})},
            "after": {"total": totals[k], "advantage": advantages[k],
                      "rewards": {n: rewards[i][k] for i, n in enumerate(names)}},
        })
    return {"group_id": group["id"], "step": int(group["step"]), "row_index": group.get("row_index"),
            "prompt": str(group.get("prompt", ""))[:TEXT_KEPT], "sign_changes": flips, "max_shift": shift, "completions": completions}
