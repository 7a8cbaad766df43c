"""The policy model, seen from the web side without torch: where it comes from, prompt lengths, a memory estimate."""
