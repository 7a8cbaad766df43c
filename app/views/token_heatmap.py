"""A completion's tokens as a colour heatmap of one per-token value (pure functions of store records; no Gradio).

The values are those TRL computed in its loss for the step (:class:`storage.TokenStats`): the policy's
log-probability of each token, its KL to the reference model, or the entropy at its position. The colour runs from
white (unremarkable) to deep red (remarkable): a *low* log-probability (a surprising token), a *high* KL (where the
policy left the reference) or a *high* entropy (where it hesitated). The scale spans the completion's own range, shown
in a legend; each token's exact value is in its tooltip. Each token's text is black or white, whichever contrasts more
with its background (WCAG 2.x relative luminance; the scale's every colour reaches a contrast of at least 4.5:1).
"""

from __future__ import annotations

import functools
import html
import math

from grpo_core.tools.turns import clean_spans, trained_flags
from storage import CompletionRecord, TokenStats

#: The measures a heatmap can show: (label in the selector, key).
TOKEN_MEASURES: tuple[tuple[str, str], ...] = (
    ("log-probability (policy)", "logprob"),
    ("KL to the reference", "kl"),
    ("entropy", "entropy"),
)
_MEASURE_NAMES = {key: label for label, key in TOKEN_MEASURES}
_HIGH_IS_REMARKABLE = {"logprob": False, "kl": True, "entropy": True}

# white -> amber -> deep red, (r, g, b) at intensity 0, 0.5, 1
_STOPS = ((255, 255, 255), (253, 186, 116), (185, 28, 28))

HEATMAP_CSS = """
.token-view { display: flex; gap: 12px; align-items: flex-start; }
.token-view .token-side { min-width: 9em; padding: 8px; border: 1px solid #e5e7eb; border-radius: 6px;
  font-size: 13px; }
.token-view .token-side .token-adv { font-size: 20px; font-weight: 600; }
.token-view .token-main { flex: 1; min-width: 0; }
.token-heatmap { font-family: ui-monospace, monospace; font-size: 13px; white-space: pre-wrap;
  word-break: break-word; line-height: 1.7; padding: 6px; border: 1px solid #e5e7eb; border-radius: 6px;
  color: #111827; background: #fff; }
.token-heatmap .tok { border-radius: 2px; }
.token-heatmap .tok.untrained { outline: 1px dashed #6b7280; opacity: 0.6; }
.token-legend { display: flex; align-items: center; gap: 6px; font-size: 12px; color: #374151; margin: 4px 0; }
.token-legend .token-scale { width: 160px; height: 10px; border: 1px solid #d1d5db; border-radius: 2px; }
"""


def measure_values(stats: TokenStats, measure: str) -> list[float] | None:
    """The per-token values of ``measure`` (a key of :data:`TOKEN_MEASURES`); ``None`` when they were not recorded
    (``kl`` of a run with ``beta`` = 0).

    Raises:
        ValueError: ``measure`` is not a known key.
    """
    if measure not in _MEASURE_NAMES:
        raise ValueError(f"unknown token measure {measure!r}; expected one of {sorted(_MEASURE_NAMES)}")
    return {"logprob": stats.logprobs, "kl": stats.kl, "entropy": stats.entropy}[measure]


def intensity(value: float, low: float, high: float, measure: str) -> float:
    """How remarkable ``value`` is on the completion's scale ``[low, high]``, from 0 to 1 (0 for a non-finite value
    or a flat scale): the lowest log-probability, the highest KL or entropy give 1."""
    if not math.isfinite(value) or not high > low:
        return 0.0
    share = (min(max(value, low), high) - low) / (high - low)
    return share if _HIGH_IS_REMARKABLE[measure] else 1.0 - share


