"""Does a quick start learn? Train it for several seeds and measure reward and held-out accuracy.

``--task arithmetic`` (the default): the Launch defaults (``RunConfig()``: SmolLM2-135M-Instruct from the packaged
GGUF, LoRA, the default reward rules) on the quick start's dataset (``examples/arithmetic_sums1.jsonl``, single-digit
sums). Held out: 50 questions never in the training file (``examples/heldout/arithmetic_sums1.jsonl``), scored by
the ``numeric_answer`` rule (the final number equals the answer). Goal (issue #11): last-10 mean reward at least 2x
the first-10 mean, and held-out accuracy up by 15 points or more, on every seed.

``--task code``: the code quick start (``examples/code_quick_start.yaml``: ``code_tests`` 0.7, ``code_runtime``,
``code_style`` and ``length`` 0.1 each gated on ``code_tests``) on ``examples/code_train.jsonl``. Held out: unseen
instances of the training families (``examples/heldout/code_instances.jsonl``, "inst") and instances of families
never trained on (``examples/heldout/code_families.jsonl``, "fam"); pass@1 is the share of problems whose greedy
completion gets ``code_tests`` reward 1.0 (every test passed) from the real :class:`CodeTestsReward`, in the sandbox.
The curve is ``rewards/code_tests/mean``. Goal (issue #30): held-out pass@1 up by 15 points or more on both held-out
sets, on every seed. Also printed, over the first and last 10 steps: the share of groups with zero reward std
(``frac_reward_zero_std``: no advantage, nothing learnt), truncation (``completions/clipped_ratio``) and the mean
completion length (``completions/mean_length``), which say why when the goal is missed; the curve's mean per 10
steps (still rising at the end, or flat?); and why the held-out completions fail, base and adapter side by side
(:func:`code_failures`: no function of the asked name, a syntax error, a failed test, truncation).

``--task agent``: the agent quick start (``examples/agent_quick_start.yaml``: the calculator tool) on
``examples/agent_train.jsonl``; held out: ``examples/heldout/agent_tasks.jsonl``, answered greedily with the tool in
multi-turn rollouts as TRL runs them (``benchmarks/agent_bench.py``: accuracy, valid calls, calls per answer, why the
others fail, base vs adapter, and over the training rollouts per 10 steps). Goal (issue #39): valid calls in more
than 80% of the last 10 steps' rollouts, and held-out accuracy up by 30 points or more, on every seed.

For each seed the run config is the task's recipe (:mod:`grpo_core.submit.quick_starts`) with only ``seed`` and
``name`` set (and ``max_steps`` when ``--steps`` is given). It is trained headless by ``python -m app train`` (the
real worker, recording into a store in the bench's data directory), one seed after the other, or all at once with
``--parallel``. Then the base model and each run's final adapter answer the held-out rows greedily,
``max_completion_length`` tokens at most.

Printed per seed: the mean of the task's curve over the first and the last 10 steps and their ratio, held-out
accuracy (pass@1) of the base model and of the adapter and the difference in points, seconds per step (wall time
between the first and last recorded step, divided by the steps between), and whether the goal is met. ``--json``
writes the figures, per-step curves and the first held-out completions; ``--chart`` writes the curve vs step as a
PNG (plotly's HTML screenshot by headless Chromium; skipped with a note when ``chromium`` is not installed).

    python benchmarks/bench_learning.py [--task arithmetic|code|agent] [--seeds 0,1,2] [--steps N] [--parallel]
        [--data-dir DIR] [--json FILE] [--chart PNG]

A run of the same config already completed in ``--data-dir`` is measured again without training it again.

Left out: GPU runs (the bench hides CUDA from the worker: the figures are for the CPU a new user may have),
sampled (temperature > 0) held-out accuracy or pass@k, and other datasets or models.
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from grpo_core.datasets.library import (  # noqa: E402
    AGENT_HELDOUT_PATH,
    CODE_HELDOUT_FAMILIES_PATH,
    CODE_HELDOUT_INSTANCES_PATH,
    QUICK_START_HELDOUT_PATH,
)
from grpo_core.run_config import RunConfig  # noqa: E402
from grpo_core.runs.files import adapter_dir, run_dir  # noqa: E402
from grpo_core.settings import load_settings  # noqa: E402
from grpo_core.submit.quick_starts import quick_start  # noqa: E402
from storage import RunStatus, Store  # noqa: E402

WINDOW = 10
GOAL_RATIO = 2.0
GOAL_POINTS = 15.0


def score_numeric_answer(completions: list[str], rows: list[dict]) -> list[float]:
    """1.0 where the completion's final number equals the row's ``answer`` (the ``numeric_answer`` rule), else 0.0."""
    from grpo_core.rewards.answer import make_numeric_answer

    return make_numeric_answer()(completions, answer=[r["answer"] for r in rows])


def score_code_tests(completions: list[str], rows: list[dict]) -> list[float]:
    """1.0 where the completion passes every one of the row's ``tests`` (``code_tests`` reward 1.0, run in the
    sandbox as in training, the prompts passed as TRL passes them), else 0.0 (a timeout or an unreadable row too)."""
    from grpo_core.rewards.code.correctness import CodeTestsReward

    rewards = CodeTestsReward()(completions, tests=[r["tests"] for r in rows],
                                entry_point=[r.get("entry_point") for r in rows], prompts=[r["prompt"] for r in rows])
    return [1.0 if reward == 1.0 else 0.0 for reward in rewards]


@dataclass(frozen=True)
class Task:
    """What the bench trains and measures for one ``--task``.

    Attributes:
        key: the quick start (:func:`grpo_core.submit.quick_starts.quick_start`) whose recipe trains.
        curve: the logged metric whose first and last :data:`WINDOW` steps are compared and charted.
        heldout: ``(label, file)`` per held-out set (JSON Lines of the training file's columns); the label names the
            set's columns ("" for a task's only set).
        score: ``(completions, rows) -> [1.0 right | 0.0]``, one per row.
        scorer: how ``score`` judges, for the printout.
        measure: the held-out figure's name (``acc``, ``pass@1``); ``noun``: what a held-out row is.
        ratio_goal: last-10 / first-10 mean of ``curve`` the goal needs (``None``: not part of the goal).
        diagnostics: ``(metric key, short name)`` of metrics shown over the first and last steps (none: no table).
        chart_title, chart_y: the chart's title and y axis.
    """

    key: str
    curve: str
    heldout: tuple[tuple[str, Path], ...]
    score: Callable[[list[str], list[dict]], list[float]]
    scorer: str
    measure: str
    noun: str
    ratio_goal: float | None
    diagnostics: tuple[tuple[str, str], ...]
    chart_title: str
    chart_y: str
    points_goal: float = GOAL_POINTS

    def goal_text(self) -> str:
        """The goal in words, for its line."""
        ratio = f"last-10 >= {self.ratio_goal:g}x first-10 and " if self.ratio_goal else ""
        sets = f" on {' and '.join(label for label, _ in self.heldout)}" if len(self.heldout) > 1 else ""
        calls = "valid calls > 80% of the last-10 rollouts and " if self.key == "agent" else ""
        return f"{ratio}{calls}held-out +{self.points_goal:g} points{sets}, every seed"


TASKS = {
    "arithmetic": Task(
        key="arithmetic", curve="reward", heldout=(("", QUICK_START_HELDOUT_PATH),), score=score_numeric_answer,
        scorer="numeric_answer", measure="acc", noun="questions", ratio_goal=GOAL_RATIO, diagnostics=(),
        chart_title="Quick start: SmolLM2-135M-Instruct on single-digit sums, 2-core CPU", chart_y="mean reward",
    ),
    "code": Task(
        key="code", curve="rewards/code_tests/mean",
        heldout=(("inst", CODE_HELDOUT_INSTANCES_PATH), ("fam", CODE_HELDOUT_FAMILIES_PATH)),
        score=score_code_tests, scorer="code_tests = 1.0", measure="pass@1", noun="problems", ratio_goal=None,
        diagnostics=(("frac_reward_zero_std", "zero-std"), ("completions/clipped_ratio", "clipped"),
                     ("completions/mean_length", "length")),
        chart_title="Code quick start: SmolLM2-135M-Instruct writing functions, 2-core CPU",
        chart_y="mean code_tests reward",
    ),
    "agent": Task(
        key="agent", curve="rewards/numeric_answer/mean", heldout=(("", AGENT_HELDOUT_PATH),),
        score=score_numeric_answer, scorer="numeric_answer on the final turn, calculator available", measure="acc",
        noun="questions", ratio_goal=None, diagnostics=(("tools/call_frequency", "calls"),
                                                        ("completions/clipped_ratio", "clipped")),
        chart_title="Agent quick start: SmolLM2-135M-Instruct with a calculator, 2-core CPU",
        chart_y="mean numeric_answer reward", points_goal=30.0,
    ),
}


def task_config(task: Task, seed: int, steps: int | None) -> RunConfig:
    """The task's quick start recipe with ``seed`` and a name (and ``max_steps`` = ``steps`` if given)."""
    recipe = quick_start(task.key).recipe()
    config = recipe.model_copy(update={"seed": seed, "name": f"{recipe.name or 'quick start'}, seed {seed}"})
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


