"""Lint rules for FrameworkPolicies, type-checking CEL against schemas, output formats."""