def heat_colour(level: float) -> str:
    """The background colour of intensity ``level`` (0..1) as ``#rrggbb``: white, amber at 0.5, deep red at 1."""
    level = min(max(float(level), 0.0), 1.0)
    half = 0 if level <= 0.5 else 1
    t = (level - 0.5 * half) * 2
    start, end = _STOPS[half], _STOPS[half + 1]
    r, g, b = (round(a + (b - a) * t) for a, b in zip(start, end, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


#: The two text colours a token may take: the one that contrasts more with its background is used.
TEXT_COLOURS = ("#000000", "#ffffff")


def relative_luminance(colour: str) -> float:
    """The WCAG 2.x relative luminance (0 black .. 1 white) of ``#rrggbb`` (sRGB channels linearised).

    Raises:
        ValueError: ``colour`` is not ``#rrggbb``.
    """
    if len(colour) != 7 or colour[0] != "#":
        raise ValueError(f"expected a colour as #rrggbb, got {colour!r}")
    channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(first: str, second: str) -> float:
    """The WCAG 2.x contrast ratio of two ``#rrggbb`` colours, from 1 (same) to 21 (black on white)."""
    light, dark = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


@functools.lru_cache(maxsize=1024)
def text_colour(background: str) -> str:
    """Black or white (:data:`TEXT_COLOURS`), whichever reads better on ``background`` (``#rrggbb``). Cached: a
    heatmap's backgrounds are a few hundred of :func:`heat_colour`'s, over thousands of tokens."""
    return max(TEXT_COLOURS, key=lambda colour: contrast_ratio(colour, background))


def _fmt(value: float | None, digits: int = 3, *, signed: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def token_heatmap_html(
    stats: TokenStats | None, measure: str, *, completion: CompletionRecord | None = None, label: str = ""
) -> str:
    """One completion's tokens coloured by ``measure`` (a key of :data:`TOKEN_MEASURES`), beside its advantage.

    Each token is a ``<span class="tok">`` with its escaped text, its value in ``data-value`` and ``title``, and
    its background from :func:`heat_colour`; a legend gives the scale (the completion's min and max). ``completion``
    supplies the advantage, total reward and token count shown beside it; ``label`` names it.

    In a multi-turn completion the tokens of a tool's result, which TRL does not train on (its tool mask,
    :attr:`storage.CompletionRecord.tool_mask`), get the class ``untrained`` (dashed, faded) and say so in their
    tooltip.

    Returns a note instead when ``stats`` is ``None`` (nothing recorded) or the measure was not recorded (KL with
    ``beta`` = 0).

    Raises:
        ValueError: ``measure`` is not a known key.
    """
    if stats is None:
        return ('<div class="grpo-empty token-none">No per-token values were recorded for this completion '
                "(they are recorded for the training groups of runs trained by this version).</div>")
    values = measure_values(stats, measure)
    if values is None:
        return ('<div class="grpo-empty token-none">No KL per token: this run has beta = 0, so TRL computed no '
                "reference log-probabilities.</div>")
    finite = [v for v in values if math.isfinite(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    mask = clean_spans(completion.tool_mask) if completion is not None else None
    trained = trained_flags(mask, len(values))
    spans = []
    for piece, value, learns in zip(stats.pieces, values, trained, strict=True):
        colour = heat_colour(intensity(value, low, high, measure))
        shown = piece if piece else "\u200b"  # a zero-width space keeps an empty piece's span in the page
        kind, note = ("tok", "") if learns else ("tok untrained", " (a tool's result: not trained on)")
        spans.append(
            f'<span class="{kind}" style="background:{colour};color:{text_colour(colour)}" data-value="{value:.4g}" '
            f'title="{html.escape(repr(piece))}: {value:.4g}{note}">{html.escape(shown)}</span>'
        )
    name = _MEASURE_NAMES[measure]
    remarkable = "low" if not _HIGH_IS_REMARKABLE[measure] else "high"
    left, right = (high, low) if not _HIGH_IS_REMARKABLE[measure] else (low, high)
    gradient = ", ".join(heat_colour(level) for level in (0.0, 0.25, 0.5, 0.75, 1.0))
    legend = (
        f'<div class="token-legend" data-measure="{measure}" data-low="{low:.4g}" data-high="{high:.4g}">'
        f"<span>{html.escape(name)}:</span><span>{left:.3g}</span>"
        f'<span class="token-scale" style="background:linear-gradient(to right, {gradient})"></span>'
        f"<span>{right:.3g}</span><span>(red: {remarkable}; mean {sum(finite) / max(1, len(finite)):.3g} "
        f"over {len(values)} tokens)</span></div>"
    )
    side = ['<div class="token-side">']
    if label:
        side.append(f"<div>{html.escape(label)}</div>")
    if completion is not None:
        side.append(f'<div class="token-adv" data-advantage="{_fmt(completion.advantage, 4)}">advantage '
                    f"{_fmt(completion.advantage, 2, signed=True)}</div>")
        side.append(f"<div>total reward {_fmt(completion.total_reward)}</div>")
        if completion.truncated:
            side.append('<div class="grpo-badge">truncated</div>')
    side.append(f"<div>{stats.num_tokens} tokens</div></div>")
    return (
        f"<style>{HEATMAP_CSS}</style><div class=\"token-view\">{''.join(side)}<div class=\"token-main\">{legend}"
        f'<div class="token-heatmap" data-measure="{measure}">{"".join(spans)}</div></div></div>'
    )
