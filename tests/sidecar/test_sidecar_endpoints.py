"""Endpoint credentials: CA, serving certificate, tokens, kept across restarts; Kueue-valid kubeconfigs."""

from __future__ import annotations

import os
import ssl
import stat
from pathlib import Path

from cryptography import x509

from mkpolicy.kube.kubeconfig import kueue_violations
from mkpolicy.sidecar.endpoints import certificate_hosts, endpoint_url, load_or_create


def test_generated_credentials_and_kubeconfig() -> None:
    creds = load_or_create(None, ["worker1", "worker2"], ["127.0.0.1", "localhost"])
    assert creds.tokens["worker1"] != creds.tokens["worker2"]
    config = creds.kubeconfig("worker1", "https://127.0.0.1:9443")
    assert kueue_violations(config) == []
    assert config["users"][0]["user"]["token"] == creds.tokens["worker1"]
    assert isinstance(creds.server_context(), ssl.SSLContext)
    cert = x509.load_pem_x509_certificate(creds.serving.cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    assert creds.tokens["worker1"] not in repr(creds)


def test_token_check_is_exact() -> None:
    creds = load_or_create(None, ["worker1", "worker2"], ["127.0.0.1"])
    token = creds.tokens["worker1"]
    assert creds.check_token("worker1", f"Bearer {token}")
    assert not creds.check_token("worker2", f"Bearer {token}")
    assert not creds.check_token("worker1", f"Bearer {token}x")
    assert not creds.check_token("worker1", token)
    assert not creds.check_token("worker1", None)
    assert not creds.check_token("nobody", f"Bearer {token}")


def test_state_dir_keeps_credentials(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = load_or_create(str(state), ["w1"], ["127.0.0.1"])
    mode = stat.S_IMODE(os.stat(state).st_mode)
    assert mode == 0o700
    for name in ("ca.crt", "ca.key", "tls.crt", "tls.key", "tokens.json"):
        assert stat.S_IMODE(os.stat(state / name).st_mode) == 0o600, name
    again = load_or_create(str(state), ["w1", "w2"], ["127.0.0.1"])
    assert again.ca.cert_pem == first.ca.cert_pem
    assert again.serving.cert_pem == first.serving.cert_pem
    assert again.tokens["w1"] == first.tokens["w1"] and "w2" in again.tokens
    # a new host name needs a new serving certificate from the same CA
    wider = load_or_create(str(state), ["w1"], ["127.0.0.1", "sidecar.local"])
    assert wider.ca.cert_pem == first.ca.cert_pem and wider.serving.cert_pem != first.serving.cert_pem
    # a damaged CA is replaced (and with it the serving certificate)
    (state / "ca.crt").write_bytes(b"garbage")
    fresh = load_or_create(str(state), ["w1"], ["127.0.0.1"])
    assert fresh.ca.cert_pem != first.ca.cert_pem


def test_urls_and_hosts() -> None:
    assert endpoint_url("0.0.0.0", 9443) == "https://127.0.0.1:9443"
    assert endpoint_url("::1", 9443) == "https://[::1]:9443"
    assert certificate_hosts("::", ["x.example"]) == ["::1", "127.0.0.1", "localhost", "x.example"]
