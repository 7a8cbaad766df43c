"""The Launch tab's Tools group: the library's tools offered with their descriptions, the plugin note naming the
boundary of reward plugins when served with logins, and the template line: the preflight's check (TRL's
``supports_tool_calling`` and its call parser) run in a child on the tokenizer on disk, shown only with tools."""

from __future__ import annotations

from app.tabs.launch.tool_fields import plugin_boundary_markdown, tool_template_markdown, uses_tools
from grpo_core.tools.library import LIBRARY, library_descriptions


def test_the_library_tools_are_offered_with_what_trl_renders_of_them():
    assert set(library_descriptions()) == set(LIBRARY)
    assert library_descriptions()["calculator"] == "Evaluate an arithmetic expression."
    assert uses_tools(["calculator"], "", "") and uses_tools([], "  m:f ", "") and uses_tools([], "", "m:Env")
    assert not uses_tools([], " \n ", "  ")


def test_the_plugin_note_names_the_boundary_only_with_logins(ctx, tmp_path):
    import dataclasses

    assert "With logins" not in plugin_boundary_markdown(ctx)
    served = ctx.settings.with_overrides(auth=(("alice", "a"), ("bob", "b")), plugin_dirs=(tmp_path,))
    note = plugin_boundary_markdown(dataclasses.replace(ctx, settings=served))
    assert "With logins" in note and str(tmp_path) in note and "[run-code]" in note


def test_the_template_line_says_whether_the_template_carries_tools(ctx, tiny_tool_model_dir, tiny_model_dir):
    assert tool_template_markdown(ctx, str(tiny_tool_model_dir), False) == ""  # no tools: nothing to say
    carries = tool_template_markdown(ctx, str(tiny_tool_model_dir), True)
    assert carries.startswith("✅") and "renders tool calls" in carries and "model's own template" in carries
    # a plain ChatML template drops tool calls: the run's worker sets TRL's Qwen2.5 template, and the line says so
    # (a template nothing can fix is named as refused: tests/unit/engine/test_tool_template.py)
    swapped = tool_template_markdown(ctx, str(tiny_model_dir), True)
    assert swapped.startswith("✅") and "cannot render tools, so the dashboard sets" in swapped
    assert "Qwen2.5 chat template" in swapped
    assert "not on disk yet" in tool_template_markdown(ctx, "someone/absent-model", True)


def test_every_text_field_of_the_form_is_a_text_box(ctx):
    import gradio as gr

    from app.tabs.launch.form import CONFIG_FIELDS, field_kind
    from app.tabs.launch.layout import field_component

    text_fields = [(field, label, extra) for field, label, extra in CONFIG_FIELDS if field_kind(field) == "text"]
    assert "environment" in [field for field, *_ in text_fields]  # 'file.py:Class': a number box refused it
    with gr.Blocks():
        for field, label, extra in text_fields:
            assert isinstance(field_component(ctx, field, label, extra), gr.Textbox), field
