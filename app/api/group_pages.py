"""One page of the named API's ``run_groups``, bounded by what it carries as well as by its number of groups.

A group of short completions is a few hundred characters; a group of G agentic rollouts of 8 turns and ~4,096 tokens
each is ~70,000 (their turns: assistant texts, tool calls, tool results). A page of 200 such groups was ~14 MB of
JSON, ~160 ms of CPU to read, decode and clean on the server before Gradio serialised it again
(``benchmarks/bench_store_scale.py --trajectories``, docs/long-runs.md). :func:`bounded_page` reads the groups in
chunks in page order and stops once the page carries :data:`PAGE_CHARS` characters of text (prompts, completion
texts, turn texts and call arguments), whatever ``limit`` asked for; the caller goes on with the keyset cursor of
the last group (its ``step`` and ``id``), as for a page cut by ``limit``. A page holds at least one group, so a
page can go past the budget by one group at most (itself bounded: :mod:`grpo_core.tools.turns`'s limits).

The idea: a response page bounded by size as well as by count, with a cursor to go on, as DynamoDB's ``Query`` (at
most 1 MB a response, then ``LastEvaluatedKey``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from storage import GroupRecord, Store

#: Characters of text (prompt, completion texts, turn texts, call arguments) after which a page ends (~2 MB of JSON;
#: about 28 groups of 4 long agentic rollouts, thousands of groups of short completions).
PAGE_CHARS = 2_000_000
#: Groups read in the first chunk; later chunks are sized from the characters a group carried so far.
FIRST_CHUNK = 16

#: Reads up to ``count`` groups after the keyset cursor ``(step, group id | None)``, in ``(step, id)`` order.
ReadAfter = Callable[[tuple[int, int | None], int], list[GroupRecord]]


def carried_chars(group: dict[str, Any]) -> int:
    """The characters of text a :func:`app.api.public.group_dict` carries: its prompt, each completion's text and
    its turns' texts and call arguments (the bulk of a trajectory; numbers and keys are left out)."""
    size = len(group.get("prompt") or "")
    for completion in group.get("completions") or ():
        size += len(completion.get("text") or "")
        for turn in completion.get("turns") or ():
            size += len(turn.get("text") or "") + len(turn.get("arguments") or "")
    return size


def bounded_page(read_after: ReadAfter, after: tuple[int, int | None], limit: int,
                 to_dict: Callable[[GroupRecord], dict[str, Any]], *, max_chars: int = PAGE_CHARS,
                 keep: Callable[[GroupRecord], bool] | None = None,
                 within: Callable[[GroupRecord], bool] | None = None) -> list[dict]:
    """At most ``limit`` groups after the cursor ``after``, as ``to_dict`` gives them, in page order, ending early
    once they carry ``max_chars`` characters (:func:`carried_chars`); at least one group when there is one.

    Args:
        read_after: the store's read of the next groups after a cursor (``(step, id)``; ``(step, None)``: after
            every group of ``step``), at most the count given.
        after: where the page starts (exclusive).
        limit: the most groups the page holds (>= 1).
        to_dict: one group as the API gives it.
        max_chars: the page's budget of characters.
        keep: only the groups it accepts are on the page (the others are read past).
        within: the page ends at the first group it refuses (e.g. the next step).

    Returns:
        The page's groups (``[]`` past the end).
    """
    page: list[dict] = []
    used = 0
    cursor = after
    floor = 1 if keep is None else FIRST_CHUNK  # groups read past by ``keep`` take no room on the page
    count = max(floor, min(limit, FIRST_CHUNK))
    while True:
        chunk = read_after(cursor, count)
        for group in chunk:
            if within is not None and not within(group):
                return page
            if keep is not None and not keep(group):
                continue
            page.append(to_dict(group))
            used += carried_chars(page[-1])
            if used >= max_chars or len(page) >= limit:
                return page
        if len(chunk) < count:
            return page  # the end of the groups
        cursor = (chunk[-1].step, chunk[-1].id)
        per_group = max(1, used // max(1, len(page)))
        count = max(floor, min(limit - len(page), (max_chars - used) // per_group + 1))


def groups_page(store: Store, run_id: int, *, after_step: int = -1, step: int | None = None, limit: int = 200,
                row_index: int | None = None, after_group: int | None = None,
                to_dict: Callable[[GroupRecord], dict[str, Any]], max_chars: int = PAGE_CHARS) -> list[dict]:
    """The page ``run_groups`` answers (its arguments checked by the caller; ``limit`` >= 1): the groups of
    ``step`` when given (only dataset row ``row_index``'s when that is given too), else dataset row ``row_index``'s
    training groups, else every group, after the keyset cursor ``(after_step, after_group)`` (with ``step``:
    ``(step, after_group)``), in ``(step, id)`` order, bounded by :func:`bounded_page`."""
    after: tuple[int, int | None] = (after_step, after_group)
    keep = within = None
    if row_index is not None and step is None:
        def read_after(cursor: tuple[int, int | None], count: int) -> list[GroupRecord]:
            return store.groups_for_prompt(run_id, row_index, count, after=cursor)
    else:
        if step is not None:  # that step's groups, from after_group on
            after = (step, after_group) if after_group is not None else (step - 1, None)
            within = lambda group: group.step == step  # noqa: E731
            if row_index is not None:
                keep = lambda group: group.row_index == row_index  # noqa: E731

        def read_after(cursor: tuple[int, int | None], count: int) -> list[GroupRecord]:
            return store.groups_since(run_id, cursor[0], limit=count, after_group=cursor[1], until_step=step)
    return bounded_page(read_after, after, limit, to_dict, max_chars=max_chars, keep=keep, within=within)