def metric_curve(store: Store, run_id: int, key: str) -> tuple[list[int], list[float], float]:
    """``(steps, value per step, seconds per step)`` of a recorded run's metric ``key`` (steps without a value left
    out)."""
    points = [p for p in store.metrics_since(run_id, keys=[key]) if p.value is not None]
    steps, values = [p.step for p in points], [float(p.value) for p in points]
    times = [p.wall_time for p in points]
    per_step = (times[-1] - times[0]) / (steps[-1] - steps[0]) if len(steps) > 1 else float("nan")
    return steps, values, per_step


def heldout_accuracy(
    model, tokenizer, rows: list[dict], max_new_tokens: int, score: Callable[[list[str], list[dict]], list[float]]
) -> tuple[float, list[str], list[float], list[bool]]:
    """Greedy accuracy (0-1) of ``model`` on ``rows`` by ``score``, the completions, each one's score and whether
    it was cut at ``max_new_tokens`` (no end token).

    The prompts go through the chat template as TRL's trainer builds them, left-padded in one batch.
    """
    import torch

    from grpo_core.engine.policy_model import end_of_sequence_ids

    end = end_of_sequence_ids(model, tokenizer)
    texts = [tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False) for r in rows]
    tokenizer.padding_side = "left"
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.inference_mode():
        output = model.generate(
            **batch, do_sample=False, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
            eos_token_id=list(end.ids),
        )
    cut = [end.cut(sequence) for sequence in output[:, batch["input_ids"].shape[1]:].tolist()]
    completions = [tokenizer.decode(ids, skip_special_tokens=True) for ids, _ in cut]
    scores = score(completions, rows)
    return sum(scores) / len(scores), completions, scores, [truncated for _, truncated in cut]


