"""What a script's :class:`~grpo_core.integrations.DashboardCallback` sends a served dashboard, and its bounds.

Every request body is JSON, read at most :data:`MAX_BODY_BYTES`, and validated here before anything reaches the store
(the body comes from whoever holds a token: untrusted). Two requests:

* **Create** (``POST /api/v1/runs``, :class:`CreateRun`): the run's name, config, tags, provenance and a
  ``client_key`` the sender chose, so that a create sent again after a lost answer finds the same run.
* **Batch** (``POST /api/v1/runs/{id}/batches``, :class:`Batch`): records numbered ``seq`` = 1, 2, 3, ... in the order
  the script made them. The dashboard applies those after the run's last applied number, in order, and answers with
  the last one applied: a record sent twice is applied once, a gap is refused (the sender resends from the number
  answered). A record is a training step (:class:`StepRecord`: TRL's logged metrics and the step's groups, with
  advantages and token values) or the end of training (:class:`FinishRecord`).

A group may carry its prompt's images (:class:`WireImage`: base64 PNG bytes, at most
:data:`~grpo_core.runs.script_images.MAX_GROUP_IMAGES`); :func:`groups_from_wire` decodes each under bounds
(:func:`grpo_core.runs.script_images.checked_copy`), names it by the SHA-256 of its re-encoded bytes whatever name
the request gave, and keeps in the group's ``extra[GROUP_IMAGES_KEY]`` only the names of images the group itself
carried: a request never names a file, and never another run's image.

A run's config, its provenance and each group's extra columns are held to the bounds of config text
(:data:`JSON_LIMITS`: size, values, nesting), counted before anything walks them; what breaks one is refused (422),
never stored. :func:`step_record` and :func:`groups_from_wire` convert between :class:`storage.GroupRecord` and the wire form.
Imports neither torch nor TRL (the web process validates with it).
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from grpo_core.bounded_parse import DEFAULT_LIMITS, ParseError, check_shape
from grpo_core.runs.script_images import MAX_GROUP_IMAGES, ImageRefused, checked_copy
from grpo_core.tools.turns import MAX_MASK_SPANS, MAX_TURNS, clean_spans, clean_turns
from storage import CompletionRecord, GroupRecord, TokenStats
from storage.run_images import GROUP_IMAGES_KEY, IMAGE_NAME, MAX_IMAGE_BYTES

#: Largest request body, in bytes.
MAX_BODY_BYTES = 32 * 1024 * 1024
#: Most records in one batch request.
MAX_RECORDS = 256
#: Most groups in one step (both splits), completions in one group, tokens in one completion.
MAX_GROUPS = 2048
MAX_COMPLETIONS = 512
MAX_TOKENS = 65536
#: Longest prompt, completion or token piece kept, in characters.
MAX_TEXT = 1_000_000
#: Most metric keys in one step, reward functions per completion.
MAX_METRICS = 2000
#: Most distinct metric names one run recorded over the API keeps, all its steps together (TRL logs about 60; the
#: Runs tab reads every name of the run it shows).
MAX_RUN_METRIC_KEYS = 2000
MAX_REWARDS = 64
#: Most bytes of the pictures one step record carries, its groups' together (before base64): a step with more sends
#: the rest of its groups without pictures, so that it fits in :data:`MAX_BODY_BYTES`.
MAX_STEP_IMAGE_BYTES = 16 * 1024 * 1024
#: Bounds of a run's config, its provenance and a group's extra columns, each: those of config text
#: (:data:`grpo_core.bounded_parse.DEFAULT_LIMITS`: 64 KB of JSON, 10,000 values, 32 levels).
JSON_LIMITS = DEFAULT_LIMITS
#: Largest JSON of a run's config, provenance or a group's extra columns, in characters.
MAX_JSON_CHARS = JSON_LIMITS.max_bytes

Name = Annotated[str, Field(min_length=1, max_length=200)]
Finite = Annotated[float, Field(allow_inf_nan=False)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WireTokenStats(_Strict):
    pieces: list[Annotated[str, Field(max_length=10_000)]] = Field(max_length=MAX_TOKENS)
    logprobs: list[Finite | None] = Field(max_length=MAX_TOKENS)
    kl: list[Finite | None] | None = Field(None, max_length=MAX_TOKENS)
    entropy: list[Finite | None] | None = Field(None, max_length=MAX_TOKENS)


class WireCompletion(_Strict):
    index: int = Field(ge=0, lt=MAX_COMPLETIONS)
    text: str = Field(max_length=MAX_TEXT)
    rewards: dict[Name, Finite | None] = Field(default_factory=dict, max_length=MAX_REWARDS)
    total_reward: Finite | None = None
    advantage: Finite | None = None
    num_tokens: int | None = Field(None, ge=0, le=10_000_000)
    truncated: bool = False
    token_stats: WireTokenStats | None = None
    # A multi-turn completion's turns and tool-mask spans (grpo_core.tools.turns); reduced to their bounded shape.
    turns: list[dict[str, Any]] | None = Field(None, max_length=MAX_TURNS)
    tool_mask: list[list[int]] | None = Field(None, max_length=MAX_MASK_SPANS)

    @field_validator("turns")
    @classmethod
    def _bounded_turns(cls, value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        return clean_turns(value)

    @field_validator("tool_mask")
    @classmethod
    def _bounded_mask(cls, value: list[list[int]] | None) -> list[list[int]] | None:
        if value is not None and clean_spans(value) is None:
            raise ValueError("tool_mask must be spans [[0 or 1, length >= 1], ...]")
        return value


class WireImage(_Strict):
    name: str = Field(pattern=IMAGE_NAME.pattern)
    png: str = Field(min_length=1, max_length=(MAX_IMAGE_BYTES + 2) // 3 * 4)  # base64


class WireGroup(_Strict):
    row_index: int = Field(ge=-1, le=2**31 - 1)
    prompt: str = Field(max_length=MAX_TEXT)
    completions: list[WireCompletion] = Field(min_length=1, max_length=MAX_COMPLETIONS)
    extra: dict[str, Any] = Field(default_factory=dict)
    images: list[WireImage] = Field(default_factory=list, max_length=MAX_GROUP_IMAGES)

    @field_validator("extra")
    @classmethod
    def _bounded_extra(cls, value: dict[str, Any]) -> dict[str, Any]:
        _require_small(value, "a group's extra columns")
        return value


class WireSplit(_Strict):
    split: Literal["train", "eval"]
    groups: list[WireGroup] = Field(max_length=MAX_GROUPS)


class StepRecord(_Strict):
    seq: int = Field(ge=1)
    kind: Literal["step"]
    step: int = Field(ge=0, le=2**31 - 1)
    wall_time: Finite = Field(ge=0)
    metrics: dict[Name, float | None] = Field(default_factory=dict, max_length=MAX_METRICS)
    groups: list[WireSplit] = Field(default_factory=list, max_length=2)


class FinishRecord(_Strict):
    seq: int = Field(ge=1)
    kind: Literal["finish"]
    status: Literal["completed", "cancelled", "failed"]
    error: str | None = Field(None, max_length=20_000)


class Batch(_Strict):
    records: list[Annotated[StepRecord | FinishRecord, Field(discriminator="kind")]] = Field(
        min_length=1, max_length=MAX_RECORDS)

    @field_validator("records")
    @classmethod
    def _consecutive(cls, records: list[StepRecord | FinishRecord]) -> list[StepRecord | FinishRecord]:
        for before, after in zip(records, records[1:], strict=False):
            if after.seq != before.seq + 1:
                raise ValueError(f"records must be numbered consecutively: {before.seq} is followed by {after.seq}")
        return records


class CreateRun(_Strict):
    client_key: str = Field(min_length=8, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    name: str = Field("", max_length=200)
    config: dict[str, Any]
    max_steps: int = Field(0, ge=0, le=10_000_000)
    tags: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(default_factory=list, max_length=32)
    provenance: dict[str, Any] = Field(default_factory=dict)

    @field_validator("config", "provenance")
    @classmethod
    def _bounded(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        _require_small(value, f"the run's {info.field_name}")
        return value


class Progress(_Strict):
    step: int | None = Field(None, ge=0, le=2**31 - 1)
    phase: str | None = Field(None, max_length=200)


def _require_small(value: Any, what: str) -> None:
    """Refuse ``value`` beyond :data:`JSON_LIMITS` (counted without recursion first, so a value nested hundreds deep
    is refused here, never stored to break a later listing).

    Raises:
        ValueError: the message names ``what`` and the limit.
    """
    try:
        check_shape(value, what, JSON_LIMITS)
    except ParseError as exc:
        raise ValueError(str(exc)) from None


def _finite_or_none(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _stats_to_wire(stats: TokenStats | None) -> dict[str, Any] | None:
    if stats is None:
        return None

    def values(seq):
        return None if seq is None else [_finite_or_none(v) for v in seq]

    return {"pieces": list(stats.pieces), "logprobs": values(stats.logprobs), "kl": values(stats.kl),
            "entropy": values(stats.entropy)}


def _wire_images(groups: Sequence[tuple[str, Sequence[GroupRecord]]]) -> dict[int, tuple[dict, list[dict]]]:
    """Each group's extra columns and base64 pictures, by ``id`` of the group, the step's pictures held to
    :data:`MAX_STEP_IMAGE_BYTES` together: a group whose pictures would pass it is sent without them (and without
    their names), so that the step fits in a request."""
    budget = MAX_STEP_IMAGE_BYTES
    out: dict[int, tuple[dict, list[dict]]] = {}
    for _, records in groups:
        for g in records:
            images = list((g.images or {}).items())[:MAX_GROUP_IMAGES]
            size = sum(len(data) for _, data in images)
            if images and size <= budget:
                budget -= size
                out[id(g)] = (g.extra, [{"name": name, "png": base64.b64encode(data).decode("ascii")}
                                        for name, data in images])
            else:
                out[id(g)] = ({k: v for k, v in g.extra.items() if k != GROUP_IMAGES_KEY}, [])
    return out


def step_record(seq: int, step: int, *, metrics: dict[str, Any] | None, wall_time: float | None,
                groups: Sequence[tuple[str, Sequence[GroupRecord]]] = ()) -> dict[str, Any]:
    """A training step as a wire record (plain JSON values; a metric's NaN stays NaN, a group's becomes ``None``;
    the groups' pictures bounded as :func:`_wire_images` says)."""
    import time

    pictures = _wire_images(groups)
    return {
        "seq": seq, "kind": "step", "step": int(step),
        "wall_time": float(wall_time if wall_time is not None else time.time()),
        "metrics": {str(k): (None if v is None else float(v)) for k, v in (metrics or {}).items()
                    if v is None or isinstance(v, (int, float))},
        "groups": [{"split": split, "groups": [{
            "row_index": g.row_index, "prompt": g.prompt, "extra": pictures[id(g)][0],
            # only with pictures: a dashboard of an earlier version refuses a field it does not know
            **({"images": pictures[id(g)][1]} if pictures[id(g)][1] else {}),
            "completions": [{
                "index": c.index, "text": c.text,
                "rewards": {name: _finite_or_none(v) for name, v in c.rewards.items()},
                "total_reward": _finite_or_none(c.total_reward), "advantage": _finite_or_none(c.advantage),
                "num_tokens": c.num_tokens, "truncated": bool(c.truncated),
                "token_stats": _stats_to_wire(c.token_stats), "turns": c.turns, "tool_mask": c.tool_mask,
            } for c in g.completions]} for g in records]} for split, records in groups],
    }


def groups_from_wire(record: StepRecord) -> list[tuple[str, list[GroupRecord]]]:
    """The ``(split, groups)`` pairs of a validated step record, for :meth:`storage.Store.record_step`.

    Raises:
        ValueError: a completion's token values differ in length from its pieces; an image is not base64, not a
            PNG, over its bounds or corrupt (the message says which group and image).
    """
    pairs = []
    for part in record.groups:
        groups = []
        for group in part.groups:
            completions = []
            for c in group.completions:
                stats = None
                if c.token_stats is not None:
                    t = c.token_stats
                    stats = TokenStats(pieces=t.pieces, logprobs=[v if v is not None else math.nan for v in t.logprobs],
                                       kl=None if t.kl is None else [v if v is not None else math.nan for v in t.kl],
                                       entropy=None if t.entropy is None else
                                       [v if v is not None else math.nan for v in t.entropy])
                completions.append(CompletionRecord(index=c.index, text=c.text, rewards=dict(c.rewards),
                                                    total_reward=c.total_reward, advantage=c.advantage,
                                                    num_tokens=c.num_tokens, truncated=c.truncated,
                                                    token_stats=stats, turns=c.turns, tool_mask=c.tool_mask))
            extra, images = _group_images(group, f"step {record.step}, {part.split} group {len(groups) + 1}")
            groups.append(GroupRecord(step=record.step, row_index=group.row_index, prompt=group.prompt,
                                      completions=completions, extra=extra, split=part.split, images=images))
        if groups:
            pairs.append((part.split, groups))
    return pairs


def _group_images(group: WireGroup, where: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    """A wire group's extra columns and its checked images: each image decoded and named anew
    (:func:`~grpo_core.runs.script_images.checked_copy`), ``extra[GROUP_IMAGES_KEY]`` rewritten to those names, in
    the order the group sent them (a name it did not carry is dropped).

    Raises:
        ValueError: an image is refused; ``where`` and its number say which.
    """
    extra = dict(group.extra)
    extra.pop(GROUP_IMAGES_KEY, None)
    images: dict[str, bytes] = {}
    renamed: dict[str, str] = {}
    for number, image in enumerate(group.images, start=1):
        try:
            data = base64.b64decode(image.png, validate=True)
            name, png = checked_copy(data)
        except (binascii.Error, ImageRefused) as exc:
            raise ValueError(f"{where}, image {number}: {exc}") from None
        images.setdefault(name, png)
        renamed[image.name] = name
    sent = group.extra.get(GROUP_IMAGES_KEY)
    named = [renamed[n] for n in sent if isinstance(n, str) and n in renamed] if isinstance(sent, list) else []
    if images:
        extra[GROUP_IMAGES_KEY] = named or list(images)
    return extra, images
