"""Per-token values of completions (log-probability, KL, entropy) in the store, on a real SQLite file (and
PostgreSQL when configured): float16 packing, written with the groups or alone, read by completion, replaced with
the step's groups, deleted with the run."""

from __future__ import annotations

import math
import struct

import pytest
from sqlalchemy import func, select

from storage import CompletionRecord, GroupRecord, Store, TokenStats
from storage.float16 import pack_float16, unpack_float16
from storage.tables import TokenStatsRow
from tests.store_helpers import token_stats_indexes

pytestmark = pytest.mark.backends("sqlite", "postgres")


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (0.0, 0.0),
        (-1.0, -1.0),
        (-0.5, -0.5),
        (-12.3, -12.296875),  # nearest float16
        (-1e-4, -0.00010001659393310547),
        (1e6, math.inf),  # beyond float16's range
        (-1e6, -math.inf),
        (3e-8, 5.960464477539063e-08),  # the smallest subnormal
        (1e-9, 0.0),
    ],
)
def test_float16_packing_rounds_to_the_nearest_half_float(value, stored):
    data = pack_float16([value])
    assert len(data) == 2
    assert unpack_float16(data) == [stored]


def test_float16_packing_is_two_bytes_a_value_little_endian_and_keeps_nan():
    values = [-0.25, 1.5, float("nan"), float("-inf"), 0.0]
    data = pack_float16(values)
    assert len(data) == 2 * len(values)
    assert data[:2] == struct.pack("<e", -0.25) == b"\x00\xb4"
    back = unpack_float16(data)
    assert back[:2] == [-0.25, 1.5] and math.isnan(back[2]) and back[3] == -math.inf and back[4] == 0.0
    assert pack_float16([]) == b"" and unpack_float16(b"") == []


def test_float16_unpacking_refuses_an_odd_byte_count():
    with pytest.raises(ValueError, match="even number of bytes"):
        unpack_float16(b"\x00\x00\x00")


def test_token_stats_need_one_value_per_token():
    with pytest.raises(ValueError, match="one value per token"):
        TokenStats(pieces=["a", "b"], logprobs=[-1.0])
    with pytest.raises(ValueError, match="one value per token"):
        TokenStats(pieces=["a"], logprobs=[-1.0], kl=[0.0, 0.1])
    assert TokenStats(pieces=["a"], logprobs=[-1.0]).num_tokens == 1


def _stats(n: int, *, kl: bool = True) -> TokenStats:
    return TokenStats(
        pieces=[f" t{i}" for i in range(n - 1)] + ["<|im_end|>"],
        logprobs=[-0.5 * i for i in range(n)],
        kl=[0.125 * i for i in range(n)] if kl else None,
        entropy=[1.0 + 0.25 * i for i in range(n)],
    )


def _group(step: int, stats: list[TokenStats | None]) -> GroupRecord:
    return GroupRecord(
        step=step,
        row_index=1,
        prompt="What is 2 + 2?",
        completions=[
            CompletionRecord(index=i, text=f"answer {i}", rewards={"r": 1.0}, total_reward=1.0, advantage=0.5 - i,
                             num_tokens=None if s is None else s.num_tokens, token_stats=s)
            for i, s in enumerate(stats)
        ],
    )


def _run(store: Store) -> int:
    return store.create_run(name="run", config={"model": "m"}, dataset_id=None, max_steps=10).id


def _token_rows(store: Store) -> int:
    with store.engine.connect() as connection:
        return connection.scalar(select(func.count()).select_from(TokenStatsRow))


def test_groups_are_written_with_their_token_stats_and_read_by_completion(store):
    run = _run(store)
    store.record_groups(run, 1, [_group(1, [_stats(4), None, _stats(3, kl=False)])])
    (group,) = store.groups_at(run, 1)
    assert all(c.token_stats is None for c in group.completions)  # read separately, by completion
    first = store.token_stats(group.id, 0)
    assert first == _stats(4)  # these values are exact in float16
    assert first.pieces[-1] == "<|im_end|>"
    assert store.token_stats(group.id, 1) is None
    third = store.token_stats(group.id, 2)
    assert third.kl is None and third.entropy == [1.0, 1.25, 1.5]
    assert store.token_stats(group.id, 9) is None
    assert token_stats_indexes(store, group.id) == [0, 2]


def test_float16_precision_and_compact_storage(store):
    run = _run(store)
    stats = TokenStats(pieces=["a", "b"], logprobs=[-0.1234567, -7.654321], kl=[1e-5, 0.3333], entropy=[2.71828, 0.0])
    store.record_groups(run, 1, [_group(1, [stats])])
    (group,) = store.groups_at(run, 1)
    back = store.token_stats(group.id, 0)
    for stored, original in zip(back.logprobs + back.kl + back.entropy,
                                stats.logprobs + stats.kl + stats.entropy, strict=True):
        assert stored == pytest.approx(original, rel=1e-3, abs=1e-7)
    with store.engine.connect() as connection:
        row = connection.execute(select(TokenStatsRow)).one()
    assert (len(row.logprobs), len(row.kl), len(row.entropy), row.num_tokens) == (4, 4, 4, 2)


def test_token_stats_go_with_their_completions(store):
    run, other = _run(store), _run(store)
    store.record_groups(run, 1, [_group(1, [_stats(2), _stats(2)])])
    store.record_groups(other, 1, [_group(1, [_stats(2)])])
    assert _token_rows(store) == 3
    store.record_groups(run, 1, [_group(1, [_stats(3), None])])  # the step recorded again replaces its groups
    assert _token_rows(store) == 2
    (group,) = store.groups_at(run, 1)
    assert store.token_stats(group.id, 0).num_tokens == 3
    store.delete_run(run)
    assert _token_rows(store) == 1
    (kept,) = store.groups_at(other, 1)
    assert store.token_stats(kept.id, 0) == _stats(2)


def test_pieces_keep_any_text(store):
    run = _run(store)
    pieces = ["<b>", " &amp;", "\n", "é", "", "\t→"]
    stats = TokenStats(pieces=pieces, logprobs=[-1.0] * len(pieces))
    store.record_groups(run, 1, [_group(1, [stats])])
    (group,) = store.groups_at(run, 1)
    assert store.token_stats(group.id, 0).pieces == pieces
    store.record_groups(run, 1, [_group(1, [TokenStats(pieces=["a\x00b"], logprobs=[-1.0])])])
    (group,) = store.groups_at(run, 1)
    assert store.token_stats(group.id, 0).pieces == ["a\ufffdb"]  # as the completion's text: no NUL on PostgreSQL
