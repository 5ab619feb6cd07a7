"""A MultiKueueCluster's kubeconfig, as Kueue reads and checks it.

``pkg/controller/admissionchecks/multikueue/multikueuecluster.go`` (v0.15 to main, the
same code): ``validateKubeconfig`` parses the Secret's ``kubeconfig`` key
(``clientcmd.Load``) and refuses, in this order,

1. any user with ``tokenFile`` ("tokenFile is not allowed");
2. any cluster with ``insecure-skip-tls-verify``, a ``certificate-authority`` file path, or
   no ``server``;
3. then, on the REST config of the current context (``clientcmd.RESTConfigFromKubeConfig``,
   which fails on a kubeconfig it cannot use): a bearer token file, a host that is neither
   an IP address nor a DNS-1123 subdomain (``isValidHostname``, case-insensitive), basic
   auth, an exec plugin, an auth provider (``validateRestConfig``).

Not refused: ``http://`` servers, no CA at all (the system roots), client certificate and
key *files*, ``proxy-url``, user info in the server URL. A refusal is the
MultiKueueCluster's ``Active=False`` with reason ``InsecureKubeConfig``; a Secret or key
that is missing is ``BadKubeConfig`` (``loadClientConfig``, ``getKubeConfigFromSecret``).

This module is written from Kueue's and client-go's code, independently of mkpolicy's own
kubeconfig handling, which it is used to test.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*$")
#: Characters Go's url.Parse accepts in a host (net/url shouldEscape, encodeHost).
_HOST_CHARS = re.compile(r"^[A-Za-z0-9\-._~!$&'()*+,;=:\[\]%]*$")


class KubeconfigRefused(Exception):
    """Kueue refuses the kubeconfig: ``reason`` is the MultiKueueCluster condition's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class RemoteConfig:
    """What client-go builds from an accepted kubeconfig (the parts the model uses)."""

    server: str
    ca_pem: bytes | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    client_cert_pem: bytes | None = field(default=None, repr=False)
    client_key_pem: bytes | None = field(default=None, repr=False)
    tls_server_name: str | None = None
    proxy_url: str | None = None
    insecure: bool = False
    #: The kubeconfig bytes it was built from (Kueue compares them to decide to reconnect).
    source: bytes = field(default=b"", repr=False, compare=False)


def is_valid_hostname(server: str) -> bool:
    """Kueue's ``isValidHostname`` on a lower-cased server URL (Go's url.Parse, net.SplitHostPort,
    net.ParseIP and validation.IsDNS1123Subdomain, emulated)."""
    host_port = _go_url_host(server)
    if host_port is None:
        return False
    host = _split_host(host_port)
    if host is None:
        host = host_port  # no port: the whole host
    return _is_ip(host) or (len(host) <= 253 and _DNS_SUBDOMAIN.match(host) is not None)


def _go_url_host(raw: str) -> str | None:
    """``url.Parse(raw).Host``, or None where url.Parse fails."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        return None
    rest = raw.split("#", 1)[0]
    scheme, sep, after = rest.partition(":")
    if sep and _SCHEME.match(scheme):
        rest = after
    elif sep and "/" not in scheme:
        return None  # "first path segment in URL cannot contain colon"
    rest = rest.split("?", 1)[0]
    if not rest.startswith("//"):
        return ""
    authority = rest[2:].split("/", 1)[0]
    host = authority.rpartition("@")[2]
    if not _HOST_CHARS.match(host):
        return None
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return None
        port = host[end + 1 :]
        if port and not re.fullmatch(r":\d*", port):
            return None
    elif ":" in host and not re.fullmatch(r":\d*", host[host.rfind(":") :]):
        return None
    return host


def _split_host(host_port: str) -> str | None:
    """``net.SplitHostPort``'s host, or None when it fails."""
    if host_port.startswith("["):
        end = host_port.find("]")
        if end < 0 or host_port[end + 1 : end + 2] != ":":
            return None
        return host_port[1:end]
    if host_port.count(":") != 1:
        return None
    return host_port.split(":", 1)[0]


