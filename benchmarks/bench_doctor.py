"""How far can the run doctor be trusted? Precision and recall per check on the labelled corpus, at every prefix.

The corpus (``tests/doctor/corpus/*.json``, described in :mod:`tests.doctor.corpus`) holds runs recorded by the
product on a CPU and synthetic runs for what a CPU cannot produce, each labelled with the findings it must get (from
which step, naming which cause) and must not get. The doctor (:func:`grpo_core.doctor.diagnose`) reads each run as
the Runs tab does while it trains: at every prefix from 10 logged steps on, with the groups sampled so far (the
latest 32). Per check code it counts true positives (a labelled finding there at its severity, its cause named),
false negatives (missing, or the cause not named) and false positives (a warning or error on a healthy run, or of a
code the run must not get). Prefixes before a finding's labelled onset are not scored for it.

    python benchmarks/bench_doctor.py [--corpus DIR] [--verbose]

Printed: a Markdown table per check (labelled prefixes, found with the cause named, missed, prefixes where it must
stay quiet, false alarms, precision, recall), the count of healthy-run prefixes with any warning, the runs of the
corpus, and with ``--verbose`` every miss and false alarm. Exit status 1 when any healthy run gets a warning or
any labelled finding is missed at a scored prefix.

Left out: timing (the doctor runs in milliseconds on 1,000 steps; see bench_store_scale.py for the panel's cost).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.doctor.corpus import (  # noqa: E402
    ALARM_CODES,
    CORPUS_DIR,
    FIRST_PREFIX,
    SCORED_INFO_CODES,
    Tally,
    evaluate,
    load_corpus,
)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS_DIR, help="folder of corpus JSON files")
    parser.add_argument("--verbose", action="store_true", help="list every miss and false alarm")
    args = parser.parse_args()
    runs = load_corpus(args.corpus)
    tallies = evaluate(runs)
    prefixes = sum(len(list(run.prefixes())) for run in runs)
    recorded = sum(run.source == "recorded" for run in runs)
    print(
        f"{len(runs)} runs ({recorded} recorded, {len(runs) - recorded} synthetic), {prefixes} prefixes scored "
        f"(from {FIRST_PREFIX} logged steps on)\n"
    )
    print("| check | labelled prefixes | found, cause named | missed | prefixes that must stay quiet | false alarms "
          "| precision | recall |")
    print("|---|---|---|---|---|---|---|---|")
    for code in sorted(set(tallies) | set(ALARM_CODES) | set(SCORED_INFO_CODES)):
        t = tallies.get(code, Tally())
        print(f"| `{code}` | {t.tp + t.fn} | {t.tp} | {t.fn} | {t.negatives} | {t.fp} | {_ratio(t.precision)} "
              f"| {_ratio(t.recall)} |")
    healthy = [run for run in runs if run.healthy]
    quiet = sum(len(list(run.prefixes())) for run in healthy)
    alarmed = sum(
        any(f.severity.value != "info" for f in run.diagnose_at(step)) for run in healthy for step in run.prefixes()
    )
    print(f"\nHealthy runs: {len(healthy)}, {quiet} prefixes, {alarmed} with a warning or an error.")
    print("\n| run | source | steps | labelled findings | healthy |")
    print("|---|---|---|---|---|")
    for run in runs:
        must = ", ".join(f"`{c}` (from {label.get('from_step', 0)})" for c, label in run.must.items()) or "-"
        print(f"| {run.name} | {run.source} | {len(run.steps)} | {must} | {'yes' if run.healthy else 'no'} |")
    failed = any(t.fp or t.fn for t in tallies.values())
    if args.verbose or failed:
        for code, t in sorted(tallies.items()):
            for miss in t.misses:
                print(f"MISS {code}: {miss}")
            for alarm in t.alarms:
                print(f"FALSE ALARM {code}: {alarm}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
