"""Integration tests: real workers training a tiny local model through the launcher, real servers, real faults."""
