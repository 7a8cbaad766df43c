"""Tool calling in GRPO rollouts: the turns of a multi-turn completion (:mod:`grpo_core.tools.turns`). Pure: imports
no torch."""
