"""A private certificate authority, serving and client certificates (``cryptography``).

The loopback API server and the sidecar both serve HTTPS on 127.0.0.1 with a CA they
generate; clients get the CA as data in their kubeconfig. Every certificate carries the
key identifiers RFC 5280 asks for (4.2.1.1, 4.2.1.2): strict verifiers refuse a chain
without them, and Python 3.13's default TLS context is one (``VERIFY_X509_STRICT``:
"Missing Authority Key Identifier").
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM private key."""

    cert_pem: bytes
    key_pem: bytes


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _builder(
    subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Certificate | None, days: int
) -> x509.CertificateBuilder:
    """A certificate of ``key`` for ``subject``, issued by ``issuer`` (None: self-signed), with its key identifiers."""
    now = _dt.datetime.now(_dt.UTC)
    own = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    if issuer is None:
        authority = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(own)
    else:
        try:
            ski = issuer.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
            authority = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)
        except x509.ExtensionNotFound:  # a CA made before they were added (a sidecar's state folder)
            authority = x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.public_key())  # type: ignore[arg-type]
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject if issuer is None else issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(own, critical=False)
        .add_extension(authority, critical=False)
    )


def _issue(ca: KeyPair, subject: x509.Name, extensions: list[tuple[x509.ExtensionType, bool]], days: int) -> KeyPair:
    """A new key and its certificate for ``subject``, signed by ``ca``, with ``extensions`` (value, critical)."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    builder = _builder(subject, key, ca_cert, days)
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def make_ca(common_name: str = "mkpolicy-ca", days: int = 3650) -> KeyPair:
    """A self-signed certificate authority."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(_name(common_name), key, None, days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def make_serving_cert(
    ca: KeyPair, hosts: list[str] | None = None, common_name: str = "mkpolicy", days: int = 825
) -> KeyPair:
    """A server certificate signed by ``ca`` for ``hosts`` (IP addresses or DNS names)."""
    hosts = hosts or ["127.0.0.1", "localhost"]
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return _issue(
        ca, _name(common_name), _leaf(ExtendedKeyUsageOID.SERVER_AUTH, x509.SubjectAlternativeName(names)), days
    )


def make_client_cert(ca: KeyPair, common_name: str, organizations: list[str], days: int = 825) -> KeyPair:
    """A client certificate signed by ``ca``: user ``common_name`` in groups ``organizations``."""
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return _issue(ca, x509.Name(attrs), _leaf(ExtendedKeyUsageOID.CLIENT_AUTH), days)


def _leaf(usage: ObjectIdentifier, *more: x509.ExtensionType) -> list[tuple[x509.ExtensionType, bool]]:
    """An end entity's extensions: ``more``, not a CA, used for ``usage``."""
    return [
        *((extension, False) for extension in more),
        (x509.BasicConstraints(ca=False, path_length=None), True),
        (x509.ExtendedKeyUsage([usage]), False),
    ]
