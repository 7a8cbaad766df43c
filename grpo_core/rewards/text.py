"""Text-shape reward rules: ``format_regex``, ``think_answer_format``, ``length``, ``repetition`` and
``json_valid`` (a user's own reward function, ``plugin``, is in :mod:`grpo_core.rewards.plugin`).

These rules read only the completion (and, for ``length``, TRL's ``completion_ids``; for ``json_valid``, an optional
schema column). Every reward function is a picklable callable class built by a factory and registered in
:mod:`grpo_core.rewards.registry`; factories validate their parameters and raise ``ValueError`` naming the
parameter, so a bad form value fails at launch, not in the middle of training.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from grpo_core.rewards.columns import column_values
from grpo_core.rewards.regex_budget import MATCH_TIMEOUT_S, RegexTimeout, guard_jsonschema, match_timeout
from grpo_core.rewards.registry import RewardRule, RuleParam, completion_text, register
from grpo_core.rewards.template_tags import OPENED_THINK_CHOICES, OPENED_THINK_PARAM, opened_think_prefix

_OPENED_THINK_HELP = "auto: from the model's chat template; yes: the prompt already opened <think>; no"


def _opened_think_param() -> RuleParam:
    return RuleParam(OPENED_THINK_PARAM, "choice", "auto", _OPENED_THINK_HELP, choices=OPENED_THINK_CHOICES)


def _check_opened_think(value: str) -> None:
    if value not in OPENED_THINK_CHOICES:
        raise ValueError(f"parameter {OPENED_THINK_PARAM!r}: {value!r} is not one of {list(OPENED_THINK_CHOICES)}")

# --------------------------------------------------------------------------------------------------------------------
# format_regex
# --------------------------------------------------------------------------------------------------------------------

DEFAULT_FORMAT_PATTERN = r"^<think>[\s\S]*</think>\s*<answer>[\s\S]*</answer>$"
REGEX_MODES = ("search", "fullmatch")


# A user's pattern can backtrack for minutes on a degenerate completion (the default one is quadratic on a
# completion that repeats "<think>" lines). The third-party `regex` module (a dependency of transformers) can stop
# a match after a time limit (grpo_core.rewards.regex_budget, which the web process also bounds per group); without
# it, the standard `re` runs unguarded.
REGEX_TIMEOUT_S = MATCH_TIMEOUT_S


def _compile_guarded(pattern: str) -> tuple[Any, bool]:
    """``(compiled pattern, supports timeout)``: the ``regex`` module's compilation if available, else ``re``'s."""
    try:
        import regex  # type: ignore[import-untyped]

        return regex.compile(pattern, regex.DOTALL | regex.MULTILINE), True
    except Exception:  # noqa: BLE001 - not installed, or a pattern only `re` accepts: use `re`
        return re.compile(pattern, re.DOTALL | re.MULTILINE), False


class FormatRegexReward:
    """1.0 when the completion matches ``pattern`` (flags ``DOTALL | MULTILINE``), else 0.0.

    ``mode="search"`` looks for the pattern anywhere (with ``MULTILINE``, ``^`` and ``$`` also match at line
    boundaries); ``mode="fullmatch"`` requires the whole completion to match. The pattern is validated with
    :mod:`re` but matched with the ``regex`` module when installed (same syntax for ``re`` patterns), so that a
    match taking longer than ``REGEX_TIMEOUT_S`` (1 s; the module may overshoot it by a few seconds) is abandoned
    and scores 0.0 instead of stalling training. The compiled pattern is not pickled; it is recompiled after
    unpickling. When the pattern mentions ``<think>`` and ``template_opened_think`` is ``yes`` (the chat template
    opened the tag, :mod:`grpo_core.rewards.template_tags`), the completion is matched with ``<think>\\n`` in front.

    Call: ``(completions, **ignored) -> list[float]``, one reward per completion.
    """

    def __init__(
        self,
        pattern: str = DEFAULT_FORMAT_PATTERN,
        mode: str = "search",
        name: str = "format_regex",
        template_opened_think: str = "auto",
    ):
        self.pattern = pattern
        self.mode = mode
        self.__name__ = name
        self.template_opened_think = template_opened_think if "<think>" in pattern else "no"
        self._regex, self._has_timeout = _compile_guarded(pattern)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_regex", None)
        state.pop("_has_timeout", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._regex, self._has_timeout = _compile_guarded(self.pattern)

    def matches(self, text: str) -> bool:
        """Whether ``text`` matches (``False`` when the match ran out of time)."""
        match = self._regex.fullmatch if self.mode == "fullmatch" else self._regex.search
        if not self._has_timeout:
            return match(text) is not None
        try:
            return match(text, timeout=match_timeout()) is not None
        except TimeoutError:  # this match, or the group's budget (RegexTimeout), ran out
            return False

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        opened = getattr(self, "template_opened_think", "no")
        return [1.0 if self.matches(opened_think_prefix(opened, completion_text(c))) else 0.0 for c in completions]


def make_format_regex(
    pattern: str = DEFAULT_FORMAT_PATTERN, mode: str = "search", template_opened_think: str = "auto"
) -> FormatRegexReward:
    """Build ``format_regex``.

    Raises:
        ValueError: ``pattern`` is not a valid Python regular expression (the message quotes the pattern, the
            ``re`` error and its position), or ``mode`` is not ``search`` / ``fullmatch``.
    """
    if mode not in REGEX_MODES:
        raise ValueError(f"parameter 'mode': {mode!r} is not one of {list(REGEX_MODES)}")
    try:
        re.compile(pattern, re.DOTALL | re.MULTILINE)
    except re.error as exc:
        where = f" at position {exc.pos} (line {exc.lineno}, column {exc.colno})" if exc.pos is not None else ""
        raise ValueError(f"parameter 'pattern': invalid regular expression {pattern!r}: {exc.msg}{where}") from None
    _check_opened_think(template_opened_think)
    return FormatRegexReward(pattern, mode, template_opened_think=template_opened_think)


register(
    RewardRule(
        name="format_regex",
        description="1 if the completion matches a regular expression (DOTALL | MULTILINE)",
        factory=make_format_regex,
        params=(
            RuleParam("pattern", "text", DEFAULT_FORMAT_PATTERN, "Python regular expression"),
            RuleParam(
                "mode", "choice", "search", "search: anywhere; fullmatch: the whole completion", choices=REGEX_MODES
            ),
            _opened_think_param(),
        ),
        category="format",
    )
)


# --------------------------------------------------------------------------------------------------------------------
# think_answer_format
# --------------------------------------------------------------------------------------------------------------------

_THINK_CLOSE_ANSWER_OPEN_RE = re.compile(r"</think>\s*<answer>")
_STRICT_SEPARATOR = "\n</think>\n<answer>\n"


def is_strict_think_answer(text: str) -> bool:
    r"""Whether ``text`` fullmatches ``<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>`` (DOTALL).

    open-r1's ``format_reward`` uses that pattern with ``re.match`` and ``DOTALL | MULTILINE``, where ``$`` may
    match before any newline; here the whole completion must have the shape. Checked with string searches in
    linear time: the regex backtracks quadratically on a completion that repeats the separator.
    """
    head, tail = "<think>\n", "\n</answer>"
    if not (text.startswith(head) and text.endswith(tail)):
        return False
    separator = text.find(_STRICT_SEPARATOR, len(head))
    return separator >= 0 and separator + len(_STRICT_SEPARATOR) <= len(text) - len(tail)


def is_soft_think_answer(text: str) -> bool:
    r"""Whether ``re.search(r"<think>.*?</think>\s*<answer>.*?</answer>", text, re.DOTALL)`` would match.

    Computed in linear time: the first ``<think>``, then the first ``</think>\s*<answer>`` after it, then a
    ``</answer>`` after that (the regex itself is quadratic on a completion repeating ``<think>``).
    """
    start = text.find("<think>")
    if start < 0:
        return False
    middle = _THINK_CLOSE_ANSWER_OPEN_RE.search(text, start + len("<think>"))
    return middle is not None and text.find("</answer>", middle.end()) >= 0


class ThinkAnswerFormatReward:
    r"""1.0 when the completion has the reasoning-then-answer shape of DeepSeek-R1, else 0.0.

    This is the format reward of DeepSeek-R1 (arXiv 2501.12948, section 2.2.2: "enforces the model to put its
    thinking process between '<think>' and '</think>' tags") as implemented by Hugging Face's open-r1
    (``format_reward`` in ``src/open_r1/rewards.py``).

    ``strict=True``: the whole completion is exactly ``<think>\n...\n</think>\n<answer>\n...\n</answer>`` (nothing
    before or after, not even a trailing newline). ``strict=False``: ``<think>...</think>`` followed, after optional
    whitespace, by ``<answer>...</answer>`` somewhere in the completion.

    ``template_opened_think="yes"``: the chat template already opened ``<think>`` in the prompt (DeepSeek-R1 distills),
    so the completion is read with ``<think>\\n`` in front unless it opens the tag itself; ``auto`` is set to ``yes``
    or ``no`` from the model's chat template before a run (:mod:`grpo_core.rewards.template_tags`).

    Call: ``(completions, **ignored) -> list[float]``.
    """

    def __init__(self, strict: bool = False, name: str = "think_answer_format", template_opened_think: str = "auto"):
        self.strict = strict
        self.__name__ = name
        self.template_opened_think = template_opened_think

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        check = is_strict_think_answer if self.strict else is_soft_think_answer
        opened = getattr(self, "template_opened_think", "no")
        return [1.0 if check(opened_think_prefix(opened, completion_text(c))) else 0.0 for c in completions]


def make_think_answer_format(strict: bool = False, template_opened_think: str = "auto") -> ThinkAnswerFormatReward:
    """Build ``think_answer_format``.

    Raises:
        ValueError: ``template_opened_think`` is not ``auto``, ``yes`` or ``no``.
    """
    _check_opened_think(template_opened_think)
    return ThinkAnswerFormatReward(strict, template_opened_think=template_opened_think)


register(
    RewardRule(
        name="think_answer_format",
        description="1 if the completion is <think>...</think> then <answer>...</answer> (DeepSeek-R1 format)",
        factory=make_think_answer_format,
        params=(
            RuleParam("strict", "bool", False, "exactly <think>\\n…\\n</think>\\n<answer>\\n…\\n</answer>"),
            _opened_think_param(),
        ),
        category="format",
    )
)


# --------------------------------------------------------------------------------------------------------------------
# length
# --------------------------------------------------------------------------------------------------------------------


def _completion_lengths(completions: Sequence[Any], completion_ids: Any) -> list[int]:
    """Token counts from ``completion_ids`` when given (one id list per completion), else whitespace word counts.

    A completion whose text is empty or only whitespace has length 0 either way: TRL's ``completion_ids`` keep the
    end-of-sequence token, so an empty reply would otherwise count one token and score as a short answer.
    """
    texts = [completion_text(c) for c in completions]
    if completion_ids is not None and len(completion_ids) == len(completions):
        return [len(ids) if text.strip() else 0 for ids, text in zip(completion_ids, texts, strict=True)]
    return [len(text.split()) for text in texts]


class LengthReward:
    """A length band: 1.0 inside ``[min_tokens, max_tokens]``, less outside it.

    The length ``L`` is ``len(completion_ids[i])`` (tokens, the end-of-sequence token included) when TRL passes
    ``completion_ids``, else the number of whitespace-separated words; an empty or whitespace-only completion has
    ``L = 0`` (so with ``min_tokens >= 1`` it scores 0). With ``m = min_tokens``, ``M = max_tokens`` and ``B = overlong_buffer``::

        L < m               ->  L / m                    (linear from 0 at L = 0)
        m <= L <= M         ->  1.0
        M < L <= M + B      ->  1 - (L - M) / B          (linear down to 0 at L = M + B)
        L > M + B           ->  0.0                      (so with B = 0, anything over M gets 0)

    The part above ``M`` is DAPO's soft overlong punishment (Yu et al., arXiv 2503.14476, eq. 13, with
    ``L_max = M + B`` and ``L_cache = B``) shifted by +1 so the reward lies in [0, 1] instead of [-1, 0];
    TRL ships the unshifted form as ``trl.rewards.get_soft_overlong_punishment``.

    Call: ``(completions, completion_ids=None, **ignored) -> list[float]``.
    """

    def __init__(self, min_tokens: int = 1, max_tokens: int = 64, overlong_buffer: int = 0, name: str = "length"):
        self.min_tokens = min_tokens
        self.max_tokens = max_tokens
        self.overlong_buffer = overlong_buffer
        self.__name__ = name

    def score(self, length: int) -> float:
        """The reward for a completion of ``length`` tokens (see the class docstring)."""
        if length < self.min_tokens:
            return length / self.min_tokens
        if length <= self.max_tokens:
            return 1.0
        if length <= self.max_tokens + self.overlong_buffer:
            return 1.0 - (length - self.max_tokens) / self.overlong_buffer
        return 0.0

    def __call__(self, completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any) -> list[float | None]:
        return [self.score(length) for length in _completion_lengths(completions, completion_ids)]


def make_length(min_tokens: int = 1, max_tokens: int = 64, overlong_buffer: int = 0) -> LengthReward:
    """Build ``length``.

    Raises:
        ValueError: a negative value, or ``max_tokens < min_tokens``.
    """
    for name, value in (("min_tokens", min_tokens), ("max_tokens", max_tokens), ("overlong_buffer", overlong_buffer)):
        if value < 0:
            raise ValueError(f"parameter {name!r}: must be >= 0, got {value}")
    if max_tokens < min_tokens:
        raise ValueError(f"parameter 'max_tokens': {max_tokens} is below min_tokens ({min_tokens})")
    return LengthReward(min_tokens, max_tokens, overlong_buffer)


register(
    RewardRule(
        name="length",
        description="1 inside [min_tokens, max_tokens]; linear below; DAPO soft overlong penalty above",
        factory=make_length,
        params=(
            RuleParam("min_tokens", "int", 1, "shorter completions get length / min_tokens"),
            RuleParam("max_tokens", "int", 64, "longer completions are penalised"),
            RuleParam("overlong_buffer", "int", 0, "reward falls linearly to 0 over this many tokens past max"),
        ),
        category="length",
    )
)


# --------------------------------------------------------------------------------------------------------------------
# repetition
# --------------------------------------------------------------------------------------------------------------------


class RepetitionReward:
    """A penalty for repeated word n-grams, in ``[max_penalty, 0]``.

    ``reward = max_penalty * (1 - unique_ngrams / total_ngrams)`` over the whitespace-separated words of the
    completion; completions with fewer than ``ngram_size`` words get 0.0. This is open-r1's
    ``get_repetition_penalty_reward`` (``src/open_r1/rewards.py``, after Yeo et al., arXiv 2502.03373, appendix
    C.2); TRL's ``trl.rewards.get_repetition_penalty_reward`` computes the same on token ids.

    Call: ``(completions, **ignored) -> list[float]``.
    """

    def __init__(self, ngram_size: int = 3, max_penalty: float = -1.0, name: str = "repetition") -> None:
        self.ngram_size = ngram_size
        self.max_penalty = max_penalty
        self.__name__ = name

    def score(self, text: str) -> float:
        """The penalty for one completion text."""
        words = text.split()
        if len(words) < self.ngram_size:
            return 0.0
        size = self.ngram_size
        total = len(words) - size + 1
        # one n-gram at a time, kept as its hash: memory grows with the words, not with words x ngram_size
        unique = len({hash(tuple(words[i:i + size])) for i in range(total)})
        return self.max_penalty * (1.0 - unique / total)

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        return [self.score(completion_text(c)) for c in completions]


#: The longest n-gram ``repetition`` counts (open-r1 uses 3; the time per completion grows with it).
MAX_NGRAM_SIZE = 32


def make_repetition(ngram_size: int = 3, max_penalty: float = -1.0) -> RepetitionReward:
    """Build ``repetition``.

    Raises:
        ValueError: ``ngram_size`` not in ``1..MAX_NGRAM_SIZE`` or ``max_penalty > 0`` (it is a penalty).
    """
    if not 1 <= ngram_size <= MAX_NGRAM_SIZE:
        raise ValueError(f"parameter 'ngram_size': must be between 1 and {MAX_NGRAM_SIZE}, got {ngram_size}")
    if not math.isfinite(max_penalty) or max_penalty > 0:
        raise ValueError(f"parameter 'max_penalty': must be a finite number <= 0, got {max_penalty}")
    return RepetitionReward(ngram_size, max_penalty)


register(
    RewardRule(
        name="repetition",
        description="penalty (max_penalty * share of repeated word n-grams) for repetitive text",
        factory=make_repetition,
        params=(
            RuleParam("ngram_size", "int", 3, "words per n-gram"),
            RuleParam("max_penalty", "float", -1.0, "penalty when every n-gram is a repeat (<= 0)"),
        ),
        category="length",
    )
)


# --------------------------------------------------------------------------------------------------------------------
# json_valid
# --------------------------------------------------------------------------------------------------------------------

_JSON_FENCE_RE = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def parse_json_completion(text: str) -> tuple[bool, Any]:
    """``(True, value)`` if ``text`` (stripped) or else its first fenced ```` ```json ```` block parses as JSON.

    A fence without a language tag (```` ``` ````) is accepted too. Returns ``(False, None)`` when neither parses.
    """
    candidates = [text.strip()]
    fenced = _JSON_FENCE_RE.search(text)
    if fenced:
        candidates.append(fenced.group(1).strip())
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return True, json.loads(candidate)
        except (ValueError, RecursionError):
            continue
    return False, None


class JsonValidReward:
    """1.0 when the completion is valid JSON (and, optionally, valid against a per-row JSON schema), else 0.0.

    The completion, or else its first fenced ```` ```json ```` block, must parse with :func:`json.loads`. When
    ``schema_column`` is set, that dataset column holds a JSON schema per row (a dict or a JSON string) and the value
    must also validate against it with ``jsonschema``; a row whose schema is empty gets the syntax check only, and
    a row whose schema is itself invalid gets ``None`` (the rule cannot judge it).

    Call: ``(completions, **columns) -> list[float | None]``.

    Raises:
        ValueError: (on call) ``schema_column`` is set but missing from the dataset.
    """

    def __init__(self, schema_column: str = "", name: str = "json_valid") -> None:
        self.schema_column = schema_column
        self.__name__ = name

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        schemas: list[Any] = [None] * len(completions)
        if self.schema_column:
            schemas = column_values(self.__name__, self.schema_column, kwargs, len(completions))
        rewards: list[float | None] = []
        for completion, schema in zip(completions, schemas, strict=True):
            ok, value = parse_json_completion(completion_text(completion))
            if not ok:
                rewards.append(0.0)
            elif schema is None or schema == "" or schema == {}:
                rewards.append(1.0)
            else:
                rewards.append(_validate(value, schema))
        return rewards


def _validate(value: Any, schema: Any) -> float | None:
    """1.0 / 0.0 for ``value`` against ``schema`` (dict or JSON text); ``None`` if the schema itself is invalid, refers
    to another document (``$ref`` to a URL is never fetched), or its regular expressions (``pattern``,
    ``patternProperties``) take longer than their time limit (:mod:`grpo_core.rewards.regex_budget`)."""
    import jsonschema  # checked at build time; imported here so the web process only pays for it when used
    import referencing.exceptions

    guard_jsonschema()  # the schema is a dataset row's: its patterns run with a time limit

    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except (ValueError, RecursionError):
            return None
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return 0.0
    except (jsonschema.SchemaError, TypeError, RecursionError, RegexTimeout, referencing.exceptions.Unresolvable,
            re.error):
        return None
    return 1.0


def make_json_valid(schema_column: str = "") -> JsonValidReward:
    """Build ``json_valid``.

    Raises:
        ValueError: ``schema_column`` is set but the ``jsonschema`` package is not installed.
    """
    schema_column = schema_column.strip()
    if schema_column and importlib.util.find_spec("jsonschema") is None:
        raise ValueError(
            "parameter 'schema_column': validating against a schema needs the 'jsonschema' package "
            "(pip install jsonschema); leave schema_column empty to check JSON syntax only"
        )
    return JsonValidReward(schema_column)


register(
    RewardRule(
        name="json_valid",
        description="1 if the completion (or its first ```json block) is valid JSON, optionally against a schema",
        factory=make_json_valid,
        params=(RuleParam("schema_column", "str", "", "dataset column with a JSON schema per row (optional)"),),
        category="format",
    )
)
