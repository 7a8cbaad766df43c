"""A click on a completion card opens its token view: each card of a stored group carries its reference, and the
click script's value (``ref@time``) reads back as that reference, anything else as nothing."""

from __future__ import annotations

import pytest

from app.views.inspect import completion_click_ref
from app.views.runs import groups_html
from storage import CompletionRecord, GroupRecord


def _group(group_id):
    completions = [CompletionRecord(index=i, text=f"c{i}", rewards={"r": float(i)}, total_reward=float(i),
                                    advantage=float(i) - 0.5, num_tokens=2) for i in range(2)]
    return GroupRecord(step=3, row_index=1, prompt="p", completions=completions, id=group_id)


def test_cards_of_a_stored_group_carry_their_reference():
    page = groups_html([_group(17)])
    assert page.count('data-ref="17:') == 2 and 'data-ref="17:0"' in page and 'data-ref="17:1"' in page
    assert 'data-ref="' not in groups_html([_group(None)])  # nothing to open without a stored group


@pytest.mark.parametrize(("value", "ref"), [
    ("17:1@1733000000000", "17:1"),
    ("17:1", "17:1"),
    (" 17 : 1 @5", "17:1"),
    ("", None),
    (None, None),
    ("17@5", None),
    ("a:b@1", None),
    ("17:1:2@1", None),
    ("<script>@1", None),
])
def test_the_click_value_reads_back_as_a_reference(value, ref):
    assert completion_click_ref(value) == ref
