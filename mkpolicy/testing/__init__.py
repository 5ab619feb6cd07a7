"""Test support shipped with mkpolicy: the loopback Kubernetes API server (DESIGN.md §5)."""
