"""Views of the Inspect tab's tools (pure functions of store records; no Gradio): filters for a step's groups,
search results, one prompt across steps, and two completions side by side as a diff."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from app.views.completion_diff import MAX_DIFF_CHARS, DiffTooCostly, bounded_diff
from app.views.runs import GROUP_CSS, groups_html
from app.views.trajectories import TRAJECTORY_FILTER_KEYS, TRAJECTORY_FILTERS, filter_trajectories
from storage import CompletionRecord, GroupRecord, PromptPage, SearchPage, Store, StoreError

#: The group filters: (label shown in the dropdown, key).
GROUP_FILTERS: tuple[tuple[str, str], ...] = (
    ("all groups", "all"),
    ("no signal (all rewards equal)", "no_signal"),
    ("with truncated completions", "truncated"),
    ("top N by advantage spread", "top_spread"),
    ("bottom N by advantage spread", "bottom_spread"),
    ("top N by mean total reward", "top_reward"),
    ("bottom N by mean total reward", "bottom_reward"),
    *TRAJECTORY_FILTERS,
)
_FILTER_KEYS = {key for _, key in GROUP_FILTERS}


def reward_spread(group: GroupRecord) -> float:
    """max - min of the group's total rewards (``None`` ignored; 0 when fewer than one is known)."""
    totals = [c.total_reward for c in group.completions if c.total_reward is not None]
    return (max(totals) - min(totals)) if totals else 0.0


def has_signal(group: GroupRecord) -> bool:
    """Whether the group's total rewards differ: if not, every advantage is 0 and the group teaches nothing."""
    return reward_spread(group) > 1e-9


def advantage_spread(group: GroupRecord) -> float:
    """max - min of the advantages TRL computed for the group (``None`` ignored; 0 when none is known)."""
    advantages = [c.advantage for c in group.completions if c.advantage is not None]
    return (max(advantages) - min(advantages)) if advantages else 0.0


def mean_total(group: GroupRecord) -> float | None:
    """The mean total reward of the group's completions (``None`` ignored; ``None`` when none is known)."""
    totals = [c.total_reward for c in group.completions if c.total_reward is not None]
    return sum(totals) / len(totals) if totals else None


def filter_groups(groups: Sequence[GroupRecord], mode: str, n: int = 3) -> list[GroupRecord]:
    """The groups of a step that ``mode`` keeps (a key of :data:`GROUP_FILTERS`).

    ``all``, ``no_signal``, ``truncated`` and the trajectory filters (a group with a completion that called a tool,
    had a failed call, made no call, or stopped at the tool-calling limit:
    :data:`app.views.trajectories.TRAJECTORY_FILTERS`) keep the sampling order; ``top_*``/``bottom_*`` return the ``n`` groups
    with the largest / smallest advantage spread or mean total reward, best first for ``top``, worst first for
    ``bottom`` (groups without any reward sort last in both).

    Raises:
        ValueError: ``mode`` is not a known filter.
    """
    if mode not in _FILTER_KEYS:
        raise ValueError(f"unknown group filter {mode!r}; expected one of {sorted(_FILTER_KEYS)}")
    groups = list(groups)
    if mode == "all":
        return groups
    if mode == "no_signal":
        return [g for g in groups if not has_signal(g)]
    if mode == "truncated":
        return [g for g in groups if any(c.truncated for c in g.completions)]
    if mode in TRAJECTORY_FILTER_KEYS:
        return filter_trajectories(groups, mode)
    n = max(0, int(n))
    if mode.endswith("_spread"):
        ordered = sorted(groups, key=advantage_spread, reverse=mode.startswith("top"))
    else:
        known = [g for g in groups if mean_total(g) is not None]
        unknown = [g for g in groups if mean_total(g) is None]
        ordered = sorted(known, key=mean_total, reverse=mode.startswith("top")) + unknown
    return ordered[:n]


# ------------------------------------------------------------------------------------------------------- diff


def completion_ref(group: GroupRecord, completion: CompletionRecord) -> str:
    """The dropdown value naming one completion: ``"<group id>:<completion index>"``."""
    return f"{group.id}:{completion.index}"


