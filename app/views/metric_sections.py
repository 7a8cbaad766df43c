"""Every metric key a run recorded, grouped into the Runs tab's sections by its prefix (pure functions; no Gradio).

trackio and W&B draw every logged key with no setup, grouped by the part of its name before the first ``/``; the
Runs tab does the same with sections named after what TRL's ``GRPOTrainer`` logs (``grad_norm``,
``clip_ratio/high_mean``, ``completions/max_length``, ``sampling/importance_sampling_ratio/mean``, ``tools/*``, ...):
the overview (the eight panels of :data:`app.views.charts.PANELS`) first, then one chart per key in its section.
A key no rule names is the user's own (a script's ``log``, a callback's metric) and lands in "your metrics"; the
scalars a reward function logs through TRL's ``log_metric`` are recorded under :data:`REWARD_LOG_PREFIX`
(:mod:`grpo_core.rewards.logged`) and have their own section.

The sections are drawn lazily by the page (the overview at once, another when it is opened), so a run with 200 keys
costs the first chart no more than one with 8.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.views.charts import CHART_KEYS, GPU_PANELS

#: The prefix under which a reward function's ``log_metric`` scalars are recorded (``reward_logs/<name>``).
REWARD_LOG_PREFIX = "reward_logs/"
#: The keys of the policy and optimizer section that carry no prefix of their own (TRL's and transformers' names).
POLICY_KEYS = frozenset({
    "grad_norm", "learning_rate", "loss", "policy_loss", "aux_loss", "entropy", "entropy_coef", "kl", "epoch",
    "num_tokens", "step_time", "train_loss", "train_runtime", "train_samples_per_second", "train_steps_per_second",
    "total_flos",
})
#: At most this many characters of a key are used (the store keeps 200): a key is a name, never a payload.
MAX_KEY_CHARS = 200


@dataclass(frozen=True)
class Section:
    """One section of the Runs tab: ``id`` (the page's element ids), ``title`` (its heading)."""

    id: str
    title: str


OVERVIEW = Section("overview", "overview")
#: Every section, in the page's order (the overview first, the user's own keys last).
SECTIONS: tuple[Section, ...] = (
    OVERVIEW,
    Section("rewards", "rewards (per reward function)"),
    Section("policy", "policy and optimizer (grad_norm, learning_rate, num_tokens, step_time...)"),
    Section("clip", "clipping (clip_ratio/*)"),
    Section("completions", "completions (lengths, truncation)"),
    Section("sampling", "sampling (vLLM importance sampling)"),
    Section("tools", "tools (tool calls)"),
    Section("gpu", "GPU"),
    Section("eval", "eval (held-out rows)"),
    Section("reward_logs", "logged by reward functions (log_metric)"),
    Section("custom", "your metrics"),
)
SECTION_IDS = tuple(section.id for section in SECTIONS)
#: The keys the overview draws in its own panels (they are not repeated in another section).
_OVERVIEW_KEYS = frozenset(CHART_KEYS) | {key for _title, keys in GPU_PANELS for key in keys}


def section_of(key: str) -> str:
    """The id of the section ``key`` is charted in (:data:`SECTIONS`); ``"overview"`` for a key the overview's
    panels draw. ``rewards/<fn>/mean`` is drawn in the overview's reward panel and again on its own in "rewards"."""
    if key in _OVERVIEW_KEYS:
        return "overview"
    if key.startswith(REWARD_LOG_PREFIX):
        return "reward_logs"
    if key.startswith("eval_") or key.startswith("eval/"):
        return "eval"
    if key.startswith("rewards/") or key.startswith("reward_"):
        return "rewards"
    if key.startswith("clip_ratio/") or key == "cispo_clip_ratio" or key.startswith("clip_ratio"):
        return "clip"
    if key.startswith("completions/"):
        return "completions"
    if key.startswith("sampling/"):
        return "sampling"
    if key.startswith("tools/"):
        return "tools"
    if key.startswith("gpu/"):
        return "gpu"
    if key in POLICY_KEYS or key.startswith("vespo/") or key.startswith("train/") or key.startswith("optim"):
        return "policy"
    return "custom"


def group_keys(keys: Iterable[str]) -> dict[str, list[str]]:
    """``section id -> its keys, sorted``, every section of :data:`SECTIONS` present (empty when no key lands in
    it). The overview lists the keys drawn in its panels; keys that are not text or longer than
    :data:`MAX_KEY_CHARS` are left out."""
    grouped: dict[str, list[str]] = {section.id: [] for section in SECTIONS}
    for key in sorted({k for k in keys if isinstance(k, str) and 0 < len(k) <= MAX_KEY_CHARS}):
        grouped[section_of(key)].append(key)
    return grouped


def section_panels(keys: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    """The panels of a section other than the overview: one per key, titled by the key (TRL's name), its ``<``, ``>``
    and ``&`` escaped: plotly.js reads a subset of HTML in titles (``<a href>``, ``<b>``), and a key is whatever a
    script or the ingest API recorded."""
    return [(html.escape(key, quote=False), (key,)) for key in keys]


def matches(key: str, search: str) -> bool:
    """Whether ``key`` holds every word of ``search`` (case-insensitive; an empty search matches every key)."""
    folded = key.casefold()
    return all(word in folded for word in search.casefold().split())


def section_label(section: Section, keys: Sequence[str], search: str = "") -> str:
    """A section's heading: its title and how many charts it has (of them, how many match ``search``)."""
    if not search.strip():
        return f"{section.title} · {len(keys)} chart{'s' if len(keys) != 1 else ''}"
    found = sum(matches(key, search) for key in keys)
    return f"{section.title} · {found} of {len(keys)} match"
