"""What the recorder takes from TRL to build a step's groups: the reward function tap and TRL's per-completion buffers.

* :class:`RolloutTap` wraps the first reward function; TRL calls it once per generation batch with the
  ``completion_ids`` and the dataset columns, and it passes each completion's token count, truncation flag, dataset
  row (and the columns asked to be kept) to TRL's ``log_extra`` hook, which gathers them across processes in the same
  order as TRL's own buffers. In a user's script (``record_images``) it also hands on the row's pictures (TRL's
  ``image`` / ``images`` columns) by a token per picture, kept on a :class:`PictureShelf` until the writer thread
  copies them (:func:`grpo_core.runs.script_images.recorded_copy`).
* :func:`groups_from_trl_logs` cuts those buffers (``GRPOTrainer._logs``: prompts, completions, per-function rewards,
  **TRL's advantages**) into :class:`~storage.GroupRecord` groups of ``num_generations``; :func:`snapshot_of_trl_logs`
  and :func:`tail_of_trl_logs` copy them for the recorder's writer thread.

Used by :class:`grpo_core.engine.recorder.RunRecorder` (the dashboard's worker and
:class:`grpo_core.integrations.DashboardCallback` in a user's own script).
"""

from __future__ import annotations

import json
import math
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from grpo_core.datasets.rows import ROW_INDEX_COLUMN, prompt_key, prompt_text
from grpo_core.engine.policy_model import EndOfSequence
from grpo_core.rewards.compose import REWARD_ERRORS_KEY, REWARD_ERRORS_PREFIX
from grpo_core.rewards.logged import REWARD_COLUMNS_KEY, is_reward_column
from grpo_core.rewards.registry import completion_text
from grpo_core.runs.script_images import MAX_GROUP_IMAGES, recorded_copy
from grpo_core.tools.turns import final_assistant_text, mask_spans, turns_of_completion
from storage import CompletionRecord, GroupRecord
from storage.run_images import GROUP_IMAGES_KEY

_EXTRA_TOKENS = "_num_tokens"
_EXTRA_TRUNCATED = "_truncated"
#: The ``log_extra`` column of each completion's tool mask, as run-length spans (:func:`grpo_core.tools.turns.mask_spans`).
_EXTRA_TOOL_MASK = "_tool_mask"
#: Prefix of the ``log_extra`` columns holding a kept dataset column (``keep_columns``), one value per completion.
_EXTRA_COLUMN_PREFIX = "_column/"
#: The ``log_extra`` column of each completion's picture tokens (:class:`PictureShelf`), a list or ``None``.
_EXTRA_IMAGES = "_images"
#: TRL's dataset columns holding a row's pictures (``GRPOTrainer._generate_and_score_completions``).
_PICTURE_COLUMNS = ("images", "image")


