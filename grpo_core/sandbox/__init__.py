"""Running untrusted code in its box: namespaces, seccomp, resource limits, reaping."""
