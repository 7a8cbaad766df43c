"""How long does reading a hostile config take? Time :func:`grpo_core.bounded_parse.load_yaml` on what an attacker
sends and on what users write, beside PyYAML's own ``safe_load`` (pure Python) on the same texts.

Texts: a typical run config (~1 KB), the same config padded to just under the 64 KB size limit, the 577-byte
"billion laughs" (nested aliases), a flood of values just under the size limit, flow lists nested 65,000 deep, block
lists nested 30,000 deep, and an oversized text. Printed per text: its size, the outcome (accepted or the start of
the refusal), and the median of ``--repeat`` timings in milliseconds for ``load_yaml`` and for ``safe_load`` (which
is not run on the laughs: it accepts them, and the expansion happens later, in whatever walks the result).

    python benchmarks/bench_bounded_parse.py [--repeat 7]

Left out: the server's share (``tests/security/test_config_and_webhooks.py`` measures the server's CPU time per
refused call against an empty ``list_runs``), JSON (``json.loads`` in C: microseconds at these sizes).
"""

from __future__ import annotations

import argparse
import statistics
import time

import yaml

from grpo_core.bounded_parse import MAX_TEXT_BYTES, ParseError, load_yaml
from grpo_core.rewards import RewardSpec
from grpo_core.run_config import RunConfig


def billion_laughs() -> str:
    lines = ["a: &a [" + ",".join(['"lol"'] * 9) + "]"]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    text = "max_steps: 1\ntrl_args:\n  x:\n" + "".join(f"    {line}\n" for line in lines)
    return text + "#" * (576 - len(text)) + "\n"


def texts() -> dict[str, str]:
    config = RunConfig(name="bench", rewards=[RewardSpec(rule="numeric_answer"),
                                              RewardSpec(rule="format_regex", params={"pattern": "^\\d+$"})])
    typical = config.to_yaml()
    flood = "[" + ",".join(["1"] * ((MAX_TEXT_BYTES - 2) // 2)) + "]"
    return {
        "typical run config": typical,
        "config padded to the limit": typical + "#" * (MAX_TEXT_BYTES - len(typical) - 2) + "\n",
        "billion laughs (577 B)": billion_laughs(),
        "value flood": flood,
        "flow lists 65,000 deep": "[" * 65000,
        "block lists 30,000 deep": "- " * 30000,
        "oversized (200 KB)": "a: " + "x" * 200_000,
    }


def _median_ms(function, text: str, repeat: int) -> float:
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        try:
            function(text)
        except (ParseError, yaml.YAMLError, RecursionError):
            pass
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print("| text | bytes | load_yaml outcome | load_yaml ms | yaml.safe_load ms |\n|---|---|---|---|---|")
    for name, text in texts().items():
        try:
            load_yaml(text)
            outcome = "accepted"
        except ParseError as exc:
            outcome = str(exc).split(": ", 1)[1][:48]
        ours = _median_ms(load_yaml, text, args.repeat)
        theirs = "not run" if "laughs" in name else f"{_median_ms(yaml.safe_load, text, args.repeat):.1f}"
        print(f"| {name} | {len(text.encode()):,} | {outcome} | {ours:.1f} | {theirs} |")


if __name__ == "__main__":
    main()
