"""app/inert_outputs.py: which values Gradio could read as a file, and what they become (plain functions, no
server; the served walk is tests/security/test_file_payloads.py)."""

from __future__ import annotations

import json

import gradio as gr
import pytest
from gradio import processing_utils

from app.inert_outputs import AS_TEXT, MAX_DEPTH, file_shaped, inert, install

META = {"_type": "gradio.FileData"}


@pytest.mark.parametrize("value", [
    {"path": "/etc/passwd", "meta": META}, {"path": "x"}, {"url": "http://h/x"}, {"meta": "not a mapping"},
    {"path": "x", "url": None, "is_stream": True, "orig_name": "x", "meta": META},
])
def test_file_shapes_become_their_json_text_at_any_depth(value):
    assert file_shaped(value)
    assert inert(value) == {AS_TEXT: json.dumps(value)}
    nested = inert({"runs": [{"provenance": {"a": value}}], "t": (value,)})
    assert nested["runs"][0]["provenance"]["a"] == {AS_TEXT: json.dumps(value)}
    assert nested["t"] == ({AS_TEXT: json.dumps(value)},)


def test_other_values_are_kept_and_deep_ones_become_text():
    plain = {"path_like": "/x", "paths": ["/etc"], "path": {"nested": 1}, "n": 1.5, "ok": None}
    assert not file_shaped(plain) and inert(plain) == plain
    deep: object = "leaf"
    for _ in range(MAX_DEPTH + 5):
        deep = {"a": deep}
    shown = inert(deep)
    for _ in range(MAX_DEPTH):
        shown = shown["a"]
    assert isinstance(shown, str) and "leaf" in shown


def test_install_wraps_gradios_walks_for_every_component_but_file_ones(tmp_path):
    install()
    install()  # idempotent
    secret = tmp_path / "secret.txt"
    secret.write_text("s")
    payload = {"path": str(secret), "meta": META}
    assert processing_utils.move_files_to_cache([payload], gr.JSON(), postprocess=True) == [
        {AS_TEXT: json.dumps(payload)}]
    served = processing_utils.move_files_to_cache(payload, gr.File(), postprocess=True)
    assert served["path"] != str(secret) and served["url"]  # a file component's own value is still a file
