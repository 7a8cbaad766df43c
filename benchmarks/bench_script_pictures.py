"""What recording a vision-language script's pictures costs (``DashboardCallback``, docs/images.md): on the training
thread, the reward tap handing each completion's pictures on by token; on the recorder's writer thread, the bounded
PNG copy of a group's picture; at the dashboard, the check of a picture a request carries (decode, re-encode, hash).

Pictures are random RGB noise (PNG's worst case) of the given sides; each figure is the median of ``--reps`` timed
calls, after one warm-up.

Usage: ``python benchmarks/bench_script_pictures.py [--reps 20] [--sides 224 448 1024 2048] [--batch 16]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from PIL import Image

from grpo_core.engine.group_capture import PictureShelf, RolloutTap
from grpo_core.engine.policy_model import EndOfSequence
from grpo_core.runs.script_images import checked_copy, recorded_copy


def _median_ms(reps: int, call, *args, **kwargs) -> float:
    call(*args, **kwargs)
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        call(*args, **kwargs)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _copied(picture) -> None:
    """The writer thread's work for one group's picture: a fresh shelf, so nothing is cached."""
    shelf = PictureShelf()
    [token] = shelf.keep(picture)
    shelf.copy(token)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--sides", type=int, nargs="+", default=[224, 448, 1024, 2048])
    parser.add_argument("--batch", type=int, default=16, help="completions scored in one call of the tap")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    end = EndOfSequence(ids=(0,), pad_id=None)
    print(f"{'side':>6} {'tap, no pictures':>17} {'tap, pictures':>14} {'copy (writer)':>14} {'check (ingest)':>15} "
          f"{'PNG bytes':>10}")
    for side in args.sides:
        picture = Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8))
        batch = [picture] * args.batch
        extra: dict = {}

        def log_extra(column, values, extra=extra):
            extra.setdefault(column, [None])[0] = values  # kept bounded: the last call's values

        plain = RolloutTap(lambda c, **_: [0.0] * len(c), end, 8)
        taps = RolloutTap(lambda c, **_: [0.0] * len(c), end, 8, record_images=True)
        kwargs = {"completion_ids": [[1, 0]] * args.batch, "image": batch, "log_extra": log_extra}
        completions = ["x"] * args.batch
        bare_ms = _median_ms(args.reps, plain, completions, **kwargs)
        tap_ms = _median_ms(args.reps, taps, completions, **kwargs)
        copy_ms = _median_ms(args.reps, _copied, picture)
        _, png = recorded_copy(picture)
        check_ms = _median_ms(args.reps, checked_copy, png)
        print(f"{side:>6} {bare_ms:>14.3f} ms {tap_ms:>11.3f} ms {copy_ms:>11.1f} ms {check_ms:>12.1f} ms "
              f"{len(png):>10,}")


if __name__ == "__main__":
    main()
