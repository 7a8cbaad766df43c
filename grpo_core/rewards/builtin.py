"""Import the modules that define the built-in reward rules, so that they register themselves.

:mod:`grpo_core.rewards.registry` imports this module lazily, the first time a rule is looked up. The code-execution
rules (``grpo_core.rewards.code``) are imported when that module exists in the installed package.
"""

from __future__ import annotations

import importlib
import importlib.util

from grpo_core.rewards import answer, text  # noqa: F401  (register on import)

if importlib.util.find_spec("grpo_core.rewards.code") is not None:
    importlib.import_module("grpo_core.rewards.code")
