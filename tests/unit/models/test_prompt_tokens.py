"""Prompts counted as the run's model gets them (grpo_core.models.prompt_tokens, prompt_lengths): a chat prompt with
earlier turns' tool calls and the run's tools counts the template's tokens, the calls' arguments and the tools' JSON
schemas, with the template the run uses (TRL's Qwen2.5 on a ChatML model whose own template cannot render tools),
exactly as transformers renders it for TRL; without the tokenizer, a character estimate that errs high."""

from __future__ import annotations

from grpo_core.models.memory_estimate import CHAT_TEMPLATE_TOKENS
from grpo_core.models.prompt_lengths import (
    CHATML_TOOL_TEMPLATE,
    check_prompt_lengths,
    read_model_text,
    require_prompts_fit,
    run_model_text,
)
from grpo_core.models.prompt_tokens import estimated_tokens, longest_prompt_tokens, run_tool_schemas

CALL = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "347 * 29 - 1200"}}}
AGENT_PROMPT = [
    {"role": "system", "content": "Use the calculator tool."},
    {"role": "user", "content": "What is 347 * 29 - 1200?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "name": "calculator", "content": "8863"},
    {"role": "assistant", "content": "8863"},
    {"role": "user", "content": "What is 12 * 34?"},
]
CONTENT_ONLY = [{k: v for k, v in m.items() if k in ("role", "content")} for m in AGENT_PROMPT]


def test_a_chat_prompt_with_tool_calls_and_tools_counts_more_tokens(tiny_model_dir):
    from transformers import AutoTokenizer

    from grpo_core.engine.tool_template import use_tool_chat_template
    from grpo_core.tools.library import calculator

    config = {"model": str(tiny_model_dir), "tools": ["calculator"]}
    tools = run_tool_schemas(config)
    model_text, template = run_model_text(read_model_text(tiny_model_dir), uses_tools=True)
    assert template == CHATML_TOOL_TEMPLATE  # the tiny ChatML template cannot render tools: the run sets Qwen2.5's
    with_tools = check_prompt_lengths([{"prompt": AGENT_PROMPT}], model_text, 16, tools=tools).longest[0].tokens
    plain = check_prompt_lengths([{"prompt": CONTENT_ONLY}], read_model_text(tiny_model_dir), 16).longest[0].tokens
    # exactly what TRL's apply_chat_template(prompts, tools=...) gives the model, with the template the worker sets
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert use_tool_chat_template(tokenizer) == CHATML_TOOL_TEMPLATE
    expected = tokenizer.apply_chat_template(AGENT_PROMPT, tools=[calculator], add_generation_prompt=True,
                                             tokenize=True, return_dict=True)["input_ids"]
    assert with_tools == len(expected)
    assert with_tools > plain + 100  # the tools' schema and instructions, the call's arguments, the turn markers
    found = longest_prompt_tokens([{"prompt": CONTENT_ONLY}, {"prompt": AGENT_PROMPT}], config, None)
    assert found.counted and found.tokens == with_tools and "Qwen2.5" in found.how and "calculator" in found.how
    # the launch's check counts the same
    check = require_prompts_fit([{"prompt": AGENT_PROMPT}], tiny_model_dir, 16, tools=tools)
    assert check.longest[0].tokens == with_tools
    assert require_prompts_fit([{"prompt": AGENT_PROMPT}], tiny_model_dir, 16).longest[0].tokens < with_tools


def test_without_the_tokenizer_the_estimate_counts_calls_and_schemas_and_errs_high(tiny_model_dir, tmp_path):
    tools = run_tool_schemas({"tools": ["calculator"]})
    assert estimated_tokens(AGENT_PROMPT, tools) > estimated_tokens(AGENT_PROMPT) > estimated_tokens(CONTENT_ONLY)
    counted = longest_prompt_tokens([{"prompt": AGENT_PROMPT}], {"model": str(tiny_model_dir),
                                                                 "tools": ["calculator"]}, None)
    estimated = longest_prompt_tokens([{"prompt": AGENT_PROMPT}], {"model": "SmolLM2-135M-Instruct",
                                                                   "tools": ["calculator"]}, tmp_path / "no-cache")
    assert not estimated.counted and "not on disk" in estimated.how
    # the old count (the messages' contents only, 3.5 characters a token) was 100 tokens and more under it
    content_chars = sum(len(message["content"]) for message in AGENT_PROMPT)
    assert estimated.tokens >= int(content_chars / 3.5) + CHAT_TEMPLATE_TOKENS + 100
    assert estimated.tokens == estimated_tokens(AGENT_PROMPT, tools)
    assert counted.counted and counted.tokens > 0
    hostile = [{"role": "assistant", "tool_calls": ["x", {"function": 3}, None]}, "junk", {"content": ["a", {}]}]
    assert estimated_tokens(hostile, [{"type": "function"}]) > 0 and estimated_tokens(None) >= 0


def test_the_agent_datasets_prompt_as_smollm2_gets_it():
    """The agent quick start's longest prompt, counted with the converted SmolLM2's tokenizer when a model cache holds
    it, is 521-526 tokens (TRL's Qwen2.5 template, the calculator's schema): 526; estimated, it errs high."""
    import json

    from grpo_core.submit.quick_starts import quick_start

    config = quick_start("agent").recipe().model_dump(mode="json")
    with open(config["dataset_path"], encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    estimated = longest_prompt_tokens(rows, config, None)
    assert not estimated.counted and 526 <= estimated.tokens <= 1.1 * 526


def test_the_launch_check_refuses_a_tool_run_whose_prompts_only_overflow_with_the_tools(tiny_model_dir):
    import pytest

    from grpo_core.models.prompt_lengths import PromptTooLongError

    rows = [{"prompt": AGENT_PROMPT}]
    tools = run_tool_schemas({"tools": ["calculator"]})
    plain = require_prompts_fit(rows, tiny_model_dir, 16).longest[0].tokens
    with_tools = check_prompt_lengths(rows, run_model_text(read_model_text(tiny_model_dir), True)[0], 16,
                                      tools=tools).longest[0].tokens
    context = read_model_text(tiny_model_dir).max_position_embeddings
    completion = context - (plain + with_tools) // 2  # room for the prompt without the tools, not with them
    assert require_prompts_fit(rows, tiny_model_dir, completion).too_long == []
    with pytest.raises(PromptTooLongError, match=f"row 0: {with_tools:,} tokens"):
        require_prompts_fit(rows, tiny_model_dir, completion, tools=tools)
