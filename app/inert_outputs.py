"""No value a login supplies is ever a file to Gradio: the one boundary where values become component values.

Gradio copies into its cache, and serves at ``/gradio_api/file=...``, any mapping in a component's value that looks
like its own file payload: ``{"path": "...", "meta": {"_type": "gradio.FileData"}}`` (``gradio_client.utils``'s
``is_file_obj_with_meta``, walked by ``gradio.processing_utils.move_files_to_cache`` and its async twin), when the
path lies in the working directory, the temp folder, the upload folder or an allowed path; with a ``"url"``
(``http``) it makes the browser and ``gradio_client`` fetch that address; with ``"meta"`` not a mapping, the walk
raises and the handler fails. Run names, tags, notes, configs, provenance records, a group's extra columns,
completions and dataset rows come from logins, scripts over the ingest API and policies: any of them may hold such a
mapping, or text that ``gr.JSON`` parses into one.

:func:`install` wraps both of Gradio's walks (``processing_utils`` and the name ``gradio.components.base`` imported)
so that every value headed for a component that is not a file component (``gr.File``, ``gr.DownloadButton``: the
dashboard's own exports, given as paths by its handlers) is first made :func:`inert`: a mapping shaped like a file
payload (a text ``"path"`` or ``"url"``, or a ``"meta"`` key) becomes ``{AS_TEXT: "<its JSON>"}``, shown, never
served; nesting deeper than :data:`MAX_DEPTH` becomes its JSON text too (Gradio's walk and the JSON encoders recurse).
This covers handler outputs, ``gr.update`` values, the named API's outputs (``gr.api``: not post-processed) and
components' initial values (processed before the server starts, when Gradio checks no path at all).

Source of the shapes: ``gradio/processing_utils.py`` (``move_files_to_cache``, ``_check_allowed``),
``gradio_client/utils.py`` (``is_file_obj``, ``is_file_obj_with_meta``, ``is_file_obj_with_url``), gradio 6.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Mapping
from typing import Any

#: The key an escaped mapping's JSON text is shown under.
AS_TEXT = "file-shaped value, as text"
#: Deepest nesting kept as it is; deeper values are shown as their JSON text.
MAX_DEPTH = 32
#: Longest JSON text an escaped value keeps, in characters.
MAX_TEXT = 20_000
_FILE_KEYS = ("path", "url")


def file_shaped(value: Any) -> bool:
    """Whether Gradio (or a future version of its walk) could read ``value`` as a file payload: a mapping with a text
    ``"path"`` or ``"url"``, or with a ``"meta"`` key."""
    return isinstance(value, Mapping) and (
        any(isinstance(value.get(key), str) for key in _FILE_KEYS) or "meta" in value)


def as_text(value: Any) -> str:
    """``value`` as JSON text (anything JSON cannot encode as its ``str``), cut at :data:`MAX_TEXT` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (RecursionError, ValueError, TypeError):
        text = "(nested too deep to show)"
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def inert(value: Any, depth: int = 0) -> Any:
    """A copy of ``value`` (plain JSON values: mappings, lists, tuples, scalars) in which no mapping is shaped like a
    file payload and nothing is nested deeper than :data:`MAX_DEPTH`; other values are returned as they are."""
    if isinstance(value, Mapping):
        if file_shaped(value):
            return {AS_TEXT: as_text(value)}
        if depth >= MAX_DEPTH:
            return as_text(value)
        return {key: inert(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        if depth >= MAX_DEPTH:
            return as_text(value)
        items = [inert(item, depth + 1) for item in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def _serves_files(block: Any) -> bool:
    import gradio as gr

    return isinstance(block, (gr.File, gr.DownloadButton))


def _guard(move: Any) -> Any:
    @functools.wraps(move)
    def guarded(data: Any, block: Any, postprocess: bool = False, *args: Any, **kwargs: Any) -> Any:
        if postprocess and not _serves_files(block):
            data = inert(_plain(data))
        return move(data, block, postprocess, *args, **kwargs)

    @functools.wraps(move)
    async def guarded_async(data: Any, block: Any, postprocess: bool = False, *args: Any, **kwargs: Any) -> Any:
        if postprocess and not _serves_files(block):
            data = inert(_plain(data))
        return await move(data, block, postprocess, *args, **kwargs)

    chosen = guarded_async if inspect.iscoroutinefunction(move) else guarded
    chosen.__inert_guard__ = True  # type: ignore[attr-defined]
    return chosen


def _plain(data: Any) -> Any:
    dump = getattr(data, "model_dump", None)  # a GradioModel / GradioRootModel, as Gradio's walk would dump it
    return dump() if callable(dump) else data


def install() -> None:
    """Wrap Gradio's output walks (idempotent). Call before any component is built.

    Raises:
        RuntimeError: this Gradio has no such walks (the guard would silently not hold: refuse to start).
    """
    from gradio import processing_utils
    from gradio.components import base

    for module, name in ((processing_utils, "move_files_to_cache"), (processing_utils, "async_move_files_to_cache"),
                         (base, "move_files_to_cache")):
        current = getattr(module, name, None)
        if current is None:
            raise RuntimeError(f"gradio has no {module.__name__}.{name}: the file-payload guard cannot hold")
        if not getattr(current, "__inert_guard__", False):
            setattr(module, name, _guard(current))
