"""Reward plugins, tried away from the web process: the check before a run is queued, and the try-out bench's
scoring when it includes plugins. Imports no torch, and never the user's code.

Both run :mod:`grpo_core.reward_check.worker` as a child process (the child-job protocol,
:func:`grpo_core.child_jobs.request.ask_worker`): the user's module is imported there, called as TRL's
``GRPOTrainer`` would call it, and the child answers in a JSON file.

* :func:`check_plugins` refuses, in seconds, a plugin that does not import, whose parameters TRL's call cannot fill,
  or that does not return one number (or ``None``) per completion when called once on a real dataset row
  (:func:`grpo_core.submit.validate.validate_run_config` calls it, so every launch does, once);
* :func:`score_group_isolated` is :func:`grpo_core.rewards.compose.score_group` run in that child.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import Any

from grpo_core.child_jobs.request import ChildJob, ask_worker
from grpo_core.child_jobs.slots import PLUGIN_CHECK_SLOTS, JobSlots
from grpo_core.rewards.compose import GroupScore, RewardSpec

#: Seconds a check or a bench scoring may take (importing the plugin's module included) before it is stopped.
REWARD_CHECK_TIMEOUT_S = 60.0

#: The check before a launch; the worker's error answer is worded as a failed check.
REWARD_CHECK_JOB = ChildJob(
    module="grpo_core.reward_check.worker",
    error=ValueError,
    failed="trying the reward plugins failed",
    timed_out="the reward plugins did not answer within {timeout_s} s and were stopped",
    answered="checking the reward plugins failed: {error}",
)
#: The try-out bench's scoring; the worker's error answer is what ``score_group`` raised, as it said it.
REWARD_SCORE_JOB = ChildJob(
    module="grpo_core.reward_check.worker",
    error=ValueError,
    failed="trying the reward plugins failed",
    timed_out="the reward plugins did not answer within {timeout_s} s and were stopped",
)


def _spec_dict(spec: RewardSpec | Mapping[str, Any]) -> dict[str, Any]:
    return spec.model_dump(mode="json") if isinstance(spec, RewardSpec) else dict(spec)


def has_plugins(specs: Sequence[RewardSpec | Mapping[str, Any]]) -> bool:
    """True when one of ``specs`` is a ``plugin`` rule (user code, which only a child process may run)."""
    return any(_spec_dict(spec).get("rule") == "plugin" for spec in specs)


def ask_reward_check(request: Mapping[str, Any], *, timeout_s: float = REWARD_CHECK_TIMEOUT_S,
                     job: ChildJob = REWARD_CHECK_JOB) -> dict[str, Any]:
    """Answer ``request`` in ``python -m grpo_core.reward_check.worker`` and return its JSON answer
    (:func:`grpo_core.child_jobs.request.ask_worker`).

    Raises:
        ValueError: the worker answered an error (``job``'s wording), or the child timed out (it is killed with its
            process group), failed, or wrote no answer; the message then ends with the tail of its output (what the
            plugin printed, a traceback).
    """
    return ask_worker(job, request, timeout_s=timeout_s)


def check_plugins(
    specs: Sequence[RewardSpec | Mapping[str, Any]],
    row: Mapping[str, Any],
    *,
    timeout_s: float = REWARD_CHECK_TIMEOUT_S,
    slots: JobSlots | None = PLUGIN_CHECK_SLOTS,
    login: str | None = None,
) -> None:
    """Import and call each ``plugin`` rule of ``specs`` once, in a child process, on the dataset ``row``.

    Returns at once (no child, no slot) when there is no plugin rule. The child holds one of ``slots`` for
    ``login`` while it runs (``None``: no pool).

    Raises:
        grpo_core.child_jobs.slots.SlotsBusy: ``login`` holds its share of ``slots``, or the pool is full; no child
            was started.
        ValueError: the first plugin that fails, as ``reward rule <position> (plugin): <why>`` (an import error, a
            parameter TRL does not pass, an exception, or a result that is not one number or ``None`` per
            completion), or the child itself failed or timed out (see :func:`ask_reward_check`).
    """
    dicts = [_spec_dict(spec) for spec in specs]
    if not has_plugins(dicts):
        return
    with slots.hold(login) if slots is not None else nullcontext():
        answer = ask_reward_check({"action": "check", "specs": dicts, "row": dict(row)}, timeout_s=timeout_s)
    for index, (spec, problem) in enumerate(zip(dicts, answer["problems"], strict=True), start=1):
        if problem:
            problem = problem.removeprefix(f"reward rule 1 ({spec['rule']}): ")
            raise ValueError(f"reward rule {index} ({spec['rule']}): {problem}")


def score_group_isolated(
    specs: Sequence[RewardSpec | Mapping[str, Any]],
    completions: Sequence[Any],
    row: Mapping[str, Any],
    completion_ids: Sequence[Sequence[int]] | None = None,
    *,
    scale_rewards: str | bool = "group",
    multi_objective_aggregation: str = "sum_then_normalize",
    timeout_s: float = REWARD_CHECK_TIMEOUT_S,
) -> GroupScore:
    """:func:`grpo_core.rewards.compose.score_group` in a child process, so plugin rules never run in this one.

    Raises:
        ValueError: what ``score_group`` raises (its type and message), or the child failed or timed out.
    """
    request = {
        "action": "score",
        "specs": [_spec_dict(spec) for spec in specs],
        "completions": list(completions),
        "row": dict(row),
        "completion_ids": None if completion_ids is None else [list(ids) for ids in completion_ids],
        "scale_rewards": scale_rewards,
        "multi_objective_aggregation": multi_objective_aggregation,
    }
    return GroupScore(**ask_reward_check(request, timeout_s=timeout_s, job=REWARD_SCORE_JOB))
