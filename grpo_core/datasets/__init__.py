"""Prompt datasets: what one is (prompt_dataset), reading its files (formats; Parquet and Arrow in columnar, within
columnar_budget), its values made plain (plain_values) and its rows checked (checks); the library in the data
directory, HumanEval, a run's rows."""
