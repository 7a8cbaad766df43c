"""Write the synthetic runs of the doctor's corpus (``tests/doctor/corpus/synthetic_*.json``), deterministically.

Synthetic runs stand for what a CPU cannot record in minutes: a long run (hundreds of steps) whose entropy collapses
or whose KL drifts far, a KL blow-up, an entropy surge, a frozen adapter (the worker's LoRA always trains, and
``learning_rate`` must be > 0), a format rule learned over the task, reward functions raising, a vanishing gradient.
Each curve follows the public report cited in the file, with seeded noise of the size the recorded runs show (per-step
reward noise about 0.1 with 2 prompts of 4 completions).

    python -m tests.doctor.make_synthetic   # rewrites the files
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Callable

from tests.doctor.corpus import CORPUS_DIR
from tests.doctor.synthetic_tools import tool_runs

HEALTHY_REPORTS = [
    "https://arxiv.org/abs/2402.03300 (DeepSeekMath: GRPO, beta 0.04; KL drifts while the reward rises)",
    "https://github.com/aburkov/theLMbook/issues/6 (KL grows as the policy is updated: expected drift)",
]
QUICK_START_REWARDS = [
    {"rule": "numeric_answer", "weight": 1.0, "params": {}},
    {"rule": "format_regex", "weight": 0.5, "params": {"pattern": r"^\s*-?\d+(\.\d+)?\s*\.?\s*$"}},
]


def _clamp(value: float, low: float = 0.0, high: float = 1.0) -> float:
    return max(low, min(high, value))


def make_series(
    n: int,
    seed: int,
    *,
    reward: Callable[[int], float],
    reward_noise: float = 0.1,
    reward_std: Callable[[int], float] = lambda t: 0.4,
    kl: Callable[[int], float] | None = lambda t: 0.002 * t,
    entropy: Callable[[int], float] = lambda t: 1.6,
    grad_norm: Callable[[int], float] = lambda t: 0.5,
    clipped: Callable[[int], float] = lambda t: 0.1,
    zero_std: Callable[[int], float] = lambda t: 0.25,
    learning_rate: float = 1e-4,
    extra: dict[str, Callable[[int], float]] | None = None,
) -> dict[str, list[list[float]]]:
    """Series for steps 1..n of TRL's keys, each ``f(step)`` with multiplicative or additive seeded noise."""
    rng = random.Random(seed)
    out: dict[str, list[list[float]]] = {}

    def add(key: str, step: int, value: float) -> None:
        out.setdefault(key, []).append([step, round(value, 6)])

    for t in range(1, n + 1):
        add("reward", t, reward(t) + rng.gauss(0, reward_noise))
        add("reward_std", t, max(0.0, reward_std(t) * (1 + rng.gauss(0, 0.15))))
        if kl is not None:
            add("kl", t, max(0.0, kl(t) * (1 + rng.gauss(0, 0.1))))
        add("entropy", t, max(0.0, entropy(t) * (1 + rng.gauss(0, 0.08))))
        add("grad_norm", t, max(0.0, grad_norm(t) * (1 + rng.gauss(0, 0.2))))
        add("completions/clipped_ratio", t, _clamp(clipped(t) + rng.gauss(0, 0.04)))
        add("frac_reward_zero_std", t, _clamp(zero_std(t) + rng.gauss(0, 0.1)))
        add("learning_rate", t, learning_rate)
        add("loss", t, rng.gauss(0, 0.05))
        for key, f in (extra or {}).items():
            add(key, t, f(t))
    return out


def _sigmoid(t: float, middle: float, width: float) -> float:
    return 1 / (1 + math.exp(-(t - middle) / width))


def _run(name: str, description: str, reports: list[str], config: dict, series: dict, expect: dict) -> dict:
    return {
        "name": name, "source": "synthetic", "description": description, "reports": reports,
        "config": {"use_lora": True, "num_generations": 4, "max_completion_length": 24, **config},
        "series": series, "expect": expect,
    }


#: The quick start's completions, as the 135M model writes them (``tests/doctor/corpus/quick_start_seed0.json``'s
#: groups): (numeric_answer, format_regex, cut); weighted total = numeric_answer + 0.5 * format_regex.
_OUTCOMES = {"cut": (0.0, 0.0, True), "right": (1.0, 0.0, False), "short_right": (1.0, 1.0, False),
             "wrong": (0.0, 0.0, False)}
