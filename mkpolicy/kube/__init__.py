"""Kubeconfig loading and validation, Kubernetes API helpers."""
