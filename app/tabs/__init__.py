"""One builder per dashboard tab; each returns its components by name."""
