"""Record the real runs of the doctor's labelled corpus (``tests/doctor/corpus/``) and export their series.

Each run is a :class:`~grpo_core.run_config.RunConfig` trained headless by ``python -m app train`` (the real worker,
recording into the store of ``--data-dir``), at most ``--jobs`` at a time, each with ``OMP_NUM_THREADS=1`` (runs side
by side on a shared CPU: more threads than free cores spin at every barrier). The runs:

- ``quick_start_seed{0,1,2}``: ``RunConfig()`` on ``examples/arithmetic_sums1.jsonl`` (the shipped quick start);
- ``harder_multistep``: the same on ``examples/arithmetic_multistep.jsonl`` (two operators: rarely solved);
- ``lr_low``: ``learning_rate`` 1e-7 (the policy barely moves); ``lr_high``: ``learning_rate`` 1e-2;
- ``beta0``: ``beta`` 0 (no KL term; TRL then logs no ``kl``);
- ``saturated``: one rule every completion already earns (``format_regex`` on ``.``): no group has an advantage;
- ``quick_start_seed3``: a fourth healthy seed; ``harder_sums2``: two-digit sums;
- ``truncation_blocks``: ``max_completion_length`` 6: nearly every completion is cut before its answer.

Then ``--export DIR`` writes one JSON file per completed run (name, config, series per metric key, the groups'
reward spreads) for the corpus; labels (what the doctor must and must not find) are added by hand there.

    python benchmarks/record_doctor_corpus.py --data-dir DIR [--only a,b] [--jobs 2] [--export DIR]

Left out: GPU runs and runs longer than the CPU allows (the corpus's synthetic files stand for those).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_core.datasets.library import QUICK_START_PATH  # noqa: E402
from grpo_core.rewards import RewardSpec  # noqa: E402
from grpo_core.run_config import RunConfig  # noqa: E402
from storage import Store  # noqa: E402

MULTISTEP = ROOT / "examples" / "arithmetic_multistep.jsonl"
SUMS2 = ROOT / "examples" / "arithmetic_sums2.jsonl"


def corpus_configs() -> dict[str, RunConfig]:
    """The recorded runs by corpus name (see the module docstring)."""
    base = RunConfig(dataset_path=str(QUICK_START_PATH))

    def variant(name: str, **update) -> RunConfig:
        return base.model_copy(update={"name": f"doctor corpus: {name}", **update})

    return {
        "quick_start_seed0": variant("quick_start_seed0", seed=0, max_steps=36),
        "quick_start_seed1": variant("quick_start_seed1", seed=1, max_steps=36),
        "lr_high": variant("lr_high", learning_rate=1e-2, max_steps=16),
        "saturated": variant(
            "saturated", max_steps=10, rewards=[RewardSpec(rule="format_regex", weight=1.0, params={"pattern": "."})]
        ),
        "quick_start_seed2": variant("quick_start_seed2", seed=2, max_steps=12),
        "lr_low": variant("lr_low", learning_rate=1e-7, max_steps=10),
        "beta0": variant("beta0", beta=0.0, max_steps=10),
        "harder_multistep": variant("harder_multistep", dataset_path=str(MULTISTEP), max_steps=10),
        "quick_start_seed3": variant("quick_start_seed3", seed=3, max_steps=30),
        "truncation_blocks": variant("truncation_blocks", max_completion_length=6, max_steps=10),
        "harder_sums2": variant("harder_sums2", dataset_path=str(SUMS2), max_steps=20),
    }


#: The step by which each quick start seed has visibly risen (its reward's 10-step mean up by half its start or more).
LEARNED_BY = {0: 28, 1: 28}
HEALTHY_REPORTS = [
    "https://arxiv.org/abs/2402.03300 (DeepSeekMath: GRPO, beta 0.04; KL drifts while the reward rises)",
    "https://huggingface.co/docs/trl/main/en/grpo_trainer (TRL's logged metrics: reward, kl, frac_reward_zero_std)",
]
#: What each recorded run must and must not get (see tests/doctor/corpus.py), and the public reports it stands for.
LABELS: dict[str, dict] = {
    **{
        f"quick_start_seed{seed}": {
            "description": f"The shipped quick start (RunConfig() on arithmetic_sums1, seed {seed}): it learns "
                           "(README, 'Does it learn?'), with 60-90% of completions cut at first and KL drifting.",
            "reports": HEALTHY_REPORTS,
            "expect": {"healthy": True, "must": {"learning": {"from_step": LEARNED_BY[seed], "severity": "info"}}
                       if seed in LEARNED_BY else {}, "must_not": []},
        }
        for seed in (0, 1, 2, 3)
    },
    "beta0": {
        "description": "The quick start with beta 0 (no KL term, as DAPO and Dr. GRPO train): TRL logs no kl.",
        "reports": ["https://arxiv.org/abs/2503.14476 (DAPO: GRPO without the KL penalty)",
                    "https://arxiv.org/abs/2503.20783 (Dr. GRPO: beta 0)"],
        "expect": {"healthy": True, "must": {}, "must_not": []},
    },
    "lr_low": {
        "description": "learning_rate 1e-7 on a LoRA adapter: the adapter barely moves, KL stays near 0.",
        "reports": ["https://thinkingmachines.ai/blog/lora/ (LoRA Without Regret: LoRA wants about 10x the full "
                    "fine-tuning learning rate)",
                    "https://github.com/huggingface/trl/pull/4181 (TRL docs on LoRA learning rates for GRPO)"],
        "expect": {"healthy": False,
                   "must": {"policy_static": {"from_step": 10, "cause": ["learning_rate", "too low"]}},
                   "must_not": ["kl", "grad_zero", "entropy_surge", "clipped"]},
    },
    "lr_high": {
        "description": "learning_rate 1e-2 on the quick start: within 3 steps the policy writes '5555...' for every "
                       "prompt (entropy 2.4 -> 0.01, KL about 1 nat), which earns the number-only format rule and "
                       "never the answer; every group is flat.",
        "reports": ["https://github.com/datawhalechina/hello-agents/issues/770 (GRPO learning rate too high: policy "
                    "collapse on a small model)",
                    "https://github.com/huggingface/open-r1/issues/255 (the format reward rises while the accuracy "
                    "reward falls)"],
        "expect": {"healthy": False,
                   "must": {"task_rule_falling": {"from_step": 10, "cause": ["numeric_answer", "format"]},
                            "zero_std": {"from_step": 10},
                            # entropy below 0.05 for three logged steps in a row from step 10 on
                            "entropy_collapse": {"from_step": 12, "cause": ["learning rate"]}},
                   "must_not": ["grad_zero", "policy_static", "grad_vanishing"]},
    },
    "harder_multistep": {
        "description": "The quick start on two-operator arithmetic ((13 + 14) x 2): the 135M model never gets one "
                       "right, so the reward is 0 and every group flat.",
        "reports": ["https://github.com/janhq/ReZero/issues/5 (GRPO only helps when the base model already solves "
                    "some prompts)",
                    "https://arxiv.org/abs/2503.14476 (DAPO: groups of all-equal rewards carry no gradient)"],
        "expect": {"healthy": False,
                   "must": {"zero_std": {"from_step": 10, "cause": ["too hard"]},
                            "reward_zero": {"from_step": 10, "severity": "error"}},
                   "must_not": ["grad_zero", "kl", "policy_static", "entropy_surge", "reward_flat"]},
    },
    "saturated": {
        "description": "One rule every completion already earns (format_regex on '.'): reward 1, every group flat.",
        "reports": ["https://github.com/modelscope/ms-swift/issues/3130 (GRPO rewards always 1: no signal)",
                    "https://arxiv.org/abs/2503.14476 (DAPO: dynamic sampling drops groups of all-equal rewards)"],
        "expect": {"healthy": False,
                   "must": {"zero_std": {"from_step": 10, "cause": ["too easy"]}},
                   "must_not": ["reward_zero", "kl", "grad_zero", "policy_static", "entropy_surge", "reward_flat"]},
    },
    "truncation_blocks": {
        "description": "max_completion_length 6: every completion is cut before its answer.",
        "reports": ["https://arxiv.org/abs/2503.14476 (DAPO: truncated samples; overlong shaping)",
                    "https://github.com/verl-project/verl/issues/2738 (a high clip ratio: truncated samples carry "
                    "no signal)"],
        "expect": {"healthy": False,
                   "must": {"clipped": {"from_step": 10, "cause": ["max_completion_length", "block"]}},
                   "must_not": ["kl", "grad_zero", "entropy_surge"]},
    },
}


def start(name: str, config: RunConfig, data_dir: Path) -> subprocess.Popen:
    """Start ``python -m app train`` on ``config``; its output goes to ``data_dir/<name>.log``."""
    path = data_dir / f"{name}.yaml"
    path.write_text(config.to_yaml(), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    env.update(HF_HUB_OFFLINE="1", CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with (data_dir / f"{name}.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "app", "train", str(path), "--data-dir", str(data_dir)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )


def record(names: list[str], data_dir: Path, jobs: int) -> None:
    """Train ``names`` (keys of :func:`corpus_configs`), ``jobs`` at a time, in order."""
    configs = corpus_configs()
    queue = list(names)
    running: dict[str, subprocess.Popen] = {}
    while queue or running:
        while queue and len(running) < jobs:
            name = queue.pop(0)
            running[name] = start(name, configs[name], data_dir)
            print(f"started {name}", flush=True)
        time.sleep(5)
        for name, process in list(running.items()):
            if process.poll() is not None:
                print(f"{name} finished (exit {process.returncode})", flush=True)
                del running[name]


def export(data_dir: Path, out: Path, running: bool = False) -> list[Path]:
    """Write each completed run of the store (and the running ones with ``running``) as ``out/<name>.json``: the
    config fields the doctor reads, the series per key and the sampled groups (texts cut to 120 characters)."""
    store = Store(f"sqlite:///{data_dir / 'grpo.db'}")
    written = []
    try:
        for run in store.list_runs():
            name = str(run.config.get("name", "")).removeprefix("doctor corpus: ")
            if not name or run.status.value not in (("completed", "running") if running else ("completed",)):
                continue
            series: dict[str, list[list[float]]] = {}
            for point in store.metrics_since(run.id):
                if point.value is not None:
                    series.setdefault(point.key, []).append([point.step, float(f"{float(point.value):.6g}")])
            groups = [
                {"step": step, "row_index": g.row_index, "completions": [
                    {"text": c.text[:120], "total_reward": c.total_reward, "rewards": c.rewards, "advantage": c.advantage,
                     "truncated": c.truncated}
                    for c in g.completions]}
                for step in store.group_steps(run.id) for g in store.groups_at(run.id, step) if g.split == "train"
            ]
            label = LABELS.get(name, {})
            record = {
                "name": name,
                "source": "recorded",
                "description": label.get("description", ""),
                "reports": label.get("reports", []),
                "expect": label.get("expect", {}),
                "config": {k: run.config.get(k) for k in (
                    "dataset_path", "learning_rate", "beta", "num_generations", "max_completion_length",
                    "max_steps", "seed", "use_lora", "lora_target_modules", "temperature", "rewards")},
                "series": series,
                "groups": groups,
            }
            out.mkdir(parents=True, exist_ok=True)
            path = out / f"{name}.json"
            path.write_text(json.dumps(record, indent=1), encoding="utf-8")
            written.append(path)
    finally:
        store.close()
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="data directory the runs record into")
    parser.add_argument("--only", help="comma-separated run names (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="runs trained at the same time (default 2)")
    parser.add_argument("--export", type=Path, help="export the completed runs' series into this folder instead")
    parser.add_argument("--running", action="store_true", help="with --export, export the running runs too")
    args = parser.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    if args.export:
        for path in export(args.data_dir, args.export, args.running):
            print(f"wrote {path}")
        return 0
    names = args.only.split(",") if args.only else list(corpus_configs())
    record(names, args.data_dir, args.jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
