"""A finished run with recorded groups, written straight into a store (no training), for the reward workbench's tests.

Run "workbench-demo": 12 dataset rows ``What is i + i?`` (``answer`` 2i), 4 steps of 3 groups of 4 completions each;
in each group one completion answers right inside ``<answer>`` tags, one answers right without them, one is wrong
inside the tags and one is empty. The run was scored with :data:`RUN_RULES` (numeric_answer + format_regex, weight 1
each); its recorded totals and advantages are what :func:`grpo_core.rewards.compose.score_group` gives (TRL's).
:data:`NEW_RULES` halves the format weight and gates it on a right answer: the wrong-but-tagged completion then
loses its format reward, and its advantage changes sign in some groups.
"""

from __future__ import annotations

import json
from pathlib import Path

from grpo_core.rewards.compose import score_group
from grpo_core.run_config import RunConfig
from storage import CompletionRecord, GroupRecord, RunStatus, Store

RUN_RULES = [
    {"rule": "numeric_answer", "weight": 1.0},
    {"rule": "format_regex", "weight": 1.0, "params": {"pattern": r"<answer>.*</answer>"}},
]
NEW_RULES = [
    {"rule": "numeric_answer", "weight": 1.0},
    {"rule": "format_regex", "weight": 0.5, "params": {"pattern": r"<answer>.*</answer>"},
     "gate": {"rule": "numeric_answer", "min": 1.0}},
]
STEPS = 4
GROUPS_PER_STEP = 3


def write_dataset(folder: Path) -> Path:
    """The run's prompt file (JSON Lines)."""
    path = folder / "doubles.jsonl"
    rows = [{"prompt": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(12)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def completions_of(row: int, step: int) -> list[str]:
    right = 2 * row
    return [f"<answer>{right}</answer>", f"The answer is {right}.", f"<answer>{right + step}</answer>", ""]


def seed_run(store: Store, folder: Path, *, model: str = "/nonexistent/model", name: str = "workbench-demo") -> int:
    """Create the finished run with its recorded groups; returns its id."""
    dataset = write_dataset(folder)
    config = RunConfig.model_validate({"name": name, "model": model, "dataset_path": str(dataset),
                                       "rewards": RUN_RULES, "max_steps": STEPS}).model_dump(mode="json")
    run = store.create_run(name=name, config=config, dataset_id=None, max_steps=STEPS)
    store.finish_run(run.id, RunStatus.COMPLETED)
    for step in range(1, STEPS + 1):
        groups = []
        for g in range(GROUPS_PER_STEP):
            row = (step * GROUPS_PER_STEP + g) % 12
            texts = completions_of(row, step)
            score = score_group(RUN_RULES, texts, {"prompt": f"What is {row} + {row}?", "answer": str(2 * row)})
            groups.append(GroupRecord(step=step, row_index=row, prompt=f"What is {row} + {row}?", completions=[
                CompletionRecord(index=k, text=text, num_tokens=len(text.split()),
                                 rewards={n: score.rewards[i][k] for i, n in enumerate(score.names)},
                                 total_reward=score.total[k], advantage=score.advantages[k])
                for k, text in enumerate(texts)]))
        store.record_groups(run.id, step, groups)
    return run.id
