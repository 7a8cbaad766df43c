"""The ``groups``, ``completions`` and ``completion_tokens`` tables: the sampled groups of each logged step with
their completions and per-token values, written per step and split, read by step (the Inspect tab, the run doctor,
pass@G)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, insert, or_, select
from sqlalchemy.orm import selectinload

from storage.base import StoreBase, finite, get_row, split_clause
from storage.records import CompletionRecord, GroupRecord, TokenStats
from storage.run_images import write_group_images
from storage.tables import CompletionRow, GroupRow, TokenStatsRow

# The inserts of a step's groups, built once: a step's transaction only binds values, as Core executemany.
_GROUPS = GroupRow.__table__
_COMPLETIONS = CompletionRow.__table__
_INSERT_GROUPS = insert(_GROUPS).returning(_GROUPS.c.id, sort_by_parameter_order=True)
_INSERT_COMPLETIONS = insert(_COMPLETIONS)
_INSERT_COMPLETIONS_IDS = insert(_COMPLETIONS).returning(_COMPLETIONS.c.id, sort_by_parameter_order=True)
_INSERT_TOKEN_STATS = insert(TokenStatsRow.__table__)


#: A keyset cursor after a group already shown: ``(step, group id)``, or ``(step, None)``: after every group of ``step``.
After = tuple[int, int | None]
#: A keyset cursor before a group already shown: ``(step, group id)``.
Before = tuple[int, int]


def keyset(after: After | None, before: Before | None) -> list:
    """The conditions of a keyset page over groups ordered by ``(step, id)``: after ``after`` and before ``before``
    (both exclusive; ``after = (step, None)``: after every group of ``step``). Each is written as a range on
    ``step`` first, so the index on ``(..., step)`` bounds the scan."""
    conditions = []
    if after is not None:
        step, group_id = int(after[0]), after[1]
        if group_id is None:
            conditions.append(GroupRow.step > step)
        else:
            conditions += [GroupRow.step >= step, or_(GroupRow.step > step, GroupRow.id > int(group_id))]
    if before is not None:
        step, group_id = int(before[0]), int(before[1])
        conditions += [GroupRow.step <= step, or_(GroupRow.step < step, GroupRow.id < group_id)]
    return conditions


def with_completions(*conditions, turns: bool = True) -> Any:
    """``SELECT`` of the groups matching ``conditions`` with their completions loaded in one more query (order and
    limit are the caller's); convert the rows with :meth:`storage.tables.GroupRow.to_record`. ``turns=False`` leaves
    the completions' ``turns`` and ``tool_mask`` unread (``None`` in the records): a multi-turn trajectory's turns
    are most of its row (tens of kB), which a view of rewards and labels does not draw."""
    load = selectinload(GroupRow.completions)
    if not turns:
        load = load.defer(CompletionRow.turns, raiseload=True).defer(CompletionRow.tool_mask, raiseload=True)
    return select(GroupRow).where(*conditions).options(load)


def _group_values(run_id: int, step: int, group: GroupRecord, split: str) -> dict[str, Any]:
    return {"run_id": run_id, "step": step, "row_index": group.row_index, "prompt": group.prompt,
            "extra": group.extra, "split": None if split == "train" else split}


def _completion_values(group_id: int, c: CompletionRecord) -> dict[str, Any]:
    return {"group_id": group_id, "index": c.index, "text": c.text,
            "rewards": {k: finite(v) for k, v in c.rewards.items()}, "total_reward": finite(c.total_reward),
            "advantage": finite(c.advantage), "num_tokens": c.num_tokens, "truncated": bool(c.truncated),
            "turns": c.turns, "tool_mask": c.tool_mask}


class GroupStore(StoreBase):
    """The store's sampled groups, completions and per-token values (a mixin of :class:`storage.Store`)."""

    def _read_groups(self, query) -> list[GroupRecord]:
        """The groups a :func:`with_completions` query selects, as records, in its order."""
        with self._session() as session:
            return [row.to_record() for row in session.scalars(query).all()]

    def record_groups(self, run_id: int, step: int, groups: Sequence[GroupRecord], *, split: str = "train") -> int:
        """Store the sampled groups of ``step`` of one ``split`` (``"train"`` or ``"eval"``), replacing any already
        stored for that step and split (with their per-token values). Completions that carry
        :attr:`CompletionRecord.token_stats` get them stored too (:meth:`token_stats` reads them). Returns how many."""
        with self._session() as session:
            self._write_groups(session.connection(), run_id, step, groups, split, replace=True)
            session.commit()
        return len(groups)

    def _write_groups(self, connection, run_id: int, step: int, groups: Sequence[GroupRecord], split: str, *,
                      replace: bool) -> None:
        """Insert ``groups`` of ``step`` and ``split`` with their completions and per-token values, in
        ``connection``'s transaction (not committed), after deleting the step's groups of that split when
        ``replace`` (a step that may have been stored before). Core executemany: one insert per table, the new
        ids read back in order through ``RETURNING`` (SQLAlchemy's insertmanyvalues, SQLite and PostgreSQL)."""
        if replace:
            old = select(GroupRow.id).where(GroupRow.run_id == run_id, GroupRow.step == step, split_clause(split))
            connection.execute(delete(CompletionRow).where(CompletionRow.group_id.in_(old)))
            connection.execute(delete(GroupRow).where(GroupRow.run_id == run_id, GroupRow.step == step,
                                                      split_clause(split)))
        if not groups:
            return
        write_group_images(connection, run_id, groups)
        group_ids = connection.execute(
            _INSERT_GROUPS, [_group_values(run_id, step, group, split) for group in groups]
        ).scalars().all()
        completions = [(group_id, c) for group_id, group in zip(group_ids, groups, strict=True)
                       for c in group.completions]
        if not completions:
            return
        values = [_completion_values(group_id, c) for group_id, c in completions]
        if not any(c.token_stats is not None for _, c in completions):
            connection.execute(_INSERT_COMPLETIONS, values)
            return
        completion_ids = connection.execute(_INSERT_COMPLETIONS_IDS, values).scalars().all()
        connection.execute(_INSERT_TOKEN_STATS, [
            TokenStatsRow.values_of(completion_id, c.token_stats)
            for completion_id, (_, c) in zip(completion_ids, completions, strict=True) if c.token_stats is not None
        ])

    def token_stats(self, group_id: int, index: int) -> TokenStats | None:
        """The per-token values of completion ``index`` of group ``group_id`` (float16 precision), or ``None`` when
        none were recorded (or there is no such completion)."""
        with self._session() as session:
            row = session.scalar(
                select(TokenStatsRow)
                .join(CompletionRow, CompletionRow.id == TokenStatsRow.completion_id)
                .where(CompletionRow.group_id == group_id, CompletionRow.index == index)
            )
            return None if row is None else row.to_record()

    def group_steps(self, run_id: int) -> list[int]:
        """The steps of a run that have recorded groups, ascending."""
        with self._session() as session:
            rows = session.scalars(
                select(GroupRow.step).where(GroupRow.run_id == run_id).distinct().order_by(GroupRow.step)
            ).all()
            return list(rows)

    def latest_group_steps(self, run_id: int, limit: int = 1000) -> list[int]:
        """The latest ``limit`` steps of a run that have recorded groups, newest first: a bounded read of the index
        ``ix_groups_run_step`` (backwards, stopping after ``limit`` distinct steps), whatever the run's length."""
        with self._session() as session:
            rows = session.scalars(
                select(GroupRow.step).where(GroupRow.run_id == run_id).distinct()
                .order_by(GroupRow.step.desc()).limit(max(0, int(limit)))
            ).all()
            return list(rows)

    def nearest_group_step(self, run_id: int, step: float) -> int | None:
        """The recorded step (one with groups) closest to ``step``, the earlier one on a tie; ``None`` when the run
        has no groups. Two index lookups (the last step at or before, the first after)."""
        with self._session() as session:
            below = session.scalar(select(func.max(GroupRow.step)).where(
                GroupRow.run_id == run_id, GroupRow.step <= math.floor(step)))
            above = session.scalar(select(func.min(GroupRow.step)).where(
                GroupRow.run_id == run_id, GroupRow.step >= math.ceil(step)))
        found = [s for s in (below, above) if s is not None]
        return min(found, key=lambda s: (abs(s - step), s)) if found else None

    def best_totals(self, run_id: int, first_step: int, last_step: int) -> dict[int, list[float | None]]:
        """Per step in ``[first_step, last_step]`` that has groups, each group's best completion total reward
        (``None``: a group without one), the groups in recording order: what pass@G per step needs, in one
        aggregate over those steps' completions instead of reading every group."""
        with self._session() as session:
            rows = session.execute(
                select(GroupRow.step, GroupRow.id, func.max(CompletionRow.total_reward))
                .outerjoin(CompletionRow, CompletionRow.group_id == GroupRow.id)
                .where(GroupRow.run_id == run_id, GroupRow.step >= first_step, GroupRow.step <= last_step)
                .group_by(GroupRow.step, GroupRow.id)
                .order_by(GroupRow.step, GroupRow.id)
            ).all()
        out: dict[int, list[float | None]] = {}
        for step, _, best in rows:
            out.setdefault(int(step), []).append(None if best is None else float(best))
        return out

    def groups_at(self, run_id: int, step: int, *, turns: bool = True) -> list[GroupRecord]:
        """The groups of one step with their completions, in the order TRL sampled them (``turns=False``: without
        the completions' turns and tool masks, for views of rewards and labels; see :func:`with_completions`)."""
        return self._read_groups(with_completions(GroupRow.run_id == run_id, GroupRow.step == step, turns=turns)
                                 .order_by(GroupRow.id))

    def groups_since(
        self, run_id: int, after_step: int = -1, *, limit: int = 200, after_group: int | None = None,
        until_step: int | None = None,
    ) -> list[GroupRecord]:
        """The groups recorded after ``after_step`` (step ascending, then in sampling order), at most ``limit``.

        Pass the last step seen to read only what is new (``-1``: from the start). A page cut by ``limit`` inside a
        step goes on with ``after_group``, the id of the last group read: then the groups of ``after_step`` after
        it come first (the keyset ``(step, id)``, see :meth:`groups_for_prompt`). ``until_step``: none after it.
        """
        bound = [] if until_step is None else [GroupRow.step <= int(until_step)]
        return self._read_groups(with_completions(GroupRow.run_id == run_id, *keyset((after_step, after_group), None),
                                                  *bound).order_by(GroupRow.step, GroupRow.id).limit(max(0, limit)))

    def get_group(self, group_id: int) -> GroupRecord:
        """One group with its completions. Raises StoreError when there is none with that id."""
        with self._session() as session:
            row = get_row(session, GroupRow, group_id, "group", options=[selectinload(GroupRow.completions)])
            return row.to_record()

    def recent_groups(self, run_id: int, limit: int = 8) -> list[GroupRecord]:
        """The ``limit`` most recently sampled groups of a run, newest step first (the run doctor's sample)."""
        return self._read_groups(with_completions(GroupRow.run_id == run_id)
                                 .order_by(GroupRow.step.desc(), GroupRow.id).limit(limit))
