"""Reward rules for GRPO: a registry of named, parametrised reward functions with TRL's signature, and their
weighted composition.

Public API::

    RewardSpec, RewardGate, build_reward_funcs, score_group  # a run's rewards -> TRL reward_funcs / weights; try-out scoring
    RewardRule, RuleParam, all_rules, get_rule       # the registry the Launch form is generated from
    completion_text                                  # the text of a standard or conversational completion

Importing this package registers the built-in rules: it imports the rule modules (:mod:`~grpo_core.rewards.answer`,
:mod:`~grpo_core.rewards.text`, :mod:`~grpo_core.rewards.code`, :mod:`~grpo_core.rewards.plugin`,
:mod:`~grpo_core.rewards.reward_model`, :mod:`~grpo_core.rewards.tools`), each of which
calls :func:`~grpo_core.rewards.registry.register`; the registry imports none of them. It does not import torch,
transformers, trl or sympy.
"""

from grpo_core.rewards import answer, code, plugin, reward_model, text, tools  # noqa: F401  (each registers its rules on import)
from grpo_core.rewards.compose import GroupScore, RewardGate, RewardSpec, build_reward_funcs, score_group
from grpo_core.rewards.registry import RewardRule, RuleParam, all_rules, completion_text, get_rule

__all__ = [
    "GroupScore",
    "RewardGate",
    "RewardRule",
    "RewardSpec",
    "RuleParam",
    "all_rules",
    "build_reward_funcs",
    "completion_text",
    "get_rule",
    "score_group",
]
