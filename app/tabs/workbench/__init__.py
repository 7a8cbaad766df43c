"""The Reward workbench tab: re-score a run's recorded groups with changed rules, compare, launch or save a preset
(layout.py lays out, handlers.py answers by field name, tab.py connects them)."""
