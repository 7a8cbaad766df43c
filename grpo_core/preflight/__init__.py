"""The preflight: a few groups sampled before launch and the report on them. report.py (the report, pure),
verdict.py (go / fix first, and advice), job.py (the web half: the request, the report read back), worker.py (the
child: ``python -m grpo_core.preflight.worker``, imports torch); the two talk through :mod:`grpo_core.child_jobs`."""
