"""The command line, ``grpo-dashboard`` (``python -m app``): main.py (serve, train, sweep, preflight and the parser),
integrations.py (token, sync), rescore.py (the reward workbench, headless)."""
