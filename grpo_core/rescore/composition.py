"""What the workbench does with a composition it likes: launch the run again with it, or save it as a preset.

* :func:`launch_config`: the run's stored config with its ``rewards`` replaced (and a new name), ready for
  :func:`grpo_core.submit.queue.submit_run`, which validates and checks the login's boundary as every launch does;
* presets: YAML files holding ``rewards: [...]``, offered in the workbench, owned by the login that saved them:
  ``<data dir>/reward_presets/users/<sha256 of the login>/<name>.yaml`` (``reward_presets/<name>.yaml`` without
  logins); no other login sees, overwrites or deletes them. An admin may publish a shared one
  (``reward_presets/shared/``), which every login sees read-only as ``shared/<name>``; presets saved before they had
  owners are shared ones too. Names are ``[A-Za-z0-9_.-]``, 1-64 characters (no path can be named); at most
  :data:`MAX_PRESETS` a folder; read back under :mod:`grpo_core.bounded_parse`'s limits.
"""

from __future__ import annotations

import hashlib
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
#: The folder of shared presets, and the prefix their names carry in a list (``shared/<name>``).
SHARED = "shared"
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
    """Where presets are saved (a dashboard without logins keeps its own here; see :func:`owner_dir`)."""
    return Path(data_dir) / PRESETS_DIR


def owner_dir(data_dir: Path, owner: str | None) -> Path:
    """The folder of ``owner``'s presets: ``reward_presets/users/<sha256 of the login>/``; without a login
    (``None``), ``reward_presets/`` itself. Logins' names never become paths."""
    if owner is None:
        return presets_dir(data_dir)
    return presets_dir(data_dir) / "users" / hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _check_name(name: str) -> str:
    name = (name or "").strip()
    if not _NAME.fullmatch(name) or name.endswith(".") or ".." in name:
        raise RescoreError(f"preset name {name[:80]!r}: use 1-64 letters, digits, '_', '-' or '.'")
    return name


def _shared_dirs(data_dir: Path, owner: str | None) -> list[Path]:
    """Where shared presets are read: ``reward_presets/shared/``, and, with logins, the presets saved in
    ``reward_presets/`` before presets had owners."""
    return [presets_dir(data_dir) / SHARED] + ([presets_dir(data_dir)] if owner is not None else [])


def _preset_path(data_dir: Path, name: str, owner: str | None = None) -> Path:
    """The file of preset ``name`` as ``owner`` names it (``shared/x``: a shared one). Raises RescoreError."""
    name = (name or "").strip()
    if name.startswith(SHARED + "/"):
        plain = _check_name(name[len(SHARED) + 1:])
        found = [folder / f"{plain}.yaml" for folder in _shared_dirs(data_dir, owner)]
        return next((p for p in found if p.is_file() and not p.is_symlink()), found[0])
    return owner_dir(data_dir, owner) / f"{_check_name(name)}.yaml"


def _names(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.yaml") if p.is_file() and not p.is_symlink())


def save_preset(data_dir: Path, name: str, specs: Sequence[RewardSpec | Mapping[str, Any]], *,
                owner: str | None = None, shared: bool = False) -> Path:
    """Save the composition ``specs`` as ``owner``'s preset ``name`` (replacing its own of that name), or, with
    ``shared``, as a shared preset every login sees read-only (the caller checks that ``owner`` is an admin);
    returns its file.

    Raises:
        RescoreError: a bad name, too many presets; ValueError: a bad composition (by position).
    """
    name = _check_name(name.removeprefix(SHARED + "/") if shared else name)
    folder = presets_dir(data_dir) / SHARED if shared else owner_dir(data_dir, owner)
    path = folder / f"{name}.yaml"
    dicts = _spec_dicts(specs)
    build_reward_funcs(dicts)
    folder.mkdir(parents=True, exist_ok=True)
    if not path.exists() and len(_names(folder)) >= MAX_PRESETS:
        raise RescoreError(f"there are already {MAX_PRESETS} presets here; delete some first")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(dump_yaml({"rewards": dicts}), encoding="utf-8")
    tmp.replace(path)
    return path


def list_presets(data_dir: Path, owner: str | None = None) -> list[str]:
    """The presets ``owner`` may load: its own names, then the shared ones as ``shared/<name>``, each sorted."""
    shared = sorted({n for folder in _shared_dirs(data_dir, owner) for n in _names(folder)})
    return _names(owner_dir(data_dir, owner)) + [f"{SHARED}/{n}" for n in shared]


def load_preset(data_dir: Path, name: str, owner: str | None = None) -> list[dict[str, Any]]:
    """The composition of preset ``name`` (``owner``'s own, or ``shared/<name>``). Raises RescoreError: no such
    preset of ``owner``'s (another login's is not found either), or not a composition."""
    path = _preset_path(data_dir, name, owner)
    if not path.is_file() or path.is_symlink():
        raise RescoreError(f"no preset named {name!r}")
    return parse_rules_text(path.read_text(encoding="utf-8"), source=f"preset {name}")


def delete_preset(data_dir: Path, name: str, owner: str | None = None, *, is_admin: bool = False) -> None:
    """Delete ``owner``'s preset ``name``, or a shared one (``shared/<name>``: admins only, or without logins).

    Raises:
        RescoreError: no such preset of ``owner``'s, or a shared one and ``owner`` is not an admin.
    """
    if (name or "").strip().startswith(SHARED + "/") and owner is not None and not is_admin:
        raise RescoreError(f"{name!r} is a shared preset: only an admin may delete it")
    path = _preset_path(data_dir, name, owner)
    if not path.is_file() or path.is_symlink():
        raise RescoreError(f"no preset named {name!r}")
    path.unlink()
