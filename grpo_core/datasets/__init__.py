"""Prompt datasets: file formats and their checks, the library in the data directory, HumanEval, a run's rows."""
