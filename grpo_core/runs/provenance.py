"""What reproduces a run: the hash of its dataset file, the identity of its model, the library versions and the device.

The worker records a run's provenance once it has built the trainer (:func:`collect_provenance`, the device
described by :func:`grpo_core.engine.policy_model.describe_device`), as the run's ``provenance`` JSON in the store. The web
process computes the same fields "as they are now" (:func:`current_environment`, no device) and
:func:`provenance_differences` says which of them changed since the run, for instance when a run is cloned into the
Launch form. Nothing here imports torch or transformers: library versions come from the installed distributions'
metadata (``importlib.metadata``), hashes from the files.

A provenance record (every value JSON; ``None`` where the thing could not be read)::

    {
      "dataset": {"sha256": "<64 hex>" | None},
      "model": {"name": "<the config's model field>", "kind": "gguf" | "folder" | "hub" | "unknown",
                "identity": "sha256:<64 hex>" | "revision:<commit>" | "unknown"},
      "versions": {"python": "3.11.9", "torch": "2.13.0+cpu", "transformers": ..., "trl": ..., "peft": ...,
                   "accelerate": ..., "grpo-dashboard": ...},      # "not installed" when a package is missing
      "device": {"type": "cpu" | "cuda", "name": str, "count": int, "threads": int},   # worker only
      "plugins": {"/abs/path/rewards.py": "<64 hex>" | None, ...},  # each plugin rule's file.py (none: {})
    }

A model's identity (the sha256 of its files, cached; a hub id's local commit) is :mod:`grpo_core.models.identity`'s.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from grpo_core.models.identity import HashCache, model_identity

#: Distributions whose versions a provenance record holds, besides ``python``.
PROVENANCE_PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "grpo-dashboard")
NOT_INSTALLED = "not installed"
# ---------------------------------------------------------------------------------------------------- versions
def library_versions() -> dict[str, str]:
    """``python`` and each of :data:`PROVENANCE_PACKAGES` -> its installed version (``"not installed"``)."""
    versions = {"python": platform.python_version()}
    for name in PROVENANCE_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = NOT_INSTALLED
    return versions


def plugin_files(rewards: Iterable[Any]) -> list[str]:
    """The ``file.py`` paths of the ``plugin`` rules among ``rewards`` (``RewardSpec`` objects or their dicts, as a
    run's config stores them: a relative path is made absolute at submit), each once, in rule order. A dotted module
    target has no file and is left out."""
    files: list[str] = []
    for spec in rewards:
        rule = spec.get("rule") if isinstance(spec, Mapping) else getattr(spec, "rule", None)
        params = (spec.get("params") if isinstance(spec, Mapping) else getattr(spec, "params", None)) or {}
        module = str(params.get("target", "")).rpartition(":")[0].strip()
        if rule == "plugin" and module.endswith(".py") and module not in files:
            files.append(module)
    return files


def plugin_hashes(files: Sequence[str], cache: HashCache | None = None) -> dict[str, str | None]:
    """``{path: sha256}`` of each plugin file (``None`` for a file that is gone or unreadable)."""
    cache = cache or HashCache(None)
    hashes: dict[str, str | None] = {}
    for path in files:
        try:
            hashes[path] = cache.sha256(Path(path))
        except OSError:
            hashes[path] = None
    return hashes


# ---------------------------------------------------------------------------------------------------- records
def current_environment(
    *,
    dataset_file: Path | None,
    model: str,
    cache_dir: Path | None,
    hub_cache: Path | None = None,
    plugins: Sequence[str] = (),
) -> dict[str, Any]:
    """The provenance fields as they are now, without ``device`` (safe in the web process: no torch).

    Args:
        dataset_file: the run's dataset file (:func:`grpo_core.datasets.rows.dataset_file`); ``None`` gives a ``None`` sha256.
        model: the config's ``model`` field.
        cache_dir: folder of the shared hash cache (the settings' model cache); ``None`` caches in memory only.
        hub_cache: the Hugging Face hub cache to read a hub model's revision from (default: the library's).
        plugins: the run's plugin files (:func:`plugin_files`), hashed into ``plugins``.

    Returns:
        ``{"dataset": ..., "model": ..., "versions": ..., "plugins": ...}`` as in the module docstring. Never raises for an
        unreadable file (its hash is ``None``/``"unknown"``).
    """
    cache = HashCache(cache_dir)
    dataset_sha: str | None = None
    if dataset_file is not None:
        try:
            dataset_sha = cache.sha256(Path(dataset_file))
        except OSError:
            dataset_sha = None
    return {
        "dataset": {"sha256": dataset_sha},
        "model": model_identity(model, cache, hub_cache),
        "versions": library_versions(),
        "plugins": plugin_hashes(plugins, cache),
    }


def collect_provenance(
    *,
    dataset_file: Path | None,
    model: str,
    cache_dir: Path | None,
    device: Mapping[str, Any],
    hub_cache: Path | None = None,
    plugins: Sequence[str] = (),
) -> dict[str, Any]:
    """A run's provenance record: :func:`current_environment` plus the ``device`` the worker trains on.

    Args:
        device: what :func:`grpo_core.engine.policy_model.describe_device` returns (``type``, ``name``, ``count``, ``threads``).
        dataset_file, model, cache_dir, hub_cache, plugins: as :func:`current_environment`.
    """
    return {**current_environment(dataset_file=dataset_file, model=model, cache_dir=cache_dir,
                                  hub_cache=hub_cache, plugins=plugins),
            "device": dict(device)}


def flatten_provenance(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A provenance record as ``dotted.field -> value`` (``versions.trl``, ``model.identity``, ...)."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, Mapping):
            flat.update(flatten_provenance(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def provenance_differences(
    recorded: Mapping[str, Any] | None, now: Mapping[str, Any] | None
) -> list[tuple[str, Any, Any]]:
    """The fields whose value changed between a run's recorded provenance and ``now``, sorted by field.

    Only fields present in both are compared: ``now`` from :func:`current_environment` has no ``device``, and a
    record written by an older version may lack a field. A run without a record (``None`` or empty) has no
    differences.

    Returns:
        ``[(dotted field, recorded value, value now), ...]``, e.g. ``("versions.trl", "1.15.0", "1.16.0")``.
    """
    if not recorded or not now:
        return []
    before, after = flatten_provenance(recorded), flatten_provenance(now)
    return [(field, before[field], after[field]) for field in sorted(before.keys() & after.keys())
            if before[field] != after[field]]


def describe_differences(differences: list[tuple[str, Any, Any]]) -> list[str]:
    """Plain-words lines for :func:`provenance_differences`: the dataset file changed, the model changed, each
    library whose version changed (``trl 1.15.0 -> 1.16.0``), each plugin file changed or gone. Empty when nothing
    differs."""
    lines = []
    fields = {field for field, _, _ in differences}
    if "dataset.sha256" in fields:
        lines.append("the dataset file changed since the run (its sha256 differs)")
    if fields & {"model.identity", "model.kind"}:
        lines.append("the model changed since the run (its weights hash or revision differs)")
    versions = [f"{field.removeprefix('versions.')} {old} -> {new}" for field, old, new in differences
                if field.startswith("versions.")]
    if versions:
        lines.append("library versions changed: " + ", ".join(versions))
    for field, _, new in differences:
        if field.startswith("plugins."):
            path = field.removeprefix("plugins.")
            lines.append(f"the plugin file {path} is gone" if new is None
                         else f"the plugin file {path} changed since the run (its sha256 differs)")
    devices = [field for field in fields if field.startswith("device.")]
    if devices:
        lines.append("the device differs: " + ", ".join(sorted(devices)))
    return lines


def short_hash(value: str | None, length: int = 12) -> str:
    """``sha256:1a2b...`` or a bare hex digest shortened to ``length`` hex digits (kind prefix kept); "–" for none."""
    if not value:
        return "–"
    kind, _, digest = value.rpartition(":")
    return f"{kind}:{digest[:length]}" if kind else digest[:length]
