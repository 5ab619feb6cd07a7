"""mkpolicy.kube.certs: the certificates verify under strict X.509 checks (Python 3.13's default)."""

from __future__ import annotations

import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509

from mkpolicy.kube.certs import KeyPair, make_ca, make_client_cert, make_serving_cert


def _strict_client(ca: KeyPair, cert: KeyPair | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca.cert_pem.decode())
    # Python >= 3.13 sets it by default; set here so every interpreter checks the same
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    if cert is not None:
        _load(ctx, cert)
    return ctx


def _load(ctx: ssl.SSLContext, pair: KeyPair) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        crt, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        crt.write_bytes(pair.cert_pem)
        key.write_bytes(pair.key_pem)
        ctx.load_cert_chain(crt, key)


def _handshake(client: ssl.SSLContext, server: ssl.SSLContext, hostname: str) -> x509.Certificate | None:
    """A TLS handshake in memory; the client certificate the server verified (None: none sent)."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(c_in, c_out, server_hostname=hostname)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for name, side, out, peer_in in (("client", c, c_out, s_in), ("server", s, s_out, c_in)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            peer_in.write(out.read())
        if all(done.values()):
            break
    assert all(done.values()), done
    got = s.getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(got) if got else None


def _server(pair: KeyPair, client_ca: KeyPair | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    _load(ctx, pair)
    if client_ca is not None:
        ctx.load_verify_locations(cadata=client_ca.cert_pem.decode())
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    return ctx


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "kueue-webhook-service.kueue-system.svc"])
def test_a_serving_certificate_verifies_strictly(host: str) -> None:
    ca = make_ca()
    serving = make_serving_cert(ca, ["127.0.0.1", "localhost", "kueue-webhook-service.kueue-system.svc"])
    assert _handshake(_strict_client(ca), _server(serving), host) is None


def test_a_client_certificate_verifies_strictly() -> None:
    ca = make_ca()
    client = make_client_cert(ca, "admin", ["system:masters"])
    got = _handshake(_strict_client(ca, client), _server(make_serving_cert(ca), client_ca=ca), "127.0.0.1")
    assert got is not None
    assert got.subject.rfc4514_string() == "CN=admin,O=system:masters"


def test_a_certificate_of_another_ca_is_refused() -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(_strict_client(make_ca()), _server(make_serving_cert(make_ca())), "127.0.0.1")


LEAF = {"SubjectKeyIdentifier": False, "AuthorityKeyIdentifier": False, "BasicConstraints": True,
        "ExtendedKeyUsage": False}  # fmt: skip


@pytest.mark.parametrize(
    ("make", "extensions"),
    [
        (make_serving_cert, {**LEAF, "SubjectAlternativeName": False}),
        (lambda ca: make_client_cert(ca, "u", []), LEAF),
    ],
    ids=["serving", "client"],
)
def test_key_identifiers_chain_the_leaf_to_its_ca(
    make: Callable[[KeyPair], KeyPair], extensions: dict[str, bool]
) -> None:
    ca = make_ca()
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_id = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    assert ca_cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier == ca_id
    leaf = x509.load_pem_x509_certificate(make(ca).cert_pem)
    assert {type(e.value).__name__: e.critical for e in leaf.extensions} == extensions
    assert leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier == ca_id
