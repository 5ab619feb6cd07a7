"""The worker endpoints' credentials: a private CA, a serving certificate, one token per worker.

They are generated at start, or kept in ``state.dir`` (files readable by the owner
only) so that a restarted sidecar keeps the kubeconfigs Kueue already holds valid.
Each worker gets a kubeconfig for its endpoint that passes Kueue's rules.
"""

from __future__ import annotations

import datetime as _dt
import hmac
import ipaddress
import json
import os
import secrets
import ssl
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509

from mkpolicy.kube.certs import KeyPair, make_ca, make_serving_cert
from mkpolicy.kube.kubeconfig import check_kueue_rules, make_kubeconfig
from mkpolicy.kube.rest import load_pem_chain
from mkpolicy.kube.secretfiles import UnsafeFile, private_dir, read_secret, write_secret
from mkpolicy.sidecar.config import ConfigError

#: A kept serving certificate is renewed when it expires within this time.
RENEW_BEFORE = _dt.timedelta(days=30)


@dataclass(frozen=True)
class Credentials:
    """CA, serving certificate and per-worker bearer tokens."""

    ca: KeyPair = field(repr=False)
    serving: KeyPair = field(repr=False)
    tokens: dict[str, str] = field(repr=False)

    def check_token(self, worker: str, header: str | None) -> bool:
        """Whether ``header`` (an ``Authorization`` value) carries ``worker``'s token (constant time)."""
        expected = self.tokens.get(worker)
        if expected is None or not header:
            return False
        # as kube-apiserver reads it (apiserver/pkg/authentication/request/bearertoken/bearertoken.go):
        # the scheme in any case, then the token up to the next space
        parts = header.strip().split(" ", 2)
        if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
            return False
        return hmac.compare_digest(parts[1].encode(), expected.encode())

    def server_context(self) -> ssl.SSLContext:
        """The TLS context the worker endpoints serve with."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_alpn_protocols(["http/1.1"])
        load_pem_chain(ctx, self.serving.cert_pem, self.serving.key_pem)
        return ctx

    def kubeconfig(self, worker: str, server: str) -> dict[str, Any]:
        """The kubeconfig Kueue uses for ``worker``: the sidecar endpoint, CA as data, bearer token."""
        config = make_kubeconfig(server, self.ca.cert_pem, self.tokens[worker], cluster=worker, user=f"{worker}-kueue")
        check_kueue_rules(config, f"<kubeconfig for {worker}>")
        return config


def endpoint_url(address: str, port: int) -> str:
    """``https://address:port`` (IPv6 in brackets; 0.0.0.0 and :: become loopback)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(address, address)
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass
    return f"https://{host}:{port}"


def certificate_hosts(address: str, extra: list[str]) -> list[str]:
    """Names the serving certificate covers: the listen address, loopback, localhost, extras."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(address, address)
    return list(dict.fromkeys([host, "127.0.0.1", "localhost", *extra]))


def load_or_create(state_dir: str | None, workers: list[str], hosts: list[str]) -> Credentials:
    """Credentials from ``state_dir`` when present and still good, new ones otherwise (and saved)."""
    if state_dir is None:
        ca = make_ca("mkpolicy-sidecar-ca")
        return Credentials(ca, make_serving_cert(ca, hosts, "mkpolicy-sidecar"), _tokens({}, workers))
    try:
        private_dir(state_dir)
    except OSError as exc:
        raise ConfigError(f"state.dir {state_dir!r}: cannot create it (mode 0700): {exc.strerror or exc}") from None
    kept = _read_pair(state_dir, "ca")
    if kept is None or not _valid(kept.cert_pem, []):
        ca = make_ca("mkpolicy-sidecar-ca")
        _write(state_dir, "ca.crt", ca.cert_pem)
        _write(state_dir, "ca.key", ca.key_pem)
        serving: KeyPair | None = None
    else:
        ca, serving = kept, _read_pair(state_dir, "tls")
    if serving is None or not _valid(serving.cert_pem, hosts, ca.cert_pem):
        serving = make_serving_cert(ca, hosts, "mkpolicy-sidecar")
        _write(state_dir, "tls.crt", serving.cert_pem)
        _write(state_dir, "tls.key", serving.key_pem)
    known: dict[str, str] = {}
    try:
        loaded = json.loads(_read(state_dir, "tokens.json"))
        if isinstance(loaded, dict):
            known = {str(k): str(v) for k, v in loaded.items() if isinstance(v, str) and len(v) >= 32}
    except (OSError, ValueError):
        pass
    tokens = _tokens(known, workers)
    if tokens != known:
        _write(state_dir, "tokens.json", json.dumps(tokens, indent=2).encode())
    return Credentials(ca, serving, tokens)


def _tokens(known: dict[str, str], workers: list[str]) -> dict[str, str]:
    return {w: known.get(w) or secrets.token_urlsafe(32) for w in workers}


def _read(state_dir: str, name: str) -> bytes:
    """A state file (OSError when it cannot be read); ConfigError when others may have written it."""
    try:
        return read_secret(os.path.join(state_dir, name))
    except UnsafeFile as exc:
        raise ConfigError(f"state.dir: {exc} (remove it, or fix its mode and owner)") from None


def _read_pair(state_dir: str, stem: str) -> KeyPair | None:
    try:
        cert = _read(state_dir, f"{stem}.crt")
        key = _read(state_dir, f"{stem}.key")
    except OSError:
        return None
    return KeyPair(cert, key)


def _write(state_dir: str, name: str, data: bytes) -> None:
    path = os.path.join(state_dir, name)
    try:
        write_secret(path, data)
    except OSError as exc:
        raise ConfigError(f"state.dir: cannot write {path!r}: {exc.strerror or exc}") from None


def _valid(cert_pem: bytes, hosts: list[str], issuer_pem: bytes | None = None) -> bool:
    """The certificate parses, is not about to expire, covers ``hosts`` and (if given) was issued by ``issuer_pem``."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        if cert.not_valid_after_utc - _dt.datetime.now(_dt.UTC) < RENEW_BEFORE:
            return False
        if issuer_pem is not None:
            issuer = x509.load_pem_x509_certificate(issuer_pem)
            if cert.issuer != issuer.subject:
                return False
            cert.verify_directly_issued_by(issuer)
        if hosts:
            san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            names = {str(n) for n in san.get_values_for_type(x509.DNSName)}
            names |= {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
            if any(h not in names for h in hosts):
                return False
    except Exception:  # unreadable, mismatching or badly signed: generate a new one
        return False
    return True