_TEXTS = {"cut": "To find the sum we add the two numbers together, so first we take", "right": "3 + 4 = 7.",
          "short_right": "7", "wrong": "3 + 4 = 8."}


def _quick_start_mix(progress: float) -> dict[str, float]:
    """The share of each outcome at ``progress`` (0 at the start, 1 learned): mostly cut explanations at first
    (mean reward about 0.25 with the all-cut groups), "a + b = c" at the end (about 0.75)."""
    start = {"cut": 0.5, "right": 0.42, "short_right": 0.03, "wrong": 0.05}
    end = {"cut": 0.28, "right": 0.62, "short_right": 0.03, "wrong": 0.07}
    return {k: start[k] + (end[k] - start[k]) * progress for k in start}


def quick_start_final(n: int = 60, seed: int = 15) -> tuple[dict, list[dict]]:
    """A quick start's whole series and groups, computed from its sampled completions as TRL logs them: 2 prompts
    per step, 4 completions each; a group is flat (all 4 alike) with probability 0.55 at first (all cut, scoring 0)
    and 0.6 at the end (all right 7 times in 10), so both groups of a step are often flat; entropy falls from 2.0 to about 0.35
    nats per token (below a quarter) as the policy learns to answer "a + b = c"."""
    rng = random.Random(seed)
    series: dict[str, list[list[float]]] = {}
    groups: list[dict] = []

    def add(key: str, step: int, value: float) -> None:
        series.setdefault(key, []).append([step, round(value, 6)])

    for t in range(1, n + 1):
        progress = _sigmoid(t, 24, 7)
        mix = _quick_start_mix(progress)
        kinds, weights = list(mix), list(mix.values())
        step_groups = []
        for row in range(2):
            flat = rng.random() < 0.55 + 0.05 * progress
            if flat:
                kind = "right" if rng.random() < 0.7 * progress else "cut"
                picked = [kind] * 4
            else:
                picked = rng.choices(kinds, weights, k=4)
                while len(set(picked)) == 1:
                    picked = rng.choices(kinds, weights, k=4)
            step_groups.append(picked)
            groups.append({
                "step": t, "row_index": (2 * t + row) % 40, "prompt": "What is 3 + 4?",
                "completions": [
                    {"text": _TEXTS[k], "total_reward": _OUTCOMES[k][0] + 0.5 * _OUTCOMES[k][1],
                     "rewards": {"numeric_answer": _OUTCOMES[k][0], "format_regex": _OUTCOMES[k][1]},
                     "truncated": _OUTCOMES[k][2]}
                    for k in picked
                ],
            })
        every = [k for picked in step_groups for k in picked]
        totals = [[_OUTCOMES[k][0] + 0.5 * _OUTCOMES[k][1] for k in picked] for picked in step_groups]
        add("reward", t, sum(sum(g) for g in totals) / len(every))
        add("reward_std", t, sum(statistics.pstdev(g) for g in totals) / len(totals))
        add("frac_reward_zero_std", t, sum(max(g) == min(g) for g in totals) / len(totals))
        add("rewards/numeric_answer/mean", t, sum(_OUTCOMES[k][0] for k in every) / len(every))
        add("rewards/format_regex/mean", t, sum(_OUTCOMES[k][1] for k in every) / len(every))
        add("completions/clipped_ratio", t, sum(_OUTCOMES[k][2] for k in every) / len(every))
        add("entropy", t, max(0.05, (2.0 - 1.65 * _sigmoid(t, 30, 7)) * (1 + rng.gauss(0, 0.08))))
        add("kl", t, max(0.0, (0.002 * t if t < 15 else 0.03 + 0.07 * (t - 15) / 45) * (1 + rng.gauss(0, 0.1))))
        add("grad_norm", t, max(0.0, 0.5 * (1 + rng.gauss(0, 0.2))))
        add("learning_rate", t, 1e-4)
        add("loss", t, rng.gauss(0, 0.05))
    return series, groups


