"""The reward workbench: re-score a run's recorded groups with another reward composition, compare with what the run
recorded, and keep the result as a rescoring of the run (never over what the run recorded). Only worker.py imports
torch.

advantages.py (TRL's group-relative advantage, pure), request.py (a rescoring request and its bounds), compare.py
(the comparison of two scorings, pure), composition.py (launch config, presets), job.py (the web half: the request,
the count copied into the store, the comparison stored), worker.py (the child: ``python -m grpo_core.rescore.worker``);
the two talk through :mod:`grpo_core.child_jobs`.
"""
