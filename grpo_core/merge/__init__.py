"""Merging a run's LoRA adapter into its base model: job.py (the web half, imports no torch), worker.py (the child:
``python -m grpo_core.merge.worker``), talking through :mod:`grpo_core.child_jobs`."""
