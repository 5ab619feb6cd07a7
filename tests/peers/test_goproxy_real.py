"""The bench's Go reverse proxy (peers/goproxy) builds through the peers' cache and proxies a real
kube-apiserver: the client's token checked, the worker's credentials (the admin client certificate)
used upstream."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.controlplane import KubeCluster
from mkpolicy.testing.peers.goproxy import GoProxy


def get(proxy: GoProxy, path: str, token: str | None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(proxy.url + path, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, context=proxy.client_tls(), timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.real_peers
def test_go_proxy_swaps_the_token_for_the_workers_credentials(real_kube: KubeCluster, tmp_path: Path) -> None:
    pki = real_kube.plane.pki
    with GoProxy(
        tmp_path, real_kube.url, pki.ca.cert_pem, client_cert=(pki.admin.cert_pem, pki.admin.key_pem)
    ) as proxy:
        assert build.binary_path(build.goproxy()).is_file()
        code, body = get(proxy, "/api/v1/namespaces/default", proxy.token)
        assert code == 200
        assert body["metadata"] == real_kube.admin.get("v1", "Namespace", "default")["metadata"]
        assert get(proxy, "/api/v1/namespaces/default", None)[0] == 401
        assert get(proxy, "/api/v1/namespaces/default", proxy.token + "x")[0] == 401

