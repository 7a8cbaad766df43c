"""The Try the model tab's trained-weights dropdown lists each saved weights once: the newest labelled "(latest)"
(value ``latest``, so it follows a run that saves more), never "latest (final adapter)" beside "final adapter"."""

from __future__ import annotations

from app.tabs.try_model import weights_options
from grpo_core.runs.files import resolve_weights


def _weights(folder, adapter=True):
    folder.mkdir(parents=True)
    (folder / ("adapter_config.json" if adapter else "config.json")).write_text("{}")
    (folder / "trainer_state.json").write_text("{}")


def test_each_saved_weights_is_offered_once(tmp_path):
    folder = tmp_path / "run-00001"
    assert weights_options(folder) == []
    _weights(folder / "output" / "checkpoint-2")
    assert weights_options(folder) == [("checkpoint at step 2 (latest)", "latest")]
    _weights(folder / "output" / "checkpoint-10")
    _weights(folder / "adapter")
    options = weights_options(folder)
    assert options == [("final adapter (latest)", "latest"), ("checkpoint at step 10", "checkpoint-10"),
                       ("checkpoint at step 2", "checkpoint-2")]
    labels = [label for label, _ in options]
    assert len(set(labels)) == len(labels)
    paths = [resolve_weights(folder, value) for _, value in options]
    assert len(set(paths)) == len(paths), "two entries of the dropdown load the same weights"
