"""Shared pytest configuration: the loopback API server fixtures (mkpolicy.testing.fixtures)."""

pytest_plugins = ["mkpolicy.testing.fixtures"]
