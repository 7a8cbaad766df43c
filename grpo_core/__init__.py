"""Core of grpo-dashboard, in two sides.

The top level (config, run files and rows, processes, run actions, datasets, launcher, jobs, rewards, doctor,
export) is what the web process may import: nothing here imports gradio, torch, transformers, TRL or PEFT.
:mod:`grpo_core.engine` and the modules named ``worker.py`` (``python -m grpo_core.<subject>.worker``) are the other
side, imported only by child processes (training, preflight, try the model, merge, reward check, rescore).
"""

__version__ = "0.1.0"
