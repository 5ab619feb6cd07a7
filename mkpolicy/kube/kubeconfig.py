"""Kubeconfig documents: building them for endpoints mkpolicy serves."""

from __future__ import annotations

import base64
import os
from typing import Any


def make_kubeconfig(
    server: str,
    ca_pem: bytes,
    token: str,
    cluster: str = "mkpolicy",
    user: str | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """A kubeconfig with one cluster, user and context: TLS with the CA as data, a bearer token.

    This is the shape Kueue accepts for MultiKueue clusters (no file paths, no exec or
    auth-provider plugins, no basic auth).
    """
    user = user or f"{cluster}-user"
    context: dict[str, Any] = {"cluster": cluster, "user": user}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode("ascii"),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": cluster, "context": context}],
        "current-context": cluster,
    }


def write_kubeconfig(path: str, config: dict[str, Any]) -> None:
    """Write ``config`` as YAML, readable by the owner only (it holds a token)."""
    import yaml

    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump(config, fh, sort_keys=False)
    os.replace(tmp, path)