def parse_completion_ref(value: str) -> tuple[int, int]:
    """``"12:3"`` -> ``(12, 3)`` (group id, completion index).

    Raises:
        ValueError: ``value`` is not two integers joined by ``:``.
    """
    match = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", str(value or ""))
    if match is None:
        raise ValueError(f"not a completion reference (group id:index): {value!r}")
    return int(match.group(1)), int(match.group(2))


def find_completion(store: Store, ref: str) -> tuple[GroupRecord, CompletionRecord] | None:
    """The group and completion that ``ref`` (:func:`completion_ref`) names, or ``None`` when ``ref`` is malformed
    or they no longer exist (the run was deleted, the step re-trained)."""
    try:
        group_id, index = parse_completion_ref(ref)
        group = store.get_group(group_id)
        return group, next(c for c in group.completions if c.index == index)
    except (ValueError, StoreError, StopIteration):
        return None


def completion_click_ref(value: str | None) -> str | None:
    """The completion reference of a click on a completion card, as the token view's click script writes it
    (``"<group id>:<index>@<milliseconds>"``, the time making each click a change) -> ``"<group id>:<index>"``;
    ``None`` for anything else."""
    ref = str(value or "").partition("@")[0]
    try:
        group_id, index = parse_completion_ref(ref)
    except ValueError:
        return None
    return f"{group_id}:{index}"


def completion_label(group: GroupRecord, completion: CompletionRecord) -> str:
    """``step 3 · row 11 · #2 (advantage +1.22, total 1.00)`` for the diff dropdowns."""
    advantage = "–" if completion.advantage is None else f"{completion.advantage:+.2f}"
    total = "–" if completion.total_reward is None else f"{completion.total_reward:.2f}"
    return f"step {group.step} · row {group.row_index} · #{completion.index} (advantage {advantage}, total {total})"


def completion_choices(groups: Sequence[GroupRecord]) -> list[tuple[str, str]]:
    """(label, reference) for every completion of ``groups`` that has a stored id, each group once."""
    seen: set[int] = set()
    choices = []
    for group in groups:
        if group.id is None or group.id in seen:
            continue
        seen.add(group.id)
        choices.extend((completion_label(group, c), completion_ref(group, c)) for c in group.completions)
    return choices


DIFF_CSS = """
#completion-diff table.diff { font-family: ui-monospace, monospace; font-size: 12px; border-collapse: collapse;
  width: 100%; }
#completion-diff td { vertical-align: top; white-space: pre-wrap; word-break: break-word; padding: 1px 4px; }
#completion-diff td[nowrap] { width: 50%; }
#completion-diff td.diff_header { color: #6b7280; width: 2.5em; text-align: right; }
#completion-diff .diff_add { background: #bbf7d0; }
#completion-diff .diff_chg { background: #fde68a; }
#completion-diff .diff_sub { background: #fecaca; }
"""

#: HtmlDiff's "next change" navigation cells and their column groups: in-page links that do not belong in a panel.
_DIFF_NAVIGATION = re.compile(r'<t[dh] class="diff_next"[^>]*>.*?</t[dh]>|<colgroup></colgroup>\s*')


