"""Prompts as the model gets them, and their lengths against its context, from the tokenizer files only.

The web process may import this module: it reads a model folder's ``tokenizer_config.json`` (or
``chat_template.jinja``), ``tokenizer.json`` and ``config.json`` with the ``tokenizers`` package, never transformers
or torch; chat templates are rendered in a bounded child process (:mod:`grpo_core.models.bounded_template`).

* :func:`model_text_folder` finds the folder holding those files for a run's ``model`` field: a local folder as
  is; the packaged SmolLM2 GGUF's converted folder in the model cache (``<cache>/<gguf stem>-<sha256[:16]>``, as
  :func:`grpo_core.engine.policy_model.convert_gguf` names it), once converted; ``None`` otherwise (hub ids).
* :func:`model_prompt_text` renders a prompt as TRL hands it to the model: a text prompt as is, a chat prompt
  through the model's chat template with the generation prompt added (transformers'
  ``render_jinja_template``, in ``transformers/utils/chat_template_utils.py``, compiles the template the same way);
  :func:`render_chat_prompts` renders many at once (one child).
* :func:`run_model_text` gives the model's text with the chat template *the run* renders prompts with: for a run
  with tools whose model's own template cannot render a tool-calling conversation (TRL's ``supports_tool_calling``,
  asked the same way in the bounded child) and is ChatML, TRL's Qwen2.5 template (:data:`CHATML_TOOL_TEMPLATE`, read
  from the installed TRL's ``chat_templates/`` folder without importing TRL), as the worker sets it
  (:func:`grpo_core.engine.tool_template.use_tool_chat_template`); otherwise the model's own.
* :func:`check_prompt_lengths` counts every prompt's tokens (``add_special_tokens=False``, as TRL tokenizes the
  rendered prompts), the run's tools rendered into it (``tools=``, as TRL's ``apply_chat_template(..., tools=)``)
  and earlier turns' ``tool_calls`` as the template writes them, and lists the rows whose prompt plus
  ``max_completion_length`` exceeds the model's ``max_position_embeddings``; :class:`PromptTooLongError` carries that
  list in its message.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from grpo_core.models import bounded_template
from grpo_core.models.source import ModelSourceError, describe_model
from grpo_core.models.vision import image_tokens, most_images, read_json_object

NAMED_LONGEST = 5
"""How many of the longest prompts a message names."""
#: The template a run with tools gets on a ChatML model whose own template cannot render tools, as the Launch tab and
#: the logs name it (set by :func:`grpo_core.engine.tool_template.use_tool_chat_template`).
CHATML_TOOL_TEMPLATE = "TRL's Qwen2.5 chat template (trl/chat_templates/qwen2_5.jinja)"
_CHATML_TOKENS = ("<|im_start|>", "<|im_end|>")
_SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")


class PromptTooLongError(ValueError):
    """Prompts that leave no room for ``max_completion_length`` in the model's context; ``str()`` names the rows,
    their token counts and the limit. ``check`` is the :class:`PromptLengthCheck`."""

    def __init__(self, check: PromptLengthCheck) -> None:
        super().__init__(check.message())
        self.check = check


@dataclass(frozen=True)
class ModelText:
    """What a model folder says about text: its chat template, special tokens and context length.

    Attributes:
        folder: the model folder (holds ``tokenizer.json``).
        chat_template: the Jinja chat template, or ``None`` when the folder has none.
        special_tokens: ``{"bos_token": "<|im_start|>", ...}``, as the template sees them.
        max_position_embeddings: the context length in tokens (``config.json``), or ``None`` when not stated.
    """

    folder: Path
    chat_template: str | None
    special_tokens: dict[str, str] = field(default_factory=dict)
    max_position_embeddings: int | None = None


@dataclass(frozen=True)
class PromptLength:
    """One prompt's length: ``row_index`` (0-based row of the run's dataset) and its ``tokens``."""

    row_index: int
    tokens: int


@dataclass(frozen=True)
class PromptLengthCheck:
    """The prompt lengths of a dataset against a model's context.

    Attributes:
        num_rows: prompts counted.
        context: the model's ``max_position_embeddings`` in tokens (``None``: not stated, nothing is too long).
        max_completion_length: tokens kept free for the completion.
        longest: the :data:`NAMED_LONGEST` longest prompts, longest first.
        too_long: every prompt with ``tokens + max_completion_length > context``, longest first.
    """

    num_rows: int
    context: int | None
    max_completion_length: int
    longest: list[PromptLength]
    too_long: list[PromptLength]

    @property
    def prompt_budget(self) -> int | None:
        """Tokens left for a prompt: ``context - max_completion_length`` (``None`` without a context)."""
        return None if self.context is None else self.context - self.max_completion_length

    def message(self) -> str:
        """One paragraph for the user: how many prompts are too long, the limit, and the longest rows."""
        if not self.too_long:
            top = self.longest[0].tokens if self.longest else 0
            return f"all {self.num_rows} prompts fit: the longest has {top:,} tokens (limit {self.prompt_budget})"
        named = ", ".join(f"row {p.row_index}: {p.tokens:,} tokens" for p in self.too_long[:NAMED_LONGEST])
        more = f" and {len(self.too_long) - NAMED_LONGEST} more" if len(self.too_long) > NAMED_LONGEST else ""
        return (
            f"{len(self.too_long)} of {self.num_rows} prompts are too long for the model: its context is "
            f"{self.context:,} tokens (max_position_embeddings) and max_completion_length = "
            f"{self.max_completion_length} leaves {max(self.prompt_budget or 0, 0):,} tokens for a prompt; "
            f"{named}{more} (rows numbered from 0). Shorten or drop those rows, or lower max_completion_length."
        )


# ------------------------------------------------------------------------------------------------ model files
def model_text_folder(model: str, model_cache_dir: Path | None) -> Path | None:
    """The folder holding ``model``'s tokenizer files, or ``None`` when none is on disk yet (a GGUF not yet
    converted, a hub id, an unknown model); never downloads or converts anything."""
    try:
        source = describe_model(model)
    except ModelSourceError:
        return None
    if source.kind == "folder":
        folder = Path(source.location)
    elif source.kind == "gguf" and model_cache_dir is not None:
        from grpo_core.models.identity import HashCache

        gguf = Path(source.location)
        try:
            folder = Path(model_cache_dir) / f"{gguf.stem}-{HashCache(model_cache_dir).sha256(gguf)[:16]}"
        except OSError:
            return None
    else:
        return None
    return folder if (folder / "tokenizer.json").is_file() else None


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):  # a saved AddedToken
        return value["content"]
    return None


def read_model_text(folder: str | Path) -> ModelText:
    """Read a model folder's chat template (``chat_template.jinja``, else ``tokenizer_config.json``'s
    ``chat_template``, the ``"default"`` one of a named list), special tokens and ``max_position_embeddings``
    (also looked up in ``text_config``, and as ``n_positions`` / ``max_sequence_length``)."""
    folder = Path(folder)
    tokenizer_config = read_json_object(folder / "tokenizer_config.json")
    template: Any = None
    jinja_file = folder / "chat_template.jinja"
    if jinja_file.is_file():  # read no more than a template may be (a huge file is refused when rendered)
        with open(jinja_file, encoding="utf-8", errors="replace") as handle:
            template = handle.read(bounded_template.MAX_TEMPLATE_CHARS + 1)
    else:
        template = tokenizer_config.get("chat_template")
        if isinstance(template, list):
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default") or next(iter(named.values()), None)
    specials = {k: text for k in _SPECIAL_TOKEN_KEYS if (text := _token_text(tokenizer_config.get(k))) is not None}
    config = read_json_object(folder / "config.json")
    context = None
    for holder in (config, config.get("text_config") or {}):
        for key in ("max_position_embeddings", "n_positions", "max_sequence_length"):
            if isinstance(holder, dict) and isinstance(holder.get(key), int) and holder[key] > 0:
                context = holder[key]
                break
        if context is not None:
            break
    return ModelText(
        folder=folder,
        chat_template=template if isinstance(template, str) else None,
        special_tokens=specials,
        max_position_embeddings=context,
    )


# -------------------------------------------------------------------------------------------- chat template
def render_chat_prompts(prompts: Sequence[Sequence[Mapping[str, Any]]], model_text: ModelText, *,
                        tools: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    """Each message list of ``prompts`` through the model's chat template, with the generation prompt added (as TRL
    renders a chat prompt before generating), in a bounded child process
    (:func:`grpo_core.models.bounded_template.render_chat_prompts`: a template is code a model folder brings).
    ``tools``: the run's tools as JSON schemas, rendered as TRL renders them (``None``: none).

    Raises:
        ValueError: the model has no chat template, the template cannot be rendered within its bounds, or it refuses
            a prompt (its message).
    """
    if model_text.chat_template is None:
        raise ValueError(f"the model in {model_text.folder} has no chat template; use text prompts")
    results = bounded_template.render_chat_prompts(model_text.chat_template, prompts, model_text.special_tokens,
                                                   tools=tools)
    for result in results:
        if isinstance(result, Exception):
            raise result
    return [str(result) for result in results]


def render_chat_prompt(messages: Sequence[Mapping[str, Any]], model_text: ModelText) -> str:
    """One prompt through :func:`render_chat_prompts`.

    Raises:
        ValueError: as :func:`render_chat_prompts`.
    """
    return render_chat_prompts([messages], model_text)[0]


def model_prompt_text(prompt: str | Sequence[Mapping[str, Any]], model_text: ModelText) -> str:
    """The text the model reads for ``prompt``: text as is, a message list through the chat template.

    Raises:
        ValueError: as :func:`render_chat_prompt`.
    """
    return prompt if isinstance(prompt, str) else render_chat_prompt(prompt, model_text)


def preview_model_prompts(
    rows: Sequence[Mapping[str, Any]], model: str, model_cache_dir: Path | None, limit: int = 3
) -> tuple[list[str], str | None]:
    """The first ``limit`` prompts exactly as ``model`` gets them, and a note when that could not be done (the
    model's tokenizer is not on disk yet, or it has no chat template): then chat prompts are shown as JSON."""
    folder = model_text_folder(model, model_cache_dir)
    model_text = read_model_text(folder) if folder is not None else None
    shown, note = [], None
    for row in rows[:limit]:
        prompt = row.get("prompt")
        if isinstance(prompt, str):
            shown.append(prompt)
            continue
        if model_text is not None and model_text.chat_template is not None and note is None:
            try:
                shown.append(render_chat_prompt(prompt, model_text))
                continue
            except ValueError as exc:
                note = str(exc)
        else:
            note = (f"{model}'s chat template is not on disk yet (a GGUF is converted at its first run): "
                    "chat prompts are shown as messages")
        shown.append(json.dumps(prompt, ensure_ascii=False, indent=1))
    return shown, note


# ------------------------------------------------------------------------------------ the run's template
def trl_chat_template(file_name: str) -> str | None:
    """The text of ``trl/chat_templates/<file_name>`` in the installed TRL, read as a file (TRL is never imported in
    the web process), or ``None`` when TRL or the file is missing."""
    try:
        spec = importlib.util.find_spec("trl")  # finds the package's folder; runs none of its code
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / "chat_templates" / file_name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return None


def renders_tool_calls(model_text: ModelText) -> bool:
    """Whether the model's chat template renders a whole tool-calling conversation (user -> assistant with
    ``tool_calls`` -> tool: the call's name and arguments and the tool's content all appear), the test of TRL's
    ``supports_tool_calling`` (``trl/chat_template_utils.py``), rendered in the bounded child."""
    if model_text.chat_template is None:
        return False
    sentinels = ("tool_name_a8f3e2b1", "tool_arg_key_b9d4f5c2", "tool_arg_val_d6e7a9f3", "tool_content_c4f9a8e2")
    name, key, value, content = sentinels
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": name, "arguments": {key: value}}}]},
                {"role": "tool", "name": name, "content": content}]
    try:
        rendered = bounded_template.render_chat_prompts(model_text.chat_template, [messages],
                                                        model_text.special_tokens, add_generation_prompt=False)[0]
    except bounded_template.TemplateError:
        return False
    return isinstance(rendered, str) and all(sentinel in rendered for sentinel in sentinels)


