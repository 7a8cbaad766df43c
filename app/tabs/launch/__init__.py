"""The Launch tab: its layout, the form <-> RunConfig mapping, the reward tools, the memory panel, sweeps."""
