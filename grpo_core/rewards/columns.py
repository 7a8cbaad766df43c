"""Reading a dataset column from a reward function's arguments: the one helper every rule uses.

TRL calls a reward function with ``completions`` and every other dataset column as a keyword argument holding one
value per completion (``answer=[...]``, ``tests=[...]``). A direct call (Try the model, tests) may pass a single
value for all completions instead.
"""

from __future__ import annotations

from typing import Any

TRL_ARGUMENTS = frozenset({"prompts", "completion_ids", "trainer_state", "log_extra", "log_metric"})
"""Keyword arguments TRL passes that are not dataset columns."""


def column_values(rule: str, column: str, kwargs: dict[str, Any], count: int, *, required: bool = True) -> list[Any]:
    """The values of dataset column ``column`` from a reward function's ``**kwargs``, one per completion.

    A single value (a string, bytes, a dict, or anything without a length) stands for every completion. A column
    that is absent (or ``None``) gives ``[None] * count`` unless ``required``.

    Raises:
        ValueError: a required column is missing (the dataset lacks it), or a column holds a different number of
            values than there are completions; the message names the rule and the column.
    """
    values = kwargs.get(column)
    if values is None:
        if required:
            present = sorted(k for k in kwargs if k not in TRL_ARGUMENTS)
            raise ValueError(
                f"reward rule {rule!r} needs the dataset column {column!r}; the columns given are {present}"
            )
        return [None] * count
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__"):
        values = [values] * count  # one value for every completion (a direct call such as answer="42")
    values = list(values)
    if len(values) != count:
        raise ValueError(f"reward rule {rule!r}: column {column!r} has {len(values)} values for {count} completions")
    return values
