"""KubeClient.reconfigure: a rotated configuration is taken up whole, or not at all."""

from __future__ import annotations

import pytest

from mkpolicy.kube.certs import make_ca
from mkpolicy.kube.client import KubeClient
from mkpolicy.kube.rest import RestConfig, RestConfigError


def test_a_configuration_that_cannot_be_used_changes_nothing() -> None:
    first = RestConfig(server="https://127.0.0.1:6443", ca_pem=make_ca("first").cert_pem, token="t1")
    client = KubeClient(first)
    with pytest.raises(RestConfigError):
        client.reconfigure(RestConfig(server="https://127.0.0.1:7443", ca_pem=b"not a certificate", token="t2"))
    assert client.config is first and client.url("/api") == "https://127.0.0.1:6443/api"
    rotated = RestConfig(server="https://127.0.0.1:7443", ca_pem=make_ca("second").cert_pem, token="t2")
    client.reconfigure(rotated)
    assert client.config is rotated and client.url("/api") == "https://127.0.0.1:7443/api"
    assert client.headers()["Authorization"] == "Bearer t2"
