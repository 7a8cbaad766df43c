"""Try the model: the base model and a run's trained weights sampled side by side. job.py (the web half, imports no
torch), worker.py (the child: ``python -m grpo_core.try_model.worker``), talking through :mod:`grpo_core.child_jobs`."""
