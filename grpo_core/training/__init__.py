"""Where and how a queued run trains: the launcher, its executors (local or Ray), GPUs, headless training."""
