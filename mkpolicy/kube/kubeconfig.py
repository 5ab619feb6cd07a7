"""Kubeconfig documents: building them, reading them, and Kueue's MultiKueue rules.

Kueue (>= 0.15) refuses a MultiKueueCluster kubeconfig that could run code or read
token or CA files in the manager pod, or that skips TLS verification.
:func:`kueue_violations` applies exactly Kueue's rules (no more: Kueue accepts plain
``http``, the system roots, client certificate files and ``proxy-url``), and
:func:`rest_config` turns a kubeconfig into the connection settings mkpolicy uses.
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


#: The file paths a kubeconfig's clusters and users may name (read when its connection is made).
_FILE_KEYS = (
    ("clusters", "cluster", ("certificate-authority",)),
    ("users", "user", ("client-certificate", "client-key")),
)


def named_files(config: Mapping[str, Any], base_dir: str | None) -> list[str]:
    """Every CA, client certificate and key file ``config``'s clusters and users name (relative to ``base_dir``)."""
    out: list[str] = []
    for section, item, keys in _FILE_KEYS:
        for entry in config.get(section) or []:
            body = entry.get(item) if isinstance(entry, dict) else None
            for key in keys:
                path = body.get(key) if isinstance(body, dict) else None
                if isinstance(path, str) and path:
                    out.append(path if os.path.isabs(path) or base_dir is None else os.path.join(base_dir, path))
    return out


class KubeconfigFiles:
    """A followed kubeconfig file and the files it names, as bytes: polling it (every second) costs a few
    reads instead of a YAML parse when nothing changed.

    :meth:`snapshot` reads them; after a parse, :meth:`taken` records the snapshot read before it and the
    files the parsed kubeconfig names (a snapshot taken before the parse can only be older than what was
    parsed: a change in between is seen at the next check).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._named: list[str] = []
        self._taken: bytes | None = None

    def snapshot(self) -> bytes | None:
        """The bytes of the kubeconfig and of the files it named at the last parse (None: one is unreadable)."""
        parts = []
        for path in (self.path, *self._named):
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                return None
            parts.append(b"%d:%b" % (len(data), data))
        return b"".join(parts)

    def unchanged(self, snapshot: bytes | None) -> bool:
        """Whether ``snapshot`` holds what the last parse was made from."""
        return snapshot is not None and snapshot == self._taken

    def taken(self, snapshot: bytes | None, config: Mapping[str, Any]) -> None:
        """``config`` (parsed after ``snapshot`` was read) is in use."""
        self._taken = snapshot
        self._named = named_files(config, os.path.dirname(os.path.abspath(self.path)))


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
    config: Mapping[str, Any], context: str | None = None, *, strict: bool = False
) -> tuple[str, dict[str, Any], str, dict[str, Any], str, dict[str, Any]]:
    """(context, cluster, user) names and bodies of ``context`` (default: the current one).

    ``strict``: as client-go's ``RESTConfigFromKubeConfig`` (which Kueue uses), a
    current-context is required; otherwise a kubeconfig with a single context uses it.
    """
    contexts = _named(config, "contexts", "context")
    name = context or config.get("current-context")
    if not name:
        if strict or len(contexts) != 1:
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


def _go_split_host_port(hostport: str) -> str:
    """The host part as Go's ``net.SplitHostPort`` finds it, or all of ``hostport`` when that fails."""
    if hostport.startswith("["):
        end = hostport.find("]")
        if end > 0 and hostport[end + 1 : end + 2] == ":":
            return hostport[1:end]
        return hostport  # "[::1]" without a port: SplitHostPort fails, the brackets stay
    if hostport.count(":") == 1:
        return hostport.partition(":")[0]
    return hostport  # no port, or too many colons


def _is_go_ip(host: str) -> bool:
    """Whether Go's ``net.ParseIP`` accepts ``host`` (no zone, no brackets, no leading zeros)."""
    if "%" in host:
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def valid_server_host(server: str) -> bool:
    """Kueue's endpoint rule (``isValidHostname`` in Kueue's multikueuecluster.go).

    The server URL, lower-cased, must parse; the host of its authority (user info and
    port dropped as Go's ``url.Parse`` and ``net.SplitHostPort`` drop them) must be an IP
    address or a DNS-1123 subdomain. A server without a scheme has no authority and fails.
    """
    try:
        parts = urlsplit(server.lower())
    except ValueError:
        return False
    hostport = parts.netloc.rpartition("@")[2]
    if not parts.scheme or not hostport:
        return False
    host = _go_split_host_port(hostport)
    if host != hostport:
        port = hostport[len(host) + (2 if hostport.startswith("[") else 0) + 1 :]
        if port and not port.isdigit():
            return False  # Go's url.Parse: invalid port
    if _is_go_ip(host):
        return True
    return len(host) <= 253 and bool(_DNS_SUBDOMAIN.match(host))


