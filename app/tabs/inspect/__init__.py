"""The Inspect tab: a step's groups, the tools across steps, the token view."""
