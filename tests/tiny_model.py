"""A tiny Llama with random weights and a byte-level BPE tokenizer, built locally in about a second.

Tests train it for real with TRL on the CPU: it samples gibberish, which is all a pipeline test needs.
"""

from __future__ import annotations

from pathlib import Path

CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_CORPUS = [
    "What is 12 + 30? The answer is 42.",
    "You are a careful calculator. Reply with the result only, as a number.",
    "def add(a, b):\n    return a + b\n",
    "<think>add the numbers</think><answer>7</answer>",
    "0 1 2 3 4 5 6 7 8 9 - + = ? . , ( )",
] * 20


def build_tiny_model(folder: Path, *, hidden_size: int = 32, layers: int = 2, seed: int = 0,
                     extra_corpus: tuple[str, ...] = (), vocab_size: int = 320) -> Path:
    """Write a random-weight ``LlamaForCausalLM`` (~30k parameters) and its tokenizer to ``folder``; the tokenizer's
    byte-level BPE is trained on a small corpus (plus ``extra_corpus``) up to ``vocab_size`` entries."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    backend.train_from_iterator(_CORPUS + list(extra_corpus) * 20, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_reward_model(folder: Path, *, seed: int = 1) -> Path:
    """Write a random-weight ``LlamaForSequenceClassification`` with one label (a reward model, as TRL loads one)
    and the tiny tokenizer to ``folder``."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    folder = Path(folder)
    base = build_tiny_model(folder / "base", seed=seed)
    config = LlamaConfig.from_pretrained(base)
    config.num_labels = 1
    torch.manual_seed(seed)
    LlamaForSequenceClassification(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(base).save_pretrained(folder)
    return folder


#: The question the tool-calling tiny model learned to answer with the library's calculator
#: (:func:`grpo_core.tools.library.calculator`), its system prompt, the call and its final answer.
TOOL_QUESTION = "What is 6 * 7?"
TOOL_SYSTEM = "Use the tools."
TOOL_EXPRESSION = "6 * 7"
TOOL_ANSWER = "The answer is 42."


def build_tiny_tool_model(folder: Path, *, steps: int = 400, seed: int = 0) -> Path:
    """The tiny Llama of :func:`build_tiny_model` with TRL's Qwen2.5 chat template (it renders tools and tool calls;
    TRL's ``supports_tool_calling`` accepts it and ``add_response_schema`` parses its calls), trained for ``steps``
    supervised steps on the two turns TRL renders for a one-tool conversation: the user's question with the
    library's ``calculator`` tool in the prompt -> the assistant's ``<tool_call>`` for
    ``calculator(expression="6 * 7")``; then, with the tool's result "42" appended, -> :data:`TOOL_ANSWER`. Sampled at temperature 1 it calls the tool most of the time and
    answers after the result (a few seconds on a CPU)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    from grpo_core.tools.library import calculator

    folder = Path(folder)
    call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": TOOL_EXPRESSION}}}
    user = [{"role": "system", "content": TOOL_SYSTEM}, {"role": "user", "content": TOOL_QUESTION}]
    with_call = user + [{"role": "assistant", "content": "", "tool_calls": [call]}]
    with_result = with_call + [{"role": "tool", "name": "calculator", "content": "42"}]
    final = with_result + [{"role": "assistant", "content": TOOL_ANSWER}]
    # The tokenizer learns the rendered conversation's pieces, so that a prompt with the tool's schema is short.
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from transformers.utils import get_json_schema

    render = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(qwen2_5_chat_template)
    rendered = render.render(messages=final, tools=[get_json_schema(calculator)], add_generation_prompt=False)
    build_tiny_model(folder, hidden_size=64, seed=seed, extra_corpus=(rendered,), vocab_size=800)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.chat_template = qwen2_5_chat_template
    model = AutoModelForCausalLM.from_pretrained(folder)
    examples = []
    for context, full in ((user, with_call), (with_result, final)):
        prefix = tokenizer.apply_chat_template(context, tools=[calculator], add_generation_prompt=True, tokenize=False)
        text = tokenizer.apply_chat_template(full, tools=[calculator], tokenize=False).rstrip("\n")
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        start = len(tokenizer(prefix, add_special_tokens=False)["input_ids"])
        labels = [-100] * start + ids[start:]
        examples.append((torch.tensor([ids]), torch.tensor([labels])))
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        ids, labels = examples[step % len(examples)]
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


#: The tiny VLM's chat template: ChatML, an image block rendered as the processor's ``<image>`` placeholder.
VLM_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ '<image>' }}{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def build_tiny_vlm(folder: Path, *, seed: int = 0) -> Path:
    """Write a random-weight ``LlavaForConditionalGeneration`` (a one-layer CLIP vision tower on 28 x 28 images in
    14 x 14 patches: 4 image tokens; the tiny Llama as language model; ~60k parameters) and its ``LlavaProcessor``
    (the PIL CLIP image processor, the tiny tokenizer with an ``<image>`` token, :data:`VLM_TEMPLATE`) to
    ``folder``. LLaVA is one of the VLM architectures TRL's ``GRPOTrainer`` trains; its processor needs no
    torchvision (Qwen2-VL's needs its video processor)."""
    import torch
    from transformers import AutoTokenizer, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    folder = Path(folder)
    build_tiny_model(folder / "text", seed=seed)
    tokenizer = AutoTokenizer.from_pretrained(folder / "text")
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    tokenizer.chat_template = VLM_TEMPLATE
    images = CLIPImageProcessorPil(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
    processor = LlavaProcessor(image_processor=images, tokenizer=tokenizer, chat_template=VLM_TEMPLATE,
                               patch_size=14, vision_feature_select_strategy="default", num_additional_image_tokens=1)
    torch.manual_seed(seed)
    config = LlavaConfig(
        text_config={"model_type": "llama", "vocab_size": len(tokenizer), "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                     "max_position_embeddings": 1024, "bos_token_id": tokenizer.bos_token_id,
                     "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id,
                     "tie_word_embeddings": True},
        vision_config={"model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                       "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 28, "patch_size": 14,
                       "projection_dim": 32},
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"), vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    target = folder / "vlm"
    LlavaForConditionalGeneration(config).save_pretrained(target)
    processor.save_pretrained(target)
    return target