class PictureShelf:
    """The pictures of the batches being scored, by token, for the writer thread to copy: the tap puts each
    completion's pictures here (:meth:`keep`) and logs the tokens, the writer thread turns the tokens of each group's
    first completion into PNG copies (:meth:`copy`). Emptied when a training batch is scored (the writer has
    recorded the previous one by then: the tap waits for it), so it holds one generation's pictures, which TRL holds
    anyway. A token from another process (``accelerate launch``) is not on this shelf: its pictures are not recorded.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pictures: dict[str, Any] = {}
        self._copies: dict[int, tuple[str, bytes] | None] = {}
        self._count = 0
        # tokens of other processes (gathered by TRL) must never name a picture of this one
        self._prefix = uuid.uuid4().hex[:12]

    def keep(self, cell: Any) -> list[str] | None:
        """Tokens for one completion's pictures (a picture or a list of them; at most
        :data:`~grpo_core.runs.script_images.MAX_GROUP_IMAGES`); ``None`` without any."""
        pictures = list(cell) if isinstance(cell, (list, tuple)) else ([] if cell is None else [cell])
        tokens = []
        with self._lock:
            for picture in pictures[:MAX_GROUP_IMAGES]:
                self._count += 1
                token = f"{self._prefix}-{self._count}"
                self._pictures[token] = picture
                tokens.append(token)
        return tokens or None

    def clear(self) -> None:
        with self._lock:
            self._pictures.clear()
            self._copies.clear()

    def copy(self, token: Any) -> tuple[str, bytes] | None:
        """The stored name and PNG bytes of the picture of ``token`` (one copy per picture object), or ``None``
        (unknown token, not a picture in memory, over a bound)."""
        with self._lock:
            picture = self._pictures.get(token) if isinstance(token, str) else None
            if picture is None:
                return None
            key = id(picture)
            if key in self._copies:
                return self._copies[key]
        made = recorded_copy(picture)
        with self._lock:
            if token in self._pictures:  # still the same object: its id cannot have been reused
                self._copies[key] = made
        return made


class RolloutTap:
    """A reward function wrapper that reports each completion's length, truncation and dataset row to TRL.

    Args:
        func: the reward function to wrap; its result is returned unchanged and its ``__name__`` kept.
        end: the model's end tokens (:func:`grpo_core.engine.policy_model.end_of_sequence_ids`); a completion that ends
            otherwise was truncated at ``max_completion_length`` (TRL's own ``completions/clipped_ratio`` rule).
        max_completion_length: the generation limit, in tokens.
        keep_columns: dataset columns whose value each completion's row has, to be kept with its group (a user's
            own script has no dashboard dataset to look them up in); a column the batch lacks is skipped.
        record_images: put each completion's pictures (TRL's ``images`` / ``image`` column) on :attr:`pictures`
            and log their tokens (a user's script: its dataset is not the dashboard's).
    """

    def __init__(self, func, end: EndOfSequence, max_completion_length: int,
                 keep_columns: Sequence[str] = (), record_images: bool = False) -> None:
        self.func = func
        self.pictures: PictureShelf | None = PictureShelf() if record_images else None
        self.keep_columns = tuple(keep_columns)
        self.__name__ = getattr(func, "__name__", type(func).__name__)
        self.end = end
        self.max_completion_length = max_completion_length
        self.calls = 0
        self.eval_completions = 0
        self.in_eval: Callable[[], bool] = lambda: False
        self.before_scoring: Callable[[], None] = lambda: None
        #: TRL's ``tool_mask`` of the batch being scored (one list of 0/1 per completion of this process), set by
        #: :func:`tap_tool_mask` when the trainer generated it; ``None``: a single-turn batch.
        self.tool_mask: list[list[int]] | None = None

    def __call__(self, completions, **kwargs) -> list[float | None]:
        self.before_scoring()
        if self.pictures is not None and not self.in_eval():
            self.pictures.clear()  # the previous generation is recorded (before_scoring waited for the writer)
        log_extra = kwargs.get("log_extra")
        if log_extra is not None:
            ids = kwargs.get("completion_ids") or [[] for _ in completions]
            rows = kwargs.get(ROW_INDEX_COLUMN) or [None] * len(completions)
            log_extra(ROW_INDEX_COLUMN, list(rows))
            log_extra(_EXTRA_TOKENS, [len(i) for i in ids])
            log_extra(
                _EXTRA_TRUNCATED,
                [self.end.is_truncated(i) for i in ids],
            )
            mask, self.tool_mask = self.tool_mask, None
            if mask is not None and len(mask) == len(completions):
                log_extra(_EXTRA_TOOL_MASK, [mask_spans(m) for m in mask])
            for column in self.keep_columns:
                values = kwargs.get(column)
                if isinstance(values, list) and len(values) == len(completions):
                    log_extra(_EXTRA_COLUMN_PREFIX + column, [_jsonable(v) for v in values])
            if self.pictures is not None:
                cells = next((kwargs[c] for c in _PICTURE_COLUMNS if isinstance(kwargs.get(c), list)), None)
                if cells is not None and len(cells) == len(completions):
                    log_extra(_EXTRA_IMAGES, [self.pictures.keep(cell) for cell in cells])
        # ``calls`` counts training generations only; an evaluation's completions are counted apart, so that the
        # recorder can cut them off the tail of TRL's buffers as eval groups.
        if self.in_eval():
            self.eval_completions += len(completions)
        else:
            self.calls += 1
        return self.func(completions, **kwargs)


def tap_tool_mask(trainer, tap: RolloutTap) -> None:
    """Have ``tap`` see TRL's tool mask: wrap the trainer's ``_generate`` (TRL 1.16 returns ``(prompt_ids,
    completion_ids, tool_mask, completions, ...)``; ``tool_mask`` is ``None`` without tools, else one list per
    completion, 1 for a token the model wrote and 0 for a tool result's, as ``rollout_func``'s ``env_mask``), whose
    result the scoring of the same batch reads next. A trainer without ``_generate`` is left as it is."""
    generate = getattr(trainer, "_generate", None)
    if generate is None or getattr(generate, "_grpo_dashboard_tap", None) is tap:
        return

    def _generate(prompts):
        result = generate(prompts)
        try:
            mask = result[2]
        except (TypeError, IndexError, KeyError):
            mask = None
        tap.tool_mask = [list(m) for m in mask] if isinstance(mask, list) else None
        return result

    _generate._grpo_dashboard_tap = tap
    trainer._generate = _generate


def environment_reward_names(trainer) -> list[str]:
    """The reward functions TRL added for the environments that own their reward (``get_reward``): TRL names each
    after its environment's class (``GRPOTrainer.__init__``, ``environment_factory``)."""
    pool = getattr(trainer, "_environment_pool", None) or {}
    names = {type(instances[0]).__name__ for instances in pool.values() if instances
             and callable(getattr(instances[0], "get_reward", None))}
    return [name for name in getattr(trainer, "reward_func_names", []) if name in names]


