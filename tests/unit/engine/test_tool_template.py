"""Preflight's tool-calling check (grpo_core.engine.tool_template): a chat template TRL can train with tools passes;
one that cannot render a tool call is named, with what to use instead."""

from __future__ import annotations

from transformers import AutoTokenizer

from grpo_core.engine.tool_template import tool_calling_problem


def test_a_template_that_renders_tool_calls_passes_and_one_that_does_not_is_named(tiny_model_dir):
    from trl.chat_template_utils import qwen2_5_chat_template

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)  # a plain ChatML template: no tools, no tool calls
    problem = tool_calling_problem(tokenizer)
    assert problem and "supports_tool_calling" in problem and "trl/chat_templates" in problem
    tokenizer.chat_template = qwen2_5_chat_template
    assert tool_calling_problem(tokenizer) is None
    tokenizer.chat_template = None
    assert "no chat template" in tool_calling_problem(tokenizer)


def test_a_template_trl_has_a_training_template_for_is_pointed_to_it(tiny_model_dir):
    from trl.chat_template_utils import llama3_chat_template

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = llama3_chat_template  # TRL: the basic Llama 3 template drops tool calls
    problem = tool_calling_problem(tokenizer)
    assert problem is not None and "supports_tool_calling" in problem


def test_a_chatml_model_that_cannot_render_tools_gets_the_qwen2_5_template_and_no_other_model_does(tiny_model_dir):
    from trl.chat_template_utils import llama3_chat_template, qwen2_5_chat_template

    from grpo_core.engine.tool_template import CHATML_TOOL_TEMPLATE, use_tool_chat_template
    from grpo_core.submit.quick_starts import CHATML_TOOL_TEMPLATE_NOTE

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)  # ChatML tokens, a template without tools
    assert use_tool_chat_template(tokenizer) == CHATML_TOOL_TEMPLATE
    assert tokenizer.chat_template == qwen2_5_chat_template and tool_calling_problem(tokenizer) is None
    assert use_tool_chat_template(tokenizer) is None  # it renders tools now: left as it is
    assert "Qwen2.5 chat template" in CHATML_TOOL_TEMPLATE and "Qwen2.5 chat template" in CHATML_TOOL_TEMPLATE_NOTE
    tokenizer.chat_template = llama3_chat_template  # not ChatML: left to tool_calling_problem to name a fix
    assert use_tool_chat_template(tokenizer) is None and tokenizer.chat_template == llama3_chat_template


def test_the_launch_forms_report_says_the_template_the_run_will_set(tiny_model_dir):
    from trl.chat_template_utils import llama3_chat_template

    from grpo_core.engine.tool_template import CHATML_TOOL_TEMPLATE, tool_template_report

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)  # ChatML, no tools: the worker sets Qwen2.5's
    assert tool_template_report(tokenizer) == {"problem": None, "training_template": CHATML_TOOL_TEMPLATE,
                                               "dashboard_template": True}
    tokenizer.chat_template = llama3_chat_template  # not ChatML: nothing set, the problem named
    report = tool_template_report(tokenizer)
    assert report["problem"] and report["dashboard_template"] is False
