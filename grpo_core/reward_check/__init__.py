"""The reward check: plugin reward functions tried on a sample in a child before a launch. job.py (the web half,
imports no torch), worker.py (the child: ``python -m grpo_core.reward_check.worker``), talking through
:mod:`grpo_core.child_jobs`."""
