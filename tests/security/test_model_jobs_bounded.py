"""Handlers that load a model in a child process (preflight, Try the model, merge, through the page or the API)
share one concurrency group of two: a login clicking them over and over queues behind itself instead of loading
eight models per button onto the GPUs the runs train on (app/context.py's ``MODEL_JOBS``)."""

from __future__ import annotations

from app.context import MODEL_JOBS
from app.server import build_blocks, create_context
from grpo_core.settings import load_settings


def test_model_loading_handlers_share_one_bounded_group(tmp_path):
    settings = load_settings(data_dir=tmp_path / "data")
    settings.ensure_dirs()
    blocks = build_blocks(create_context(settings))
    grouped = {fn.name for fn in blocks.fns.values() if fn.concurrency_id == MODEL_JOBS["concurrency_id"]}
    assert {"on_preflight", "on_sample", "on_merge", "merge"} <= grouped
    assert all(fn.concurrency_limit == 2 for fn in blocks.fns.values()
               if fn.concurrency_id == MODEL_JOBS["concurrency_id"])
