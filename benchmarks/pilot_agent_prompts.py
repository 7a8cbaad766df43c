"""Pilot of the agent quick start: how often does the base SmolLM2-135M-Instruct, with the calculator tool and the
tool-calling template the dashboard sets for it (TRL's Qwen2.5 template, ``use_tool_chat_template``), emit a
well-formed call under each system prompt? Sampled at temperature 1 (as GRPO samples), one rollout per question.

Per prompt: the share of rollouts with a parsed call (``valid call``), with call markup TRL could not parse
(``malformed``), with no call, truncated, and whose final answer is right (``numeric_answer`` on the final turn).

    python benchmarks/pilot_agent_prompts.py [--samples 16] [--max-completion-length 96] [--data-dir DIR]

Left out: other models, greedy decoding, prompts beyond the five below.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from agent_rollouts import rollouts  # noqa: E402

from grpo_core.settings import load_settings  # noqa: E402

PLAIN = "You are a helpful assistant. Use the calculator tool for arithmetic, then reply with the result as a number."
EXAMPLE_CALL = ("Example: for \"What is 12 * 34?\" you call\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": "
                "{\"expression\": \"12 * 34\"}}\n</tool_call>\nand after the tool returns 408 you reply: 408")
SHOT = [{"role": "user", "content": "What is 12 * 34?"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "calculator", "arguments": {"expression": "12 * 34"}}}]},
        {"role": "tool", "name": "calculator", "content": "408"},
        {"role": "assistant", "content": "408"}]



def exchange(question: str, expression: str, result: str) -> list[dict]:
    """One worked exchange as earlier turns: the question, a call, the tool's result, the answer."""
    return [{"role": "user", "content": question},
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                "name": "calculator", "arguments": {"expression": expression}}}]},
            {"role": "tool", "name": "calculator", "content": result},
            {"role": "assistant", "content": result}]


SHOTS = [*exchange("What is 12 * 34?", "12 * 34", "408"), *exchange("What is 56 * 78 - 90?", "56 * 78 - 90", "4278"),
         *exchange("What is 231 * 19?", "231 * 19", "4389")]

PROMPTS = {
    "none (template default)": lambda q: [{"role": "user", "content": q}],
    "plain instruction": lambda q: [{"role": "system", "content": PLAIN}, {"role": "user", "content": q}],
    "instruction + example call": lambda q: [{"role": "system", "content": f"{PLAIN} {EXAMPLE_CALL}"},
                                            {"role": "user", "content": q}],
    "instruction + one worked exchange": lambda q: [{"role": "system", "content": PLAIN}, *SHOT,
                                                   {"role": "user", "content": q}],
    "instruction + three worked exchanges": lambda q: [{"role": "system", "content": PLAIN}, *SHOTS,
                                                      {"role": "user", "content": q}],
}


def main() -> int:
    import torch

    from grpo_core.engine.policy_model import load_policy, prepare_model
    from grpo_core.engine.tool_template import use_tool_chat_template
    from grpo_core.rewards.answer import make_numeric_answer
    from grpo_core.tools.library import calculator
    from grpo_core.tools.turns import trajectory_summary, turns_of_completion

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--max-completion-length", type=int, default=96)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prompts", default=",".join(PROMPTS), help="comma-separated names of the prompts to sample")
    args = parser.parse_args()
    rows = [json.loads(line) for line in (ROOT / "examples" / "agent_train.jsonl").read_text().splitlines()]
    rows = rows[:args.samples]
    settings = load_settings(data_dir=str(args.data_dir) if args.data_dir else None)
    model, tokenizer = load_policy(prepare_model("SmolLM2-135M-Instruct", settings.model_cache_dir), "cpu")
    print("template:", use_tool_chat_template(tokenizer))
    score = make_numeric_answer()
    print(f"{'system prompt':<38} {'valid call':>10} {'malformed':>9} {'no call':>7} {'truncated':>9} {'right':>5}  s")
    names = [n.strip() for n in args.prompts.split(",")]
    if unknown := [n for n in names if n not in PROMPTS]:
        parser.error(f"unknown prompt(s) {unknown}; known: {', '.join(PROMPTS)}")
    for name in names:
        build = PROMPTS[name]
        torch.manual_seed(args.seed)
        started = time.monotonic()
        states = rollouts(model.eval(), tokenizer, [build(r["prompt"][-1]["content"]) for r in rows], [calculator],
                          max_completion_length=args.max_completion_length, temperature=1.0)
        summaries = [trajectory_summary(turns_of_completion(s.messages)) for s in states]
        valid = sum(1 for x in summaries if x["calls"] > x["unparsed"])
        malformed = sum(1 for x in summaries if x["unparsed"])
        none = sum(1 for x in summaries if not x["calls"])
        right = sum(score([s.messages for s in states], answer=[r["answer"] for r in rows]))
        n = len(states)
        print(f"{name:<38} {valid / n:>10.0%} {malformed / n:>9.0%} {none / n:>7.0%} "
              f"{sum(s.truncated for s in states) / n:>9.0%} {right / n:>5.0%}  {time.monotonic() - started:.0f}",
              flush=True)
        for s in states[:2]:
            print("   e.g.", json.dumps(s.messages)[:300])
    return 0


if __name__ == "__main__":
    sys.exit(main())
