"""The web process never loads torch, transformers, TRL or PEFT, on any path it takes at run time (docs/architecture.md, "Rules").

A fresh interpreter plays the web process: it builds the real dashboard (``app.server.create_context`` and
``build_blocks``), then drives every path that starts or touches a child process or a run's files: the launcher's
tick starts a queued run of the tiny local Llama and watches it to completion, a preflight job and a
try-the-model job run to their results, the run is exported and its adapter merged into its base model, its
memory estimated and the alerts checked, a second run is cancelled, resumed, cancelled and deleted, and a sweep is
queued, shown in its table and cancelled. At the end it reports which heavy packages are in its ``sys.modules`` and
whether libtorch is mapped into its memory (``/proc/self/maps``); both must be empty. Each child (worker, preflight,
try) imports torch, as it must.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "arithmetic.jsonl"

DRIVER = textwrap.dedent(
    """
    import json, sys, time

    import app.server
    from grpo_core.run_config import RunConfig
    from pathlib import Path

    from grpo_core.runs.export import export_run
    from grpo_core.datasets.rows import load_rows
    from grpo_core.models.memory_estimate import estimate_peak_memory, free_memory, model_shape
    from grpo_core.models.prompt_tokens import longest_prompt_tokens
    from grpo_core.merge.job import merge_run
    from grpo_core.preflight.job import preflight_report, start_preflight
    from grpo_core.runs.actions import delete_run, resume_run
    from grpo_core.submit.queue import submit_run
    from grpo_core.settings import load_settings
    from grpo_core.submit.sweeps import submit_sweep
    from app.tabs.runs.sweeps import sweep_frame
    from grpo_core.try_model.job import build_request, try_in_subprocess
    from storage import RunStatus

    data_dir, model_dir, example = sys.argv[1:4]
    settings = load_settings(data_dir=data_dir)
    ctx = app.server.create_context(settings)
    app.server.build_blocks(ctx)
    store, launcher = ctx.store, ctx.launcher
    config = RunConfig.model_validate({
        "model": model_dir, "dataset_path": example, "max_steps": 2, "max_completion_length": 8,
        "num_generations": 2, "per_device_train_batch_size": 4, "temperature": 1.0,
        "rewards": [{"rule": "numeric_answer", "weight": 1.0}, {"rule": "length", "weight": 0.5}],
    })
    done = {}

    run = submit_run(store, config).run                       # launch: the launcher's tick starts the worker
    assert launcher.wait_idle(timeout_s=400), "the run did not finish"
    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error
    done["launch"] = final.status.value

    job = start_preflight(settings, config, num_prompts=1, env=launcher.env)   # preflight
    try:
        deadline = time.monotonic() + 300
        while not job.poll():
            assert time.monotonic() < deadline, job.log_tail()
            time.sleep(0.5)
        done["preflight"] = preflight_report(job).num_prompts
    finally:
        job.close()

    request = build_request(settings, final, prompt="What is 2 + 2?", row={"answer": 4},   # try the model
                            num_samples=1, max_new_tokens=4)
    done["try"] = sorted(try_in_subprocess(request, timeout_s=300, env=launcher.env)["sides"])

    done["export"] = export_run(store, settings, run.id).bundle.name                    # export
    done["merge"] = Path(list(merge_run(settings, final))[-1]).is_dir()                  # merged model
    tool_run = {**config.model_dump(mode="json"), "tools": ["calculator"]}               # will it fit? (a tool run's
    longest = longest_prompt_tokens(load_rows(store, tool_run), tool_run, settings.model_cache_dir)  # prompts counted)
    estimate = estimate_peak_memory(model_shape(model_dir), config.model_dump(), device="cpu",
                                    prompt_tokens=longest.tokens)
    done["prompt_counted"] = longest.counted
    done["estimate"] = estimate.total > 0 and bool(free_memory("cpu"))
    done["alerts"] = ctx.notifier.check()                 # alerts: reads the store (no webhook set: nothing due)

    second = submit_run(store, config).run                    # cancel, resume, cancel, delete (never started)
    launcher.cancel(second.id)
    resumed = resume_run(store, settings, second.id)
    launcher.cancel(resumed.id)
    delete_run(store, settings, second.id)
    done["resume_delete"] = [r.id for r in store.list_runs()]

    swept = submit_sweep(store, config, {"beta": [0.0, 0.04]})   # a sweep: validated, queued, shown, cancelled
    for point in swept.runs:
        launcher.cancel(point.id)
    done["sweep"] = [str(status) for status in sweep_frame(ctx, swept.sweep.id)["status"]]

    heavy = sorted(m for m in sys.modules if m.split(".")[0] in {"torch", "transformers", "trl", "peft"})
    with open("/proc/self/maps", encoding="utf-8") as maps:
        mapped = sorted({line.split()[-1] for line in maps if "libtorch" in line})
    print(json.dumps({"done": done, "heavy": heavy, "libtorch": mapped}))
    store.close()
    """
)


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="needs /proc (Linux)")
def test_web_process_paths_load_no_torch(tmp_path, tiny_model_dir):
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, str(tmp_path / "data"), str(tiny_model_dir), str(EXAMPLE)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-6000:])
    report = json.loads(result.stdout.strip().splitlines()[-1])
    done = report["done"]
    assert done["launch"] == "completed"
    assert done["preflight"] == 1
    assert done["try"] == ["base", "trained"]
    assert done["export"].endswith(".zip")
    assert done["merge"] is True and done["estimate"] is True and done["alerts"] == []
    assert done["prompt_counted"] is True
    assert done["resume_delete"] == [1]
    assert done["sweep"] == ["cancelled", "cancelled"]
    assert report["heavy"] == []
    assert report["libtorch"] == []
