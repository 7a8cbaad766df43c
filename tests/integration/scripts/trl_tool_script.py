"""A user's own agentic GRPO script, written from TRL's documentation (GRPOTrainer, "Agent training" with
``environment_factory``): an environment class whose public method is the tool the model calls, ``reset()`` per
rollout and ``get_reward()`` scoring the rollout, plus a reward function on the model's final answer, and the one
line that records it.

    python trl_tool_script.py --model DIR --output-dir DIR --target TARGET [--token T] [--steps N]

It leaves out what an agentic run at scale needs (vLLM, several environments); the model is the tool-calling tiny
model of tests/tiny_model.py.
"""

from __future__ import annotations

import argparse
import re

from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

QUESTION = "What is 6 * 7?"


class CalculatorEnv:
    """One rollout's environment: the model may compute with it; the rollout is rewarded when it did, without a
    failed call."""

    def reset(self, **kwargs) -> None:
        self.calls = 0
        self.failures = 0

    def calculator(self, expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: numbers with + - * / // % ** and parentheses, e.g. "(12 + 30) * 2".
        """
        self.calls += 1
        match = re.fullmatch(r"\s*(\d{1,6})\s*([-+*])\s*(\d{1,6})\s*", str(expression))
        if match is None:
            self.failures += 1
            raise ValueError(f"cannot evaluate {expression!r}")
        left, op, right = int(match.group(1)), match.group(2), int(match.group(3))
        return str({"+": left + right, "-": left - right, "*": left * right}[op])

    def get_reward(self) -> float:
        return 1.0 if self.calls and not self.failures else 0.0


def final_answer_reward(completions, **kwargs):
    """1.0 when the model's last message says 42."""
    return [1.0 if "42" in completion[-1]["content"] else 0.0 for completion in completions]


def make_trainer(model_dir: str, output_dir: str, *, steps: int, callbacks=None) -> GRPOTrainer:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    prompt = [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": QUESTION}]
    dataset = Dataset.from_list([{"prompt": prompt}] * 8)
    config = GRPOConfig(
        output_dir=output_dir, max_steps=steps, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=64, learning_rate=1e-5, logging_steps=1, report_to="none", use_cpu=True,
        save_strategy="no", max_tool_calling_iterations=2, temperature=0.7, seed=0, disable_tqdm=True,
    )
    return GRPOTrainer(model=model, reward_funcs=[final_answer_reward], args=config, train_dataset=dataset,
                       processing_class=tokenizer, environment_factory=CalculatorEnv, callbacks=callbacks)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--target")
    parser.add_argument("--token")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--spool-dir")
    args = parser.parse_args()

    from grpo_core.integrations import DashboardCallback

    callback = DashboardCallback(args.target, token=args.token, name="agent script", spool_dir=args.spool_dir)
    make_trainer(args.model, args.output_dir, steps=args.steps, callbacks=[callback]).train()


if __name__ == "__main__":
    main()
