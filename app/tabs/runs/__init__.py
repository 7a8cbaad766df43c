"""The Runs tab: the table, run controls, the doctor panel, compare, export."""
