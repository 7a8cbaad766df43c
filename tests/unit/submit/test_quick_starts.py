"""The quick starts (grpo_core/submit/quick_starts.py): the code recipe is the gated weighted recipe on the code tasks,
its YAML trains headless from any folder on the shipped file, it pays no degenerate completion, and the arithmetic one
is ``RunConfig()``'s defaults.

The figures (steps, lengths, learning rate) are the lead's to retune from a pilot: these tests read them from the
recipe and assert only what the recipe is for."""

from __future__ import annotations

import pytest

from app.cli.main import _as_given, build_parser
from grpo_core.datasets.formats import load_prompt_dataset
from grpo_core.datasets.library import (
    AGENT_HELDOUT_PATH,
    AGENT_TASKS_EXAMPLE,
    AGENT_TASKS_PATH,
    CODE_HELDOUT_FAMILIES_PATH,
    CODE_HELDOUT_INSTANCES_PATH,
    CODE_TASKS_EXAMPLE,
    CODE_TASKS_PATH,
    QUICK_START_PATH,
    register_examples,
)
from grpo_core.rewards import score_group
from grpo_core.rewards.compose import RewardGate
from grpo_core.rewards.hacking_probe import flagged, probe_row
from grpo_core.run_config import DEFAULT_MODEL, RunConfig, load_run_config
from grpo_core.submit.quick_starts import CODE_RECIPE_PATH, QUICK_STARTS, quick_start
from grpo_core.submit.validate import validate_run_config

GATE = RewardGate(rule="code_tests", min=0.01)


def test_the_code_recipe_is_the_gated_weighted_recipe_on_the_code_tasks():
    recipe = quick_start("code").recipe()
    assert [(spec.rule, spec.weight, spec.gate) for spec in recipe.rewards] == [
        ("code_tests", 0.7, None), ("code_runtime", 0.1, GATE), ("code_style", 0.1, GATE), ("length", 0.1, GATE)]
    assert recipe.model == DEFAULT_MODEL and recipe.use_lora
    assert recipe.dataset_path == str(CODE_TASKS_PATH) and recipe.dataset_id is None
    # concision never pays a completion cut at the length limit
    length = recipe.rewards[3].params
    assert length["max_tokens"] + length.get("overlong_buffer", 0) <= recipe.max_completion_length
    assert recipe.per_device_train_batch_size % recipe.num_generations == 0


def test_the_recipe_file_trains_headless_from_another_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # `grpo-dashboard train examples/code_quick_start.yaml` run from elsewhere
    args = build_parser().parse_args(["train", str(CODE_RECIPE_PATH)])
    config = _as_given(load_run_config(args.config), args)
    assert config == quick_start("code").recipe()


@pytest.mark.skipif(not CODE_TASKS_PATH.is_file(), reason="the code tasks are not generated yet")
def test_the_code_tasks_are_an_example_the_recipe_validates_on(store, settings):
    register_examples(store, settings)
    dataset = store.find_dataset(CODE_TASKS_EXAMPLE)
    assert dataset is not None and dataset.num_rows == load_prompt_dataset(CODE_TASKS_PATH).num_rows
    assert {"prompt", "tests", "entry_point", "reference_solution"} <= set(dataset.columns)
    warnings = validate_run_config(store, quick_start("code").for_dataset(dataset.id),
                                   model_cache_dir=settings.model_cache_dir)
    assert not [w for w in warnings if "cannot read" in w], warnings  # every row's tests are readable
    for path in (CODE_HELDOUT_INSTANCES_PATH, CODE_HELDOUT_FAMILIES_PATH):
        assert {"tests", "entry_point"} <= set(load_prompt_dataset(path).columns)


def test_the_arithmetic_quick_start_is_the_defaults_on_single_digit_sums():
    assert quick_start("arithmetic").recipe() == RunConfig(dataset_path=str(QUICK_START_PATH))
    assert quick_start("arithmetic").minutes() == pytest.approx(RunConfig().max_steps * 8 / 60)


