"""Kueue's MultiKueue kubeconfig rules, as mkpolicy applies them to generated and given kubeconfigs."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from mkpolicy.kube.certs import make_ca
from mkpolicy.kube.kubeconfig import (
    KubeconfigError,
    check_kueue_rules,
    kueue_violations,
    make_kubeconfig,
    parse_kubeconfig,
    rest_config,
    valid_server_host,
)

CA = make_ca("test-ca")


def good() -> dict[str, Any]:
    return make_kubeconfig("https://10.0.0.1:6443", CA.cert_pem, "t0ken", cluster="worker1")


def with_cluster(**fields: Any) -> dict[str, Any]:
    cfg = good()
    cfg["clusters"][0]["cluster"].update(fields)
    return cfg


def with_user(**fields: Any) -> dict[str, Any]:
    cfg = good()
    cfg["users"][0]["user"].update(fields)
    return cfg


def test_generated_kubeconfig_passes() -> None:
    assert kueue_violations(good()) == []
    check_kueue_rules(good())


def no_current_context() -> dict[str, Any]:
    cfg = good()
    del cfg["current-context"]
    return cfg


# Kueue's validateKubeconfig/validateRestConfig (multikueuecluster.go) and what client-go's
# RESTConfigFromKubeConfig refuses on the way (tools/clientcmd/validation.go).
@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (with_user(tokenFile="/var/run/token"), "tokenFile is not allowed"),
        (with_user(username="admin", password="secret"), "basic auth"),
        (with_user(exec={"command": "gke-gcloud-auth-plugin", "apiVersion": "v1"}), "exec credential plugins"),
        (with_user(**{"auth-provider": {"name": "oidc"}}), "auth-provider plugins"),
        (with_cluster(**{"insecure-skip-tls-verify": True}), "insecure-skip-tls-verify is not allowed"),
        (with_cluster(**{"certificate-authority": "/etc/ca.crt"}), "certificate-authority file paths"),
        (with_cluster(server="https://invalid_host.example.com"), "untrusted server endpoint"),
        (with_cluster(server="api.example.com:6443"), "untrusted server endpoint"),
        (with_cluster(server=""), "a server URL is required"),
        (with_cluster(**{"proxy-url": "ftp://proxy:21"}), "expected an http, https or socks5 URL"),
        (with_user(**{"client-certificate-data": "Zm9v"}), "a client certificate needs client-key-data"),
        (with_cluster(**{"certificate-authority-data": base64.b64encode(b"junk").decode()}), "not a base64 PEM"),
        (no_current_context(), "expected current-context to name a context"),
    ],
    ids=[
        "token-file",
        "basic-auth",
        "exec",
        "auth-provider",
        "insecure",
        "ca-file",
        "bad-host",
        "no-scheme",
        "no-server",
        "proxy-scheme",
        "cert-without-key",
        "ca-not-pem",
        "no-current-context",
    ],
)
def test_each_rule_rejects(config: dict[str, Any], expected: str) -> None:
    problems = kueue_violations(config)
    assert any(expected in p for p in problems), problems
    with pytest.raises(KubeconfigError) as info:
        check_kueue_rules(config, "w.kubeconfig")
    assert expected in str(info.value)
    assert str(info.value.location) == "w.kubeconfig"


def without_ca() -> dict[str, Any]:
    cfg = good()
    del cfg["clusters"][0]["cluster"]["certificate-authority-data"]
    return cfg


def other_user_with_exec() -> dict[str, Any]:
    cfg = good()
    cfg["users"].append({"name": "unused", "user": {"exec": {"command": "x"}, "username": "u"}})
    return cfg


# What Kueue accepts although it looks unsafe: the sidecar must accept it too.
@pytest.mark.parametrize(
    "config",
    [
        with_cluster(server="http://10.0.0.1:8080"),
        without_ca(),
        with_user(**{"client-certificate": "/etc/c.crt", "client-key": "/etc/c.key"}),
        with_cluster(server="https://user:pw@api.example.com"),
        with_cluster(**{"proxy-url": "http://proxy.internal:3128"}),
        with_cluster(**{"proxy-url": "socks5://127.0.0.1:1080"}),
        with_cluster(server="https://API.Example.com:6443"),
        other_user_with_exec(),
    ],
    ids=[
        "http",
        "system-roots",
        "client-cert-files",
        "user-info",
        "http-proxy",
        "socks5-proxy",
        "upper-case",
        "unused-user",
    ],
)
def test_what_kueue_accepts(config: dict[str, Any]) -> None:
    assert kueue_violations(config) == []


def test_all_violations_are_listed() -> None:
    cfg = with_user(tokenFile="/t", username="u")
    cfg["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    with pytest.raises(KubeconfigError) as info:
        check_kueue_rules(cfg)
    assert len(info.value.violations) == 3, info.value.violations


def test_unresolvable_current_context() -> None:
    cfg = good()
    cfg["current-context"] = "nope"
    assert any("current-context 'nope'" in p for p in kueue_violations(cfg))
    cfg = good()
    cfg["contexts"][0]["context"]["cluster"] = "missing"
    assert any("names cluster 'missing'" in p for p in kueue_violations(cfg))


@pytest.mark.parametrize(
    ("server", "ok"),
    [
        ("https://API.Example.com:6443", True),
        ("https://[2001:db8::1]:6443", True),
        ("https://127.0.0.1:9443", True),
        ("https://my_host:443", False),
        ("https://-bad.example.com", False),
        ("https://[::1]", False),  # Go's SplitHostPort fails without a port: the brackets stay
        ("https://[::1]:443", True),
        ("https://[fe80::1%25eth0]:443", False),
        ("https://api.example.com:https", False),
        ("api.example.com", False),
        ("https://user:pw@api.example.com", True),
    ],
)
def test_server_host(server: str, ok: bool) -> None:
    assert valid_server_host(server) is ok


def test_rest_config_of_a_good_kubeconfig() -> None:
    rc = rest_config(good())
    assert rc.server == "https://10.0.0.1:6443"
    assert rc.token == "t0ken"
    assert rc.ca_pem == CA.cert_pem
    assert "t0ken" not in repr(rc)
    assert rc.ssl_context() is not None


def test_rest_config_enforces_rules_for_workers_only(tmp_path: Any) -> None:
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(CA.cert_pem)
    cfg = good()
    cluster = cfg["clusters"][0]["cluster"]
    del cluster["certificate-authority-data"]
    cluster["certificate-authority"] = "ca.crt"
    with pytest.raises(KubeconfigError, match="certificate-authority file paths"):
        rest_config(cfg, "worker")
    # the manager's own kubeconfig may use files (relative to its directory)
    rc = rest_config(copy.deepcopy(cfg), "manager", kueue_rules=False, base_dir=str(tmp_path))
    assert rc.ca_pem == CA.cert_pem


def test_rest_config_refuses_plugins_even_without_rules() -> None:
    with pytest.raises(KubeconfigError, match="exec credential plugins are not supported"):
        rest_config(with_user(exec={"command": "x"}), kueue_rules=False)


def test_parse_errors_are_located() -> None:
    with pytest.raises(KubeconfigError) as info:
        parse_kubeconfig("clusters: [\n  - a\n  b: c\n", "k.yaml")
    location = info.value.location
    assert (location.file, location.line, location.column) == ("k.yaml", 2, 3)  # the "-" in the flow sequence
    # The words after "malformed YAML:" are the YAML parser's (libyaml's or PyYAML's, whichever is installed).
    assert str(info.value).startswith("k.yaml:2:3: malformed YAML: "), str(info.value)
    with pytest.raises(KubeconfigError, match="expected kind 'Config'"):
        parse_kubeconfig("kind: Pod\n")
    with pytest.raises(KubeconfigError, match="expected a kubeconfig mapping"):
        parse_kubeconfig("- 1\n")
    with pytest.raises(KubeconfigError, match="expected one YAML document; found 2"):
        parse_kubeconfig("kind: Config\n---\nkind: Config\n")
    bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)
    )
    with pytest.raises(KubeconfigError, match="k.yaml:1:1: the YAML stream expands to more than"):
        parse_kubeconfig(bomb, "k.yaml")


def test_rest_config_reads_what_kueue_accepts(tmp_path: Any) -> None:
    """Client certificate files (relative to the kubeconfig's directory), proxy-url, user info."""
    from mkpolicy.kube.certs import make_serving_cert
    from mkpolicy.kube.rest import TokenSource

    pair = make_serving_cert(CA, ["client"], "client")
    (tmp_path / "c.crt").write_bytes(pair.cert_pem)
    (tmp_path / "c.key").write_bytes(pair.key_pem)
    cfg = with_cluster(server="https://bob:s%40cret@api.example.com:6443", **{"proxy-url": "http://proxy:3128"})
    user = cfg["users"][0]["user"]
    del user["token"]
    user.update({"client-certificate": "c.crt", "client-key": "c.key"})
    rc = rest_config(cfg, "w", base_dir=str(tmp_path))
    assert (rc.client_cert_pem, rc.client_key_pem) == (pair.cert_pem, pair.key_pem)
    assert rc.proxy_url == "http://proxy:3128"
    assert "proxy" not in repr(rc)
    # Go's HTTP client sends the URL's user info as basic auth when nothing else authenticates.
    assert TokenSource(rc).authorization() == "Basic " + base64.b64encode(b"bob:s@cret").decode()
    assert TokenSource(rest_config(good())).authorization() == "Bearer t0ken"
