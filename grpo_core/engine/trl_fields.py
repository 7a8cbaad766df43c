"""Writes the snapshot of TRL's ``GRPOConfig`` fields that the web process validates ``trl_args`` against
(imports TRL; run as ``python -m grpo_core.engine.trl_fields [PATH]`` after upgrading TRL).

The snapshot is a JSON object ``{"trl_version": str, "fields": {name: {"type": str, "default": json, "help": str,
"choices": [str] | null, "grpo": bool}}}`` with every dataclass field of ``trl.GRPOConfig`` (its own, ``grpo`` true,
and those inherited from ``transformers.TrainingArguments``). ``choices`` are the values TRL documents for the text
fields that take one of a closed set (:data:`~grpo_core.trl_fields.CHOICE_FIELDS`), read from the field's help text
(TRL declares them there only: "Supported values are 'grpo', 'dr_grpo', ..."); generation fails when the default is
not among them, so a reworded help text is noticed rather than shipped as a wrong list.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Any

from grpo_core.trl_fields import CHOICE_FIELDS, SNAPSHOT_PATH

#: A value quoted in a help text: 'grpo', `'token'`, or `group' (TRL's own typo in scale_rewards); not a field name
#: in backticks (`max_completion_length`) nor another field's setting (``importance_sampling_level='sequence'``).
_QUOTED = re.compile(r"(?<![=\w])(?:`'|'|`)([a-z][a-z0-9_]*)'")


def _type_name(annotation: Any) -> str:
    return annotation.__name__ if isinstance(annotation, type) else str(annotation).replace("typing.", "")


def _json_default(field: dataclasses.Field) -> Any:
    if field.default is dataclasses.MISSING:
        return None
    value = field.default
    value = getattr(value, "value", value)  # enums such as SchedulerType
    try:
        json.dumps(value)
    except TypeError:
        return str(value)
    return value


def help_choices(name: str, help_text: str, default: Any) -> list[str]:
    """The values a :data:`~grpo_core.trl_fields.CHOICE_FIELDS` field takes, in the order its help text names them.

    Raises:
        ValueError: the help text names fewer than two values, or not the field's default.
    """
    choices: list[str] = []
    for match in _QUOTED.finditer(help_text):
        if match.group(1) not in choices:
            choices.append(match.group(1))
    if len(choices) < 2 or default not in choices:
        raise ValueError(f"{name}: TRL's help text names {choices}, without its default {default!r}; update "
                         "CHOICE_FIELDS or the extraction in grpo_core/engine/trl_fields.py")
    return choices


def snapshot() -> dict[str, Any]:
    """The installed TRL's ``GRPOConfig`` fields as the JSON-ready mapping described in the module docstring."""
    import trl
    from transformers import TrainingArguments
    from trl import GRPOConfig

    inherited = {f.name for f in dataclasses.fields(TrainingArguments)}
    fields = {}
    for f in dataclasses.fields(GRPOConfig):
        if not f.init or f.name.startswith("_"):
            continue
        help_text, default = str(f.metadata.get("help", "")), _json_default(f)
        fields[f.name] = {"type": _type_name(f.type), "default": default, "help": help_text,
                          "choices": help_choices(f.name, help_text, default) if f.name in CHOICE_FIELDS else None,
                          "grpo": f.name not in inherited}
    return {"trl_version": trl.__version__, "fields": dict(sorted(fields.items()))}


def main(argv: list[str] | None = None) -> int:
    """Write :func:`snapshot` to ``argv[0]`` (default: the shipped :data:`~grpo_core.trl_fields.SNAPSHOT_PATH`)."""
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0]) if argv else SNAPSHOT_PATH
    path.write_text(json.dumps(snapshot(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
