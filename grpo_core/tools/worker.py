"""Can this model's chat template carry a run with tools? The child half:
``python -m grpo_core.tools.worker REQUEST.json --out ANSWER.json`` (request ``{"model", "model_cache_dir"}``).

The request ``{"action": "check_plugins", "tool_plugins": [...], "environment": "..."}`` instead imports the run's
tool plugins and environment class and answers ``{"problems": [...], "schemas": [...]}``
(:func:`grpo_core.engine.tool_plugin_check.plugin_problems` and ``plugin_schemas``: the tools' JSON schemas TRL
renders into the prompt; what they print goes to this process's log).

Loads only the tokenizer, from disk (never a download: the folder :func:`grpo_core.models.prompt_lengths.model_text_folder`
finds, or a model folder), without remote code, and answers
:func:`grpo_core.engine.tool_template.tool_template_report` with ``on_disk``; ``{"on_disk": false}`` when no
tokenizer is on disk yet. Imports transformers and TRL (worker side).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from grpo_core.child_jobs.answer_file import answer_request


def answer(request: dict[str, Any], _progress: Any = None) -> dict[str, Any]:
    """The check's answer for one request (see the module docstring)."""
    if request.get("action") == "check_plugins":
        from grpo_core.engine.tool_plugin_check import plugin_problems, plugin_schemas

        plugins = [str(t) for t in request.get("tool_plugins") or []]
        environment = str(request.get("environment") or "")
        problems = plugin_problems(plugins, environment)
        return {"problems": problems, "schemas": [] if problems else plugin_schemas(plugins, environment)}
    from transformers import AutoTokenizer

    from grpo_core.engine.tool_template import tool_template_report
    from grpo_core.models.prompt_lengths import model_text_folder

    model = str(request.get("model") or "")
    folder = model_text_folder(model, Path(str(request.get("model_cache_dir") or ".")))
    if folder is None and model and Path(model).is_dir() and (Path(model) / "tokenizer_config.json").is_file():
        folder = Path(model)
    if folder is None:
        return {"on_disk": False}
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    return {"on_disk": True, **tool_template_report(tokenizer)}


def main(argv: list[str] | None = None) -> int:
    """Entry point; exit status 0 (an error is written as the answer)."""
    return answer_request("python -m grpo_core.tools.worker", answer, argv)


if __name__ == "__main__":
    sys.exit(main())