def _is_chatml(model_text: ModelText) -> bool:
    """Whether the template writes ChatML turns and the tokenizer has both ChatML markers as single tokens (as
    :func:`grpo_core.engine.tool_template.use_tool_chat_template` asks)."""
    template = model_text.chat_template or ""
    if not all(token in template for token in _CHATML_TOKENS):
        return False
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(model_text.folder / "tokenizer.json"))
    except Exception:  # noqa: BLE001 - any unreadable tokenizer file: not ChatML as far as we can tell
        return False
    return all(tokenizer.token_to_id(token) is not None for token in _CHATML_TOKENS)


def run_model_text(model_text: ModelText, uses_tools: bool) -> tuple[ModelText, str]:
    """``model_text`` with the chat template the run renders its prompts with, and that template's name for the user.

    Without tools TRL renders with the model's own template. With tools (``tools``, ``tool_plugins`` or an
    ``environment``), a ChatML model whose own template cannot render a tool-calling conversation gets TRL's Qwen2.5
    template, as the worker sets it (:func:`grpo_core.engine.tool_template.use_tool_chat_template`); a template that
    renders tools is kept (TRL's prefix-preserving training template, when it swaps one in, renders a prompt's turns
    the same way).
    """
    if not uses_tools or renders_tool_calls(model_text) or not _is_chatml(model_text):
        return model_text, "the model's chat template"
    qwen = trl_chat_template("qwen2_5.jinja")
    if qwen is None:
        return model_text, "the model's chat template (TRL's Qwen2.5 template, which the run sets, was not found)"
    return replace(model_text, chat_template=qwen), CHATML_TOOL_TEMPLATE


