"""What a reward function logs through TRL's ``log_extra`` and ``log_metric``, checked and kept aligned.

TRL 1.16's ``GRPOTrainer`` passes every reward function ``log_extra(column, values)`` (one value per completion of
the call, gathered across processes into its completions table) and ``log_metric(name, value)`` (a scalar averaged
over the logging step; ``GRPOTrainer._log_completion_extra`` / ``_log_metric``). A plugin's calls are hostile input
to the buffers TRL keeps in step with the prompts and completions: :class:`RewardLogs` stands between them.

* A column is passed on only with one value per completion (any other length is dropped with a warning, since it
  would shift every later completion's values), at most :data:`MAX_COLUMNS` columns per function, names at most
  :data:`MAX_NAME_CHARS` characters; a name starting with ``_`` or ``reward_errors/`` (the dashboard's own columns)
  is refused. Once a column was logged, a call that does not log it (or that raised) logs ``None`` for it, so TRL's
  per-completion buffers stay aligned. The recorder stores each completion's values with its group
  (:data:`REWARD_COLUMNS_KEY`) and Inspect shows them on the completion.
* A scalar is logged under ``reward_logs/<function>/<name>`` (:data:`REWARD_LOGS_PREFIX`), so the Runs tab charts it
  in the section of what reward functions log; a value that is not a finite number is dropped.
"""

from __future__ import annotations

import logging
import math
from typing import Any

logger = logging.getLogger(__name__)

#: The recorded metric key of a reward function's ``log_metric`` scalar: ``reward_logs/<function>/<name>``.
REWARD_LOGS_PREFIX = "reward_logs/"
#: Key of a recorded group's ``extra``: ``{completion index (str): {column: value}}``, the ``log_extra`` columns of
#: the run's reward functions.
REWARD_COLUMNS_KEY = "reward_columns"
#: At most this many ``log_extra`` columns per reward function; names and metric names at most this many characters.
MAX_COLUMNS = 16
MAX_NAME_CHARS = 100
#: Prefixes of the ``log_extra`` columns the dashboard writes itself (group capture's ``_row_index``, ``_num_tokens``,
#: ``_truncated``, ``_column/...``, and each guarded function's ``reward_errors/<fn>``).
OWN_COLUMN_PREFIXES = ("_", "reward_errors/")


def is_reward_column(name: object) -> bool:
    """Whether a column of TRL's ``_logs["extra"]`` is a reward function's own (not one the dashboard writes)."""
    return isinstance(name, str) and 0 < len(name) <= MAX_NAME_CHARS and not name.startswith(OWN_COLUMN_PREFIXES)


class RewardCall:
    """One call of a reward function: the ``kwargs`` to call it with (TRL's hooks replaced by checking ones) and
    :meth:`flush`, which passes what it logged on to TRL after the call."""

    def __init__(self, owner: RewardLogs, kwargs: dict[str, Any], count: int) -> None:
        self.owner, self.count = owner, count
        self.trl_extra, self.trl_metric = kwargs.get("log_extra"), kwargs.get("log_metric")
        self.columns: dict[str, list[Any]] = {}
        self.scalars: dict[str, float] = {}
        self.kwargs = dict(kwargs)
        if callable(self.trl_extra):
            self.kwargs["log_extra"] = self.log_extra
        if callable(self.trl_metric):
            self.kwargs["log_metric"] = self.log_metric

    def log_extra(self, column: object, values: object) -> None:
        """The function's ``log_extra``: kept until :meth:`flush` when well formed, else dropped with a warning."""
        name = self.owner.name
        if not is_reward_column(column):
            logger.warning("reward function %s: log_extra column %r refused (a name of at most %d characters, not "
                           "starting with %s)", name, column, MAX_NAME_CHARS, " or ".join(OWN_COLUMN_PREFIXES))
            return
        values = list(values) if isinstance(values, list | tuple) else None
        if values is None or len(values) != self.count:
            logger.warning("reward function %s: log_extra column %r needs one value per completion (%d); dropped",
                           name, column, self.count)
            return
        if column not in self.owner.columns and len(self.owner.columns) >= MAX_COLUMNS:
            logger.warning("reward function %s: more than %d log_extra columns; %r dropped", name, MAX_COLUMNS, column)
            return
        self.columns[column] = values  # type: ignore[index]

    def log_metric(self, metric: object, value: object) -> None:
        """The function's ``log_metric``: a finite number under a name of at most :data:`MAX_NAME_CHARS`."""
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            number = math.nan
        if not isinstance(metric, str) or not 0 < len(metric) <= MAX_NAME_CHARS or not math.isfinite(number):
            logger.warning("reward function %s: log_metric(%r, %r) dropped", self.owner.name, metric, value)
            return
        self.scalars[metric] = number

    def flush(self, error: str | None) -> None:
        """Pass the call's outcome and logs on to TRL: ``rewards/<fn>/errors`` (the completions it failed on, 0 when
        it ran) and the ``reward_errors/<fn>`` column, then its columns (``None`` for a column it logged before but
        not now) and its scalars under ``reward_logs/<fn>/``."""
        name, count = self.owner.name, self.count
        if callable(self.trl_metric):
            self.trl_metric(f"rewards/{name}/errors", float(count if error else 0))
            for metric, value in self.scalars.items():
                self.trl_metric(f"{REWARD_LOGS_PREFIX}{name}/{metric}", value)
        if callable(self.trl_extra):  # every call, so TRL's per-completion buffers stay aligned
            self.trl_extra(f"reward_errors/{name}", [error or ""] * count)
            self.owner.columns.update(dict.fromkeys(self.columns))
            for column in self.owner.columns:
                self.trl_extra(column, self.columns.get(column, [None] * count))


class RewardLogs:
    """The logging state of one reward function across calls: the ``log_extra`` columns it has logged (in order)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.columns: dict[str, None] = {}

    def call(self, kwargs: dict[str, Any], count: int) -> RewardCall:
        """A :class:`RewardCall` for a call on ``count`` completions with TRL's ``kwargs``."""
        return RewardCall(self, kwargs, count)
