"""Helpers for the loopback API server tests: typed clients and a raw HTTPS client.

With ``MKPOLICY_E2E_*`` kubeconfigs (docs/testing.md) the ``apiserver`` fixture is a real
cluster: tests that run there work in the ``namespace`` fixture (``pr`` for
PipelineRuns), the rest are marked ``loopback_only``.
"""

from __future__ import annotations

import json
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import urllib3
from kubernetes.dynamic import DynamicClient

from mkpolicy.testing.apiserver import ApiServer
from mkpolicy.testing.targets import is_real


@dataclass
class Clients:
    """The kubernetes client APIs of one server."""

    api: kubernetes.client.ApiClient
    core: kubernetes.client.CoreV1Api
    batch: kubernetes.client.BatchV1Api
    custom: kubernetes.client.CustomObjectsApi
    cache_dir: Path

    def dynamic(self) -> DynamicClient:
        # A private discovery cache: the default file is keyed by URL and outlives the server.
        return DynamicClient(self.api, cache_file=str(self.cache_dir / "discovery.json"))


def clients_for(server: ApiServer, cache_dir: Path) -> Clients:
    api = server.api_client()
    return Clients(
        api=api,
        core=kubernetes.client.CoreV1Api(api),
        batch=kubernetes.client.BatchV1Api(api),
        custom=kubernetes.client.CustomObjectsApi(api),
        cache_dir=cache_dir,
    )


@pytest.fixture
def k8s(apiserver: ApiServer, tmp_path: Path) -> Iterator[Clients]:
    """Typed, custom-object and dynamic clients for the ``apiserver`` fixture."""
    c = clients_for(apiserver, tmp_path)
    yield c
    c.api.close()


@dataclass
class Reply:
    """A raw HTTP reply."""

    status: int
    headers: dict[str, str]
    data: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.data)


class Raw:
    """A plain HTTPS client that can send anything (malformed bodies, wrong types, no token).

    On a real cluster: its CA and credentials from the kubeconfig, writes held to the test namespace.
    """

    def __init__(self, server: Any) -> None:
        self.server = server
        self._ca = None
        if is_real(server):
            ctx = server.ssl_context()
        else:
            self._ca = tempfile.NamedTemporaryFile(suffix=".pem")  # noqa: SIM115 - lives as long as the client
            self._ca.write(server.ca_pem)
            self._ca.flush()
            ctx = ssl.create_default_context(cafile=self._ca.name)
        self.pool = urllib3.PoolManager(ssl_context=ctx, retries=False, timeout=urllib3.Timeout(total=10))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        token: str | None = "",
        headers: dict[str, str] | None = None,
        timeout: float = 10.0,
    ) -> Reply:
        hdrs = {"Accept": "application/json"}
        if token == "" and is_real(self.server):
            hdrs.update(self.server.auth_headers())  # a token, or nothing when a client certificate authenticates
        else:
            tok = self.server.token if token == "" else token
            if tok is not None:
                hdrs["Authorization"] = f"Bearer {tok}"
        if is_real(self.server):
            self.server.check_write(method, path)
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            hdrs["Content-Type"] = content_type
        hdrs.update(headers or {})
        resp = self.pool.request(
            method, self.server.url + path, body=data, headers=hdrs, timeout=urllib3.Timeout(total=timeout)
        )
        return Reply(resp.status, dict(resp.headers), resp.data)

    def close(self) -> None:
        self.pool.clear()
        if self._ca is not None:
            self._ca.close()


@pytest.fixture
def raw(apiserver: ApiServer) -> Iterator[Raw]:
    """A raw HTTPS client for the ``apiserver`` fixture."""
    r = Raw(apiserver)
    yield r
    r.close()


@pytest.fixture
def pr(namespace: str) -> tuple[str, str, str, str]:
    """``(group, version, namespace, plural)`` of PipelineRuns in the test's namespace, for ``CustomObjectsApi(*pr)``."""
    return ("tekton.dev", "v1", namespace, "pipelineruns")


def pipelinerun(name: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    """A minimal Tekton PipelineRun."""
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"pipelineRef": {"name": "build"}, **spec},
    }


def simple_crd(
    *, group: str = "example.com", kind: str = "Widget", plural: str = "widgets", status: bool = True,
    scope: str = "Namespaced", versions: tuple[str, ...] = ("v1",), selectable: tuple[str, ...] = (),
) -> dict[str, Any]:  # fmt: skip
    """A small CRD with a preserve-unknown-fields spec, optional status subresource."""
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"size": {"type": "integer", "default": 1}, "color": {"type": "string"}},
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "shortNames": ["wd"]},
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": i == 0,
                    "schema": {"openAPIV3Schema": schema},
                    **({"subresources": {"status": {}}} if status else {}),
                    **({"selectableFields": [{"jsonPath": f".{p}"} for p in selectable]} if selectable else {}),
                }
                for i, v in enumerate(versions)
            ],
        },
    }