def completion_diff_html(left: tuple[str, str], right: tuple[str, str], *, width: int = 60) -> str:
    """Two completions side by side (``difflib.HtmlDiff``, computed in a child process killed after
    :data:`app.views.completion_diff.TIMEOUT_S`; each side's first :data:`~app.views.completion_diff.MAX_DIFF_CHARS`
    characters): added, changed and removed text highlighted; a note instead when the child ran out of time.

    Two long texts (multi-turn trajectories of thousands of characters) are compared by lines instead, in time that
    does not grow with the product of their lengths: the similarity past :data:`~app.views.completion_diff.RATIO_CHAR_PAIRS` character pairs,
    the table past :data:`~app.views.completion_diff.TABLE_LINE_PAIRS` line pairs (whole changed lines marked).

    Args:
        left, right: ``(label, text)`` of each completion; labels and texts are escaped.
        width: lines longer than this many characters are split at spaces before diffing.

    Returns:
        HTML: a header with the similarity ratio (``difflib.SequenceMatcher``, 1.0 = identical) and the table.
    """
    (left_label, left_text), (right_label, right_text) = left, right
    try:  # in a bounded child: difflib is quadratic to cubic in the texts (app.views.completion_diff)
        ratio, table = bounded_diff(left_text, right_text, (html.escape(left_label), html.escape(right_label)), width)
    except DiffTooCostly as exc:
        return f'<div id="completion-diff" class="grpo-empty" data-ratio="">No diff drawn: {html.escape(str(exc))}.</div>'
    table = _DIFF_NAVIGATION.sub("", table)
    same = " · identical" if left_text == right_text else ""
    if max(len(left_text), len(right_text)) > MAX_DIFF_CHARS:
        same += f" · the first {MAX_DIFF_CHARS:,} characters of each compared"
    return (
        f'<style>{DIFF_CSS}</style><div id="completion-diff" data-ratio="{ratio:.3f}">'
        f'<div class="grpo-meta">similarity {ratio:.0%}{same}</div>{table}</div>'
    )


# ----------------------------------------------------------------------------------------------------- search


def _snippet(text: str, needle: str, context: int = 60) -> str:
    """Escaped ``text`` around the first case-insensitive occurrence of ``needle``, the match in ``<mark>``."""
    at = text.casefold().find(needle.casefold())
    if at < 0 or not needle:
        return html.escape(text[: 2 * context]) + ("…" if len(text) > 2 * context else "")
    start, end = max(0, at - context), min(len(text), at + len(needle) + context)
    return (
        ("…" if start else "")
        + html.escape(text[start:at])
        + f"<mark>{html.escape(text[at : at + len(needle)])}</mark>"
        + html.escape(text[at + len(needle) : end])
        + ("…" if end < len(text) else "")
    )