# ------------------------------------------------------------------------------------------------ lengths
def check_prompt_lengths(
    rows: Sequence[Mapping[str, Any]], model_text: ModelText, max_completion_length: int, *,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> PromptLengthCheck:
    """Count each row's prompt tokens as the model gets them and find those that do not fit.

    Args:
        rows: the run's rows (``row["prompt"]`` text or messages); a row's position is its ``row_index``; a row's
            ``images`` count :func:`grpo_core.models.vision.image_tokens` each.
        model_text: from :func:`read_model_text` (for a run, :func:`run_model_text`: the template the run uses); its
            folder must hold ``tokenizer.json``.
        max_completion_length: tokens the completion may take.
        tools: the run's tools as JSON schemas, rendered into every chat prompt as TRL renders them.

    Raises:
        ValueError: a chat prompt the template cannot render; OSError / Exception from ``tokenizers`` when
            ``tokenizer.json`` cannot be read.
    """
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_text.folder / "tokenizer.json"))
    chats = [row["prompt"] for row in rows if not isinstance(row["prompt"], str)]
    rendered = iter(render_chat_prompts(chats, model_text, tools=tools) if chats else [])
    texts = [row["prompt"] if isinstance(row["prompt"], str) else next(rendered) for row in rows]
    counts = [len(encoding.ids) for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)]
    if most_images(rows):  # each image becomes its tokens in the prompt (grpo_core.models.vision)
        per_image = image_tokens(model_text.folder)
        counts = [n + per_image * len(row.get("images") or []) for n, row in zip(counts, rows, strict=True)]
    ranked = sorted((PromptLength(i, n) for i, n in enumerate(counts)), key=lambda p: (-p.tokens, p.row_index))
    context = model_text.max_position_embeddings
    too_long = [] if context is None else [p for p in ranked if p.tokens + max_completion_length > context]
    return PromptLengthCheck(
        num_rows=len(rows),
        context=context,
        max_completion_length=max_completion_length,
        longest=ranked[:NAMED_LONGEST],
        too_long=too_long,
    )


def require_prompts_fit(
    rows: Sequence[Mapping[str, Any]], model_folder: str | Path, max_completion_length: int, *,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> PromptLengthCheck:
    """:func:`check_prompt_lengths` for the model in ``model_folder``, with the template the run uses
    (:func:`run_model_text`) and ``tools`` rendered; raises when any prompt is too long.

    Args:
        tools: the run's tools as JSON schemas; ``None`` for a run without tools. An empty list is a run with tools
            whose schemas are not known here (an environment's): the template is still the run's.

    Raises:
        PromptTooLongError: some prompts do not fit (the message names them, their token counts and the limit).
    """
    model_text, _ = run_model_text(read_model_text(model_folder), uses_tools=tools is not None)
    check = check_prompt_lengths(rows, model_text, max_completion_length, tools=tools)
    if check.too_long:
        raise PromptTooLongError(check)
    return check
