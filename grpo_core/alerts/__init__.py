"""Alerts a run sends: webhook messages, and where a webhook may POST."""
