"""``python -m grpo_core.reward_check.worker REQUEST --out RESULT --progress FILE``: runs a user's reward plugins
once, away from the web process (:mod:`grpo_core.reward_check.job` starts it and reads its answer, through the
child-job protocol of :mod:`grpo_core.child_jobs`).

Two requests, both JSON:

* ``{"action": "check", "specs": [...], "row": {...}}``: for each ``plugin`` rule of ``specs``, import it, check
  that TRL's call fits its signature, and call it once on ``row`` with :data:`CHECK_COMPLETIONS` (as chat messages
  when the row's prompt is a message list); the answer is ``{"problems": [message or null, one per spec]}``;
* ``{"action": "score", "specs": [...], "completions": [...], "row": {...}, "completion_ids": ...,
  "scale_rewards": ..., "multi_objective_aggregation": ...}``: :func:`grpo_core.rewards.compose.score_group`, the
  try-out bench's scoring with plugins; the answer is the :class:`~grpo_core.rewards.compose.GroupScore` fields, or
  ``{"error": message}``.

What the plugins print goes to this process's log, never into the answer. Imports no torch (a ``reward_model``
rule is reported as needing the training worker).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from grpo_core.child_jobs.answer_file import answer_request, error_answer
from grpo_core.rewards.compose import _ignore_log_extra, _ignore_log_metric, build_reward_funcs, score_group
from grpo_core.rewards.plugin import PluginReward, call_reward_function, check_rewards

#: The completions a plugin is tried on: an empty one and a short answer-like one.
CHECK_COMPLETIONS = ("", "The answer is 42.")


def check_completions(row: Mapping[str, Any]) -> list[Any]:
    """:data:`CHECK_COMPLETIONS` in the row's format: text, or one assistant message each for a chat prompt."""
    if isinstance(row.get("prompt"), list):
        return [[{"role": "assistant", "content": text}] for text in CHECK_COMPLETIONS]
    return list(CHECK_COMPLETIONS)


def initial_trainer_state() -> SimpleNamespace:
    """A stand-in for ``transformers.TrainerState`` at the first scoring (its defaults, ``global_step`` 0), for a
    plugin that reads ``trainer_state`` without allowing ``None`` (importing transformers here would cost seconds)."""
    return SimpleNamespace(
        epoch=0.0, global_step=0, max_steps=0, logging_steps=500, eval_steps=500, save_steps=500,
        train_batch_size=None, num_train_epochs=0, num_input_tokens_seen=0, total_flos=0, log_history=[],
        best_metric=None, best_global_step=None, best_model_checkpoint=None, is_local_process_zero=True,
        is_world_process_zero=True, is_hyper_param_search=False, trial_name=None, trial_params=None,
        stateful_callbacks=[],
    )  # fmt: skip


def check_plugin(plugin: PluginReward, row: Mapping[str, Any]) -> str | None:
    """Load ``plugin`` and call it once as TRL would on ``row``; ``None`` when it returned one number (or ``None``)
    per completion, else what went wrong (the exception's type and message, or the bad result).

    ``trainer_state`` is ``None`` (as on the try-out bench); a plugin that fails on that with an ``AttributeError``
    is called again with :func:`initial_trainer_state`."""
    completions = check_completions(row)
    size = len(completions)
    arguments: dict[str, Any] = {
        key: [value] * size for key, value in row.items() if key not in ("prompt", "completion", "completion_ids")
    }
    arguments.update(
        prompts=[row.get("prompt")] * size,
        completions=completions,
        completion_ids=[[] for _ in completions],
        trainer_state=None,
        log_extra=_ignore_log_extra,
        log_metric=_ignore_log_metric,
    )
    try:
        fn = plugin.load()
        try:
            result = call_reward_function(fn, arguments, plugin.target)
        except AttributeError as exc:
            if "'NoneType'" not in str(exc):
                raise
            # it reads trainer_state, which TRL always passes: try again with one as it is before the first step
            result = call_reward_function(fn, {**arguments, "trainer_state": initial_trainer_state()}, plugin.target)
        check_rewards(result, size, plugin.target)
    except ValueError as exc:  # load, signature and result problems name the target already
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - the user's code may raise anything; report it
        return f"reward plugin {plugin.target!r} raised {type(exc).__name__}: {exc} (called on the dataset's first row)"
    return None


def check_specs(specs: Sequence[Mapping[str, Any]], row: Mapping[str, Any]) -> list[str | None]:
    """:func:`check_plugin` for each ``plugin`` rule of ``specs`` (``None`` for the other rules)."""
    problems: list[str | None] = []
    for spec in specs:
        if spec.get("rule") != "plugin":
            problems.append(None)
            continue
        try:
            (func,), _, _ = build_reward_funcs([spec])
        except ValueError as exc:
            problems.append(str(exc))
            continue
        problems.append(check_plugin(func, row))
    return problems


def answer(request: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to one request (see the module docstring)."""
    action = request.get("action")
    if action == "check":
        return {"problems": check_specs(request["specs"], request.get("row") or {})}
    if action == "score":
        try:
            score = score_group(
                request["specs"],
                request["completions"],
                request.get("row") or {},
                completion_ids=request.get("completion_ids"),
                scale_rewards=request.get("scale_rewards", "group"),
                multi_objective_aggregation=request.get("multi_objective_aggregation", "sum_then_normalize"),
            )
        except Exception as exc:  # noqa: BLE001 - shown to the user as is
            return error_answer(exc)
        return dataclasses.asdict(score)
    return {"error": f"unknown action {action!r}"}


def main(argv: Sequence[str] | None = None) -> int:
    return answer_request("python -m grpo_core.reward_check.worker", lambda request, _: answer(request), argv)


if __name__ == "__main__":
    sys.exit(main())
