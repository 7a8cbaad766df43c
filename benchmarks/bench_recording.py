"""Recording overhead: the same GRPO config trained with and without the dashboard's RunRecorder, in one process.

Builds TRL's ``GRPOTrainer`` through :func:`grpo_core.worker.trainer.build_trainer` (the worker's own code) for a tiny
random Llama (``tests/tiny_model.py``; ``--model`` takes any local folder instead) on the arithmetic example, and
trains ``--steps`` steps per repetition, alternating "recorded" (RunRecorder + heartbeat writing every step's
metrics and groups into a SQLite store, as the worker does) and "bare" (the recorder callback removed and the
reward tap unwrapped), ``--reps`` times, the order swapped every repetition. A step's time is the interval between
consecutive ``on_step_begin`` calls, so it includes the logging (and recording) of the step before; the first
interval of each repetition is warm-up and dropped. Reports the median step time of each mode, their ratio (goal
≤ 1.02), and the time spent inside the recorder's callbacks per step, measured directly. "Recorded" includes the
capture of every completion's per-token log-probability, KL and entropy (:mod:`grpo_core.worker.token_stats`; "bare"
gives the trainer back TRL's own methods) and the bench prints the bytes each completion's token record takes in the
store (float16 arrays and the token pieces' JSON).

What it leaves out: the GPU (on a GPU a step is shorter, so the same milliseconds weigh more), several processes,
PostgreSQL, and a browser polling the same store. A tiny model's step is short too, which makes the ratio a
pessimistic bound for real models; the direct per-step milliseconds are the number that transfers.

Usage: ``python benchmarks/bench_recording.py [--steps 6] [--reps 3] [--model FOLDER]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from transformers import PrinterCallback, TrainerCallback  # noqa: E402

from grpo_core.config import RunConfig  # noqa: E402
from grpo_core.datasets import load_prompt_dataset  # noqa: E402
from grpo_core.worker.recorder import Heartbeat, RolloutTap, RunRecorder  # noqa: E402
from grpo_core.worker.trainer import build_trainer  # noqa: E402
from storage import Store, sqlite_url  # noqa: E402

EXAMPLE = ROOT / "examples" / "arithmetic.jsonl"
GOAL_RATIO = 1.02


class StepClock(TrainerCallback):
    """Records the wall time of every ``on_step_begin``."""

    def __init__(self) -> None:
        self.starts: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.starts.append(time.perf_counter())

    def intervals(self) -> list[float]:
        """Seconds between consecutive step starts, the first (warm-up) dropped."""
        gaps = [b - a for a, b in zip(self.starts, self.starts[1:], strict=False)]
        return gaps[1:]


def timed_recorder(recorder: RunRecorder) -> list[float]:
    """Wrap the recorder's per-step callbacks to accumulate their time; returns the list receiving the seconds."""
    spent: list[float] = []
    for name in ("on_step_end", "on_log"):
        original = getattr(recorder, name)

        def wrapper(*args, _original=original, **kwargs):
            start = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                spent.append(time.perf_counter() - start)

        setattr(recorder, name, wrapper)
    return spent


def timed_capture(capture, spent: list[float]) -> None:
    """Wrap the token capture's work inside TRL's loss (keeping a micro-batch's per-token values on the CPU) to
    add its seconds to ``spent``. Its work at ``on_log`` (decoding, packing) is inside the recorder's callbacks."""
    original = capture._keep

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    capture._keep = wrapper


def token_record_bytes(store: Store) -> tuple[int, int, int]:
    """(completions with a token record, their tokens, the bytes of their records: the three float16 arrays plus
    the token pieces' JSON, UTF-8) in a SQLite store."""
    from sqlalchemy import text

    with store.engine.connect() as connection:
        count, tokens, size = connection.execute(text(
            "SELECT count(*), coalesce(sum(num_tokens), 0), coalesce(sum(length(logprobs) + coalesce(length(kl), 0)"
            " + coalesce(length(entropy), 0) + length(CAST(pieces AS BLOB))), 0) FROM completion_tokens"
        )).one()
    return int(count), int(tokens), int(size)