def test_for_dataset_swaps_the_file_for_the_stored_dataset():
    for chosen in QUICK_STARTS:
        config = chosen.for_dataset(7)
        assert config.dataset_id == 7 and config.dataset_path is None
        assert config.model_dump(exclude={"dataset_id", "dataset_path"}) == chosen.recipe().model_dump(
            exclude={"dataset_id", "dataset_path"})


def test_an_unknown_quick_start_names_the_known_ones():
    with pytest.raises(ValueError, match="no quick start 'chess'; there are arithmetic, code"):
        quick_start("chess")


@pytest.mark.skipif(not CODE_TASKS_PATH.is_file(), reason="the code tasks are not generated yet")
def test_the_code_recipe_pays_no_degenerate_completion_and_the_reference_its_tests():
    row = load_prompt_dataset(CODE_TASKS_PATH).rows[0]
    reference = f"```python\n{row['reference_solution']}```"
    results = probe_row(quick_start("code").recipe().rewards, row, [reference], scorer=score_group)
    assert results and not flagged(results), [(r.probe, r.total, r.rule) for r in flagged(results)]
    assert all(r.total == 0.0 for r in results)  # gated: a completion that passes no test earns nothing at all
    assert all(r.best_real >= 0.7 for r in results)  # the reference passes every test: code_tests' 0.7 at least


def test_the_agent_recipe_is_valid_on_its_dataset_and_a_call_alone_never_outpays_a_right_answer(store, settings):
    recipe = quick_start("agent").recipe()
    assert recipe.tools == ["calculator"] and recipe.max_tool_calling_iterations
    assert recipe.dataset_path == str(AGENT_TASKS_PATH)
    assert (recipe.per_device_train_batch_size * recipe.gradient_accumulation_steps) % recipe.num_generations == 0
    register_examples(store, settings)
    dataset = store.find_dataset(AGENT_TASKS_EXAMPLE)
    assert dataset is not None and dataset.num_rows == load_prompt_dataset(AGENT_TASKS_PATH).num_rows
    validate_run_config(store, quick_start("agent").for_dataset(dataset.id), model_cache_dir=settings.model_cache_dir)
    train = load_prompt_dataset(AGENT_TASKS_PATH).rows
    heldout = load_prompt_dataset(AGENT_HELDOUT_PATH).rows
    assert heldout and not {str(r["prompt"]) for r in heldout} & {str(r["prompt"]) for r in train}
    # the worked exchanges before each question (earlier turns: a call, its result, the answer) never give away a
    # training or held-out question's answer: their questions are none of those asked
    worked = {m["content"] for r in train + heldout for m in r["prompt"][:-1] if m["role"] == "user"}
    asked = {r["prompt"][-1]["content"] for r in train + heldout}
    assert worked and not worked & asked
    assert all(m.get("tool_calls") for r in train for m in r["prompt"] if m["role"] == "assistant" and not m["content"])
    row = train[0]
    call = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": "calculator", "arguments": {"expression": row["prompt"][-1]["content"][8:-1]}}}]}
    gold = {"role": "tool", "name": "calculator", "content": str(row["answer"])}
    trajectories = {
        "call, then the right answer": [call, gold, {"role": "assistant", "content": str(row["answer"])}],
        "right answer, no call": [{"role": "assistant", "content": str(row["answer"])}],
        "call, then a wrong answer": [call, gold, {"role": "assistant", "content": str(row["answer"] + 1)}],
        "call alone": [call, gold],
        "nothing": [{"role": "assistant", "content": "I cannot say."}],
    }
    totals = dict(zip(trajectories, score_group(recipe.rewards, list(trajectories.values()), row).total, strict=True))
    assert totals["call, then the right answer"] == max(totals.values())
    assert totals["call alone"] == totals["call, then a wrong answer"] < totals["right answer, no call"]
    assert totals["nothing"] == 0.0
