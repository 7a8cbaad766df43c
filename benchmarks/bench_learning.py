"""Does the quick start learn? Train the Launch defaults for several seeds and measure reward and held-out accuracy.

For each seed the run config is ``RunConfig()`` (the Launch form's defaults: SmolLM2-135M-Instruct from the
packaged GGUF, LoRA, the default reward rules) on the quick start's dataset (``examples/arithmetic_sums1.jsonl``,
single-digit sums), with only ``seed`` set (and ``max_steps`` when ``--steps`` is given). It is trained headless by
``python -m app train`` (the real worker, recording into a store in the bench's data directory), one seed after the
other, or all at once with ``--parallel``. Then the base model and each run's final adapter answer the 50 held-out
questions (``examples/heldout/arithmetic_sums1.jsonl``, never in the training file) greedily,
``max_completion_length`` tokens at most, scored by the ``numeric_answer`` rule (the final number equals the answer).

Printed per seed: mean reward (the weighted total TRL logs as ``reward``) over the first and the last 10 steps and
their ratio, held-out accuracy of the base model and of the adapter and the difference in points, and seconds per
step (wall time between the first and last recorded step, divided by the steps between). The goal (issue #11):
last-10 mean at least 2x the first-10 mean, and held-out accuracy up by 15 points or more, on every seed.
``--json`` writes the figures and per-step rewards; ``--chart`` writes reward vs step as a PNG (plotly's HTML
screenshot by headless Chromium; skipped with a note when ``chromium`` is not installed).

    python benchmarks/bench_learning.py [--seeds 0,1,2] [--steps N] [--parallel] [--data-dir DIR] [--json FILE]
        [--chart PNG]

A run of the same config already completed in ``--data-dir`` is measured again without training it again.

Left out: GPU runs (the bench hides CUDA from the worker: the figures are for the CPU a new user may have),
sampled (temperature > 0) held-out accuracy, and other datasets or models.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_core.datasets.library import QUICK_START_HELDOUT_PATH, QUICK_START_PATH  # noqa: E402
from grpo_core.run_config import DEFAULT_MODEL, RunConfig  # noqa: E402
from grpo_core.runs.files import adapter_dir, run_dir  # noqa: E402
from grpo_core.settings import load_settings  # noqa: E402
from storage import RunStatus, Store  # noqa: E402

WINDOW = 10
GOAL_RATIO = 2.0
GOAL_POINTS = 15.0


def quick_start_config(seed: int, steps: int | None) -> RunConfig:
    """The Launch defaults on the quick start's dataset, with ``seed`` (and ``max_steps`` = ``steps`` if given)."""
    config = RunConfig(dataset_path=str(QUICK_START_PATH), seed=seed, name=f"quick start, seed {seed}")
    return config.model_copy(update={"max_steps": steps}) if steps else config


def start_training(config: RunConfig, data_dir: Path, log_path: Path, threads: int | None = None) -> subprocess.Popen:
    """Start training ``config`` headless with ``python -m app train`` (its output to ``log_path``); ``threads``
    sets the worker's ``OMP_NUM_THREADS`` (``None``: torch's default, one per core)."""
    config_path = data_dir / f"seed-{config.seed}.yaml"
    config_path.write_text(config.to_yaml(), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    env.update(HF_HUB_OFFLINE="1", CUDA_VISIBLE_DEVICES="")
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "app", "train", str(config_path), "--data-dir", str(data_dir)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )


def finish_training(process: subprocess.Popen, seed: int, log_path: Path) -> int:
    """Wait for a training started by :func:`start_training`; returns the run id.

    Raises:
        RuntimeError: the training command failed (the message ends with its log's last lines).
    """
    returncode = process.wait()
    text = log_path.read_text(encoding="utf-8", errors="replace")
    found = re.findall(r"run #(\d+) completed", text)
    if returncode != 0 or not found:
        tail = "\n".join(text.splitlines()[-15:])
        raise RuntimeError(f"training seed {seed} failed (exit {returncode}):\n{tail}")
    return int(found[-1])


def reward_curve(store: Store, run_id: int) -> tuple[list[int], list[float], float]:
    """``(steps, mean reward per step, seconds per step)`` of a recorded run (TRL's ``reward`` metric)."""
    points = [p for p in store.metrics_since(run_id, keys=["reward"]) if p.value is not None]
    steps, rewards = [p.step for p in points], [float(p.value) for p in points]
    times = [p.wall_time for p in points]
    per_step = (times[-1] - times[0]) / (steps[-1] - steps[0]) if len(steps) > 1 else float("nan")
    return steps, rewards, per_step