def search_results_html(page: SearchPage) -> str:
    """One page of search hits: for each matching group its step, dataset row and where the text was found, with
    snippets, and the whole group folded underneath."""
    if not page.text.strip():
        return '<div class="grpo-empty">Type some text to search the run\'s prompts and completions.</div>'
    if page.total == 0:
        return f'<div class="grpo-empty">No prompt or completion contains “{html.escape(page.text)}”.</div>'
    first, last = page.offset + 1, page.offset + len(page.hits)
    pages = -(-page.total // page.limit)
    out = [
        f"<style>{GROUP_CSS}</style>",
        f'<div id="search-summary" data-total="{page.total}">groups {first}–{last} of {page.total} containing '
        f"“{html.escape(page.text)}” · page {page.offset // page.limit + 1} of {pages}</div>",
    ]
    for hit in page.hits:
        group = hit.group
        where = (["prompt"] if hit.prompt_matched else []) + [f"completion #{i}" for i in hit.completion_indexes]
        out.append(
            f'<div class="grpo-group search-hit" data-step="{group.step}" data-row="{group.row_index}">'
            f'<div class="grpo-meta"><b>step {group.step}</b> · dataset row {group.row_index} · '
            f"found in {', '.join(where) or 'nothing (changed since?)'}</div>"
        )
        if hit.prompt_matched:
            out.append(f'<div class="grpo-meta">prompt: {_snippet(group.prompt, page.text)}</div>')
        by_index = {c.index: c for c in group.completions}
        for index in hit.completion_indexes:
            if index in by_index:
                out.append(f'<div class="grpo-meta">#{index}: {_snippet(by_index[index].text, page.text)}</div>')
        out.append(
            f'<details class="grpo-fold"><summary>the whole group</summary>{groups_html([group])}</details></div>'
        )
    return "".join(out)


# ------------------------------------------------------------------------------------------ one prompt over time


_TRAJECTORY_NOTE = ('<div class="grpo-meta" id="prompt-history-turns-note">Trajectories show a summary of their turns '
                    "and the final answer here; every turn in full: the step's groups (pick the step), or the diff "
                    "(its lists hold this page's completions).</div>")


def prompt_history_html(groups: Sequence[GroupRecord], page: PromptPage | None = None, *, pictures: str = "") -> str:
    """One dataset row's groups in step order: a table (step, mean total, best, spread, advantage spread,
    truncated, signal) and then each group's completions.

    ``groups`` come from ``Store.groups_for_prompt`` or are ``page.groups`` (``Store.prompt_page``: then a line
    "groups N–M of T" says where the page lies among the row's groups); an empty list says the row was never
    sampled. ``pictures``: the HTML of the prompt's images (:func:`app.views.images.images_html`), under it. A
    multi-turn completion (an agentic rollout) shows a summary line of its turns and its final answer, not its turns'
    texts (a page of 50 groups of long rollouts drew ~5 MB of HTML): a note says where they are in full (the step's
    view, the diff).
    """
    if not groups:
        return '<div class="grpo-empty">This dataset row has no recorded groups in this run.</div>'
    rows = []
    for group in groups:
        totals = [c.total_reward for c in group.completions if c.total_reward is not None]
        mean = mean_total(group)
        rows.append(
            f'<tr class="history-step" data-step="{group.step}"><td>{group.step}</td>'
            f"<td>{'–' if mean is None else f'{mean:.3f}'}</td>"
            f"<td>{'–' if not totals else f'{max(totals):.3f}'}</td>"
            f"<td>{reward_spread(group):.3f}</td><td>{advantage_spread(group):.3f}</td>"
            f"<td>{sum(c.truncated for c in group.completions)}/{len(group.completions)}</td>"
            f"<td>{'yes' if has_signal(group) else 'none'}</td></tr>"
        )
    steps = sorted({g.step for g in groups})
    plural = "s" if len(steps) != 1 else ""
    if page is None:
        where = (f'<div class="grpo-meta">dataset row {groups[0].row_index}: sampled at {len(steps)} step{plural} '
                 f"({len(groups)} groups)</div>")
    else:
        where = (
            f'<div class="grpo-meta" id="prompt-history-range" data-offset="{page.offset}" data-total="{page.total}">'
            f"dataset row {page.row_index}: groups {page.offset + 1:,}–{page.offset + len(groups):,} of "
            f"{page.total:,} (steps {steps[0]:,}–{steps[-1]:,}: {len(steps)} step{plural} on this page)</div>"
        )
    return (
        f'<div id="prompt-history" data-steps="{len(steps)}">{where}'
        '<table class="grpo-history" style="font-size:13px;border-collapse:collapse">'
        "<tr><th>step</th><th>mean total</th><th>best total</th><th>reward spread</th><th>advantage spread</th>"
        f"<th>truncated</th><th>signal</th></tr>{''.join(rows)}</table>"
        f'<div class="grpo-prompt" style="margin:8px 0">{html.escape(groups[0].prompt)}</div>{pictures}'
        f"{_TRAJECTORY_NOTE if any(c.turns for g in groups for c in g.completions) else ''}"
        f"{groups_html(list(groups), turns=False)}</div>"
    )


def pass_share(best_totals: Sequence[float | None], threshold: float) -> float | None:
    """pass@G of one step from its groups' best totals (``Store.best_totals``): the share (0..1) above
    ``threshold``, as :func:`pass_at_g` counts it; ``None`` without groups."""
    if not best_totals:
        return None
    return sum(1 for best in best_totals if best is not None and best > threshold) / len(best_totals)


def step_totals(groups: Sequence[GroupRecord]) -> list[float]:
    """Every completion's total reward at one step (``None`` left out): the values of the reward histogram."""
    return [c.total_reward for g in groups for c in g.completions if c.total_reward is not None]


def pass_at_g(groups: Sequence[GroupRecord], threshold: float) -> float | None:
    """pass@G of one step: the share of groups (0..1) with at least one completion whose total reward is above
    ``threshold`` (a group that can still teach the right answer); ``None`` without groups."""
    if not groups:
        return None
    passed = sum(1 for g in groups if any(c.total_reward is not None and c.total_reward > threshold
                                          for c in g.completions))
    return passed / len(groups)
