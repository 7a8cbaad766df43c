"""The code examples (``examples/make_code_tasks.py``): the committed files are the generator's output, held-out rows
are unseen, and on a sample of rows the sandbox passes the reference and fails degenerate programs."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import pytest

from grpo_core.rewards.code.units import split_tests

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FILES = {
    "train": EXAMPLES / "code_train.jsonl",
    "heldout_instances": EXAMPLES / "heldout" / "code_instances.jsonl",
    "heldout_families": EXAMPLES / "heldout" / "code_families.jsonl",
}


def _generator():
    spec = importlib.util.spec_from_file_location("make_code_tasks", EXAMPLES / "make_code_tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def generator():
    return _generator()


@pytest.fixture(scope="module")
def splits():
    return {name: _rows(path) for name, path in FILES.items()}


def test_committed_files_are_the_generators_output_for_seed_0(generator, tmp_path):
    made = generator.make_splits(0)
    for name, path in FILES.items():
        out = tmp_path / name
        generator.write_jsonl(made[name], out)
        assert out.read_bytes() == path.read_bytes(), f"{path.name} differs from make_code_tasks.py --seed 0"


def test_seeds_differ_and_repeat(generator):
    first, again, other = generator.make_splits(3, 2, 10), generator.make_splits(3, 2, 10), generator.make_splits(4, 2, 10)
    assert first == again
    assert first["train"] != other["train"]


def test_rows_have_the_columns_and_shapes_the_recipe_reads(splits):
    for name, rows in splits.items():
        for row in rows:
            assert set(row) == {"prompt", "tests", "entry_point", "reference_solution", "family"}, name
            assert [m["role"] for m in row["prompt"]] == ["system", "user"]
            assert f"`{row['entry_point']}(" in row["prompt"][1]["content"]
            assert 4 <= len(row["tests"]) <= 6
            assert all(t.startswith("assert ") and row["entry_point"] + "(" in t for t in row["tests"])
            assert len(split_tests(row["tests"], row["entry_point"])) == len(row["tests"])
            assert row["reference_solution"].startswith(f"def {row['entry_point']}(")


def test_family_counts_and_held_out_families_never_trained(splits):
    train_families = {row["family"] for row in splits["train"]}
    assert len(train_families) == 30 and len(splits["train"]) == 450
    assert {row["family"] for row in splits["heldout_instances"]} <= train_families
    held = {row["family"] for row in splits["heldout_families"]}
    assert len(held) == 6 and not held & train_families
    assert len(splits["heldout_instances"]) == len(splits["heldout_families"]) == 50


def test_held_out_prompts_and_tests_are_not_in_train(splits):
    train_prompts = {row["prompt"][1]["content"] for row in splits["train"]}
    train_tests = {test for row in splits["train"] for test in row["tests"]}
    for name in ("heldout_instances", "heldout_families"):
        for row in splits[name]:
            assert row["prompt"][1]["content"] not in train_prompts
            assert not set(row["tests"]) & train_tests, row["tests"]
    prompts = [row["prompt"][1]["content"] for rows in splits.values() for row in rows]
    assert len(prompts) == len(set(prompts))


def test_the_prompts_example_call_is_not_a_test(splits):
    for rows in splits.values():
        for row in rows:
            call = row["prompt"][1]["content"].split("For example, `", 1)[1].split("`", 1)[0]
            assert not any(f"assert {call} ==" in t or f"{call}," in t or f"{call})" in t for t in row["tests"])


def test_references_pass_and_degenerate_programs_fail_in_the_sandbox(generator, splits):
    """The product's path: ``code_tests`` on a fenced completion; one row of each of 12 families, 12 programs each
    (``make_code_tasks.py --check`` runs every row)."""
    picked: dict[str, dict] = {}
    for rows in splits.values():
        for row in rows:
            picked.setdefault(row["family"], row)
    rows = list(picked.values())
    random.Random(0).shuffle(rows)
    assert generator.sandbox_failures(rows[:12]) == []


def test_the_sandbox_check_catches_a_weak_row(generator, splits):
    row = splits["train"][0]
    assert row["family"] == "add_const"  # one argument
    weak = {**row, "tests": [f"assert {row['entry_point']}({n}) is not None or True" for n in range(4)]}
    bad_reference = {**row, "reference_solution": f"def {row['entry_point']}(x):\n    return 12345\n"}
    failures = generator.sandbox_failures([weak, bad_reference])
    assert any(line.startswith("row 0") and "pass scores 1.0" in line for line in failures), failures
    assert any(line.startswith("row 1") and "reference scores 0.0" in line for line in failures), failures