def heldout_accuracy(model, tokenizer, rows: list[dict], max_new_tokens: int) -> tuple[float, list[str]]:
    """Greedy accuracy (0-1) of ``model`` on ``rows`` by the ``numeric_answer`` rule, and the completions.

    The prompts go through the chat template as TRL's trainer builds them, left-padded in one batch.
    """
    import torch

    from grpo_core.rewards.answer import make_numeric_answer
    from grpo_core.worker.policy_model import end_of_sequence_ids

    end = end_of_sequence_ids(model, tokenizer)
    texts = [tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False) for r in rows]
    tokenizer.padding_side = "left"
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.inference_mode():
        output = model.generate(
            **batch, do_sample=False, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
            eos_token_id=list(end.ids),
        )
    completions = [
        tokenizer.decode(end.cut(sequence)[0], skip_special_tokens=True)
        for sequence in output[:, batch["input_ids"].shape[1]:].tolist()
    ]
    scores = make_numeric_answer()(completions, answer=[r["answer"] for r in rows])
    return sum(scores) / len(scores), completions


def write_chart(curves: dict[int, tuple[list[int], list[float]]], png: Path, title: str) -> str:
    """Reward vs step, per seed: each step's mean reward as dots and its trailing 5-step mean as a line, as a PNG
    (plotly HTML, screenshot by headless Chromium); returns a note."""
    import plotly.colors
    import plotly.graph_objects as go

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        return "no chart: chromium is not installed"
    width, height = 900, 450
    figure = go.Figure()
    for (seed, (steps, rewards)), color in zip(curves.items(), plotly.colors.qualitative.Plotly, strict=False):
        smooth = [_mean(rewards[max(0, i - 4):i + 1]) for i in range(len(rewards))]
        figure.add_trace(go.Scatter(x=steps, y=rewards, mode="markers", marker={"color": color, "size": 5},
                                    opacity=0.45, showlegend=False))
        figure.add_trace(go.Scatter(x=steps, y=smooth, mode="lines", line={"color": color, "width": 2.5},
                                    name=f"seed {seed} (5-step mean)"))
    figure.update_layout(
        title=title, xaxis_title="step", yaxis_title="mean reward", width=width, height=height,
        margin={"l": 60, "r": 20, "t": 60, "b": 50}, template="plotly_white",
        legend={"x": 0.01, "y": 0.99, "bgcolor": "rgba(255,255,255,0.7)"},
    )
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "chart.html"
        figure.write_html(html, include_plotlyjs=True, full_html=True, config={"displayModeBar": False})
        html.write_text(
            html.read_text(encoding="utf-8").replace("<head>", "<head><style>body{margin:0;overflow:hidden}</style>", 1),
            encoding="utf-8",
        )
        png.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--screenshot={png.resolve()}", f"--window-size={width},{height}", "--virtual-time-budget=5000",
             html.as_uri()],
            check=True, capture_output=True, timeout=120,
        )
    return f"chart written to {png}"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def train_seeds(configs: dict[int, RunConfig], work: Path, db_url: str, parallel: bool) -> dict[int, int]:
    """Train each seed's config (unless a completed run of it is in the store); returns ``{seed: run id}``."""
    store = Store(db_url)
    wanted = [config.model_dump(mode="json") for config in configs.values()]
    done = {r.config.get("seed"): r.id for r in store.list_runs([RunStatus.COMPLETED]) if r.config in wanted}
    store.close()
    running: dict[int, subprocess.Popen] = {}
    run_ids: dict[int, int] = {}
    # Runs side by side share the cores: OpenMP threads that outnumber them spin at every barrier (many times slower)
    threads = max(1, (os.cpu_count() or 1) // max(1, len(configs) - len(done))) if parallel else None
    for seed, config in configs.items():
        if seed in done:
            run_ids[seed] = done[seed]
            continue
        running[seed] = start_training(config, work, work / f"seed-{seed}.log", threads)
        if not parallel:
            run_ids[seed] = finish_training(running.pop(seed), seed, work / f"seed-{seed}.log")
    for seed, process in running.items():
        run_ids[seed] = finish_training(process, seed, work / f"seed-{seed}.log")
    return run_ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--steps", type=int, help="max_steps (default: the Launch default)")
    parser.add_argument(
        "--parallel", action="store_true", help="train the seeds at the same time, cores split between them (s/step is then per run, on a share)"
    )
    parser.add_argument("--data-dir", type=Path, help="data directory to train in (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--chart", type=Path, help="also write reward vs step to this PNG")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    work = Path(args.data_dir or tempfile.mkdtemp(prefix="bench-learning-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    settings = load_settings(data_dir=str(work))
    load = os.getloadavg()
    print(f"bench_learning: {DEFAULT_MODEL}, {QUICK_START_PATH.name}, seeds {seeds}, data in {work}")
    print(f"  load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs", flush=True)

    from grpo_core.worker.policy_model import load_policy, prepare_model

    # convert the packaged GGUF once, before the runs that share this data directory's model cache start
    model_path = prepare_model(DEFAULT_MODEL, settings.model_cache_dir, progress=lambda _: None)
    configs = {seed: quick_start_config(seed, args.steps) for seed in seeds}
    started = time.monotonic()
    run_ids = train_seeds(configs, work, settings.db_url, args.parallel)
    print(f"  trained in {time.monotonic() - started:.0f} s", flush=True)
    results: dict[int, dict] = {}
    store = Store(settings.db_url)
    for seed, run_id in run_ids.items():
        steps, rewards, per_step = reward_curve(store, run_id)
        results[seed] = {
            "run_id": run_id, "max_steps": configs[seed].max_steps, "steps": steps, "rewards": rewards,
            "first": _mean(rewards[:WINDOW]), "last": _mean(rewards[-WINDOW:]), "s_per_step": per_step,
            "adapter": str(adapter_dir(run_dir(settings, store.get_run(run_id)))),
        }
    store.close()

    import torch
    from peft import PeftModel

    torch.manual_seed(0)
    heldout = [json.loads(line) for line in QUICK_START_HELDOUT_PATH.read_text(encoding="utf-8").splitlines()]
    max_new = RunConfig().max_completion_length
    base_model, tokenizer = load_policy(model_path, "cpu")
    base_acc, base_completions = heldout_accuracy(base_model.eval(), tokenizer, heldout, max_new)
    for result in results.values():
        model, tokenizer = load_policy(model_path, "cpu")
        tuned = PeftModel.from_pretrained(model, result["adapter"]).eval()
        acc, completions = heldout_accuracy(tuned, tokenizer, heldout, max_new)
        result.update(base_acc=base_acc, adapter_acc=acc, completions=completions[:10])

    print(f"\nheld-out: {len(heldout)} questions from {QUICK_START_HELDOUT_PATH.name} (greedy, numeric_answer)")
    print("seed  steps  first-10  last-10  ratio  base acc  adapter acc  delta (pts)  s/step  goal")
    every = True
    for seed, r in results.items():
        ratio = r["last"] / r["first"] if r["first"] > 0 else float("inf")
        delta = 100 * (r["adapter_acc"] - r["base_acc"])
        met = ratio >= GOAL_RATIO and delta >= GOAL_POINTS
        every &= met
        r.update(ratio=ratio, delta_points=delta, goal_met=met)
        print(
            f"{seed:>4}  {len(r['steps']):>5}  {r['first']:>8.3f}  {r['last']:>7.3f}  {ratio:>5.2f}  "
            f"{100 * r['base_acc']:>7.0f}%  {100 * r['adapter_acc']:>10.0f}%  {delta:>+11.0f}  {r['s_per_step']:>6.1f}  "
            f"{'met' if met else 'MISSED'}"
        )
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"goal (last-10 >= {GOAL_RATIO:g}x first-10 and held-out +{GOAL_POINTS:g} points, every seed): "
          f"{'MET' if every else 'MISSED'}")
    print(f"base greedy completions (first 5): {base_completions[:5]}")
    for seed, r in results.items():
        print(f"seed {seed} adapter greedy completions (first 5): {r['completions'][:5]}")
    if args.json:
        args.json.write_text(json.dumps({"seeds": results, "goal_met": every}, indent=1), encoding="utf-8")
    if args.chart:
        curves = {seed: (r["steps"], r["rewards"]) for seed, r in results.items()}
        print(write_chart(curves, args.chart, f"Quick start: {DEFAULT_MODEL} on single-digit sums, 2-core CPU"))
    return 0 if every else 1


if __name__ == "__main__":
    sys.exit(main())
