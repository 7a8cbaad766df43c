"""Running untrusted code in its box (callers import :mod:`grpo_core.sandbox.box`): the host's isolation mode,
namespaces, seccomp, resource limits, reaping, the uid pool."""
