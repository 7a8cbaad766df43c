"""The doctor's newer checks on small hand-made series, next to the corpus tests: what each says and, as much, what
it must not say (a higher learning rate to a run whose gradient is 0; a KL alarm for an ordinary drift)."""

from __future__ import annotations

import pytest

from grpo_core.doctor import Severity, diagnose, series_keys


def _series(**columns: list[float | None]) -> dict[str, tuple[list[int], list[float | None]]]:
    """``key=[v1, ...]`` at steps 1, 2, ...; ``__`` in a key stands for ``/``."""
    return {key.replace("__", "/"): (list(range(1, len(v) + 1)), list(v)) for key, v in columns.items()}


def _by_code(findings):
    return {f.code: f for f in findings}


LORA = {"use_lora": True, "learning_rate": 1e-6, "beta": 0.04, "lora_target_modules": "q_proj,v_proj"}


def test_gradient_zero_with_reward_variance_names_the_causes_and_never_a_higher_learning_rate():
    n = 20
    series = _series(grad_norm=[0.0] * n, reward_std=[0.4] * n, reward=[0.3, 0.35] * (n // 2), kl=[0.0] * n)
    findings = diagnose(series, config=LORA)
    found = _by_code(findings)["grad_zero"]
    assert found.severity is Severity.ERROR and "reward_std is 0.4" in found.title
    for cause in ("frozen", "lora_target_modules (now 'q_proj,v_proj')", "learning_rate 0", "cannot help"):
        assert cause in found.advice
    text = " ".join(f"{f.title} {f.advice}" for f in findings)
    assert "with LoRA is low" not in text and "try 0.0001" not in text
    assert {f.code for f in findings} == {"grad_zero"}  # not "not improving", not "policy not moving"


def test_gradient_zero_without_reward_variance_is_the_zero_std_finding():
    n = 12
    series = _series(grad_norm=[0.0] * n, reward_std=[0.0] * n, frac_reward_zero_std=[1.0] * n, reward=[0.5] * n)
    codes = {f.code for f in diagnose(series, config=LORA)}
    assert "grad_zero" not in codes and "zero_std" in codes


def test_gradient_vanishing_is_a_warning_with_the_numbers():
    n = 20
    grads = [0.5] * 5 + [0.5 * 0.3**i for i in range(1, n - 4)]
    [found] = [f for f in diagnose(_series(grad_norm=grads, reward_std=[0.3] * n)) if f.code == "grad_vanishing"]
    assert found.severity is Severity.WARNING and found.title.startswith("The gradient is vanishing: grad_norm 0.5 →")


@pytest.mark.parametrize(
    ("config", "rates", "says"),
    [
        ({"use_lora": True, "learning_rate": 1e-7, "beta": 0.04}, [1e-7] * 12, "learning_rate 1e-07 is too low"),
        ({"use_lora": True, "learning_rate": 1e-4, "beta": 0.04}, [0.0] * 12, "logged learning_rate is 0"),
        ({"use_lora": True, "learning_rate": 1e-4, "beta": 0.04}, [1e-4] * 12, "frozen"),
    ],
)
def test_a_policy_that_does_not_move_gets_its_cause(config, rates, says):
    n = 12
    series = _series(kl=[0.0] + [1e-7] * (n - 1), grad_norm=[0.4] * n, reward_std=[0.4] * n, learning_rate=rates)
    found = _by_code(diagnose(series, config=config))["policy_static"]
    assert says in found.advice


def test_a_moving_policy_is_not_static():
    n = 12
    series = _series(kl=[0.0] + [0.001 * i for i in range(1, n)], grad_norm=[0.4] * n, reward_std=[0.4] * n)
    assert "policy_static" not in _by_code(diagnose(series, config={"beta": 0.02}))


def test_entropy_surge_with_a_falling_reward_and_not_with_a_rising_one():
    n = 30
    entropy = [0.5] * 10 + [0.5 + 0.15 * i for i in range(1, n - 9)]
    falling = _series(entropy=entropy, reward=[0.6 - 0.02 * i for i in range(n)], reward_std=[0.3] * n)
    found = _by_code(diagnose(falling, config={"learning_rate": 1e-4, "beta": 0.0}))["entropy_surge"]
    assert "while the reward falls" in found.title and "learning_rate (now 0.0001)" in found.advice
    rising = _series(entropy=entropy, reward=[0.2 + 0.02 * i for i in range(n)], reward_std=[0.3] * n)
    assert "entropy_surge" not in _by_code(diagnose(rising))


RULES = {"rewards": [{"rule": "numeric_answer", "weight": 1.0}, {"rule": "format_regex", "weight": 0.5}]}


def test_task_rule_falling_under_a_rising_total():
    n = 30
    task = [0.6 - 0.01 * i for i in range(n)]
    fmt = [0.1 + 0.03 * i for i in range(n)]
    series = _series(reward=[t + 0.5 * f for t, f in zip(task, fmt, strict=True)], reward_std=[0.3] * n,
                     rewards__numeric_answer__mean=task, rewards__format_regex__mean=fmt)
    found = _by_code(diagnose(series, config=RULES))["task_rule_falling"]
    assert found.severity is Severity.WARNING
    assert found.title.startswith("The task rule is falling while the total reward rises: numeric_answer 0.59 → 0.32")
    assert "format_regex 0.13 → 0.94" in found.title
    assert "format learned, task forgotten" in found.advice


def test_task_rule_falling_needs_another_rule_rising():
    n = 30
    task = [0.6 - 0.015 * i for i in range(n)]
    series = _series(reward=task, reward_std=[0.3] * n, rewards__numeric_answer__mean=task,
                     rewards__format_regex__mean=[0.1] * n)
    assert "task_rule_falling" not in _by_code(diagnose(series, config=RULES))


def test_reward_function_errors_name_the_rule_the_count_and_the_steps():
    series = _series(reward=[0.3] * 8, rewards__code_tests__errors=[0, 2, 3, 0, 0, 0, 1, 0],
                     rewards__format_regex__errors=[0.0] * 8, rewards__other__errors=[None] * 8)
    found = _by_code(diagnose(series))["rule_errors"]
    assert found.title == "Reward functions raised errors: code_tests: 6 errors at 3 steps (2–3, 7)"
    assert found.steps == (2, 3, 7) and "train.log" in found.advice


def test_no_errors_no_finding():
    assert "rule_errors" not in _by_code(diagnose(_series(rewards__code_tests__errors=[0.0] * 5)))


def test_series_keys_add_each_reward_functions_mean_and_error_count():
    keys = series_keys(RULES)
    assert {"reward", "grad_norm", "learning_rate", "rewards/numeric_answer/mean", "rewards/format_regex/errors"} <= set(
        keys)
    assert series_keys(None) == series_keys({})


def test_many_cuts_that_last_while_the_reward_does_not_improve_block_it():
    n = 30
    flat = [0.3 + (0.04 if i % 2 else -0.04) for i in range(n)]
    series = _series(completions__clipped_ratio=[0.7] * n, reward=flat, reward_std=[0.4] * n)
    found = _by_code(diagnose(series, config={"max_completion_length": 64}))["clipped"]
    assert found.severity is Severity.WARNING and "70% on average over 30 logged steps" in found.title
    assert "max_completion_length (now 64)" in found.advice
    # the same cuts for 12 steps only: information (the quick start's first steps)
    short = {k: (steps[:12], values[:12]) for k, (steps, values) in series.items()}
    assert _by_code(diagnose(short))["clipped"].severity is Severity.INFO


def test_a_learning_rate_of_zero_is_found_without_kl():
    # beta 0: TRL logs no kl; the logged learning_rate says the weights never change
    n = 12
    series = _series(learning_rate=[0.0] * n, grad_norm=[0.4] * n, reward_std=[0.4] * n, reward=[0.3] * n)
    found = _by_code(diagnose(series, config={"beta": 0.0, "learning_rate": 1e-4}))["policy_static"]
    assert "logged learning_rate is 0" in found.advice


def test_the_ratio_pinned_at_the_high_clip_names_the_share_and_the_step_size():
    n = 12
    series = _series(clip_ratio__high_mean=[0.02] * 9 + [0.3, 0.35, 0.4], reward_std=[0.3] * n)
    found = _by_code(diagnose(series, config={"learning_rate": 5e-4, "num_iterations": 4, "epsilon_high": 0.28}))
    hit = found["clip_high"]
    assert hit.severity is Severity.WARNING and "35% of tokens" in hit.title and "1.28" in hit.title
    assert "learning_rate (now 0.0005)" in hit.advice and "num_iterations (now 4)" in hit.advice
    assert hit.steps == (10, 11, 12)
    quiet = _series(clip_ratio__high_mean=[0.02] * 9 + [0.3, 0.1, 0.1], reward_std=[0.3] * n)  # one step decides nothing
    assert "clip_high" not in _by_code(diagnose(quiet))


@pytest.mark.parametrize(
    ("columns", "says"),
    [({"sampling__sampling_logp_difference__mean": [0.004] * 9 + [0.1] * 3}, "logp difference is 0.1 nats"),
     ({"sampling__importance_sampling_ratio__mean": [1.0] * 9 + [0.6] * 3}, "importance-sampling ratio is 0.6")],
)
def test_trainer_and_generator_disagreeing_is_found_from_either_vllm_signal(columns, says):
    series = _series(**columns)
    hit = _by_code(diagnose(series, config={"use_vllm": True}))["sampling_mismatch"]
    assert says in hit.title and "vllm_importance_sampling_correction on" in hit.advice
    off = _by_code(diagnose(series, config={"vllm_importance_sampling_correction": False}))["sampling_mismatch"]
    assert "correction is off" in off.advice
    agreeing = _series(sampling__sampling_logp_difference__mean=[0.006] * 12,
                       sampling__importance_sampling_ratio__mean=[1.01, 0.99] * 6)
    assert "sampling_mismatch" not in _by_code(diagnose(agreeing))


def test_a_grad_norm_spike_is_named_with_its_step_and_size_and_noise_is_not():
    grads = [0.5, 0.6, 0.4, 0.55, 0.45] * 4 + [0.5] * 5
    grads[21] = 12.0
    hit = _by_code(diagnose(_series(grad_norm=grads, reward_std=[0.3] * len(grads))))["grad_spike"]
    assert hit.title.startswith("grad_norm spikes: 12 at step 22, 24x the median") and hit.steps == (22,)
    noisy = [0.5 * (4.5 if i % 7 == 0 else 1.0) for i in range(40)]  # up to 4.5x: GRPO's ordinary noise
    assert "grad_spike" not in _by_code(diagnose(_series(grad_norm=noisy, reward_std=[0.3] * 40)))
    assert series_keys({})[:1] == ("loss",) and "clip_ratio/high_mean" in series_keys({})
