"""Kubeconfig documents: building them, reading them, and Kueue's MultiKueue rules.

Kueue (>= 0.15) refuses a MultiKueueCluster kubeconfig that could run code or read
files in the manager pod, or that weakens TLS. :func:`kueue_violations` applies the
same rules, and :func:`rest_config` turns a kubeconfig into the connection settings
mkpolicy's own HTTP client uses.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import mkpolicy.yamldata as yamldata
from mkpolicy.errors import InputError, Location, MkpolicyError
from mkpolicy.kube.rest import RestConfig
from mkpolicy.kube.secretfiles import write_secret

#: The key under which Kueue reads a MultiKueueCluster's kubeconfig from its Secret.
KUBECONFIG_SECRET_KEY = "kubeconfig"

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")


class KubeconfigError(MkpolicyError):
    """A kubeconfig is unreadable, incomplete, or breaks Kueue's security rules.

    ``violations`` lists every rule broken (one message each).
    """

    def __init__(self, message: str, location: Location | None = None, violations: list[str] | None = None) -> None:
        super().__init__(message, location)
        self.violations: list[str] = violations if violations is not None else [message]


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
    write_secret(path, dump_kubeconfig(config).encode("utf-8"))


def dump_kubeconfig(config: Mapping[str, Any]) -> str:
    """``config`` as YAML text (the form Kueue reads from a Secret)."""
    import yaml

    return str(yaml.safe_dump(dict(config), sort_keys=False))


def parse_kubeconfig(text: str | bytes, source: str = "<kubeconfig>") -> dict[str, Any]:
    """Parse kubeconfig YAML (or JSON) into a mapping; raises :class:`KubeconfigError`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise KubeconfigError("expected UTF-8 YAML; found binary data", Location(source)) from None
    try:
        docs = yamldata.load_all(text, source)
    except InputError as exc:
        raise KubeconfigError(exc.message, exc.location) from None
    if len(docs) > 1:
        raise KubeconfigError(f"expected one YAML document; found {len(docs)}", Location(source))
    data = docs[0] if docs else None
    if not isinstance(data, dict):
        raise KubeconfigError(f"expected a kubeconfig mapping; found {type(data).__name__}", Location(source))
    if data.get("kind", "Config") != "Config":
        raise KubeconfigError(f"expected kind 'Config'; found {data.get('kind')!r}", Location(source))
    return data


def load_kubeconfig(path: str) -> dict[str, Any]:
    """Read and parse the kubeconfig file at ``path``."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise KubeconfigError(f"cannot read kubeconfig: {exc.strerror or exc}", Location(path)) from None
    return parse_kubeconfig(raw, path)


def _named(config: Mapping[str, Any], section: str, item: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    entries = config.get(section) or []
    if not isinstance(entries, list):
        return out
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            body = entry.get(item)
            out[entry["name"]] = body if isinstance(body, dict) else {}
    return out


def _current(
    config: Mapping[str, Any], context: str | None = None
) -> tuple[str, dict[str, Any], str, dict[str, Any], str, dict[str, Any]]:
    """(context, cluster, user) names and bodies of ``context`` (default: the current one)."""
    contexts = _named(config, "contexts", "context")
    name = context or config.get("current-context")
    if not name:
        if len(contexts) != 1:
            raise KubeconfigError(f"expected current-context to name a context; found {name!r}")
        name = next(iter(contexts))
    if name not in contexts:
        raise KubeconfigError(f"current-context {name!r} is not among the contexts ({', '.join(contexts) or 'none'})")
    ctx = contexts[name]
    clusters, users = _named(config, "clusters", "cluster"), _named(config, "users", "user")
    cluster_name, user_name = str(ctx.get("cluster") or ""), str(ctx.get("user") or "")
    if cluster_name not in clusters:
        raise KubeconfigError(f"context {name!r} names cluster {cluster_name!r}, which is not defined")
    if user_name and user_name not in users:
        raise KubeconfigError(f"context {name!r} names user {user_name!r}, which is not defined")
    return name, ctx, cluster_name, clusters[cluster_name], user_name, users.get(user_name, {})


def valid_server_host(server: str) -> bool:
    """Kueue's endpoint rule: the host is an IP address or a DNS-1123 subdomain (case-insensitive)."""
    try:
        host = urlsplit(server.lower()).hostname or ""
    except ValueError:
        return False
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return len(host) <= 253 and bool(_DNS_SUBDOMAIN.match(host))