def synthetic_runs() -> list[dict]:
    """The synthetic runs with their labels (see :mod:`tests.doctor.corpus` for the format)."""
    base = {"learning_rate": 1e-4, "beta": 0.04, "rewards": QUICK_START_REWARDS, "max_steps": 300}
    runs = [
        _run(
            "synthetic_entropy_collapse",
            "A long run whose entropy falls from 1.2 to 0.05 nats between steps 20 and 90 while the reward stays near "
            "0.35: the policy turns greedy without getting better.",
            ["https://arxiv.org/abs/2505.22617 (Cui et al. 2025, The Entropy Mechanism of RL for Reasoning LMs)"],
            base,
            make_series(
                160, 1, reward=lambda t: 0.35, reward_noise=0.05,
                entropy=lambda t: 0.05 + 1.15 * (1 - _sigmoid(t, 55, 10)),
                reward_std=lambda t: 0.35 * (1 - 0.6 * _sigmoid(t, 55, 10)),
            ),
            {"healthy": False, "must": {"entropy_collapse": {"from_step": 75, "cause": ["temperature"]}},
             "must_not": ["kl", "entropy_surge", "grad_zero", "grad_vanishing", "policy_static"]},
        ),
        _run(
            "synthetic_kl_blowup",
            "The reward rises for 50 steps with an ordinary KL drift (0.002 per step), then KL grows 1.5x per step to "
            "tens of nats and the reward falls back.",
            ["https://github.com/huggingface/open-r1/issues/373 (KL suddenly very large during GRPO, training crashes)",
             "https://github.com/meta-pytorch/torchforge/issues/664 (KL divergence explodes in GRPO training)"],
            base,
            make_series(
                80, 2, reward=lambda t: 0.2 + 0.4 * min(t, 50) / 50 - (0.015 * (t - 50) if t > 50 else 0.0),
                kl=lambda t: 0.002 * t if t <= 50 else min(50.0, 0.1 * 1.5 ** (t - 50)),
            ),
            {"healthy": False, "must": {"kl": {"from_step": 58, "cause": ["beta", "learning_rate"]}},
             "must_not": ["grad_zero", "policy_static", "entropy_surge"]},
        ),
        _run(
            "synthetic_entropy_surge",
            "Entropy holds at 0.5 for 30 steps, then surges to 3.2 nats per token while the reward falls from 0.5 to "
            "0.1: sampling goes to noise.",
            ["https://github.com/verl-project/verl/issues/2738 (unexpected entropy increase collapses GRPO training)",
             "https://github.com/PeterGriffinJin/Search-R1/issues/162 (responses garbled as entropy rises in GRPO)"],
            base,
            make_series(
                70, 3, reward=lambda t: 0.5 - 0.4 * _sigmoid(t, 42, 5),
                entropy=lambda t: 0.5 + 2.7 * _sigmoid(t, 40, 4),
                kl=lambda t: 0.002 * t + 0.5 * _sigmoid(t, 42, 5),
            ),
            {"healthy": False, "must": {"entropy_surge": {"from_step": 45, "cause": ["learning rate", "beta"]}},
             "must_not": ["grad_zero", "policy_static", "entropy_collapse"]},
        ),
        _run(
            "synthetic_frozen_adapter",
            "grad_norm exactly 0 and KL 0 at every step while reward_std is 0.4: the trainable parameters get no "
            "gradient (a frozen or detached adapter, target modules outside the forward pass).",
            ["https://github.com/modelscope/ms-swift/issues/5571 (GRPO LoRA: grad_norm 0.0 and kl 0.0 with "
             "reward_std 0.44)",
             "https://github.com/verl-project/verl/issues/4514 (grad_norm always 0 with LoRA)"],
            {**base, "learning_rate": 1e-6, "lora_target_modules": "q_proj,v_proj"},
            make_series(40, 4, reward=lambda t: 0.3, kl=lambda t: 0.0, grad_norm=lambda t: 0.0,
                        learning_rate=1e-6),
            {"healthy": False,
             "must": {"grad_zero": {"from_step": 10, "severity": "error",
                                    "cause": ["target_modules", "frozen", "learning_rate 0"]}},
             "must_not": ["kl", "entropy_surge", "reward_flat"],
             "say_never": ["with LoRA is low", "try 0.0001", "try 1e-4"]},
        ),
        _run(
            "synthetic_format_over_task",
            "Two rules of equal weight: the format rule rises from 0.1 to 0.95 while the task rule falls from 0.55 to "
            "0.15, so the total still rises: format learned, task forgotten.",
            ["https://github.com/huggingface/open-r1/issues/255 (accuracy reward falls 0.16 -> 0.06 while the format "
             "reward rises 0.48 -> 0.86 and the total rises)"],
            {**base, "rewards": [{"rule": "numeric_answer", "weight": 1.0, "params": {}},
                                 {"rule": "format_regex", "weight": 1.0, "params": {}}]},
            make_series(
                60, 5, reward=lambda t: (0.55 - 0.4 * _sigmoid(t, 30, 6)) + (0.1 + 0.85 * _sigmoid(t, 25, 5)),
                extra={
                    "rewards/numeric_answer/mean": lambda t: round(0.55 - 0.4 * _sigmoid(t, 30, 6), 4),
                    "rewards/format_regex/mean": lambda t: round(0.1 + 0.85 * _sigmoid(t, 25, 5), 4),
                },
            ),
            {"healthy": False,
             "must": {"task_rule_falling": {"from_step": 40, "cause": ["numeric_answer", "format_regex"]}},
             "must_not": ["grad_zero", "policy_static", "kl", "entropy_surge"]},
        ),
        _run(
            "synthetic_rule_errors",
            "A learning run whose code_tests reward function raised for 2 completions at steps 12-15 and 4 at step 30.",
            ["https://github.com/huggingface/trl/pull/3079 (reward functions may return None; a failing one adds "
             "nothing)",
             "https://github.com/modelscope/ms-swift/issues/8123 (reward functions failing on some samples, silent "
             "training failure)"],
            {**base, "rewards": [{"rule": "code_tests", "weight": 1.0, "params": {}}]},
            make_series(
                40, 6, reward=lambda t: 0.2 + 0.5 * t / 40,
                extra={"rewards/code_tests/errors": lambda t: 2.0 if 12 <= t <= 15 else 4.0 if t == 30 else 0.0},
            ),
            {"healthy": False, "must": {"rule_errors": {"from_step": 12, "cause": ["code_tests", "train.log"]}},
             "must_not": ["grad_zero", "policy_static", "kl", "entropy_surge", "reward_flat", "clipped"]},
        ),
        _run(
            "synthetic_healthy_long",
            "A healthy 200-step run: reward 0.2 -> 0.8, KL drifting smoothly to 0.35 at beta 0.04, entropy easing "
            "from 1.5 to 0.9, truncation falling from 60% to 5% in the first 30 steps.",
            ["https://arxiv.org/abs/2402.03300 (DeepSeekMath: GRPO with beta 0.04, KL grows steadily while the reward "
             "rises)"],
            base,
            make_series(
                200, 7, reward=lambda t: 0.2 + 0.6 * (1 - math.exp(-t / 60)), reward_noise=0.12,
                kl=lambda t: 0.0006 * t**1.2, entropy=lambda t: 0.9 + 0.6 * math.exp(-t / 80),
                clipped=lambda t: 0.05 + 0.55 * math.exp(-t / 10),
            ),
            {"healthy": True, "must": {"learning": {"from_step": 30, "severity": "info"}}, "must_not": []},
        ),
        _run(
            "synthetic_small_beta_drift",
            "A healthy run at beta 0.001: KL drifts smoothly to 3 nats over 150 steps while the reward rises; the "
            "penalty (beta x KL = 0.003) never weighs.",
            ["https://github.com/aburkov/theLMbook/issues/6 (KL keeps growing while the policy is updated; expected "
             "drift)"],
            {**base, "beta": 0.001},
            make_series(
                150, 8, reward=lambda t: 0.2 + 0.5 * (1 - math.exp(-t / 50)), kl=lambda t: 0.02 * t,
            ),
            {"healthy": True, "must": {"learning": {"from_step": 30, "severity": "info"}}, "must_not": []},
        ),
        _run(
            "synthetic_truncation_blocks",
            "92-100% of completions cut at max_completion_length for 40 steps, the share not falling, the reward flat "
            "near 0.1: the cuts keep the answers from being scored.",
            ["https://arxiv.org/abs/2503.14476 (DAPO: overlong, truncated samples add reward noise; overlong "
             "filtering and shaping)",
             "https://github.com/verl-project/verl/issues/2738 (high clip ratio: many truncated samples carry no "
             "training signal)"],
            base,
            make_series(40, 9, reward=lambda t: 0.1, reward_noise=0.04, reward_std=lambda t: 0.15,
                        clipped=lambda t: 0.97),
            {"healthy": False,
             "must": {"clipped": {"from_step": 10, "cause": ["max_completion_length", "block"]}},
             "must_not": ["grad_zero", "policy_static", "kl", "entropy_surge"]},
        ),
        _run(
            "synthetic_reward_zero",
            "A regex rule nothing matches: reward, reward_std 0 and every group flat at every step.",
            ["https://github.com/huggingface/open-r1/issues/255 (a reward rule stuck at 0.0)"],
            base,
            make_series(30, 10, reward=lambda t: 0.0, reward_noise=0.0, reward_std=lambda t: 0.0,
                        zero_std=lambda t: 1.0, grad_norm=lambda t: 0.0, kl=lambda t: 0.0),
            {"healthy": False,
             "must": {"reward_zero": {"from_step": 10, "severity": "error", "cause": ["rules"]},
                      "zero_std": {"from_step": 10, "cause": ["too hard"]}},
             "must_not": ["grad_zero", "policy_static", "kl", "entropy_surge", "reward_flat"]},
        ),
        _run(
            "synthetic_grad_vanishing",
            "grad_norm decays 0.8x per step from step 10 to 1e-4 while reward_std stays 0.3: the gradient no longer "
            "reaches the parameters.",
            ["https://github.com/modelscope/ms-swift/issues/5890 (grad_norm stays 0 while reward and reward_std look "
             "normal)"],
            base,
            make_series(50, 11, reward=lambda t: 0.3, reward_std=lambda t: 0.3,
                        grad_norm=lambda t: 0.5 * 0.8 ** max(0, t - 10), kl=lambda t: 0.01),
            {"healthy": False,
             "must": {"grad_vanishing": {"from_step": 45, "cause": ["frozen", "target_modules"]}},
             "must_not": ["kl", "entropy_surge", "policy_static"],
             "say_never": ["with LoRA is low"]},
        ),
        _run(
            "synthetic_quick_start_60",
            "The quick start as the issue measured it from the browser over 60 steps: reward 0.29 over the first 10 "
            "steps, 0.80 over the last 10, KL drifting 0.03 -> 0.10 at beta 0.02, 60-90% of completions cut at first "
            "and falling: the ordinary run the old doctor warned about (not improving, cut, KL x3).",
            HEALTHY_REPORTS,
            {**base, "beta": 0.02, "max_steps": 60},
            make_series(
                60, 12, reward=lambda t: 0.25 + 0.6 * _sigmoid(t, 30, 8), reward_noise=0.15,
                reward_std=lambda t: 0.45, kl=lambda t: 0.002 * t if t < 15 else 0.03 + 0.07 * (t - 15) / 45,
                clipped=lambda t: 0.8 - 0.7 * _sigmoid(t, 30, 6), entropy=lambda t: 1.8 - 0.6 * _sigmoid(t, 30, 8),
            ),
            {"healthy": True, "must": {"learning": {"from_step": 35, "severity": "info"}}, "must_not": []},
        ),
        {
            **_run(
                "synthetic_quick_start_final",
                "The healthy quick start's own final series as a new user sees it: reward from about 0.25 over the "
                "first 10 steps to 0.75 over the last 10 (60 steps), entropy falling from 2.0 to about 0.35 nats per "
                "token as the model learns a short 'a + b = c', both groups of a step often flat (all cut and 0 at "
                "first, all right at the end), KL drifting 0.03 -> 0.10 at beta 0.02. The doctor once called this "
                "'entropy collapsing and most groups flat ... without getting better' above 'Learning: reward up'.",
                [*HEALTHY_REPORTS,
                 "https://arxiv.org/abs/2505.22617 (Cui et al. 2025: entropy falls as performance rises in RL for "
                 "reasoning; a collapse is harmful only when the reward stops improving)"],
                {**base, "beta": 0.02, "max_steps": 60},
                quick_start_final()[0],
                {"healthy": True, "must": {"learning": {"from_step": 40, "severity": "info"}}, "must_not": [],
                 "say_never": ["without getting better", "not at the latest step", "is collapsing"]},
            ),
            "groups": quick_start_final()[1],
        },
        _run(
            "synthetic_reward_flat",
            "A LoRA run at learning_rate 2e-5 whose reward stays at 0.3 for 60 steps while its groups differ "
            "(reward_std 0.4): KL grows a little, nothing is learned; by step 25 the trend test could have seen a "
            "rise of half the reward spread.",
            ["https://thinkingmachines.ai/blog/lora/ (LoRA Without Regret: LoRA wants about 10x the full "
             "fine-tuning learning rate)",
             "https://github.com/ml-explore/mlx-examples/pull/1233 (GRPO reward stays in the same range for 300 "
             "iterations)"],
            {**base, "learning_rate": 2e-5, "max_steps": 60},
            make_series(60, 14, reward=lambda t: 0.3, reward_noise=0.06, kl=lambda t: 0.0002 * t),
            {"healthy": False,
             "must": {"reward_flat": {"from_step": 25, "cause": ["learning_rate 2e-5 with LoRA is low"]}},
             "must_not": ["kl", "grad_zero", "entropy_surge", "policy_static", "clipped"]},
        ),
        _run(
            "synthetic_learning_rate_zero",
            "learning_rate 0 in the optimiser (a schedule that decays to 0, an override): the gradient is computed "
            "(grad_norm 0.4) but never applied, so KL stays 0 while groups differ.",
            ["https://github.com/modelscope/ms-swift/issues/5571 (GRPO LoRA with kl 0.0 and reward_std 0.44: the "
             "policy never leaves the reference)"],
            {**base, "learning_rate": 1e-4},
            make_series(30, 13, reward=lambda t: 0.3, kl=lambda t: 0.0, learning_rate=0.0),
            {"healthy": False,
             "must": {"policy_static": {"from_step": 10, "cause": ["learning_rate is 0"]}},
             "must_not": ["kl", "grad_zero", "entropy_surge"], "say_never": ["with LoRA is low"]},
        ),
        *_signal_runs(base),
        *tool_runs(_run),
    ]
    return runs


