"""Tests of the one end-of-sequence rule (grpo_core.engine.policy_model): which tokens end a completion, where it is cut,
and when it counts as truncated, for the trainer's recorder, the preflight and Try the model alike (TRL's rule)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from grpo_core.engine.policy_model import EndOfSequence, end_of_sequence_ids


def _pair(tokenizer_eos, generation_eos, pad):
    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=generation_eos))
    return model, SimpleNamespace(eos_token_id=tokenizer_eos, pad_token_id=pad)


@pytest.mark.parametrize(
    ("tokenizer_eos", "generation_eos", "pad", "ids"),
    [
        (2, None, 0, (2,)),
        (2, 7, 0, (2, 7)),  # the tokenizer's first, as TRL orders them
        (2, [7, 2], 2, (2, 7)),  # no repeats
        (None, [7], None, (7,)),
    ],
)
def test_end_of_sequence_ids_as_trl_collects_them(tokenizer_eos, generation_eos, pad, ids):
    end = end_of_sequence_ids(*_pair(tokenizer_eos, generation_eos, pad))
    assert end == EndOfSequence(ids=ids, pad_id=pad)


@pytest.mark.parametrize(
    ("ids", "expected_cut", "truncated"),
    [
        ([5, 6, 2, 0, 0], [5, 6, 2], False),  # cut after the first end token, which stays (TRL counts it)
        ([5, 6, 7], [5, 6, 7], True),  # never ended: truncated at the length limit
        ([5, 0, 0], [5], False),  # ends in padding: not truncated (TRL's clipped_ratio counts pad as an ending)
        ([5, 9], [5, 9], False),  # any end token
    ],
)
def test_cut_and_truncation_follow_one_rule(ids, expected_cut, truncated):
    end = EndOfSequence(ids=(2, 9), pad_id=0)
    assert end.cut(ids) == (expected_cut, truncated)
    assert end.is_truncated(ids) is truncated