def kueue_violations(config: Mapping[str, Any], *, require_ca_data: bool = True) -> list[str]:
    """Every MultiKueue kubeconfig rule ``config`` breaks (empty when it is acceptable).

    The rules are Kueue's (``validateKubeconfig`` / ``validateRestConfig``): no token
    files, no ``insecure-skip-tls-verify``, no CA, client-certificate or client-key
    file paths, a server URL that is ``https`` with a plain IP or DNS host and no user
    info, no basic auth, no exec or auth-provider plugins. ``require_ca_data`` also
    asks for ``certificate-authority-data`` on the current cluster (the shape
    mkpolicy generates; stock Kueue falls back to the system roots).
    """
    problems: list[str] = []
    for name, user in _named(config, "users", "user").items():
        if user.get("tokenFile"):
            problems.append(f"user {name!r}: tokenFile is not allowed (put the token inline as 'token')")
        for key in ("client-certificate", "client-key"):
            if user.get(key):
                problems.append(f"user {name!r}: {key} file paths are not allowed (use {key}-data)")
        if user.get("username") or user.get("password"):
            problems.append(f"user {name!r}: basic auth (username/password) is not allowed")
        if user.get("exec"):
            problems.append(f"user {name!r}: exec credential plugins are not allowed")
        if user.get("auth-provider"):
            problems.append(f"user {name!r}: auth-provider plugins are not allowed")
    for name, cluster in _named(config, "clusters", "cluster").items():
        if cluster.get("insecure-skip-tls-verify"):
            problems.append(f"cluster {name!r}: insecure-skip-tls-verify is not allowed (TLS is required)")
        if cluster.get("certificate-authority"):
            problems.append(
                f"cluster {name!r}: certificate-authority file paths are not allowed (use certificate-authority-data)"
            )
        if not cluster.get("server"):
            problems.append(f"cluster {name!r}: a server URL is required")
    try:
        _, _, cluster_name, cluster, _, _ = _current(config)
    except KubeconfigError as exc:
        problems.append(exc.message)
        return problems
    server = str(cluster.get("server") or "")
    if server:
        parts = urlsplit(server)
        if parts.scheme.lower() != "https":
            problems.append(f"cluster {cluster_name!r}: server {server!r} must use https (TLS is required)")
        if parts.username is not None or parts.password is not None:
            problems.append(f"cluster {cluster_name!r}: the server URL must not carry user info")
        if not valid_server_host(server):
            problems.append(
                f"cluster {cluster_name!r}: untrusted server endpoint {server!r} "
                "(expected an IP address or a DNS-1123 host name)"
            )
    ca_data = cluster.get("certificate-authority-data")
    if ca_data:
        if _decode_pem(ca_data, b"CERTIFICATE") is None:
            problems.append(f"cluster {cluster_name!r}: certificate-authority-data is not a base64 PEM certificate")
    elif require_ca_data:
        problems.append(f"cluster {cluster_name!r}: certificate-authority-data is required (the CA as data)")
    return problems


def check_kueue_rules(config: Mapping[str, Any], source: str = "<kubeconfig>", *, require_ca_data: bool = True) -> None:
    """Raise :class:`KubeconfigError` listing every Kueue rule ``config`` breaks."""
    problems = kueue_violations(config, require_ca_data=require_ca_data)
    if problems:
        summary = problems[0] if len(problems) == 1 else f"{len(problems)} problems: " + "; ".join(problems)
        raise KubeconfigError(f"kubeconfig rejected by Kueue's rules: {summary}", Location(source), problems)


def _decode_pem(value: Any, marker: bytes) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        raw = base64.b64decode(value.encode("ascii"), validate=False)
    except (binascii.Error, UnicodeEncodeError):
        return None
    return raw if b"-----BEGIN " in raw and marker in raw else None


def _read_file(path: str, what: str, base: str | None) -> bytes:
    full = path if os.path.isabs(path) or base is None else os.path.join(base, path)
    try:
        with open(full, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise KubeconfigError(f"cannot read {what} {full!r}: {exc.strerror or exc}") from None


def rest_config(
    config: Mapping[str, Any],
    source: str = "<kubeconfig>",
    *,
    kueue_rules: bool = True,
    base_dir: str | None = None,
    context: str | None = None,
) -> RestConfig:
    """The connection settings of ``config``'s current context.

    With ``kueue_rules`` (worker kubeconfigs) the rules of :func:`kueue_violations`
    apply first. Without them (the manager's own kubeconfig) file paths are read
    relative to ``base_dir``; exec and auth-provider plugins and basic auth are still
    refused, because mkpolicy's client cannot run them. ``context`` picks a context
    other than the current one.
    """
    if kueue_rules:
        check_kueue_rules(config, source)
    try:
        context_name, ctx, cluster_name, cluster, user_name, user = _current(config, context)
    except KubeconfigError as exc:
        raise KubeconfigError(exc.message, Location(source)) from None
    for key, what in (("exec", "exec credential plugins"), ("auth-provider", "auth-provider plugins")):
        if user.get(key):
            raise KubeconfigError(f"user {user_name!r}: {what} are not supported", Location(source))
    if user.get("username") or user.get("password"):
        raise KubeconfigError(f"user {user_name!r}: basic auth is not supported", Location(source))
    server = str(cluster.get("server") or "")
    if not server:
        raise KubeconfigError(f"cluster {cluster_name!r}: a server URL is required", Location(source))
    try:
        ca_pem = _pem_field(cluster, "certificate-authority", "CA certificate", base_dir)
        cert_pem = _pem_field(user, "client-certificate", "client certificate", base_dir)
        key_pem = _pem_field(user, "client-key", "client key", base_dir)
    except KubeconfigError as exc:
        raise KubeconfigError(exc.message, Location(source)) from None
    if (cert_pem is None) != (key_pem is None):
        raise KubeconfigError(f"user {user_name!r}: a client certificate needs its key (and back)", Location(source))
    token = user.get("token")
    token_file = user.get("tokenFile")
    if token_file and base_dir is not None and not os.path.isabs(token_file):
        token_file = os.path.join(base_dir, token_file)
    return RestConfig(
        server=server.rstrip("/"),
        ca_pem=ca_pem,
        token=str(token) if token else None,
        token_file=str(token_file) if token_file and not token else None,
        client_cert_pem=cert_pem,
        client_key_pem=key_pem,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.get("tls-server-name") or None,
        namespace=ctx.get("namespace") or None,
        context=context_name,
    )


def _pem_field(body: Mapping[str, Any], key: str, what: str, base_dir: str | None) -> bytes | None:
    data = body.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(str(data).encode("ascii"))
        except (binascii.Error, UnicodeEncodeError):
            raise KubeconfigError(f"{key}-data: expected base64 data for the {what}") from None
    path = body.get(key)
    if path:
        return _read_file(str(path), what, base_dir)
    return None
