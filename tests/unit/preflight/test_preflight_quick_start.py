"""The preflight's verdict (its non-probe findings) on samples like the shipped quick start's: SmolLM2-135M on
single-digit sums with the default rules starts by explaining and is cut at 24 tokens about 75% of the time (TRL's
``completions/clipped_ratio`` over the recorded runs' first 10 steps: 0.62-1.0), answers right about 1 time in 4,
and rarely writes the number alone (here: 75% cut, 7% of those ending on the answer, 75% of the finished ones right,
15% of those the number alone: 24% right in all). It learns (README, "Does it learn?"), so the verdict must be "can learn" on
nearly every sample of 4 prompts, whatever chance puts in the sample; the same model with 6 tokens (every completion
cut) must still be told to raise max_completion_length."""

from __future__ import annotations

import random

from grpo_core.datasets.library import QUICK_START_PATH
from grpo_core.preflight.report import LEVEL_OK, SampledGroup, summarize
from grpo_core.preflight.verdict import judge
from grpo_core.rewards.compose import score_group
from grpo_core.run_config import RunConfig


def _completion(a: int, b: int, rng: random.Random, cut_share: float, on_answer: float) -> tuple[str, bool]:
    """A completion like the base model's: cut explanations (``on_answer`` of them ending on the answer), or a
    finished answer."""
    if rng.random() < cut_share:
        if rng.random() < on_answer:
            return f"The sum of {a} and {b} is {a + b}, because adding {a} and {b} gives {a + b}", True
        return f"To add {a} and {b}, we need to find the total of {a} and {b}, which is", True
    right = rng.random() < 0.75
    answer = a + b if right else a + b + 1
    return (str(answer) if rng.random() < 0.15 else f"{a} + {b} = {answer}"), False


def _report(seed: int, cut_share: float = 0.75, on_answer: float = 0.07):
    rng = random.Random(seed)
    config = RunConfig(dataset_path=str(QUICK_START_PATH))
    groups = []
    for row_index in range(4):
        a, b = rng.randrange(10), rng.randrange(10)
        drawn = [_completion(a, b, rng, cut_share, on_answer) for _ in range(config.num_generations)]
        texts = [text for text, _ in drawn]
        groups.append(
            SampledGroup(
                row_index=row_index, prompt=f"What is {a} + {b}?", texts=texts, num_tokens=[24] * len(texts),
                truncated=[cut for _, cut in drawn], score=score_group(config.rewards, texts, {"answer": a + b}),
            )
        )
    return summarize(groups, config=config)


def test_the_quick_start_can_learn_on_nearly_every_sample():
    verdicts = [judge(_report(seed)) for seed in range(300)]
    ok = sum(v.level == LEVEL_OK for v in verdicts)
    # what is left is chance in a sample of 16 completions: none right (0.76^16, 1%), or none finished (0.75^16, 1%)
    # with 3 of 4 groups flat, or the answer rule flat in every group; a real preflight of the quick start: README
    assert ok / len(verdicts) >= 0.96, [v for v in verdicts if v.level != LEVEL_OK][:3]


def test_the_quick_start_notes_say_why_the_cuts_and_the_format_rule_are_fine():
    verdict = judge(_report(1))
    text = " ".join(verdict.advice)
    assert verdict.level == LEVEL_OK
    assert "teach the policy to finish" in text


def test_every_completion_cut_before_its_answer_is_still_a_warning():
    # max_completion_length 6: "To add 6 and 9," and nothing more; every group flat
    verdicts = [judge(_report(seed, cut_share=1.0, on_answer=0.0)) for seed in range(20)]
    assert all(v.level != LEVEL_OK for v in verdicts)
    assert all("raise max_completion_length" in " ".join(v.advice) for v in verdicts)
