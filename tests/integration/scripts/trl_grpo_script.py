"""A user's own GRPO training script, written from TRL's documentation (GRPOTrainer quick start): its own model
loading, dataset and reward functions, nothing of the dashboard's worker, plus the one line that records it.

    python trl_grpo_script.py --model DIR --output-dir DIR --target TARGET [--token T] [--steps N] [--step-sleep S]

``--step-sleep`` makes each step last at least that long (a test stops the dashboard while the script trains);
``--no-callback`` trains without the dashboard (the benchmark's baseline). Runs under ``accelerate launch`` as is.
"""

from __future__ import annotations

import argparse
import re
import time

from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

PROMPTS = [("What is 2 + 3?", "5"), ("What is 7 + 1?", "8"), ("What is 4 + 4?", "8"), ("What is 9 - 3?", "6"),
           ("What is 6 + 6?", "12"), ("What is 3 * 3?", "9"), ("What is 10 - 7?", "3"), ("What is 1 + 1?", "2")]


def correct_answer(completions, answer, **kwargs):
    """1.0 when the completion contains the right number."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [1.0 if re.search(rf"\b{re.escape(a)}\b", t) else 0.0 for t, a in zip(texts, answer, strict=True)]


def short_reply(completions, **kwargs):
    """Prefers short replies."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [-len(t) / 100 for t in texts]


class SlowSteps(TrainerCallback):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(self.seconds)


class CrashAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step + 1 == self.step:
            raise RuntimeError(f"the script broke at step {self.step}")


def make_trainer(model_dir: str, output_dir: str, *, steps: int, save_steps: int = 0, callbacks=None) -> GRPOTrainer:
    """TRL's ``GRPOTrainer`` as its documentation builds one: model and tokenizer from a folder, a dataset of chat
    prompts with an ``answer`` column, two reward functions weighted 1 and 0.5, on the CPU."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": q}], "answer": a} for q, a in PROMPTS])
    config = GRPOConfig(
        output_dir=output_dir, max_steps=steps, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=8, learning_rate=1e-4, logging_steps=1, report_to="none", use_cpu=True,
        save_strategy="steps" if save_steps else "no", save_steps=save_steps or 500,
        reward_weights=[1.0, 0.5], beta=0.04, seed=0, disable_tqdm=True,
    )
    return GRPOTrainer(model=model, reward_funcs=[correct_answer, short_reply], args=config,
                       train_dataset=dataset, processing_class=tokenizer, callbacks=callbacks)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--target")
    parser.add_argument("--token")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--save-steps", type=int, default=0)
    parser.add_argument("--crash-at-step", type=int, default=0)
    parser.add_argument("--no-callback", action="store_true")
    parser.add_argument("--spool-dir")
    args = parser.parse_args()

    trainer = make_trainer(args.model, args.output_dir, steps=args.steps, save_steps=args.save_steps)
    if args.step_sleep:
        trainer.add_callback(SlowSteps(args.step_sleep))
    if args.crash_at_step:
        trainer.add_callback(CrashAt(args.crash_at_step))
    if not args.no_callback:
        from grpo_core.integrations import DashboardCallback

        trainer.add_callback(DashboardCallback(args.target, token=args.token, name="my script run",
                                               tags=["script"], keep_columns=["answer"], spool_dir=args.spool_dir))
    started = time.perf_counter()
    trainer.train()
    print(f"TRAIN_SECONDS {time.perf_counter() - started:.3f} STEPS {trainer.state.global_step}", flush=True)


if __name__ == "__main__":
    main()
