"""Multi-turn rollouts outside training (the try-out bench and the preflight), with TRL's own tool loop.

A run with tools samples each completion as TRL's ``GRPOTrainer`` does (TRL 1.16): the prompt is rendered with the
tools' schemas (``apply_chat_template(tools=...)``), the model's reply is parsed for calls (``parse_response``, with
the response template ``add_response_schema`` gives the chat templates TRL ships), and while a reply calls a tool and
fewer than ``max_tool_calling_iterations`` rounds ran, the tools are called, their results appended as ``tool``
messages (their tokens masked out of training: the tool mask) and the model continues, the whole completion bounded
by ``max_completion_length``. The loop is TRL's own method, ``GRPOTrainer._tool_call_loop``, run on a small stand-in
of the trainer (:class:`_LoopHost`) that generates with ``transformers``' ``generate``; the tool result's tokens come
from TRL's ``_get_tool_suffix_ids``. A change of those private methods in a later TRL shows in this module's tests.

Tools run as in training: the library's (``python`` only in the sandbox), the run's plugins, an environment's public
methods (one instance per rollout, ``reset(**row)`` first, ``get_reward()`` after). Each call runs in a thread
bounded by :data:`CALL_TIMEOUT_S`: a tool that raises or hangs is a failed call (``{"error": ...}`` as TRL records
it), never a stalled job. Worker side (imports torch, transformers and TRL).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Longest a tool call may take in the try-out bench and the preflight, seconds (the library's ``python`` stops
#: itself after 5 s in the sandbox).
CALL_TIMEOUT_S = 30.0


class ToolTimeout(RuntimeError):
    """A tool did not answer within :data:`CALL_TIMEOUT_S`; TRL records it as the failed call's error."""


@dataclass
class Rollout:
    """One sampled completion of a run with tools.

    Attributes:
        messages: the completion as TRL builds it: assistant messages (``tool_calls`` when parsed) and ``tool``
            messages, in order.
        completion_ids: every token after the prompt (the model's and the tool results').
        tool_mask: per token of ``completion_ids``, 1 for the model's, 0 for a tool result's.
        truncated: a single-turn completion ended without an end-of-sequence token; a multi-turn one used up
            ``max_completion_length``.
        environment_reward: ``{environment class: get_reward()}`` when the environment defines it, else empty.
    """

    messages: list[dict[str, Any]]
    completion_ids: list[int]
    tool_mask: list[int]
    truncated: bool
    environment_reward: dict[str, float | None] = field(default_factory=dict)


