"""Core of grpo-dashboard: run configs, datasets, reward rules, the TRL trainer wrapper, the worker and launcher.

Nothing here imports gradio; only ``grpo_core.trainer`` and ``grpo_core.worker`` import torch and TRL.
"""

__version__ = "0.1.0"
