"""A user's own GRPO script on a vision-language model, written from TRL's documentation (GRPOTrainer with an
``image`` column of ``datasets.Image`` features and chat prompts), plus the one line that records it.

    python trl_vlm_script.py --model DIR --output-dir DIR --target TARGET [--token T] [--steps N]
"""

from __future__ import annotations

import argparse

from datasets import Dataset, Image
from PIL import Image as PILImage
from transformers import AutoModelForImageTextToText, AutoProcessor
from trl import GRPOConfig, GRPOTrainer

#: (colour, answer): one picture of that colour a row.
COLOURS = [((255, 0, 0), "red"), ((0, 160, 0), "green"), ((0, 0, 255), "blue"), ((250, 200, 0), "yellow")]


def names_the_colour(completions, answer, **kwargs):
    """1.0 when the completion names the row's colour (the ``answer`` column)."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [1.0 if a in t.lower() else 0.0 for t, a in zip(texts, answer, strict=True)]


def short_reply(completions, **kwargs):
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [-len(t) / 100 for t in texts]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--token")
    parser.add_argument("--steps", type=int, default=1)
    args = parser.parse_args()

    processor = AutoProcessor.from_pretrained(args.model)
    model = AutoModelForImageTextToText.from_pretrained(args.model)
    rows = {"prompt": [[{"role": "user", "content": "What colour is this picture?"}] for _ in COLOURS],
            "image": [PILImage.new("RGB", (28, 28), rgb) for rgb, _ in COLOURS],
            "answer": [name for _, name in COLOURS]}
    dataset = Dataset.from_dict(rows).cast_column("image", Image())
    config = GRPOConfig(output_dir=args.output_dir, max_steps=args.steps, per_device_train_batch_size=4,
                        num_generations=2, max_completion_length=4, learning_rate=1e-4, logging_steps=1,
                        report_to="none", use_cpu=True, save_strategy="no", seed=0, disable_tqdm=True)
    trainer = GRPOTrainer(model=model, reward_funcs=[names_the_colour, short_reply], args=config,
                          train_dataset=dataset, processing_class=processor)
    from grpo_core.integrations import DashboardCallback

    trainer.add_callback(DashboardCallback(args.target, token=args.token, name="my vlm run", keep_columns=["answer"]))
    trainer.train()


if __name__ == "__main__":
    main()
