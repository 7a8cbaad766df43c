"""Reward rules for GRPO: a registry of named, parametrised reward functions with TRL's signature, and their
weighted composition.

Public API::

    RewardSpec, build_reward_funcs, score_group      # a run's rewards -> TRL reward_funcs / weights; try-out scoring
    RewardRule, RuleParam, all_rules, get_rule       # the registry the Launch form is generated from
    completion_text                                  # the text of a standard or conversational completion

Importing this package does not import torch, transformers, trl or sympy.
"""

from grpo_core.rewards.compose import GroupScore, RewardSpec, build_reward_funcs, score_group
from grpo_core.rewards.registry import RewardRule, RuleParam, all_rules, completion_text, get_rule

__all__ = [
    "GroupScore",
    "RewardRule",
    "RewardSpec",
    "RuleParam",
    "all_rules",
    "build_reward_funcs",
    "completion_text",
    "get_rule",
    "score_group",
]
