"""The preflight: a few groups sampled before launch and the report on them. report.py (the report, pure),
verdict.py (go / fix first, and advice), job.py (the web half: start, poll, stop the child), worker.py (the child:
``python -m grpo_core.preflight.worker CONFIG``, imports torch)."""