def _jsonable(value: Any) -> Any:
    """A dataset cell as a JSON value: numbers, strings, booleans, lists and dicts as they are; anything else
    (a tensor, an image) as its ``str``, cut at 2,000 characters."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)[:2000]


def _nan_to_none(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def groups_from_trl_logs(
    logs: dict[str, Any],
    *,
    step: int,
    num_generations: int,
    reward_names: Sequence[str],
    reward_weights: Sequence[float],
    rows: Sequence[dict[str, Any]] | None = None,
    split: str = "train",
    environment_rewards: Sequence[str] = (),
    pictures: Callable[[Any], tuple[str, bytes] | None] | None = None,
) -> list[GroupRecord]:
    """Cut TRL's latest-generation buffers (``GRPOTrainer._logs``) into groups of ``num_generations``, each marked
    with ``split``.

    ``logs["prompt"]``, ``logs["completion"]``, ``logs["rewards"][name]`` and ``logs["advantages"]`` hold one entry
    per completion of the gathered generation batch, groups contiguous (TRL's ``RepeatSampler`` repeats each prompt
    ``num_generations`` times in a row and rewards are normalised over ``view(-1, num_generations)``).
    The total reward is TRL's ``nansum(reward_i * weight_i)``; NaN where every function returned ``None``.

    A completion with tool calls (TRL's ``tools``/``environment_factory``: a list of assistant and tool messages) is
    recorded as its turns (:func:`grpo_core.tools.turns.turns_of_completion`, each of ``environment_rewards`` as a
    reward turn) with its tool mask, and its ``text`` is its final assistant turn; a single-turn one as before.

    ``pictures`` (:meth:`PictureShelf.copy`) turns the picture tokens the :class:`RolloutTap` logged for a group's
    first completion into PNG copies: the group carries them as :attr:`GroupRecord.images` and names them in
    ``extra[GROUP_IMAGES_KEY]``; its prompt key then counts the names too (the same question about two pictures is
    two prompts).

    Returns:
        One :class:`GroupRecord` per prompt, its ``row_index`` the dataset row's, or where the batch has no row index
        (a user's own script) the prompt text's :func:`~grpo_core.datasets.rows.prompt_key`, so that one prompt's
        groups across steps share one key; ``extra`` holds the dataset row's other columns (from ``rows``, else
        the columns the :class:`RolloutTap` kept, as its first completion's row has them).
    """
    prompts = list(logs["prompt"])
    completions = list(logs["completion"])
    advantages = list(logs["advantages"])
    rewards = {name: list(logs["rewards"].get(name, [])) for name in reward_names}
    extra = logs.get("extra", {})
    row_ids = list(extra.get(ROW_INDEX_COLUMN, []))
    tokens = list(extra.get(_EXTRA_TOKENS, []))
    truncated = list(extra.get(_EXTRA_TRUNCATED, []))
    masks = list(extra.get(_EXTRA_TOOL_MASK, []))
    picture_tokens = list(extra.get(_EXTRA_IMAGES, [])) if pictures is not None else []
    count = min(len(prompts), len(completions), len(advantages))
    groups: list[GroupRecord] = []
    for start in range(0, count - count % num_generations, num_generations):
        members = []
        for offset in range(num_generations):
            i = start + offset
            per_rule = {name: _nan_to_none(values[i]) if i < len(values) else None for name, values in rewards.items()}
            scored = [(v, w) for v, w in zip(per_rule.values(), reward_weights, strict=False) if v is not None]
            total = sum(v * w for v, w in scored) if scored else None
            turns = turns_of_completion(completions[i], {name: per_rule.get(name) for name in environment_rewards})
            members.append(
                CompletionRecord(
                    index=offset,
                    text=completion_text(completions[i]) if turns is None else final_assistant_text(completions[i]),
                    turns=turns,
                    tool_mask=masks[i] if turns is not None and i < len(masks) and isinstance(masks[i], list) else None,
                    rewards=per_rule,
                    total_reward=total,
                    advantage=_nan_to_none(advantages[i]),
                    num_tokens=int(tokens[i]) if i < len(tokens) and tokens[i] is not None else None,
                    truncated=bool(truncated[i]) if i < len(truncated) else False,
                )
            )
        text = prompt_text(prompts[start])
        images = _group_pictures(picture_tokens[start] if start < len(picture_tokens) else None, pictures)
        keyed = text if not images else text + "\n" + " ".join(images)
        row_index = row_ids[start] if start < len(row_ids) and row_ids[start] is not None else prompt_key(keyed)
        row_extra: dict[str, Any] = {}
        if rows is not None and 0 <= row_index < len(rows):
            row_extra = {k: v for k, v in rows[row_index].items() if k not in ("prompt", ROW_INDEX_COLUMN)}
        for column, values in extra.items():
            name = str(column)
            if name.startswith(_EXTRA_COLUMN_PREFIX) and start < len(values):
                row_extra.setdefault(name[len(_EXTRA_COLUMN_PREFIX):], list(values)[start])
        failed = _reward_errors(extra, start, num_generations)
        if failed:
            row_extra[REWARD_ERRORS_KEY] = failed
        logged = _reward_columns(extra, start, num_generations)
        if logged:
            row_extra[REWARD_COLUMNS_KEY] = logged
        if images:
            row_extra[GROUP_IMAGES_KEY] = list(images)
        groups.append(
            GroupRecord(
                step=step,
                row_index=int(row_index),
                prompt=text,
                completions=members,
                extra=row_extra,
                split=split,
                images=images,
            )
        )
    return groups


def _group_pictures(tokens: Any, pictures: Callable[[Any], tuple[str, bytes] | None] | None) -> dict[str, bytes]:
    """``{stored name: PNG bytes}`` of a group's picture tokens, in their order (a picture twice is kept once)."""
    if pictures is None or not isinstance(tokens, list):
        return {}
    found: dict[str, bytes] = {}
    for token in tokens[:MAX_GROUP_IMAGES]:
        made = pictures(token)
        if made is not None:
            found.setdefault(*made)
    return found


def _reward_errors(extra: dict[str, Any], start: int, size: int) -> dict[str, dict[str, str]]:
    """The reward errors of the completions ``start .. start + size - 1`` from TRL's ``extra`` buffers."""
    found: dict[str, dict[str, str]] = {}
    for column, values in extra.items():
        if not str(column).startswith(REWARD_ERRORS_PREFIX):
            continue
        values = list(values)
        for offset in range(size):
            i = start + offset
            if i < len(values) and values[i]:
                found.setdefault(str(offset), {})[str(column)[len(REWARD_ERRORS_PREFIX):]] = str(values[i])
    return found


def _reward_columns(extra: dict[str, Any], start: int, size: int) -> dict[str, dict[str, Any]]:
    """The reward functions' own ``log_extra`` columns (:func:`grpo_core.rewards.logged.is_reward_column`) of the
    completions ``start .. start + size - 1``: ``{completion index (str): {column: value}}`` (:func:`_cell`);
    ``None`` values left out."""
    found: dict[str, dict[str, Any]] = {}
    for column, values in extra.items():
        if not is_reward_column(column):
            continue
        values = list(values)
        for offset in range(size):
            i = start + offset
            if i < len(values) and values[i] is not None:
                found.setdefault(str(offset), {})[str(column)] = _cell(values[i])
    return found


def _cell(value: Any) -> Any:
    """A logged value as stored: a finite number or a boolean as it is, anything else as text of at most 2,000
    characters (a NaN as ``"nan"``: JSON has none)."""
    if isinstance(value, bool) or (isinstance(value, int | float) and math.isfinite(value)):
        return value
    text = value if isinstance(value, str) else json.dumps(_jsonable(value), ensure_ascii=False, default=str)
    return text[:2000]


def tail_of_trl_logs(logs: dict[str, Any], count: int) -> dict[str, Any]:
    """The last ``count`` entries of each of TRL's per-completion buffers (``GRPOTrainer._logs``): the completions
    of the latest eval batch, which TRL appends after the earlier ones."""

    def tail(values) -> list:
        values = list(values)
        return values[len(values) - min(count, len(values)):]

    return {
        "prompt": tail(logs["prompt"]),
        "completion": tail(logs["completion"]),
        "advantages": tail(logs["advantages"]),
        "rewards": {name: tail(values) for name, values in logs["rewards"].items()},
        "extra": {name: tail(values) for name, values in logs.get("extra", {}).items()},
    }


def snapshot_of_trl_logs(logs: dict[str, Any]) -> dict[str, Any]:
    """A copy of TRL's per-completion buffers (``GRPOTrainer._logs``: deques TRL's next generation extends) as plain
    lists, for :func:`groups_from_trl_logs` on another thread. The entries themselves are shared (strings, numbers
    and message lists TRL does not change); a buffer TRL lacks is empty."""
    return {
        "prompt": list(logs.get("prompt", ())),
        "completion": list(logs.get("completion", ())),
        "advantages": list(logs.get("advantages", ())),
        "rewards": {name: list(values) for name, values in logs.get("rewards", {}).items()},
        "extra": {name: list(values) for name, values in logs.get("extra", {}).items()},
    }
