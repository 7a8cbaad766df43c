"""The quick starts: run configs a new user launches from the Launch tab with nothing changed, and the learning
benchmark (``benchmarks/bench_learning.py``) trains.

* ``arithmetic``: :class:`~grpo_core.run_config.RunConfig`'s defaults on single-digit sums
  (:data:`~grpo_core.datasets.library.QUICK_START_PATH`);
* ``code``: the gated code recipe of ``examples/code_quick_start.yaml`` (:data:`CODE_RECIPE_PATH`) on the code tasks
  (:data:`~grpo_core.datasets.library.CODE_TASKS_PATH`; docs/code-recipe.md);
* ``agent``: the calculator recipe of ``examples/agent_quick_start.yaml`` (:data:`AGENT_RECIPE_PATH`) on arithmetic
  a small model cannot do in its head (:data:`~grpo_core.datasets.library.AGENT_TASKS_PATH`;
  docs/agent-quick-start.md). SmolLM2's own template cannot render tools: the run sets
  :data:`~grpo_core.engine.tool_template.CHATML_TOOL_TEMPLATE` (:attr:`QuickStart.template_note` says so).

A recipe's numbers live in one place (the defaults, or the YAML file, which ``grpo-dashboard train`` runs as it is);
:meth:`QuickStart.recipe` reads them each time. The Launch form selects the recipe's dataset as the library's example
of the same file (:meth:`QuickStart.for_dataset`). Imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grpo_core.datasets.library import (
    AGENT_TASKS_EXAMPLE,
    AGENT_TASKS_PATH,
    CODE_TASKS_EXAMPLE,
    CODE_TASKS_PATH,
    EXAMPLES_DIR,
    QUICK_START_EXAMPLE,
    QUICK_START_PATH,
)
from grpo_core.run_config import RunConfig, load_run_config, parse_run_config

#: The code quick start's recipe: the one file holding its rules, model and generation settings.
CODE_RECIPE_PATH = EXAMPLES_DIR / "code_quick_start.yaml"
#: The agent quick start's recipe.
AGENT_RECIPE_PATH = EXAMPLES_DIR / "agent_quick_start.yaml"
#: What the agent quick start's note says of its chat template (kept equal to
#: :data:`grpo_core.engine.tool_template.CHATML_TOOL_TEMPLATE` by a test; this module imports no torch or TRL).
CHATML_TOOL_TEMPLATE_NOTE = ("SmolLM2's own chat template cannot render tools, so the run sets TRL's Qwen2.5 chat "
                             "template (trl/chat_templates/qwen2_5.jinja): the same ChatML tokens, tools in the "
                             "system message, calls as `<tool_call>{...}</tool_call>`")


@dataclass(frozen=True)
class QuickStart:
    """One quick start.

    Attributes:
        key: ``"arithmetic"``, ``"code"`` or ``"agent"`` (``bench_learning.py --task``, the Launch tab's buttons).
        label: the Launch tab's button.
        example: the library's name of its dataset (:func:`grpo_core.datasets.library.register_examples`).
        trains: what the model learns, a phrase ("single-digit sums").
        expect: what to watch for while it trains, a clause.
        seconds_per_step: training seconds per step on two quiet CPU cores (``bench_learning.py``'s ``s/step``),
            for the note's minutes; ``None`` where it was not measured (then ``time_note`` says what was).
        recipe_file: the run YAML holding the recipe; ``None``: :class:`RunConfig`'s defaults.
        dataset_path: the training file (an absolute path under ``examples/``).
        template_note: what the run does to the model's chat template, a clause for the Launch tab ("" none).
        time_note: instead of minutes, what is known of its time, a clause (with ``seconds_per_step`` ``None``).
    """

    key: str
    label: str
    example: str
    trains: str
    expect: str
    seconds_per_step: float | None
    recipe_file: Path | None
    dataset_path: Path
    template_note: str = ""
    time_note: str = ""

    def recipe(self) -> RunConfig:
        """The recipe, on its training file (``dataset_path`` absolute), as ``grpo-dashboard train`` runs it.

        Raises:
            grpo_core.run_config.ConfigError: the recipe file is missing or invalid (the message names it).
        """
        if self.recipe_file is None:
            return RunConfig(dataset_path=str(self.dataset_path))
        config = load_run_config(self.recipe_file)
        path = Path(config.dataset_path or self.dataset_path)
        return config.model_copy(update={"dataset_path": str(path if path.is_absolute()
                                                               else self.recipe_file.parent / path)})

    def for_dataset(self, dataset_id: int) -> RunConfig:
        """The recipe on the stored dataset ``dataset_id`` instead of its file: what the Launch form fills in and
        queues with nothing changed.

        Raises:
            grpo_core.run_config.ConfigError: as :meth:`recipe`.
        """
        values = self.recipe().model_dump(mode="json") | {"dataset_id": int(dataset_id), "dataset_path": None}
        return parse_run_config(values, source=f"the {self.key} quick start")

    def minutes(self) -> float | None:
        """Training minutes on two quiet CPU cores: the recipe's ``max_steps`` times :attr:`seconds_per_step`;
        ``None`` where that was not measured."""
        if self.seconds_per_step is None:
            return None
        return self.recipe().max_steps * self.seconds_per_step / 60


QUICK_STARTS: tuple[QuickStart, ...] = (
    QuickStart(
        key="arithmetic",
        label="Arithmetic quick start",
        example=QUICK_START_EXAMPLE,
        trains="single-digit sums",
        expect="the mean reward should more than double",
        seconds_per_step=8.0,  # docs/quick-start.md: about 8 s/step on two quiet cores
        recipe_file=None,
        dataset_path=QUICK_START_PATH,
    ),
    QuickStart(
        key="code",
        label="Code quick start",
        example=CODE_TASKS_EXAMPLE,
        trains="short Python functions with unit tests",
        expect="the share of tests passed (`rewards/code_tests/mean`) should rise",
        seconds_per_step=45.0,  # 43-49 s/step measured over 6 steps of the recipe on two quiet cores
        recipe_file=CODE_RECIPE_PATH,
        dataset_path=CODE_TASKS_PATH,
    ),
    QuickStart(
        key="agent",
        label="Agent quick start",
        example=AGENT_TASKS_EXAMPLE,
        trains="arithmetic with a calculator tool",
        expect=("watch `tools/call_frequency`: under the prompt's worked exchanges the base model calls the "
                "calculator in about a third of its rollouts; learning over 60 steps is not measured yet "
                "(docs/agent-quick-start.md)"),
        seconds_per_step=75.0,  # 69-79 s a step over 3 steps of the recipe on two quiet cores (docs/agent-quick-start.md)
        recipe_file=AGENT_RECIPE_PATH,
        dataset_path=AGENT_TASKS_PATH,
        template_note=CHATML_TOOL_TEMPLATE_NOTE,
    ),
)


def quick_start(key: str) -> QuickStart:
    """The quick start called ``key`` (:attr:`QuickStart.key`).

    Raises:
        ValueError: no quick start has that key; the message lists them.
    """
    for found in QUICK_STARTS:
        if found.key == key:
            return found
    raise ValueError(f"no quick start {key!r}; there are {', '.join(q.key for q in QUICK_STARTS)}")
