"""A model's identity without loading it: the sha256 of its files, cached by path, size and modification time.

A model's identity is the sha256 of its GGUF file, or, for a local folder, the sha256 of the list of its weights
files (relative path and each file's own sha256, see :func:`folder_weights_sha256`); a hub id gets the commit its
``main`` ref points at in the local Hugging Face cache, else ``"unknown"`` (no network is asked). Hashing a model is
slow (about 1 s per GB), so file hashes are cached by path, size and modification time in a JSON file of the model
cache folder (:class:`HashCache`), shared by the web process and the workers. A run's provenance
(:mod:`grpo_core.runs.provenance`) records it; the packaged GGUF's converted folder is named after it
(:mod:`grpo_core.models.prompt_lengths`). Imports no torch.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from grpo_core.models.source import ModelSourceError, describe_model

UNKNOWN = "unknown"
#: Files of a local model folder that hold weights (what :func:`folder_weights_sha256` hashes).
WEIGHTS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack")
HASH_CACHE_FILE = "file-hashes.json"
_CHUNK = 1 << 20



def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, as 64 hex digits.

    Raises:
        OSError: the file cannot be read.
    """
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


class HashCache:
    """File hashes kept by ``(absolute path, size in bytes, modification time in ns)``, in memory and, when a
    folder is given, in ``<folder>/file-hashes.json`` so that other processes (the web process, later workers)
    reuse them. A file that changes gets a new key, so a stale hash is never returned. An unreadable or corrupt
    cache file is treated as empty; a cache file that cannot be written only costs a recomputation later.
    """

    def __init__(self, folder: Path | None = None):
        self.path = Path(folder) / HASH_CACHE_FILE if folder is not None else None
        self._memory: dict[str, str] = {}

    @staticmethod
    def _key(path: Path) -> str:
        stat = path.stat()
        return f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"

    def _read(self) -> dict[str, str]:
        if self.path is None:
            return {}
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}

    def _write(self, key: str, value: str) -> None:
        if self.path is None:
            return
        stored = self._read()
        stored[key] = value
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(json.dumps(stored, sort_keys=True), encoding="utf-8")
            os.replace(partial, self.path)  # readers see the old file or the new one, never half of one
        except OSError:
            partial.unlink(missing_ok=True)

    def sha256(self, path: Path) -> str:
        """The sha256 of ``path``, from the cache when its path, size and mtime are unchanged.

        Raises:
            OSError: the file cannot be read.
        """
        path = Path(path)
        key = self._key(path)
        if key in self._memory:
            return self._memory[key]
        value = self._read().get(key)
        if value is None:
            value = file_sha256(path)
            self._write(key, value)
        self._memory[key] = value
        return value


def folder_weights_sha256(folder: Path, cache: HashCache) -> str | None:
    """One sha256 for the weights files of a model folder (:data:`WEIGHTS_SUFFIXES`, searched recursively).

    It is the sha256 of the lines ``<relative posix path> <file sha256>\\n``, sorted by path, so renaming, adding or
    changing any weights file changes it and tokenizer or README edits do not. ``None`` when the folder holds no
    weights file.

    Raises:
        OSError: a weights file cannot be read.
    """
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in WEIGHTS_SUFFIXES)
    if not files:
        return None
    lines = "".join(f"{p.relative_to(folder).as_posix()} {cache.sha256(p)}\n" for p in files)
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def hub_revision(repo_id: str, hub_cache: Path | None = None) -> str | None:
    """The commit that ``main`` of hub model ``repo_id`` points at in the local Hugging Face cache, or ``None``.

    Reads ``<hub cache>/models--<owner>--<name>/refs/main`` (the layout ``huggingface_hub`` writes); asks no network.
    ``hub_cache`` defaults to ``huggingface_hub``'s ``HF_HUB_CACHE`` (``$HF_HUB_CACHE``, ``$HF_HOME/hub``, or
    ``~/.cache/huggingface/hub``).
    """
    if hub_cache is None:
        try:
            from huggingface_hub.constants import HF_HUB_CACHE
        except ImportError:
            return None
        hub_cache = Path(HF_HUB_CACHE)
    ref = Path(hub_cache) / f"models--{repo_id.replace('/', '--')}" / "refs" / "main"
    try:
        commit = ref.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return commit or None


def model_identity(model: str, cache: HashCache, hub_cache: Path | None = None) -> dict[str, str]:
    """``{"name", "kind", "identity"}`` of the config's ``model`` field (see the module docstring).

    Never raises: a model that cannot be resolved or read has kind or identity ``"unknown"``.
    """
    try:
        source = describe_model(model)
    except ModelSourceError:
        return {"name": model, "kind": UNKNOWN, "identity": UNKNOWN}
    identity: str | None = None
    try:
        if source.kind == "gguf":
            identity = f"sha256:{cache.sha256(Path(source.location))}"
        elif source.kind == "folder":
            digest = folder_weights_sha256(Path(source.location), cache)
            identity = f"sha256:{digest}" if digest else None
        else:
            commit = hub_revision(source.location, hub_cache)
            identity = f"revision:{commit}" if commit else None
    except OSError:
        identity = None
    return {"name": model, "kind": source.kind, "identity": identity or UNKNOWN}
