"""Pictures shown inline: a strip of ``<img>`` elements whose sources are ``data:`` URLs, so that no image becomes a
file Gradio serves (a URL another login could open); the caller has checked who may see them
(:func:`grpo_core.runs.images.group_images`)."""

from __future__ import annotations

import html
from collections.abc import Sequence

IMAGE_CSS = (
    ".grpo-images{display:flex;gap:6px;flex-wrap:wrap;margin:4px 0}"
    ".grpo-images img{max-width:224px;max-height:224px;border:1px solid #8884;border-radius:4px;"
    "image-rendering:pixelated}"
)


def images_html(data_urls: Sequence[str], label: str) -> str:
    """A strip of the pictures (``data:image/png;base64,...`` URLs only; any other source is left out), each with
    ``label`` and its number as alt text; ``""`` when there are none."""
    shown = [url for url in data_urls if isinstance(url, str) and url.startswith("data:image/png;base64,")]
    if not shown:
        return ""
    tags = "".join(f'<img src="{html.escape(url, quote=True)}" alt="{html.escape(label)} image {number}" '
                   f'title="{html.escape(label)} image {number}">' for number, url in enumerate(shown, start=1))
    return f'<style>{IMAGE_CSS}</style><div class="grpo-images">{tags}</div>'
