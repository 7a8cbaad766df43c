"""The token heatmap of a completion (app/views/token_heatmap.py): colours in the order of the values (red for a low
log-probability, a high KL or entropy), escaped token text, the legend's scale, and the notes for what was not
recorded."""

from __future__ import annotations

import math
import re

import pytest

from app.views.token_heatmap import (
    contrast_ratio,
    heat_colour,
    intensity,
    measure_values,
    relative_luminance,
    text_colour,
    token_heatmap_html,
)
from storage import CompletionRecord, TokenStats

STATS = TokenStats(
    pieces=["The", " answer", " <b>&", "\n", "", "42"],
    logprobs=[-0.1, -2.5, -7.0, -0.01, -1.0, -4.0],
    kl=[0.0, 0.2, 0.05, 0.9, 0.01, 0.4],
    entropy=[0.3, 1.1, 2.9, 0.05, 0.7, 2.0],
)
COMPLETION = CompletionRecord(index=2, text="The answer <b>&\n42", rewards={"r": 1.0}, total_reward=1.0,
                              advantage=1.2345, num_tokens=6)


def _spans(page: str) -> list[tuple[str, float, str]]:
    """(background colour, value, shown text) of each token span, in order."""
    found = re.findall(r'<span class="tok" style="background:(#[0-9a-f]{6});color:#[0-9a-f]{6}" data-value="([^"]+)" '
                       r'title="[^"]*">([^<]*)</span>', page)
    return [(colour, float(value), text) for colour, value, text in found]


def _green(colour: str) -> int:
    """The green channel: it falls steadily from white through amber to deep red."""
    return int(colour[3:5], 16)


@pytest.mark.parametrize("measure", ["logprob", "kl", "entropy"])
def test_colours_follow_the_order_of_the_values(measure):
    spans = _spans(token_heatmap_html(STATS, measure, completion=COMPLETION))
    values = measure_values(STATS, measure)
    assert [v for _, v, _ in spans] == pytest.approx(values, rel=1e-3)
    by_value = sorted(spans, key=lambda span: span[1])
    greens = [_green(colour) for colour, _, _ in by_value]
    if measure == "logprob":  # the lower the log-probability, the redder
        assert greens == sorted(greens) and greens[0] < greens[-1]
        assert by_value[0][0] == heat_colour(1.0) and by_value[-1][0] == heat_colour(0.0)
    else:  # the higher the KL or entropy, the redder
        assert greens == sorted(greens, reverse=True) and greens[0] > greens[-1]
        assert by_value[-1][0] == heat_colour(1.0) and by_value[0][0] == heat_colour(0.0)


def test_heat_colour_runs_from_white_through_amber_to_red():
    assert heat_colour(0.0) == "#ffffff"
    assert heat_colour(0.5) == "#fdba74"
    assert heat_colour(1.0) == "#b91c1c"
    assert heat_colour(-3) == heat_colour(0.0) and heat_colour(7) == heat_colour(1.0)
    greens = [_green(heat_colour(level / 20)) for level in range(21)]
    assert greens == sorted(greens, reverse=True)


def test_intensity_on_the_completions_scale():
    assert intensity(-7.0, -7.0, -0.01, "logprob") == 1.0
    assert intensity(-0.01, -7.0, -0.01, "logprob") == 0.0
    assert intensity(0.9, 0.0, 0.9, "kl") == 1.0
    assert intensity(0.45, 0.0, 0.9, "entropy") == pytest.approx(0.5)
    assert intensity(1.0, 1.0, 1.0, "kl") == 0.0  # a flat scale: nothing stands out
    assert intensity(math.nan, 0.0, 1.0, "kl") == 0.0


def test_token_text_is_escaped_and_every_token_has_a_span():
    page = token_heatmap_html(STATS, "logprob", completion=COMPLETION, label="step 3 · <row>")
    texts = [text for _, _, text in _spans(page)]
    assert texts == ["The", " answer", " &lt;b&gt;&amp;", "\n", "\u200b", "42"]
    assert "<b>" not in page  # no raw tag from a token
    assert "step 3 · &lt;row&gt;" in page


def test_advantage_and_legend_beside_the_heatmap():
    page = token_heatmap_html(STATS, "entropy", completion=COMPLETION)
    assert 'data-advantage="1.2345"' in page and "advantage +1.23" in page
    assert "total reward 1.000" in page and "6 tokens" in page
    legend = re.search(r'<div class="token-legend" data-measure="entropy" data-low="([^"]+)" data-high="([^"]+)">',
                       page)
    assert legend and float(legend.group(1)) == 0.05 and float(legend.group(2)) == 2.9
    assert "(red: high;" in page
    assert "(red: low;" in token_heatmap_html(STATS, "logprob")


def test_notes_for_what_was_not_recorded():
    assert "No per-token values were recorded" in token_heatmap_html(None, "logprob")
    no_kl = TokenStats(pieces=["a"], logprobs=[-1.0], entropy=[0.5])
    assert "beta = 0" in token_heatmap_html(no_kl, "kl")
    assert _spans(token_heatmap_html(no_kl, "entropy"))[0][1] == 0.5


def test_unknown_measure_is_refused():
    with pytest.raises(ValueError, match="unknown token measure"):
        token_heatmap_html(STATS, "perplexity")


def test_luminance_and_contrast_follow_wcag():
    assert relative_luminance("#000000") == 0.0 and relative_luminance("#ffffff") == pytest.approx(1.0)
    assert contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast_ratio("#777777", "#777777") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="#rrggbb"):
        relative_luminance("red")


@pytest.mark.parametrize("level", [0.0, 0.5, 1.0, *[i / 100 for i in range(101)]])
def test_token_text_is_readable_on_every_colour_of_the_scale(level):
    """WCAG AA for normal text (4.5:1) on the white end, the amber middle, the deep red end and everything between;
    the deep red end gets white text (black on it was about 2.6:1)."""
    background = heat_colour(level)
    assert contrast_ratio(text_colour(background), background) >= 4.5, (level, background)


def test_each_token_span_carries_its_readable_text_colour():
    page = token_heatmap_html(STATS, "logprob", completion=COMPLETION)
    pairs = re.findall(r'style="background:(#[0-9a-f]{6});color:(#[0-9a-f]{6})"', page)
    assert len(pairs) == len(STATS.pieces)
    assert ("#b91c1c", "#ffffff") in pairs and ("#ffffff", "#000000") in pairs  # the two ends
    assert all(contrast_ratio(text, background) >= 4.5 for background, text in pairs)
