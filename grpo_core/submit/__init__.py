"""Submitting runs: validation, the queue, sweeps."""