def code_failures(completions: list[str], rows: list[dict], scores: list[float], truncated: list[bool]) -> dict:
    """Why held-out code fails, as shares of the rows (0-1): ``pass``; ``no function`` (the scored code, the last
    python fence as ``code_tests`` reads it, defines no ``entry_point``: a renamed function, an example fence);
    ``syntax`` (it does not parse); ``wrong`` (it runs and fails a test); and ``truncated`` (cut at the token limit,
    passing or not)."""
    import ast

    from grpo_core.rewards.code.extract import extract_code

    kinds = {"pass": 0, "no function": 0, "syntax": 0, "wrong": 0}
    for text, row, passed in zip(completions, rows, scores, strict=True):
        code = extract_code(text)
        if passed:
            kinds["pass"] += 1
            continue
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            kinds["syntax"] += 1
            continue
        names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        kinds["wrong" if row.get("entry_point") in names else "no function"] += 1
    total = max(1, len(rows))
    return {**{k: v / total for k, v in kinds.items()}, "truncated": sum(truncated) / total}


def write_chart(curves: dict[int, tuple[list[int], list[float]]], png: Path, title: str,
                y_title: str = "mean reward") -> str:
    """A metric vs step, per seed: each step's value as dots and its trailing 5-step mean as a line, as a PNG
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
        title=title, xaxis_title="step", yaxis_title=y_title, width=width, height=height,
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


def training_figures(task: Task, store: Store, run_id: int) -> dict:
    """A trained run's curve (``steps``, ``rewards``: the task's curve metric), its first and last :data:`WINDOW`
    means, seconds per step, and each diagnostic's first and last means (``diagnostics``: short name -> pair)."""
    steps, values, per_step = metric_curve(store, run_id, task.curve)
    diagnostics = {}
    for key, short in task.diagnostics:
        series = metric_curve(store, run_id, key)[1]
        diagnostics[short] = (_mean(series[:WINDOW]), _mean(series[-WINDOW:]))
    return {"run_id": run_id, "steps": steps, "rewards": values, "first": _mean(values[:WINDOW]),
            "last": _mean(values[-WINDOW:]), "s_per_step": per_step, "diagnostics": diagnostics}