def bounded_tool(tool: Callable[..., Any], timeout_s: float | None = None, what: str = "the tool") -> Callable[..., Any]:
    """``tool`` called in a daemon thread, raising :class:`ToolTimeout` past ``timeout_s`` and re-raising its own
    errors (TRL turns both into a failed call); its name and signature are kept (TRL looks tools up by
    ``__name__``, and renders the schema from the signature and docstring). An ``async`` tool stays ``async`` (TRL
    awaits it on its event loop), bounded by :func:`asyncio.wait_for`. ``timeout_s`` defaults to
    :data:`CALL_TIMEOUT_S`; ``what`` names the callable in the timeout's message. A call that hangs leaves its
    daemon thread behind: Python cannot stop a thread, only stop waiting for it."""
    timeout_s = CALL_TIMEOUT_S if timeout_s is None else timeout_s

    if inspect.iscoroutinefunction(tool):
        @functools.wraps(tool)
        async def call_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await asyncio.wait_for(tool(*args, **kwargs), timeout_s)
            except asyncio.TimeoutError:
                raise ToolTimeout(f"{what} did not answer within {timeout_s:g} s") from None

        return call_async

    @functools.wraps(tool)
    def call(*args: Any, **kwargs: Any) -> Any:
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["value"] = tool(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                outcome["error"] = exc

        worker = threading.Thread(target=run, name=f"tool-{getattr(tool, '__name__', 'call')}", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            raise ToolTimeout(f"{what} did not answer within {timeout_s:g} s")
        if "error" in outcome:
            error = outcome["error"]
            raise error if isinstance(error, Exception) else RuntimeError(repr(error))
        return outcome.get("value")

    return call


def bounded_environment(factory: Callable[[], Any], timeout_s: float | None = None) -> Callable[[], Any]:
    """TRL's ``environment_factory`` with every public method of the environment bounded by :func:`bounded_tool`
    (``timeout_s``, default :data:`CALL_TIMEOUT_S`): a tool method that hangs or raises is a failed call, and a
    ``reset()`` or ``get_reward()`` that hangs raises :class:`ToolTimeout` naming it (the run fails with that
    reason, never stalls).

    TRL lists an environment's tools on its class (``inspect.getmembers(type(env), inspect.isfunction)``) and names
    its reward after the class, so the bounded methods live on a subclass of the same name and module (no new
    attributes: ``__slots__ = ()``). A class is returned as that subclass; any other factory is wrapped, and each
    instance it makes gets the subclass as its ``__class__`` (an instance whose class cannot be swapped, such as an
    extension type's, is returned as made)."""
    if isinstance(factory, type):
        return _bounded_class(factory, timeout_s)

    @functools.wraps(factory)
    def make() -> Any:
        instance = factory()
        try:
            instance.__class__ = _bounded_class(type(instance), timeout_s)
        except TypeError:
            pass  # a built-in or extension type (or __slots__ that do not fit): its methods run unbounded
        return instance

    return make


def _bounded_class(cls: type, timeout_s: float | None) -> type:
    """The subclass of ``cls`` that :func:`bounded_environment` describes (``cls`` itself when it is one)."""
    if getattr(cls, "__grpo_bounded__", False):
        return cls
    namespace: dict[str, Any] = {"__slots__": (), "__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                 "__doc__": cls.__doc__, "__grpo_bounded__": True}
    for name, function in inspect.getmembers(cls, predicate=inspect.isfunction):
        if not name.startswith("_"):
            what = f"{cls.__name__}.{name}()" if name in ("reset", "get_reward") else f"the tool {name}"
            namespace[name] = bounded_tool(function, timeout_s, what=what)
    return type(cls)(cls.__name__, (cls,), namespace)


def environment_tools(environment: Any) -> list[Callable[..., Any]]:
    """An environment's tools as TRL lists them: the public functions of its class but ``reset`` and
    ``get_reward``, bound to ``environment``."""
    return [getattr(environment, name) for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


def prepare_tool_tokenizer(tokenizer) -> tuple[Any, str | None]:
    """``(tokenizer, chat_template)`` as the training worker and ``GRPOTrainer.__init__`` set them for a run with
    tools: TRL's Qwen2.5 template on a ChatML model whose own cannot render tools, a response template
    added when none is set (``add_response_schema``: TRL's parser of the calls), and TRL's training template when the
    model's is not prefix-preserving (``None``: the model's own).

    Raises:
        ValueError: the template cannot render a tool-calling conversation, or TRL has no parser for it
            (:func:`grpo_core.engine.tool_template.tool_calling_problem`'s sentence).
    """
    from trl.chat_template_utils import (
        add_response_schema,
        get_training_chat_template,
        is_chat_template_prefix_preserving,
    )

    from grpo_core.engine.tool_template import tool_calling_problem, use_tool_chat_template

    use_tool_chat_template(tokenizer)  # as the run will: a ChatML model gets a template that renders tools
    problem = tool_calling_problem(tokenizer)
    if problem:
        raise ValueError(f"tools: {problem}")
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        tokenizer = add_response_schema(tokenizer)
    chat_template = None if is_chat_template_prefix_preserving(tokenizer) else get_training_chat_template(tokenizer)
    return tokenizer, chat_template


class _LoopHost:
    """The parts of a ``GRPOTrainer`` that its ``_tool_call_loop`` and ``_get_tool_suffix_ids`` read, for one group:
    one tool table per rollout, generation through ``generate_turn``, no vLLM, text only."""

    use_vllm = False
    vllm_mode = None
    _is_vlm = False
    async_loop = None
    chat_template_kwargs: dict[str, Any] = {}

    def __init__(self, model, tokenizer, chat_template, tools_per_rollout, schemas, generate_turn, *,
                 max_completion_length: int, max_iterations: int | None) -> None:
        from trl import GRPOTrainer

        self.model = model
        self.processing_class = self._tokenizer = tokenizer
        self.chat_template = chat_template
        self.max_completion_length = max_completion_length
        self.max_tool_calling_iterations = max_iterations if max_iterations is not None else sys.maxsize
        self._sync_tool_dicts = [{tool.__name__: tool for tool in tools} for tools in tools_per_rollout]
        self._async_tool_dicts = [{} for _ in tools_per_rollout]
        self.tools = schemas
        self.environment_factories = None  # every rollout of one prompt renders the same tools: ``self.tools``
        self._generate_single_turn = generate_turn
        self._get_tool_suffix_ids = functools.partial(GRPOTrainer._get_tool_suffix_ids, self)
        self._loop = functools.partial(GRPOTrainer._tool_call_loop, self)


def sample_tool_rollouts(
    model,
    tokenizer,
    prompt: Sequence[Mapping[str, Any]],
    row: Mapping[str, Any],
    *,
    num_rollouts: int,
    tools: Sequence[Callable[..., Any]],
    environment_factory: Callable[[], Any] | None,
    generate: Callable[[list[int], int], list[tuple[list[int], bool]]],
    max_completion_length: int,
    max_iterations: int | None,
    timeout_s: float | None = None,
) -> list[Rollout]:
    """Sample ``num_rollouts`` multi-turn completions of one chat ``prompt`` (see the module docstring).

    Args:
        tokenizer: prepared by :func:`prepare_tool_tokenizer`'s first value.
        prompt: the dataset row's messages (``[{"role", "content"}, ...]``).
        row: the dataset row (``reset(**row)`` of each environment, as TRL passes it).
        tools: the library's and the plugins' tool functions.
        environment_factory: the environment class (TRL's ``environment_factory``), or ``None``.
        generate: ``generate(prompt_ids, n) -> [(new token ids cut at the end token, truncated)] * n``, sampling with
            the run's settings.
        max_completion_length: TRL's bound on the whole completion (model and tool tokens), in tokens.
        max_iterations: ``max_tool_calling_iterations`` (``None``: no limit).
        timeout_s: longest a tool call may take (default :data:`CALL_TIMEOUT_S`); past it the call failed.

    Returns:
        One :class:`Rollout` per completion, in order.

    Raises:
        ValueError: the template cannot carry tools (:func:`prepare_tool_tokenizer`), an environment has no
            ``reset``.
    """
    from trl.chat_template_utils import parse_response

    tokenizer, chat_template = prepare_tool_tokenizer(tokenizer)
    environments = [environment_factory() for _ in range(num_rollouts)] if environment_factory else []
    if environments and not callable(getattr(environments[0], "reset", None)):
        raise ValueError("environment: the class must define reset() (TRL's environment_factory protocol)")
    prompts = [copy.deepcopy(list(prompt)) for _ in range(num_rollouts)]
    for index, environment in enumerate(environments):
        observation = environment.reset(**dict(row))
        if isinstance(observation, str):  # TRL appends what reset() returns to the last prompt message
            prompts[index][-1] = {**prompts[index][-1], "content": str(prompts[index][-1]["content"]) + observation}
    own = [list(tools) + (environment_tools(environments[i]) if environments else []) for i in range(num_rollouts)]
    schemas = own[0]  # the functions whose signatures and docstrings TRL renders (every rollout's are alike)

    def generate_turn(prompt_ids, _images, _fields, num_generations, has_tool_images=False):
        return [new_ids for one in prompt_ids for new_ids, _ in generate(list(one), num_generations)], None

    prompt_ids = []
    for messages in prompts:
        rendered = tokenizer.apply_chat_template(messages, tools=schemas or None, chat_template=chat_template,
                                                 add_generation_prompt=True, tokenize=True, return_dict=True)
        ids = rendered["input_ids"]
        prompt_ids.append(list(ids[0] if ids and isinstance(ids[0], list) else ids))
    first = generate(prompt_ids[0], num_rollouts)  # one prompt: the G rollouts sampled together, as TRL does
    completion_ids = [ids for ids, _ in first]
    ended_cut = [cut for _, cut in first]
    completions = [[parse_response(tokenizer, ids, prefix=prompt_ids[i], tools=schemas)]
                   for i, ids in enumerate(completion_ids)]
    host = _LoopHost(model, tokenizer, chat_template, [[bounded_tool(t, timeout_s) for t in tools] for tools in own],
                     schemas, generate_turn, max_completion_length=max_completion_length,
                     max_iterations=max_iterations)
    tool_mask, completions, completion_ids, _, _, _, _ = host._loop(
        prompts, prompt_ids, completion_ids, completions, None, None, {})
    rollouts = []
    for index in range(num_rollouts):
        reward: dict[str, float | None] = {}
        if environments and callable(getattr(type(environments[index]), "get_reward", None)):
            value = environments[index].get_reward()
            reward[type(environments[index]).__name__] = None if value is None else float(value)
        single = len(completions[index]) == 1
        rollouts.append(Rollout(messages=completions[index], completion_ids=list(completion_ids[index]),
                                tool_mask=list(tool_mask[index]), environment_reward=reward,
                                truncated=ended_cut[index] if single
                                else len(completion_ids[index]) >= max_completion_length))
    return rollouts


def with_environment_rewards(score, rollouts: Sequence[Rollout], scale_rewards: str | bool = "group"):
    """``score`` (a :class:`grpo_core.rewards.compose.GroupScore` of ``rollouts``) with each environment's reward
    added as TRL adds it: one more reward function named after the environment class, weight 1, its ``None`` left
    out; totals and group advantages computed again (``sum_then_normalize``, as
    :func:`grpo_core.rewards.compose.score_group`). ``score`` itself when no rollout has an environment reward."""
    import math
    import statistics

    from grpo_core.rewards.compose import GroupScore

    names = list(dict.fromkeys(name for rollout in rollouts for name in rollout.environment_reward))
    if not names:
        return score
    rewards = [list(values) for values in score.rewards]
    totals = [math.nan if total is None else float(total) for total in score.total]
    for name in names:
        values = [rollout.environment_reward.get(name) for rollout in rollouts]
        rewards.append(values)
        for index, value in enumerate(values):
            if value is not None and math.isfinite(value):
                totals[index] = value if math.isnan(totals[index]) else totals[index] + value
    present = [t for t in totals if not math.isnan(t)]
    mean = statistics.fmean(present) if present else math.nan
    std = statistics.stdev(present) if len(present) > 1 else (0.0 if len(totals) == 1 else math.nan)
    scale = {True: "group", False: "none"}.get(scale_rewards, scale_rewards)  # type: ignore[call-overload]
    advantages = []
    for total in totals:
        advantage = total - mean
        if scale != "none":
            advantage = advantage / (std + 1e-4)
        advantages.append(0.0 if math.isnan(advantage) else advantage)
    return GroupScore(names=[*score.names, *names], rewards=rewards,
                      total=[None if math.isnan(t) else t for t in totals], advantages=advantages)


def tool_statistics(rollouts: Sequence[Rollout]) -> tuple[int, int]:
    """``(tool calls, failed calls)`` of ``rollouts``, counted as TRL counts them for ``tools/call_frequency`` and
    ``tools/failure_frequency``: every executed call, and each whose result is an error."""
    from grpo_core.tools.turns import is_error_result

    results = [m for rollout in rollouts for m in rollout.messages if m.get("role") == "tool"]
    return len(results), sum(1 for m in results if is_error_result(m.get("content")))
