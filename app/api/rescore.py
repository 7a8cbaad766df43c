"""The public API's ``rescore_run`` endpoint (one block, added by :func:`app.api.public.create_public_api`): re-score a
run's recorded groups with another reward composition, waited for, and return the comparison
(:func:`grpo_core.rescore.job.rescore_run`, the same numbers as the workbench and ``grpo-dashboard rescore``).

No ``from __future__ import annotations`` here: ``gr.api`` reads the handler's annotations as types.
"""

import logging

import gradio as gr

from app.context import AppContext, actor_of, boundary_of
from grpo_core.child_jobs.slots import RESCORE_SLOTS
from grpo_core.rescore.job import rescore_run
from grpo_core.rescore.request import RescoreError, parse_request, parse_rules_text

LOG = logging.getLogger(__name__)

#: Rescorings the API runs at once (each a child using every core for code rules); more callers queue. As many as
#: :data:`~grpo_core.child_jobs.slots.RESCORE_SLOTS` holds, one a login (a login's second is refused at once, never queued
#: in front of others).
RESCORE_JOBS = {"concurrency_id": "rescore-jobs", "concurrency_limit": RESCORE_SLOTS.total}


def create_rescore_api(ctx: AppContext) -> None:
    """Add ``rescore_run`` to the page's API (call inside the ``gr.Blocks``)."""

    def rescore_run_endpoint(run_id: int, rules: str, first_step: int | None = None, last_step: int | None = None,
                             sample: int | None = None, seed: int = 0, scale_rewards: str = "",
                             request: gr.Request = None) -> dict:
        """Re-score run ``run_id``'s recorded groups with ``rules`` (YAML or JSON: a list of reward rules, or a
        mapping with ``rewards:``), in steps ``first_step``-``last_step`` (empty: all), at most ``sample`` groups
        (empty: all), advantages with ``scale_rewards`` (empty: the run's). Waits for the result: {"rescoring_id",
        "rules", "steps": [{"step", "reward_before", "reward_after", "frac_reward_zero_std_before", ...,
        "rules": {name: {"before", "after"}}}], "summary", "changed_groups", "probe", ...}. The run's records are
        never changed; the rescoring is stored beside it."""
        try:
            parsed = parse_request({
                "run_id": run_id, "rewards": parse_rules_text(rules or "", source="rules"),
                "first_step": first_step, "last_step": last_step, "sample": sample or None, "seed": seed or 0,
                "scale_rewards": scale_rewards or None,
            })
            return rescore_run(ctx.store, parsed, workdir=ctx.settings.data_dir / "rescorings",
                               boundary=boundary_of(ctx, request), owner=actor_of(ctx, request).user)
        except RescoreError as exc:
            LOG.info("API call refused: rescore_run: %s", exc)
            raise gr.Error(f"rescore_run: {exc}", print_exception=False) from None

    gr.api(rescore_run_endpoint, api_name="rescore_run", api_description=rescore_run_endpoint.__doc__, **RESCORE_JOBS)
