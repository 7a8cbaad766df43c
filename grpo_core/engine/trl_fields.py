"""Writes the snapshot of TRL's ``GRPOConfig`` fields that the web process validates ``trl_args`` against
(imports TRL; run as ``python -m grpo_core.engine.trl_fields [PATH]`` after upgrading TRL).

The snapshot is a JSON object ``{"trl_version": str, "fields": {name: {"type": str, "default": json, "help": str}}}``
with every dataclass field of ``trl.GRPOConfig`` (its own and those inherited from ``transformers.TrainingArguments``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from grpo_core.trl_fields import SNAPSHOT_PATH


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


def snapshot() -> dict[str, Any]:
    """The installed TRL's ``GRPOConfig`` fields as the JSON-ready mapping described in the module docstring."""
    import trl
    from trl import GRPOConfig

    fields = {
        f.name: {"type": _type_name(f.type), "default": _json_default(f), "help": str(f.metadata.get("help", ""))}
        for f in dataclasses.fields(GRPOConfig)
        if f.init and not f.name.startswith("_")
    }
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
