"""Per-token values of the recorded completions, from a tiny local Llama trained by the worker for real (TRL on the
CPU, through the launcher's subprocess): one log-probability, KL and entropy per completion token, as TRL computed
them in its loss (their means are the ``entropy`` and ``kl`` TRL logged for the step), and no KL when ``beta`` = 0."""

from __future__ import annotations

import math
import statistics

import pytest

from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from storage import RunStatus
from tests.helpers import tiny_config

SPECIAL = ("<|im_end|>", "<|im_start|>", "<|endoftext|>")


def _train(store, settings, tiny_model_dir, **overrides):
    run = submit_run(store, tiny_config(tiny_model_dir, **overrides)).run
    assert Launcher(store, settings).wait_idle(timeout_s=240), "the run did not finish"
    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error
    return run.id


def _logged(store, run_id: int, step: int, key: str) -> float:
    (point,) = [p for p in store.metrics_since(run_id, step - 1, keys=[key]) if p.step == step]
    return point.value


def test_each_completion_token_has_its_logprob_kl_and_entropy(store, settings, tiny_model_dir):
    run_id = _train(store, settings, tiny_model_dir, beta=0.04)
    assert store.group_steps(run_id) == [1, 2]
    for step in (1, 2):
        entropies, kls = [], []
        for group in store.groups_at(run_id, step):
            for completion in group.completions:
                stats = store.token_stats(group.id, completion.index)
                assert stats is not None, f"step {step}, completion {completion.index} has no token stats"
                assert stats.num_tokens == completion.num_tokens >= 1
                assert len(stats.logprobs) == len(stats.kl) == len(stats.entropy) == completion.num_tokens
                assert all(math.isfinite(v) and v <= 0 for v in stats.logprobs)
                assert all(math.isfinite(v) and v >= 0 for v in stats.kl)  # TRL's k3 estimator
                assert all(math.isfinite(v) and v >= 0 for v in stats.entropy)
                # the pieces are the completion's tokens: joined, less the special ones, they read as its text
                text = "".join(p for p in stats.pieces if p not in SPECIAL)
                assert text.strip() == completion.text.strip()
                entropies += stats.entropy
                kls += stats.kl
        # one micro-batch per step: TRL's logged means are the means over every recorded completion token
        assert statistics.fmean(entropies) == pytest.approx(_logged(store, run_id, step, "entropy"), rel=1e-2)
        assert statistics.fmean(kls) == pytest.approx(_logged(store, run_id, step, "kl"), rel=5e-2, abs=1e-4)
    # the tiny random model samples near-uniformly over its vocabulary: log-probabilities are far from 0
    assert statistics.fmean(v for g in store.groups_at(run_id, 1) for c in g.completions
                            for v in store.token_stats(g.id, c.index).logprobs) < -1.0


def test_no_kl_per_token_without_a_reference_model(store, settings, tiny_model_dir):
    run_id = _train(store, settings, tiny_model_dir, beta=0.0, max_steps=1)
    (step,) = store.group_steps(run_id)
    for group in store.groups_at(run_id, step):
        for completion in group.completions:
            stats = store.token_stats(group.id, completion.index)
            assert stats is not None and stats.kl is None
            assert len(stats.logprobs) == len(stats.entropy) == completion.num_tokens