def _is_ip(text: str) -> bool:
    if "%" in text:
        return False  # net.ParseIP takes no zone
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _named(config: Mapping[str, Any], section: str, item: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    entries = config.get(section)
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            body = entry.get(item)
            out[entry["name"]] = dict(body) if isinstance(body, Mapping) else {}
    return out


def _refuse(message: str) -> KubeconfigRefused:
    return KubeconfigRefused("InsecureKubeConfig", message)


def load(data: bytes, *, allow_insecure: bool = False) -> RemoteConfig:
    """The REST config of ``data`` (a Secret's ``kubeconfig``, kept as its ``source``), or
    :class:`KubeconfigRefused`.

    ``allow_insecure``: the ``MultiKueueAllowInsecureKubeconfigs`` gate (v0.15-v0.18):
    the rules are skipped; what client-go cannot use is still refused.
    """
    try:
        config = yaml.safe_load(data.decode("utf-8")) if data.strip() else {}
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise _refuse(f"failed to parse kubeconfig(apiconfig): {exc}") from None
    if not isinstance(config, Mapping):
        raise _refuse(f"failed to parse kubeconfig(apiconfig): expected a mapping, found {type(config).__name__}")
    users = _named(config, "users", "user")
    clusters = _named(config, "clusters", "cluster")
    if not allow_insecure:
        for user in users.values():
            if user.get("tokenFile"):
                raise _refuse("tokenFile is not allowed")
        for name, cluster in clusters.items():
            if cluster.get("insecure-skip-tls-verify"):
                raise _refuse(f"insecure TLS verification is not allowed for cluster {name}")
            if cluster.get("certificate-authority"):
                raise _refuse(
                    "certificate-authority file paths are not allowed, use certificate-authority-data for cluster "
                    + name
                )
            if not cluster.get("server"):
                raise _refuse(f"server URL is required for cluster {name}")
    rest = _rest_config(config, users, clusters)
    if not allow_insecure:
        context = _context(config)
        user = users.get(str(context.get("user") or ""), {})
        # rest.Config.Host is the kubeconfig's server as written (no scheme added yet).
        host = str(clusters.get(str(context.get("cluster") or ""), {}).get("server") or "")
        if not is_valid_hostname(host.lower()):
            raise _refuse("untrusted server endpoint")
        if user.get("username") or user.get("password"):
            raise _refuse("basic auth is not allowed")
        if user.get("exec"):
            raise _refuse("exec plugins are not allowed")
        if user.get("auth-provider"):
            raise _refuse("auth providers are not allowed")
    return dataclasses.replace(rest, source=data)


def _context(config: Mapping[str, Any]) -> dict[str, Any]:
    name = config.get("current-context")
    return _named(config, "contexts", "context").get(str(name), {}) if name else {}


def rest_config(config: Mapping[str, Any]) -> RemoteConfig:
    """The REST config of a parsed kubeconfig without Kueue's rules (the manager's own)."""
    return _rest_config(config, _named(config, "users", "user"), _named(config, "clusters", "cluster"))


def _rest_config(
    config: Mapping[str, Any], users: dict[str, dict[str, Any]], clusters: dict[str, dict[str, Any]]
) -> RemoteConfig:
    """``clientcmd.RESTConfigFromKubeConfig``: the current context, checked as client-go
    checks it (``ClientConfig`` / ``ConfirmUsable``)."""
    name = config.get("current-context")
    if not name:
        raise _refuse(
            "invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment "
            "variable"
        )
    contexts = _named(config, "contexts", "context")
    problems: list[str] = []
    ctx = contexts.get(str(name))
    if ctx is None:
        problems.append(f"context was not found for specified context: {name}")
        ctx = {}
    cluster_name, user_name = str(ctx.get("cluster") or ""), str(ctx.get("user") or "")
    cluster = clusters.get(cluster_name)
    if ctx and cluster is None:
        problems.append(f"cluster {cluster_name!r} not found for context {name!r}")
    cluster = cluster or {}
    user = users.get(user_name, {}) if user_name else {}
    if ctx and user_name and user_name not in users:
        problems.append(f"user {user_name!r} was not found for context {name!r}")
    if not cluster.get("server"):
        problems.append("no server found for cluster " + repr(cluster_name))
    # client-go ``validateAuthInfo`` (tools/clientcmd/validation.go, v0.35.3 and v0.36.2, what Kueue
    # v0.17.1 and v0.19.2 link): only a token and basic auth count as methods (a client certificate
    # beside either is allowed, tokenFile is not counted), listed as Go prints a []string.
    methods = [m for m, value in (("token", user.get("token")), ("basicAuth", user.get("username") or
                                                                  user.get("password"))) if value]  # fmt: skip
    ca = _pem(cluster, "certificate-authority", problems)
    cert = _pem(user, "client-certificate", problems)
    key = _pem(user, "client-key", problems)
    if cert is not None and key is None:
        problems.append(
            f"client-key-data or client-key must be specified for {user_name} to use the clientCert authentication "
            "method."
        )
    problems += _exec_problems(user, user_name)
    if len(methods) > 1:
        problems.append(
            f"more than one authentication method found for {user_name}; found [{' '.join(methods)}], only one is "
            "allowed"
        )
    if problems:
        joined = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
        raise _refuse("invalid configuration: " + joined)
    server = str(cluster["server"])
    if "://" not in server:
        server = "https://" + server  # rest.DefaultServerURL: a bare host means https
    token = user.get("token")
    if not token and user.get("tokenFile"):  # only with the insecure-kubeconfig gate
        try:
            with open(str(user["tokenFile"]), encoding="utf-8") as fh:
                token = fh.read().strip()
        except OSError as exc:
            raise _refuse(f"invalid configuration: cannot read tokenFile: {exc.strerror or exc}") from None
    return RemoteConfig(
        server=server.rstrip("/"),
        ca_pem=ca,
        token=str(token) if token else None,
        client_cert_pem=cert,
        client_key_pem=key,
        tls_server_name=str(cluster.get("tls-server-name") or "") or None,
        proxy_url=str(cluster.get("proxy-url") or "") or None,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
    )


def _exec_problems(user: Mapping[str, Any], user_name: str) -> list[str]:
    """client-go ``validateAuthInfo``'s checks of an exec plugin (what makes it unusable before
    Kueue's "exec plugins are not allowed" is reached)."""
    plugin = user.get("exec")
    if not isinstance(plugin, Mapping):
        return []
    out = []
    if user.get("auth-provider"):
        out.append(f"authProvider cannot be provided in combination with an exec plugin for {user_name}")
    if not plugin.get("command"):
        out.append(f"command must be specified for {user_name} to use exec authentication plugin")
    if not plugin.get("apiVersion"):
        out.append(f"apiVersion must be specified for {user_name} to use exec authentication plugin")
    for env in plugin.get("env") or []:
        if not (env or {}).get("name"):
            out.append(f"env variable name must be specified for {user_name} to use exec authentication plugin")
    mode = plugin.get("interactiveMode") or ""
    if not mode:
        out.append(f"interactiveMode must be specified for {user_name} to use exec authentication plugin")
    elif mode not in ("Never", "IfAvailable", "Always"):
        out.append(f'invalid interactiveMode for {user_name}: "{mode}"')
    return out


def _pem(body: Mapping[str, Any], key: str, problems: list[str]) -> bytes | None:
    data = body.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(str(data), validate=True)
        except (binascii.Error, ValueError) as exc:
            problems.append(f"{key}-data: {exc}")
            return None
    path = body.get(key)
    if path:
        try:
            with open(str(path), "rb") as fh:
                return fh.read()
        except OSError as exc:
            problems.append(f"unable to read {key} {path} due to {exc.strerror or exc}")
    return None


def for_secret(secret: Mapping[str, Any] | None, name: str, *, allow_insecure: bool = False) -> RemoteConfig:
    """The kubeconfig in a MultiKueueCluster's Secret (``getKubeConfigFromSecret``):
    ``BadKubeConfig`` when the Secret or its ``kubeconfig`` key is missing."""
    if secret is None:
        raise KubeconfigRefused("BadKubeConfig", f'secrets "{name}" not found')
    data = (secret.get("data") or {}).get("kubeconfig")
    if data is None:
        raise KubeconfigRefused("BadKubeConfig", f'key "kubeconfig" not found in secret "{name}"')
    try:
        raw = base64.b64decode(str(data), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise KubeconfigRefused("BadKubeConfig", f'secret "{name}": kubeconfig: {exc}') from None
    return load(raw, allow_insecure=allow_insecure)
