"""A run and its files: the typed config, TRL fields, the run folder, provenance, failures, export, run actions."""
