"""How often does the base model solve the code tasks? Greedy and sampled ``code_tests`` on a sample of rows.

The default model (SmolLM2-135M-Instruct, converted from the packaged GGUF into ``--data-dir``'s model cache, as
``benchmarks/bench_learning.py`` loads it) answers ``--per-family`` rows of each family of a code file (default
``examples/code_train.jsonl``, the first rows of each family), prompts through the chat template with
``add_generation_prompt`` as TRL's trainer builds them: once greedily and ``--samples`` times at temperature 1.0
(top-k off, as the Launch defaults). Completions are generated once at the largest ``--limits`` length; the first
``L`` tokens of a completion are what a run with ``max_completion_length`` ``L`` would have generated, so every
limit is scored from the same completions, cut there. Scored by ``code_tests`` (the product's sandbox).

Printed per limit: greedy pass@1 (share of prompts whose greedy completion passes every test, reward 1.0), greedy
and sampled mean ``code_tests`` reward, the share of prompts whose samples all score the same (zero reward std:
such groups teach nothing in GRPO), the share of prompts with at least one passing sample, and the truncation rate
(greedy, sampled); then median and 90th percentile completion length in tokens (complete completions only), and
per family the greedy passes and the sampled mean reward. ``--system`` replaces the rows' system prompt (to
compare wordings); ``--json`` writes the completions and their rewards.

    python benchmarks/bench_code_tasks.py [--file examples/code_train.jsonl] [--per-family 2] [--samples 4]
        [--limits 96,128,192] [--system TEXT] [--data-dir DIR] [--seed 0] [--json FILE]

Left out: GPU runs, other models, and the other rules of the code recipe (style, runtime, length).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_core.rewards.code.correctness import CodeTestsReward  # noqa: E402
from grpo_core.run_config import DEFAULT_MODEL  # noqa: E402
from grpo_core.settings import load_settings  # noqa: E402


def pick_rows(path: Path, per_family: int) -> list[dict]:
    """The first ``per_family`` rows of each family of ``path``, in file order."""
    taken: dict[str, int] = defaultdict(int)
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if taken[row["family"]] < per_family:
            taken[row["family"]] += 1
            rows.append(row)
    return rows


def generate(model, tokenizer, prompts: list[list[dict]], max_new_tokens: int, sample: bool,
             batch_size: int = 32) -> list[tuple[list[int], bool]]:
    """Per prompt, the completion's token ids (up to and including its end token) and whether it was truncated."""
    import torch

    from grpo_core.engine.policy_model import end_of_sequence_ids

    end = end_of_sequence_ids(model, tokenizer)
    tokenizer.padding_side = "left"
    out = []
    for start in range(0, len(prompts), batch_size):
        texts = [tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False)
                 for p in prompts[start:start + batch_size]]
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        extra = {"do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0} if sample else {"do_sample": False}
        with torch.inference_mode():
            output = model.generate(**batch, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                                    eos_token_id=list(end.ids), **extra)
        out.extend(end.cut(seq) for seq in output[:, batch["input_ids"].shape[1]:].tolist())
    return out


def score(tokenizer, rows: list[dict], completions: list[tuple[list[int], bool]], limit: int,
          reward: CodeTestsReward) -> tuple[list[float], list[bool], list[str]]:
    """``code_tests`` rewards, truncation flags and texts of ``completions`` (one per row) cut at ``limit`` tokens."""
    texts, truncated = [], []
    for ids, cut in completions:
        texts.append(tokenizer.decode(ids[:limit], skip_special_tokens=True))
        truncated.append(cut or len(ids) > limit)
    rewards = reward(texts, tests=[r["tests"] for r in rows], entry_point=[r["entry_point"] for r in rows],
                     prompts=[r["prompt"] for r in rows])
    return [0.0 if r is None else r for r in rewards], truncated, texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=ROOT / "examples" / "code_train.jsonl")
    parser.add_argument("--per-family", type=int, default=2, help="rows per family (default 2)")
    parser.add_argument("--samples", type=int, default=4, help="sampled completions per prompt (default 4)")
    parser.add_argument("--limits", default="96,128,192", help="max_completion_length values to score")
    parser.add_argument("--system", help="system prompt to use instead of the rows' own")
    parser.add_argument("--data-dir", type=Path, help="data directory holding the model cache (default: temporary)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write completions and rewards here")
    args = parser.parse_args()
    limits = sorted(int(x) for x in args.limits.split(","))
    rows = pick_rows(args.file, args.per_family)
    if args.system:
        rows = [{**r, "prompt": [{"role": "system", "content": args.system}, *r["prompt"][1:]]} for r in rows]
    settings = load_settings(data_dir=str(args.data_dir or tempfile.mkdtemp(prefix="bench-code-")))

    import torch

    from grpo_core.engine.policy_model import load_policy, prepare_model

    torch.manual_seed(args.seed)
    model, tokenizer = load_policy(prepare_model(DEFAULT_MODEL, settings.model_cache_dir, progress=lambda _: None),
                                   "cpu")
    model.eval()
    started = time.monotonic()
    prompts = [r["prompt"] for r in rows]
    greedy = generate(model, tokenizer, prompts, limits[-1], sample=False)
    sampled = generate(model, tokenizer, [p for p in prompts for _ in range(args.samples)], limits[-1], sample=True)
    print(f"bench_code_tasks: {len(rows)} rows of {args.file.name}, {args.samples} samples each, generated in "
          f"{time.monotonic() - started:.0f} s")
    reward = CodeTestsReward(timeout_s=5.0)
    header = (f"{'limit':>5} | {'greedy pass@1':>13} | {'greedy mean':>11} | {'sampled mean':>12} | {'zero-std':>8} | "
              f"{'any pass':>8} | {'trunc greedy':>12} | {'trunc sampled':>13}")
    print(header + "\n" + "-" * len(header))
    record: dict = {"rows": len(rows), "samples": args.samples, "limits": {}}
    for limit in limits:
        g_rewards, g_trunc, g_texts = score(tokenizer, rows, greedy, limit, reward)
        s_rows = [r for r in rows for _ in range(args.samples)]
        s_rewards, s_trunc, s_texts = score(tokenizer, s_rows, sampled, limit, reward)
        groups = [s_rewards[i:i + args.samples] for i in range(0, len(s_rewards), args.samples)]
        figures = {
            "greedy_pass": sum(r == 1.0 for r in g_rewards) / len(rows),
            "greedy_mean": statistics.fmean(g_rewards),
            "sampled_mean": statistics.fmean(s_rewards),
            "zero_std": sum(len(set(g)) == 1 for g in groups) / len(groups),
            "any_pass": sum(any(r == 1.0 for r in g) for g in groups) / len(groups),
            "trunc_greedy": sum(g_trunc) / len(g_trunc),
            "trunc_sampled": sum(s_trunc) / len(s_trunc),
        }
        print(f"{limit:>5} | {figures['greedy_pass']:>13.1%} | {figures['greedy_mean']:>11.3f} | "
              f"{figures['sampled_mean']:>12.3f} | {figures['zero_std']:>8.1%} | {figures['any_pass']:>8.1%} | "
              f"{figures['trunc_greedy']:>12.1%} | {figures['trunc_sampled']:>13.1%}")
        record["limits"][limit] = {**figures, "greedy": list(zip(g_texts, g_rewards, strict=True)),
                                   "sampled": list(zip(s_texts, s_rewards, strict=True))}
    lengths = [len(ids) for ids, cut in greedy + sampled if not cut]
    if lengths:
        deciles = statistics.quantiles(lengths, n=10) if len(lengths) > 1 else [lengths[0]] * 9
        print(f"completion length (tokens, complete ones): median {statistics.median(lengths):.0f}, "
              f"90th percentile {deciles[8]:.0f}")
    top = record["limits"][limits[-1]]
    per_family: dict[str, list[float]] = defaultdict(list)
    sampled_family: dict[str, list[float]] = defaultdict(list)
    for index, row in enumerate(rows):
        per_family[row["family"]].append(top["greedy"][index][1])
        sampled_family[row["family"]] += [r for _, r in top["sampled"][index * args.samples:(index + 1) * args.samples]]
    print(f"per family at {limits[-1]} tokens (greedy passes, sampled mean reward): " + ", ".join(
        f"{name} {sum(x == 1.0 for x in rs)}/{len(rs)} {statistics.fmean(sampled_family[name]):.2f}"
        for name, rs in per_family.items()))
    if args.json:
        args.json.write_text(json.dumps(record, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