def _noisy(seed: int, f: Callable[[int], float], spread: float) -> Callable[[int], float]:
    """``f`` with seeded multiplicative noise of relative size ``spread`` (a logged signal's step-to-step noise)."""
    rng = random.Random(seed)
    return lambda t: max(0.0, f(t) * (1 + rng.gauss(0, spread)))


def _signal_runs(base: dict) -> list[dict]:
    """Runs of TRL 1.16's newer signals: the ratio pinned at the high clip, vLLM's trainer/generator mismatch,
    grad_norm spikes, and a healthy off-policy vLLM run that logs them all at ordinary levels."""
    rising = {"reward": lambda t: 0.2 + 0.5 * (1 - math.exp(-t / 40)), "kl": lambda t: 0.0006 * t**1.2}
    spikes = {40: 25.0, 41: 12.0, 58: 30.0}
    return [
        _run(
            "synthetic_clip_high",
            "num_iterations 4 at a high learning rate: clip_ratio/high_mean holds near 0.02 for 30 steps, then climbs to "
            "0.4 of all tokens by step 50 while the reward stops rising: most positive-advantage tokens are clipped.",
            ["https://arxiv.org/abs/2503.14476 (DAPO, Yu et al. 2025: clip-higher; the clipped share tracks the update "
             "size)", "https://iclr-blog-track.github.io/2022/03/25/ppo-implementation-details/ (Huang et al. 2022: "
             "clipfrac as the measure of an update too large for PPO's trust region)"],
            {**base, "learning_rate": 5e-4, "num_iterations": 4, "epsilon_high": 0.2},
            make_series(70, 21, reward=lambda t: 0.2 + 0.2 * min(t, 40) / 40, extra={
                "clip_ratio/high_mean": _noisy(31, lambda t: 0.02 + 0.38 * _sigmoid(t, 42, 3), 0.1),
                "clip_ratio/low_mean": _noisy(32, lambda t: 0.01 + 0.1 * _sigmoid(t, 42, 3), 0.1),
                "clip_ratio/region_mean": _noisy(33, lambda t: 0.03 + 0.45 * _sigmoid(t, 42, 3), 0.1),
            }),
            {"healthy": False, "must": {"clip_high": {"from_step": 48, "cause": ["learning_rate", "num_iterations"]}},
             "must_not": ["grad_zero", "policy_static", "sampling_mismatch", "grad_spike", "entropy_surge"]},
        ),
        _run(
            "synthetic_vllm_mismatch",
            "A vLLM run whose weight sync breaks at step 25: the generator keeps sampling the old policy, the mean "
            "per-token logp difference goes from 0.004 to 0.15 nats and the mean importance-sampling ratio from 1.0 "
            "to 0.6.",
            ["https://fengyao.notion.site/off-policy-rl (Yao et al. 2025: vLLM/trainer probability mismatch, "
             "truncated importance sampling)"],
            {**base, "use_vllm": True, "vllm_mode": "colocate"},
            make_series(60, 22, **rising, extra={
                "sampling/sampling_logp_difference/mean": _noisy(34, lambda t: 0.004 if t < 25 else 0.15, 0.15),
                "sampling/sampling_logp_difference/max": _noisy(35, lambda t: 0.3 if t < 25 else 4.0, 0.2),
                "sampling/importance_sampling_ratio/mean": _noisy(36, lambda t: 1.0 if t < 25 else 0.6, 0.02),
                "sampling/importance_sampling_ratio/min": _noisy(37, lambda t: 0.8 if t < 25 else 0.05, 0.05),
                "sampling/importance_sampling_ratio/max": _noisy(38, lambda t: 1.2 if t < 25 else 2.9, 0.05),
            }),
            {"healthy": False,
             "must": {"sampling_mismatch": {"from_step": 27, "cause": ["precision", "vllm_importance_sampling"]}},
             "must_not": ["grad_zero", "policy_static", "clip_high", "grad_spike", "kl"]},
        ),
        _run(
            "synthetic_grad_spikes",
            "grad_norm steady near 0.5, then 25, 12 and 30 at steps 40, 41 and 58 (before clipping): batches that "
            "push the loss far from where it was.",
            ["https://arxiv.org/abs/2304.09871 (Molybog et al. 2023, A Theory on Adam Instability in Large-Scale "
             "Machine Learning: gradient-norm spikes before loss divergence)"],
            {**base, "max_grad_norm": 1.0},
            make_series(70, 23, **rising, grad_norm=lambda t: spikes.get(t, 0.5)),
            {"healthy": False, "must": {"grad_spike": {"from_step": 40, "cause": ["learning_rate", "Inspect"]}},
             "must_not": ["grad_zero", "grad_vanishing", "policy_static", "clip_high", "sampling_mismatch"]},
        ),
        _run(
            "synthetic_healthy_off_policy",
            "A healthy vLLM run with num_iterations 2: the reward rises, clip_ratio/high_mean near 0.03, the logp "
            "difference near 0.006 nats, the importance-sampling ratio near 1, grad_norm with its ordinary noise.",
            ["https://arxiv.org/abs/2503.14476 (DAPO: clip ratios of a few percent in healthy training)"],
            {**base, "use_vllm": True, "num_iterations": 2},
            make_series(80, 24, **rising, extra={
                "clip_ratio/high_mean": _noisy(41, lambda t: 0.03, 0.3),
                "sampling/sampling_logp_difference/mean": _noisy(42, lambda t: 0.006, 0.2),
                "sampling/importance_sampling_ratio/mean": _noisy(43, lambda t: 1.0, 0.03),
            }),
            {"healthy": True, "must": {}, "must_not": []},
        ),
    ]


def main() -> None:
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    for run in synthetic_runs():
        (CORPUS_DIR / f"{run['name']}.json").write_text(json.dumps(run, indent=None) + "\n", encoding="utf-8")
        print(f"wrote {run['name']}")


if __name__ == "__main__":
    main()
