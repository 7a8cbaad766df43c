"""Recording overhead: the same GRPO config trained with and without the dashboard's RunRecorder, in one process.

Builds TRL's ``GRPOTrainer`` through :func:`grpo_core.engine.trainer.build_trainer` (the worker's own code) for a tiny
random Llama (``tests/tiny_model.py``; ``--model`` takes any local folder instead) on the arithmetic example, and
trains ``--steps`` steps per repetition in three modes: "recorded" (RunRecorder + heartbeat recording every step's
metrics and groups into a SQLite store through its writer thread, as the worker does), "inline" (the same, but
every write applied on the training thread inside the callback, as the recorder did before its writer thread) and
"bare" (the recorder callback removed and the reward tap unwrapped), ``--reps`` times, the order rotated every
repetition. A step's time is the interval between consecutive ``on_step_begin`` calls, so it includes the logging
(and recording) of the step before; the first interval of each repetition is warm-up and dropped. Reports the
median step time of each mode; the ratio of each recorded mode to bare (goal ≤ 1.02), both of the pooled medians and
per repetition (each repetition's recorded median over the bare median of the same repetition, which ran just before
or after it: the median and the min-max of those ratios say how far the figure can be trusted); the time the
training thread spends inside the recorder per step, measured directly: its callbacks, the token capture inside
TRL's loss, and the tap's wait for the store before each scoring (the end-of-training flush is reported apart: it
happens once); and the CPU time per step of the store writes on the thread that applies them (``time.thread_time``:
the writer thread's work that competes with torch for the cores and the GIL; the closing summary's write, once after
the last step, left out). "Recorded" and "inline" include the
capture of every completion's per-token log-probability, KL and entropy (:mod:`grpo_core.engine.token_stats`; "bare"
gives the trainer back TRL's own methods), and the bench prints the bytes each completion's token record takes in
the store (float16 arrays and the token pieces' JSON).

The per-repetition ratios scatter on a shared two-core machine (0.7 to 1.6 within one run on a quiet machine, 0.04
to 4 while other work ran), so the verdict line gives
a 95% bootstrap interval for their median (repetitions resampled with replacement) and says "not resolved" when
the interval holds the goal on both sides.

``--burn-ms X`` adds a fourth mode, "burn": the recorder and the writer thread as in "recorded", but each step's
write replaced by X ms of CPU that holds no GIL (SHA-256 over 64 KiB blocks, which CPython hashes with the GIL
released). Comparing it with "bare" prices a millisecond of CPU on another thread of this process on this
machine: with training on both cores it costs more than a millisecond of step time (runs here: 4 to 4.5 ms of burn
made steps 6 to 16% longer; a ``SCHED_IDLE`` writer thread or a shorter GIL switch interval did not change that, so it
is contention for the cores themselves, not scheduling nor the GIL). That figure, times the writer's CPU per step,
says what the recorded ratio can be on a given machine.

``--logging-steps N`` is TRL's ``logging_steps``: the recorder writes a step's metrics and groups at TRL's logs
only, so it prices recording every N steps (TRL's own default is 10; the dashboard's is 1). ``--device cuda`` trains
on the GPU (``make gpu-check`` runs it there): short steps, the case the ≤ 1.02 goal is about,
and torch leaves the CPU cores mostly to the Python side, so the writer thread should compete for the GIL more than for
the cores. ``--threads`` sets torch's CPU threads (default: the cores, at most 4). What it leaves out: several
processes, PostgreSQL, and a browser polling the same store. A tiny model's step is short too, which makes the ratio a
pessimistic bound for real models; the direct per-step milliseconds are the number that transfers.

Usage: ``python benchmarks/bench_recording.py [--steps 6] [--reps 8] [--model FOLDER] [--device cpu|cuda]
[--threads N] [--logging-steps N] [--burn-ms X]``
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
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

from grpo_core.datasets.formats import load_prompt_dataset  # noqa: E402
from grpo_core.engine.group_capture import RolloutTap  # noqa: E402
from grpo_core.engine.heartbeat import Heartbeat  # noqa: E402
from grpo_core.engine.recorder import RunRecorder  # noqa: E402
from grpo_core.engine.store_writer import StoreWrite, StoreWriter  # noqa: E402
from grpo_core.engine.trainer import build_trainer  # noqa: E402
from grpo_core.run_config import RunConfig  # noqa: E402
from storage import Store, sqlite_url  # noqa: E402

EXAMPLE = ROOT / "examples" / "arithmetic.jsonl"
GOAL_RATIO = 1.02
GOAL_MS_PER_STEP = 1.0


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


RECORDED_MODES = ("recorded", "inline")
#: The calibration mode of ``--burn-ms``: the writer thread burns CPU instead of writing each step.
BURN = "burn"
_BLOCK = bytes(64 * 1024)


def cpu_burn(seconds: float):
    """A store write that writes nothing and spends ``seconds`` of its thread's CPU time hashing 64 KiB blocks
    (CPython releases the GIL while hashing more than 2 KiB)."""

    def burn(_store) -> None:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            hashlib.sha256(_BLOCK)

    return burn


class BurningWriter(StoreWriter):
    """A :class:`StoreWriter` whose step records (``"step N metrics..."``) become :func:`cpu_burn` writes; other
    writes (cancel checks, heartbeats) are applied as usual."""

    def __init__(self, store: Store, seconds: float) -> None:
        super().__init__(store, name="burning-writer")
        self.burn = cpu_burn(seconds)

    def submit(self, write, *, poll_s: float = 0.1) -> int:
        label = getattr(write, "label", "")
        if label.endswith(("metrics", "groups")) and "run summary" not in label:  # a step's record, not the summary
            write = StoreWrite(write.label, self.burn)
        return super().submit(write, poll_s=poll_s)


#: Seconds of each call to each part of the recorder, over every recorded repetition: ``{mode: {part: [s, ...]}}``.
PARTS: dict[str, dict[str, list[float]]] = {}


def _timed(function, spent: list[float], part: str | None = None, mode: str = ""):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - start
            spent.append(elapsed)
            if part is not None:
                PARTS.setdefault(mode, {}).setdefault(part, []).append(elapsed)

    return wrapper


def timed_recorder(recorder: RunRecorder, mode: str = "") -> tuple[list[float], list[float]]:
    """Wrap the recorder's per-step work on the training thread (its callbacks and the tap's wait for the store
    before scoring) and its end-of-training flush to accumulate their time (also by part, in :data:`PARTS`);
    returns the two lists of seconds."""
    spent: list[float] = []
    for name in ("on_step_end", "on_log", "on_prediction_step"):
        setattr(recorder, name, _timed(getattr(recorder, name), spent, name, mode))
    if recorder.tap is not None:
        recorder.tap.before_scoring = _timed(recorder.tap.before_scoring, spent, "before scoring", mode)
    at_end: list[float] = []
    recorder.on_train_end = _timed(recorder.on_train_end, at_end)
    return spent, at_end


def timed_capture(capture, spent: list[float], mode: str = "") -> None:
    """Wrap the token capture's work inside TRL's loss (keeping a micro-batch's per-token values on the CPU) to
    add its seconds to ``spent`` (and to :data:`PARTS` as "token capture"). Its decoding and packing happen on the
    writer thread (inline: in ``on_log``)."""
    capture._keep = _timed(capture._keep, spent, "token capture", mode)


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


def train_once(config: RunConfig, rows, model_path: str, store: Store, folder: Path, mode: str,
               burn_s: float = 0.0):
    """Train one repetition in ``mode`` (``bare``, one of :data:`RECORDED_MODES`, or :data:`BURN` with ``burn_s``
    seconds of CPU per step); returns (step intervals in s, recorder seconds per step on the training thread or
    None, end-of-training flush seconds or None, CPU seconds per step the store writes took on the thread applying
    them or None)."""
    recorded = mode in (*RECORDED_MODES, BURN)
    run = store.create_run(name="bench", config=config.model_dump(mode="json"), dataset_id=None,
                           max_steps=config.max_steps)
    heartbeat = Heartbeat(store, run.id).start() if recorded else None
    built = build_trainer(config, rows, model_path=model_path, output_dir=folder, store=store, run_id=run.id,
                          heartbeat=heartbeat, progress=lambda _message: None)
    trainer = built.trainer
    trainer.remove_callback(PrinterCallback)  # TRL prints every log dict without tqdm; keep the table readable
    spent = at_end = None
    if recorded:
        if mode == "inline":
            built.recorder.writer = StoreWriter(store, inline=True)
        elif mode == BURN:
            built.recorder.writer = BurningWriter(store, burn_s)
        spent, at_end = timed_recorder(built.recorder, mode)
        timed_capture(built.token_capture, spent, mode)
    else:
        trainer.remove_callback(RunRecorder)
        built.token_capture.uninstall()
        trainer.reward_funcs = [f.func if isinstance(f, RolloutTap) else f for f in trainer.reward_funcs]
    clock = StepClock()
    trainer.add_callback(clock)
    try:
        trainer.train()
    finally:
        built.recorder.close()
        if heartbeat is not None:
            heartbeat.stop()
    per_step = None if spent is None else sum(spent) / max(1, config.max_steps)
    # the closing summary's write happens once, after the last step: not a step's cost
    writes = (sum(spent for label, spent in built.recorder.writer.busy_by_label.items() if "run summary" not in label)
              / max(1, config.max_steps) if recorded else None)
    return clock.intervals(), per_step, None if at_end is None else sum(at_end), writes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps per repetition")
    parser.add_argument("--reps", type=int, default=8, help="repetitions per mode (alternated)")
    parser.add_argument("--model", help="local model folder (default: a tiny random Llama built here)")
    parser.add_argument("--max-completion-length", type=int, default=16, help="tokens per completion")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where to train (cuda: the fast steps of a GPU, where the writer has idle cores)")
    parser.add_argument("--threads", type=int, default=max(1, min(4, os.cpu_count() or 1)),
                        help="torch's CPU threads (default: the cores, at most 4)")
    parser.add_argument("--logging-steps", type=int, default=1,
                        help="TRL's logging_steps: the recorder writes metrics and groups every N steps")
    parser.add_argument("--burn-ms", type=float, default=0.0,
                        help="add the 'burn' mode: each step's write replaced by this much GIL-free CPU (calibration)")
    args = parser.parse_args()

    import torch

    if args.steps < 3:
        parser.error("--steps must be at least 3: a step is timed from its start to the next one's, and the first "
                     "interval is warm-up")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA GPU here")
    torch.set_num_threads(max(1, args.threads))
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
            "device": args.device,
            "logging_steps": args.logging_steps,
        })
        store = Store(sqlite_url(tmp_path / "grpo.db"))
        modes = ["bare", *RECORDED_MODES, *([BURN] if args.burn_ms > 0 else [])]
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        recorder_s: dict[str, list[float]] = {mode: [] for mode in modes[1:]}
        flush_s: dict[str, list[float]] = {mode: [] for mode in modes[1:]}
        writes_s: dict[str, list[float]] = {mode: [] for mode in modes[1:]}
        rep_medians: dict[str, list[float]] = {mode: [] for mode in modes}
        for rep in range(args.reps):
            order = modes[rep % len(modes):] + modes[:rep % len(modes)]
            for mode in order:
                intervals, spent, at_end, writes = train_once(config, rows, model_path, store,
                                                              tmp_path / f"out-{rep}-{mode}", mode,
                                                              args.burn_ms / 1000)
                times[mode].extend(intervals)
                rep_medians[mode].append(statistics.median(intervals))
                if spent is not None:
                    recorder_s[mode].append(spent)
                    flush_s[mode].append(at_end)
                    writes_s[mode].append(writes)
                print(f"rep {rep + 1}/{args.reps} {mode:>8}: median step {statistics.median(intervals) * 1000:.0f} ms"
                      f" over {len(intervals)} steps", flush=True)
        records, tokens, size = token_record_bytes(store)
        store.close()

    print(f"\nmodel: {'tiny random Llama' if not args.model else args.model}, {args.steps} steps x {args.reps} reps "
          f"per mode, logging_steps {args.logging_steps}, {device_name(args.device)}, "
          f"{torch.get_num_threads()} CPU threads for torch")
    print_table(times, recorder_s, flush_s, args.steps, (records, tokens, size), rep_medians, writes_s)


def device_name(device: str) -> str:
    """``CPU``, or the CUDA device's name (``NVIDIA H200``) for ``cuda``."""
    if device != "cuda":
        return "CPU"
    import torch

    return torch.cuda.get_device_name(0)


def rep_ratios(rep_medians: dict[str, list[float]], mode: str) -> list[float]:
    """Per repetition, ``mode``'s median step over bare's median step of the same repetition (the modes of one
    repetition run back to back, so a machine that gets busier or quieter over the run moves both alike)."""
    return [m / b for m, b in zip(rep_medians[mode], rep_medians["bare"], strict=True)]


def median_interval(values: list[float], *, resamples: int = 2000, level: float = 0.95,
                    seed: int = 0) -> tuple[float, float]:
    """A percentile bootstrap interval (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13) for
    the median of ``values``: ``resamples`` medians of samples drawn with replacement, cut at the ``level``
    interval's two tails. Raises ``ValueError`` on an empty list."""
    if not values:
        raise ValueError("no values to bootstrap")
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    tail = (1 - level) / 2
    return medians[int(tail * (resamples - 1))], medians[int((1 - tail) * (resamples - 1) + 0.5)]


def verdict(ratio_interval: tuple[float, float], inside_ms: float) -> str:
    """``ok`` when the training thread's ms per step and the whole 95% interval of the ratio are within the goals,
    ``over the goal`` when the thread's time or the whole interval is over, ``not resolved`` when the interval
    holds the ratio goal on both sides (more repetitions, or a quieter machine, would decide)."""
    low, high = ratio_interval
    if inside_ms > GOAL_MS_PER_STEP or low > GOAL_RATIO:
        return "over the goal"
    return "ok" if high <= GOAL_RATIO else "not resolved"


def print_table(times: dict[str, list[float]], recorder_s: dict[str, list[float]],
                flush_s: dict[str, list[float]], steps_per_rep: int, token_records: tuple[int, int, int],
                rep_medians: dict[str, list[float]], writes_s: dict[str, list[float]]) -> None:
    """One line per mode: median and p90 step, ratio to bare (of the pooled steps' medians, and the median and
    min-max of the per-repetition ratios, :func:`rep_ratios`), recorder ms per step on the training thread (goal
    <= :data:`GOAL_MS_PER_STEP`), the store writes' CPU ms per step on the thread applying them, and the
    end-of-training flush; then each recorded mode's ms per step by part, and the token records' size
    (``token_records``: completions, tokens, bytes)."""
    bare = statistics.median(times["bare"])
    print(f"{'mode':<10} {'steps':>6} {'median step ms':>15} {'p90 step ms':>12} {'ratio':>7} "
          f"{'rep ratios: median (min-max)':>29} {'recorder ms/step':>17} {'writes CPU ms/step':>19} "
          f"{'end flush ms':>13}")
    for mode, values in times.items():
        values = sorted(values)
        p90 = values[min(len(values) - 1, int(0.9 * (len(values) - 1) + 0.5))]
        median = statistics.median(values)
        ratios = rep_ratios(rep_medians, mode)
        spread = f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
        inside = f"{statistics.median(recorder_s[mode]) * 1000:.2f}" if mode in recorder_s else "-"
        writes = f"{statistics.median(writes_s[mode]) * 1000:.2f}" if mode in writes_s else "-"
        flush = f"{statistics.median(flush_s[mode]) * 1000:.1f}" if mode in flush_s else "-"
        print(f"{mode:<10} {len(values):>6} {median * 1000:>15.1f} {p90 * 1000:>12.1f} {median / bare:>7.3f} "
              f"{spread:>29} {inside:>17} {writes:>19} {flush:>13}")
    for mode, parts in PARTS.items():
        steps = len(recorder_s[mode]) * steps_per_rep
        print(f"{mode}, ms per step by part (median call): "
              + ", ".join(f"{part} {sum(calls) / max(1, steps) * 1000:.2f} ({statistics.median(calls) * 1000:.2f})"
                          for part, calls in parts.items()))
    ratios = rep_ratios(rep_medians, "recorded")
    ratio = statistics.median(ratios)
    low, high = median_interval(ratios)
    inside = statistics.median(recorder_s["recorded"]) * 1000
    print(f"recorded (writer thread): ratio {ratio:.3f} (median of the per-repetition ratios, 95% bootstrap interval "
          f"{low:.3f}-{high:.3f}; goal <= {GOAL_RATIO}), {inside:.2f} ms per step on the "
          f"training thread (goal <= {GOAL_MS_PER_STEP}; {inside / (bare * 1000) * 100:.1f}% of a bare step): "
          f"{verdict((low, high), inside)}")
    if BURN in rep_medians:
        burned = statistics.median(rep_ratios(rep_medians, BURN))
        cpu = statistics.median(writes_s[BURN]) * 1000
        print(f"burn: {cpu:.2f} ms of CPU per step on the writer thread (the burn, the cancel checks) made steps "
              f"{burned:.3f}x bare: "
              f"{(burned - 1) * bare * 1000 / max(cpu, 1e-9):.2f} ms of step time per ms of CPU on another thread")
    records, tokens, size = token_records
    if records:
        print(f"token records: {records} completions, {tokens / records:.1f} tokens each, {size / records:.0f} bytes "
              f"per completion ({size / max(1, tokens):.1f} bytes per token: 3 float16 values + its piece)")
    else:
        print("token records: none stored")


if __name__ == "__main__":
    main()