#: The proxy schemes client-go accepts in a kubeconfig's ``proxy-url`` (``parseProxyURL``).
PROXY_SCHEMES = ("http", "https", "socks5")


def kueue_violations(config: Mapping[str, Any]) -> list[str]:
    """Every MultiKueue kubeconfig rule ``config`` breaks (empty when Kueue accepts it).

    Exactly Kueue's rules (``validateKubeconfig`` and ``validateRestConfig`` in Kueue's
    pkg/controller/admissionchecks/multikueue/multikueuecluster.go, v0.19.2), plus what
    client-go's ``RESTConfigFromKubeConfig`` refuses on the way (tools/clientcmd
    validation.go: a current-context, a server, a client key with a client certificate,
    a proxy-url scheme of http, https or socks5):

    * refused in every user: ``tokenFile``; in every cluster: ``insecure-skip-tls-verify``,
      a ``certificate-authority`` file path, an empty server;
    * refused in the current context: basic auth, ``exec``, ``auth-provider``, a server
      whose host is neither an IP address nor a DNS-1123 name;
    * accepted: ``http`` servers, no CA data (the system roots), client certificate and
      key file paths, user info in the server URL, ``proxy-url``.
    """
    problems: list[str] = []
    for name, user in _named(config, "users", "user").items():
        if user.get("tokenFile"):
            problems.append(f"user {name!r}: tokenFile is not allowed (put the token inline as 'token')")
    for name, cluster in _named(config, "clusters", "cluster").items():
        if cluster.get("insecure-skip-tls-verify"):
            problems.append(f"cluster {name!r}: insecure-skip-tls-verify is not allowed (TLS must be verified)")
        if cluster.get("certificate-authority"):
            problems.append(
                f"cluster {name!r}: certificate-authority file paths are not allowed (use certificate-authority-data)"
            )
        if not cluster.get("server"):
            problems.append(f"cluster {name!r}: a server URL is required")
    try:
        _, _, cluster_name, cluster, user_name, user = _current(config, strict=True)
    except KubeconfigError as exc:
        problems.append(exc.message)
        return problems
    server = str(cluster.get("server") or "")
    if server and not valid_server_host(server):
        problems.append(
            f"cluster {cluster_name!r}: untrusted server endpoint {server!r} "
            "(expected a URL whose host is an IP address or a DNS-1123 name)"
        )
    proxy = cluster.get("proxy-url")
    if proxy:
        scheme = urlsplit(str(proxy)).scheme.lower() if isinstance(proxy, str) else ""
        if scheme not in PROXY_SCHEMES:
            problems.append(
                f"cluster {cluster_name!r}: proxy-url {proxy!r}: expected an http, https or socks5 URL; "
                f"found scheme {scheme!r}"
            )
    ca_data = cluster.get("certificate-authority-data")
    if ca_data and _decode_pem(ca_data, b"CERTIFICATE") is None:
        problems.append(f"cluster {cluster_name!r}: certificate-authority-data is not a base64 PEM certificate")
    if user.get("username") or user.get("password"):
        problems.append(f"user {user_name!r}: basic auth (username/password) is not allowed")
    if user.get("exec"):
        problems.append(f"user {user_name!r}: exec credential plugins are not allowed")
    if user.get("auth-provider"):
        problems.append(f"user {user_name!r}: auth-provider plugins are not allowed")
    has_cert = bool(user.get("client-certificate") or user.get("client-certificate-data"))
    has_key = bool(user.get("client-key") or user.get("client-key-data"))
    if has_cert and not has_key:
        problems.append(f"user {user_name!r}: a client certificate needs client-key-data or client-key")
    return problems


def check_kueue_rules(config: Mapping[str, Any], source: str = "<kubeconfig>") -> None:
    """Raise :class:`KubeconfigError` listing every Kueue rule ``config`` breaks."""
    problems = kueue_violations(config)
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
    apply first; client certificate and key paths are still read (Kueue reads them in
    its pod, the sidecar in its container). Without them (the manager's own kubeconfig)
    every file path is read, token files too. File paths are relative to ``base_dir``
    (the kubeconfig file's directory), else to the working directory as client-go reads
    them. Exec and auth-provider plugins and basic auth are refused either way:
    mkpolicy's client cannot run them. ``context`` picks a context other than the current one.
    """
    if kueue_rules:
        check_kueue_rules(config, source)
    try:
        context_name, ctx, cluster_name, cluster, user_name, user = _current(config, context, strict=kueue_rules)
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
    proxy = cluster.get("proxy-url")
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
        proxy_url=str(proxy) if proxy else None,
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
