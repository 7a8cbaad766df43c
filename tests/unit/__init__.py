"""Unit tests: pure functions, the store on a real SQLite file (and PostgreSQL), the sandbox against hostile code."""
