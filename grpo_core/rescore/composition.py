"""What the workbench does with a composition it likes: launch the run again with it, or save it as a preset.

* :func:`launch_config`: the run's stored config with its ``rewards`` replaced (and a new name), ready for
  :func:`grpo_core.submit.queue.submit_run`, which validates and checks the login's boundary as every launch does;
* presets: YAML files ``<data dir>/reward_presets/<name>.yaml`` holding ``rewards: [...]``, offered in the
  workbench. Names are ``[A-Za-z0-9_.-]``, 1-64 characters (no path can be named); at most :data:`MAX_PRESETS`;
  read back under :mod:`grpo_core.bounded_parse`'s limits.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from grpo_core.bounded_parse import dump_yaml
from grpo_core.rescore.request import RescoreError, parse_rules_text
from grpo_core.rewards.compose import RewardSpec, build_reward_funcs
from grpo_core.run_config import ConfigError, RunConfig, parse_run_config

PRESETS_DIR = "reward_presets"
MAX_PRESETS = 200
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def _spec_dicts(specs: Sequence[RewardSpec | Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [RewardSpec.model_validate(s if isinstance(s, RewardSpec) else dict(s)).model_dump(mode="json",
                                                                                              exclude_none=True)
            for s in specs]


def launch_config(run_config: Mapping[str, Any], specs: Sequence[RewardSpec | Mapping[str, Any]], *,
                  name: str | None = None) -> RunConfig:
    """The run's config with the composition ``specs`` (named ``<run name>-rescored`` unless ``name``), validated
    as a :class:`RunConfig`; the run's own fields (model, dataset, TRL arguments) are kept.

    Raises:
        grpo_core.run_config.ConfigError: the result is not a valid config (a bad rule: by position).
    """
    values = {k: v for k, v in dict(run_config).items() if k not in ("sweep",)}
    values["rewards"] = _spec_dicts(specs)
    values["name"] = name or f"{str(values.get('name') or 'run')[:180]}-rescored"
    try:
        build_reward_funcs(values["rewards"])
    except ValueError as exc:
        raise ConfigError(f"the workbench's composition: {exc}") from None
    return parse_run_config(values, source="the workbench's composition")


def presets_dir(data_dir: Path) -> Path:
    """Where presets are saved."""
    return Path(data_dir) / PRESETS_DIR


def _preset_path(data_dir: Path, name: str) -> Path:
    name = (name or "").strip()
    if not _NAME.fullmatch(name) or name.endswith(".") or ".." in name:
        raise RescoreError(f"preset name {name[:80]!r}: use 1-64 letters, digits, '_', '-' or '.'")
    return presets_dir(data_dir) / f"{name}.yaml"


def save_preset(data_dir: Path, name: str, specs: Sequence[RewardSpec | Mapping[str, Any]]) -> Path:
    """Save the composition ``specs`` as preset ``name`` (replacing one of that name); returns its file.

    Raises:
        RescoreError: a bad name, too many presets; ValueError: a bad composition (by position).
    """
    path = _preset_path(data_dir, name)
    dicts = _spec_dicts(specs)
    build_reward_funcs(dicts)
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    if not path.exists() and len(list_presets(data_dir)) >= MAX_PRESETS:
        raise RescoreError(f"there are already {MAX_PRESETS} presets; delete some in {folder}")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(dump_yaml({"rewards": dicts}), encoding="utf-8")
    tmp.replace(path)
    return path


def list_presets(data_dir: Path) -> list[str]:
    """The saved presets' names, sorted."""
    folder = presets_dir(data_dir)
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.yaml") if p.is_file() and not p.is_symlink())


def load_preset(data_dir: Path, name: str) -> list[dict[str, Any]]:
    """The composition of preset ``name``. Raises RescoreError: no such preset, or not a composition."""
    path = _preset_path(data_dir, name)
    if not path.is_file() or path.is_symlink():
        raise RescoreError(f"no preset named {name!r}")
    return parse_rules_text(path.read_text(encoding="utf-8"), source=f"preset {name}")