def heldout_columns(task: Task) -> list[str]:
    """The table's held-out headers: base, adapter and delta per held-out set (a label after the measure)."""
    headers = []
    for label, _ in task.heldout:
        suffix = f" {label}" if label else ""
        headers += [f"base {task.measure}{suffix}", f"adapter {task.measure}{suffix}", f"delta{suffix} (pts)"]
    return headers


def print_table(task: Task, results: dict[int, dict]) -> bool:
    """Print one row per seed (the goal judged per seed into ``goal_met``) and the diagnostics table; returns
    whether the goal is met on every seed. Each column is as wide as its header."""
    columns = heldout_columns(task)
    print("  ".join(["seed  steps  first-10  last-10  ratio", *columns, "s/step  goal"]))
    every = True
    for seed, r in results.items():
        ratio = r["last"] / r["first"] if r["first"] > 0 else float("inf")
        cells = []
        for held in r["heldout"]:
            held["delta_points"] = 100 * (held["adapter"] - held["base"])
            cells += [100 * held["base"], 100 * held["adapter"], held["delta_points"]]
        met = (task.ratio_goal is None or ratio >= task.ratio_goal) and all(
            held["delta_points"] >= task.points_goal for held in r["heldout"]) and r.get("calls_met", True)
        every &= met
        first = r["heldout"][0]
        r.update(ratio=ratio, goal_met=met, base_acc=first["base"], adapter_acc=first["adapter"],
                 delta_points=first["delta_points"], completions=first["completions"])
        held_text = "  ".join(
            f"{value:>+{len(header)}.0f}" if header.startswith("delta") else f"{value:>{len(header) - 1}.0f}%"
            for header, value in zip(columns, cells, strict=True))
        print(f"{seed:>4}  {len(r['steps']):>5}  {r['first']:>8.3f}  {r['last']:>7.3f}  {ratio:>5.2f}  {held_text}  "
              f"{r['s_per_step']:>6.1f}  {'met' if met else 'MISSED'}")
    if task.diagnostics:
        headers = [f"{short} {part}" for _, short in task.diagnostics for part in ("first-10", "last-10")]
        print(f"\nwhy (over the first and last {WINDOW} steps): zero-std = frac_reward_zero_std (groups that teach "
              "nothing), clipped = completions/clipped_ratio, length = completions/mean_length (tokens)")
        print("  ".join(["seed", *headers]))
        for seed, r in results.items():
            values = [v for _, short in task.diagnostics for v in r["diagnostics"][short]]
            print("  ".join([f"{seed:>4}", *(f"{v:>{len(h)}.3f}" for h, v in zip(headers, values, strict=True))]))
        print(f"\n{task.curve} per {WINDOW} steps (does it still rise at the end?)")
        for seed, r in results.items():
            means = [_mean(r["rewards"][i:i + WINDOW]) for i in range(0, len(r["rewards"]), WINDOW)]
            print(f"{seed:>4}  " + "  ".join(f"{m:.3f}" for m in means))
    failures = [(seed, held) for seed, r in results.items() for held in r["heldout"] if "failures" in held]
    if failures:
        kinds = list(failures[0][1]["failures"]["base"])
        print("\nheld-out greedy completions, share of problems: pass, no function (the scored code defines no "
              "entry_point), syntax (does not parse), wrong (fails a test), truncated (at the token limit)")
        print("  ".join(["seed  set   model  ", *(f"{k:>11}" for k in kinds)]))
        for seed, held in failures:
            for model in ("base", "adapter"):
                shares = held["failures"][model]
                print(f"{seed:>4}  {held['label']:<4}  {model:<7}  " + "  ".join(f"{shares[k]:>11.0%}" for k in kinds))
    return every


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="arithmetic", help="the quick start to train")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--steps", type=int, help="max_steps (default: the recipe's)")
    parser.add_argument(
        "--parallel", action="store_true", help="train the seeds at the same time, cores split between them (s/step is then per run, on a share)"
    )
    parser.add_argument("--data-dir", type=Path, help="data directory to train in (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--chart", type=Path, help="also write the task's curve vs step to this PNG")
    args = parser.parse_args()
    task = TASKS[args.task]
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    work = Path(args.data_dir or tempfile.mkdtemp(prefix="bench-learning-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    settings = load_settings(data_dir=str(work))
    configs = {seed: task_config(task, seed, args.steps) for seed in seeds}
    recipe = next(iter(configs.values()))
    load = os.getloadavg()
    print(f"bench_learning: {recipe.model}, {Path(recipe.dataset_path or '').name}, seeds {seeds}, data in {work}")
    print(f"  load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs", flush=True)

    from grpo_core.engine.policy_model import load_policy, prepare_model

    # convert the packaged GGUF once, before the runs that share this data directory's model cache start
    model_path = prepare_model(recipe.model, settings.model_cache_dir, progress=lambda _: None)
    started = time.monotonic()
    run_ids = train_seeds(configs, work, settings.db_url, args.parallel)
    print(f"  trained in {time.monotonic() - started:.0f} s", flush=True)
    results: dict[int, dict] = {}
    store = Store(settings.db_url)
    for seed, run_id in run_ids.items():
        results[seed] = training_figures(task, store, run_id) | {
            "max_steps": configs[seed].max_steps, "heldout": [],
            "adapter": str(adapter_dir(run_dir(settings, store.get_run(run_id)))),
        }
    store.close()

    import torch
    from peft import PeftModel

    torch.manual_seed(0)
    max_new = recipe.max_completion_length
    heldout = [(label, path, [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                              if line.strip()]) for label, path in task.heldout]
    base_model, tokenizer = load_policy(model_path, "cpu")
    if task.key == "agent":
        return agent_heldout(results, base_model, tokenizer, heldout[0][2], recipe, model_path, settings, task, args)
    base = [heldout_accuracy(base_model.eval(), tokenizer, rows, max_new, task.score) for _, _, rows in heldout]
    for result in results.values():
        model, tokenizer = load_policy(model_path, "cpu")
        tuned = PeftModel.from_pretrained(model, result["adapter"]).eval()
        for (label, path, rows), (base_acc, base_completions, *base_why) in zip(heldout, base, strict=True):
            acc, completions, *why = heldout_accuracy(tuned, tokenizer, rows, max_new, task.score)
            held = {"label": label, "file": path.name, "base": base_acc, "adapter": acc,
                    "base_completions": base_completions[:10], "completions": completions[:10]}
            if task.key == "code":
                held["failures"] = {"base": code_failures(base_completions, rows, *base_why),
                                    "adapter": code_failures(completions, rows, *why)}
            result["heldout"].append(held)
    described = [f"{len(rows)} {task.noun} from {path.name}" + (f" ({label})" if label else "")
                 for label, path, rows in heldout]

    print(f"\nheld-out: {', '.join(described)} (greedy, {task.scorer})")
    every = print_table(task, results)
    return finish(task, results, every, base[0][1], args)


def agent_heldout(results, base_model, tokenizer, rows, recipe, model_path, settings, task, args) -> int:
    """The agent task's held-out rollouts and training windows (:func:`agent_bench.measure`), its tables; the goal
    judged with :func:`print_table`."""
    from agent_bench import measure, print_tables

    base_completions = measure(results, base_model, tokenizer, rows, recipe, model_path, settings.db_url, WINDOW)
    print(f"\nheld-out: {len(rows)} questions from {AGENT_HELDOUT_PATH.name} (greedy, {task.scorer})")
    every = print_table(task, results)
    print_tables(results)
    return finish(task, results, every, base_completions, args)


def finish(task: Task, results: dict[int, dict], every: bool, base_completions: list, args) -> int:
    """The closing lines, the JSON and the chart; the exit status (0: the goal is met on every seed)."""
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"goal ({task.goal_text()}): {'MET' if every else 'MISSED'}")
    print(f"base greedy completions (first 5): {base_completions[:5]}")
    for seed, r in results.items():
        print(f"seed {seed} adapter greedy completions (first 5): {r['completions'][:5]}")
    if args.json:
        args.json.write_text(json.dumps({"task": task.key, "seeds": results, "goal_met": every}, indent=1),
                             encoding="utf-8")
    if args.chart:
        curves = {seed: (r["steps"], r["rewards"]) for seed, r in results.items()}
        print(write_chart(curves, args.chart, task.chart_title, task.chart_y))
    return 0 if every else 1


if __name__ == "__main__":
    sys.exit(main())