def train_once(config: RunConfig, rows, model_path: str, store: Store, folder: Path, recorded: bool):
    """Train one repetition; returns (step intervals in s, recorder seconds per step or None)."""
    run = store.create_run(name="bench", config=config.model_dump(mode="json"), dataset_id=None,
                           max_steps=config.max_steps)
    heartbeat = Heartbeat(store, run.id).start() if recorded else None
    built = build_trainer(config, rows, model_path=model_path, output_dir=folder, store=store, run_id=run.id,
                          heartbeat=heartbeat, progress=lambda _message: None)
    trainer = built.trainer
    trainer.remove_callback(PrinterCallback)  # TRL prints every log dict without tqdm; keep the table readable
    spent = None
    if recorded:
        spent = timed_recorder(built.recorder)
        timed_capture(built.token_capture, spent)
    else:
        trainer.remove_callback(RunRecorder)
        built.token_capture.uninstall()
        trainer.reward_funcs = [f.func if isinstance(f, RolloutTap) else f for f in trainer.reward_funcs]
    clock = StepClock()
    trainer.add_callback(clock)
    try:
        trainer.train()
    finally:
        if heartbeat is not None:
            heartbeat.stop()
    per_step = None if spent is None else sum(spent) / max(1, config.max_steps)
    return clock.intervals(), per_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps per repetition")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per mode (alternated)")
    parser.add_argument("--model", help="local model folder (default: a tiny random Llama built here)")
    parser.add_argument("--max-completion-length", type=int, default=16, help="tokens per completion")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    rows = load_prompt_dataset(EXAMPLE).rows
    with tempfile.TemporaryDirectory(prefix="bench-recording-") as tmp:
        tmp_path = Path(tmp)
        if args.model:
            model_path = args.model
        else:
            from tests.tiny_model import build_tiny_model

            model_path = str(build_tiny_model(tmp_path / "tiny"))
        config = RunConfig.model_validate({
            "model": model_path,
            "dataset_path": str(EXAMPLE),
            "rewards": [
                {"rule": "numeric_answer", "weight": 1.0},
                {"rule": "format_regex", "weight": 0.2, "params": {"pattern": r"^\s*-?\d+\s*$"}},
                {"rule": "length", "weight": 0.2, "params": {"min_tokens": 1, "max_tokens": 8}},
            ],
            "max_steps": args.steps,
            "max_completion_length": args.max_completion_length,
            "num_generations": 4,
            "per_device_train_batch_size": 8,
            "temperature": 1.0,
            "device": "cpu",
        })
        store = Store(sqlite_url(tmp_path / "grpo.db"))
        times: dict[str, list[float]] = {"bare": [], "recorded": []}
        recorder_s: list[float] = []
        for rep in range(args.reps):
            order = ["recorded", "bare"] if rep % 2 == 0 else ["bare", "recorded"]
            for mode in order:
                intervals, spent = train_once(config, rows, model_path, store, tmp_path / f"out-{rep}-{mode}",
                                              recorded=mode == "recorded")
                times[mode].extend(intervals)
                if spent is not None:
                    recorder_s.append(spent)
                print(f"rep {rep + 1}/{args.reps} {mode:>8}: median step {statistics.median(intervals) * 1000:.0f} ms"
                      f" over {len(intervals)} steps", flush=True)
        records, tokens, size = token_record_bytes(store)
        store.close()

    bare, recorded = statistics.median(times["bare"]), statistics.median(times["recorded"])
    ratio = recorded / bare
    inside = statistics.median(recorder_s) * 1000
    print(f"\nmodel: {'tiny random Llama' if not args.model else args.model}, {args.steps} steps x {args.reps} reps "
          f"per mode, CPU, {torch.get_num_threads()} threads")
    print(f"{'mode':<10} {'steps':>6} {'median step ms':>15} {'p90 step ms':>12}")
    for mode in ("bare", "recorded"):
        values = sorted(times[mode])
        p90 = values[min(len(values) - 1, int(0.9 * (len(values) - 1) + 0.5))]
        print(f"{mode:<10} {len(values):>6} {statistics.median(values) * 1000:>15.1f} {p90 * 1000:>12.1f}")
    verdict = "ok" if ratio <= GOAL_RATIO else "over the goal"
    print(f"ratio recorded / bare: {ratio:.3f} (goal <= {GOAL_RATIO}): {verdict}")
    print(f"time inside the recorder's callbacks and the token capture: {inside:.1f} ms per step "
          f"({inside / (bare * 1000) * 100:.1f}% of a bare step)")
    if records:
        print(f"token records: {records} completions, {tokens / records:.1f} tokens each, {size / records:.0f} bytes "
              f"per completion ({size / max(1, tokens):.1f} bytes per token: 3 float16 values + its piece)")
    else:
        print("token records: none stored")


if __name__ == "__main__":
    main()
