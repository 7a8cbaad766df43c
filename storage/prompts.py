"""Inspecting a run's groups by prompt: one dataset row's groups across steps (keyset pages), the rows a run sampled
most, and the text search over prompts and completions."""

from __future__ import annotations

from sqlalchemy import and_, func, or_, select

from storage.base import split_clause
from storage.groups import After, Before, GroupStore, keyset, with_completions
from storage.records import GroupRecord, PromptPage, PromptRow, SearchHit, SearchPage, StoreError
from storage.tables import CompletionRow, GroupRow

#: Longest text the search of a run's groups looks for, in characters (:meth:`PromptStore.search_groups`).
MAX_SEARCH_CHARS = 200


def _like_pattern(text: str) -> str:
    """A ``LIKE ... ESCAPE '\\'`` pattern matching ``text`` anywhere, its ``%``, ``_`` and ``\\`` taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class PromptStore(GroupStore):
    """The store's views of groups by prompt and by text (a mixin of :class:`storage.Store`)."""

    def groups_for_prompt(self, run_id: int, row_index: int, limit: int = 500, *, after: After | None = None,
                          before: Before | None = None, turns: bool = True) -> list[GroupRecord]:
        """The training groups a run sampled for one dataset row, in step order (then in recording order): at most
        ``limit``, the earliest ones, or with ``before`` the latest ones. Eval groups are left out: their
        ``row_index`` counts the rows of the eval dataset, another prompt.

        ``row_index`` is the row's index in the run's dataset (:attr:`GroupRecord.row_index`); a row sampled
        twice in one step gives two groups of that step, in the order they were recorded. ``after`` and ``before``
        are keyset cursors ``(step, group id)`` of a group already shown (exclusive; ``(step, None)`` in ``after``:
        every group of ``step`` seen), so a late page costs what the first does: one range of the index
        ``ix_groups_run_row`` (``run_id, row_index, step``), never a skip over the earlier groups. ``turns=False``
        leaves the completions' turns and tool masks unread (:func:`storage.groups.with_completions`).
        """
        query = with_completions(GroupRow.run_id == run_id, GroupRow.row_index == row_index, split_clause("train"),
                                 *keyset(after, before), turns=turns)
        if before is not None and after is None:  # the page ending just before the cursor: read it backwards
            query = query.order_by(GroupRow.step.desc(), GroupRow.id.desc())
        else:
            query = query.order_by(GroupRow.step, GroupRow.id)
        records = self._read_groups(query.limit(max(0, int(limit))))
        return records[::-1] if before is not None and after is None else records

    def prompt_page(
        self,
        run_id: int,
        row_index: int,
        *,
        limit: int = 50,
        after: After | None = None,
        before: Before | None = None,
        from_step: int | None = None,
        last: bool = False,
    ) -> PromptPage:
        """One page of a dataset row's groups across steps (the Inspect tab's "one prompt across steps"): at most
        ``limit`` groups in step order, with how many the row has in all and where the page starts.

        Which page: the first one; the one after the cursor ``after`` or before the cursor ``before``
        (:meth:`groups_for_prompt`'s keyset cursors, the last or first group shown); the one starting at the first
        group at or after ``from_step``; or with ``last`` the one ending on the row's latest group. A page past the
        end is empty (``offset == total``). Cost: the page's groups plus two counts over the row's entries of the
        index ``ix_groups_run_row``, whatever the page (the row's groups, not the run's).
        """
        limit = max(1, int(limit))
        if from_step is not None:
            after = (int(from_step) - 1, None)
        if last:
            after, before = None, (2**31 - 1, 2**31 - 1)  # past every (step, id): the largest INTEGER
        groups = self.groups_for_prompt(run_id, row_index, limit, after=after, before=before)
        of_row = (GroupRow.run_id == run_id, GroupRow.row_index == row_index, split_clause("train"))
        with self._session() as session:
            total = session.scalar(select(func.count()).select_from(GroupRow).where(*of_row)) or 0
            if groups:
                # Two counts, not one with the keyset's OR: the steps before the page's first step are counted from
                # the index alone (PostgreSQL's index lacks the id: the OR would read every earlier group's row).
                first = groups[0]
                offset = (session.scalar(
                    select(func.count()).select_from(GroupRow).where(*of_row, GroupRow.step < first.step)
                ) or 0) + (session.scalar(
                    select(func.count()).select_from(GroupRow).where(
                        *of_row, GroupRow.step == first.step, GroupRow.id < first.id
                    )
                ) or 0)
            else:
                offset = 0 if before is not None and after is None else total
        return PromptPage(row_index=int(row_index), total=int(total), offset=int(offset), limit=limit, groups=groups)

    def prompt_rows(self, run_id: int, limit: int = 500, *, recent: int | None = None) -> list[PromptRow]:
        """The dataset rows a run sampled for training, the most often sampled first (then by row index); at most
        ``limit``.

        ``recent`` counts only the run's latest ``recent`` groups (by step; the whole steps of the boundary): a
        bounded read for a long run, where counting every group grows with its length.
        """
        count = func.count(GroupRow.id)
        conditions = [GroupRow.run_id == run_id, split_clause("train")]
        with self._session() as session:
            if recent is not None:
                boundary = session.scalar(
                    select(GroupRow.step).where(GroupRow.run_id == run_id).order_by(GroupRow.step.desc())
                    .offset(max(0, int(recent) - 1)).limit(1)
                )
                if boundary is not None:
                    conditions.append(GroupRow.step >= boundary)
            # ``row_index + 0`` for a window: grouping by the bare column, SQLite walks the index on (run_id,
            # row_index, step) in row order across the whole run (~140 ms at 2.5M groups) instead of seeking each
            # row's recent steps in it (~8 ms); PostgreSQL plans both the same.
            row = GroupRow.row_index + 0 if len(conditions) > 2 else GroupRow.row_index
            rows = session.execute(
                select(row, count, func.min(GroupRow.step), func.max(GroupRow.step))
                .where(*conditions)
                .group_by(row)
                .order_by(count.desc(), row)
                .limit(limit)
            ).all()
            return [PromptRow(int(i), int(n), int(first), int(last)) for i, n, first, last in rows]

    def search_groups(self, run_id: int, text: str, *, limit: int = 10, offset: int = 0) -> SearchPage:
        """The groups of a run whose prompt or any completion contains ``text``, in step order, one page of them.

        Matching is SQL ``LIKE`` (case-insensitive for ASCII letters; ``%`` and ``_`` in ``text`` are literal).
        Blank ``text`` matches nothing. ``total`` counts every matching group, so the caller can page with
        ``offset``.

        Raises:
            StoreError: ``text`` is longer than :data:`MAX_SEARCH_CHARS`: ``LIKE '%text%'`` costs the length of
                the run's texts times the pattern's (a 20,000-character pattern took 22 s on one 200,000-character
                completion, and a script's run holds completions of up to 1,000,000 characters).
        """
        if len(text) > MAX_SEARCH_CHARS:
            raise StoreError(f"search for at most {MAX_SEARCH_CHARS} characters, not {len(text):,}")
        limit, offset = max(1, int(limit)), max(0, int(offset))
        if not text.strip():
            return SearchPage(text=text, total=0, offset=offset, limit=limit, hits=[])
        pattern = _like_pattern(text)
        completion_matches = (
            select(CompletionRow.group_id)
            .join(GroupRow, CompletionRow.group_id == GroupRow.id)
            .where(GroupRow.run_id == run_id, CompletionRow.text.ilike(pattern, escape="\\"))
        )
        condition = and_(
            GroupRow.run_id == run_id,
            or_(GroupRow.prompt.ilike(pattern, escape="\\"), GroupRow.id.in_(completion_matches)),
        )
        with self._session() as session:
            total = session.scalar(select(func.count(GroupRow.id)).where(condition)) or 0
            ids = session.scalars(
                select(GroupRow.id).where(condition).order_by(GroupRow.step, GroupRow.id).limit(limit).offset(offset)
            ).all()
            rows = session.scalars(with_completions(GroupRow.id.in_(ids)).order_by(GroupRow.step, GroupRow.id)).all()
            matched: dict[int, list[int]] = {}
            for group_id, index in session.execute(
                select(CompletionRow.group_id, CompletionRow.index)
                .where(CompletionRow.group_id.in_(ids), CompletionRow.text.ilike(pattern, escape="\\"))
                .order_by(CompletionRow.group_id, CompletionRow.index)
            ):
                matched.setdefault(group_id, []).append(index)
            prompt_ids = set(
                session.scalars(
                    select(GroupRow.id).where(GroupRow.id.in_(ids), GroupRow.prompt.ilike(pattern, escape="\\"))
                ).all()
            )
            hits = [
                SearchHit(
                    group=r.to_record(), prompt_matched=r.id in prompt_ids, completion_indexes=matched.get(r.id, [])
                )
                for r in rows
            ]
        return SearchPage(text=text, total=total, offset=offset, limit=limit, hits=hits)
