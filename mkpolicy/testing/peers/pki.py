"""The certificates a local control plane needs, generated at start (``cryptography``).

One CA signs everything: the API servers' and Kueue webhooks' serving certificates, and
the admin client certificate (``O=system:masters``, as controller-runtime's envtest makes
its admin user: ``pkg/internal/testing/controlplane/auth.go``). A separate key pair signs
service-account tokens. Kubeconfigs carry every credential as data: Kueue refuses file
references in MultiKueue Secrets (``multikueuecluster.go``, ``validateKubeconfig``).
"""

from __future__ import annotations

import base64
import datetime as _dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from mkpolicy.kube.certs import KeyPair, make_ca, make_serving_cert
from mkpolicy.kube.kubeconfig import make_kubeconfig

#: Names every serving certificate holds: loopback, and Kueue's webhook Service name.
SERVING_HOSTS = ["127.0.0.1", "localhost", "kueue-webhook-service.kueue-system.svc"]


def make_client_cert(ca: KeyPair, common_name: str, organizations: list[str], days: int = 825) -> KeyPair:
    """A client certificate signed by ``ca``: user ``common_name`` in groups ``organizations``."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    now = _dt.datetime.now(_dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())  # fmt: skip
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), key_pem)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_private(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` (mode 0600, parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


@dataclass(frozen=True)
class Pki:
    """The CA, a serving pair for loopback, the admin client pair and the service-account keys."""

    ca: KeyPair
    serving: KeyPair
    admin: KeyPair
    sa_key_pem: bytes
    sa_pub_pem: bytes

    @classmethod
    def create(cls) -> Pki:
        """Generate a new set (EC P-256 keys: a few milliseconds)."""
        ca = make_ca("mkpolicy-peers-ca")
        sa = ec.generate_private_key(ec.SECP256R1())
        return cls(
            ca=ca,
            serving=make_serving_cert(ca, SERVING_HOSTS, common_name="mkpolicy-peers"),
            admin=make_client_cert(ca, "mkpolicy-admin", ["system:masters"]),
            sa_key_pem=sa.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()),
            sa_pub_pem=sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                    serialization.PublicFormat.SubjectPublicKeyInfo),
        )  # fmt: skip

    def write(self, folder: Path) -> dict[str, Path]:
        """The files kube-apiserver reads, in ``folder``: ``ca``, ``tls.crt``, ``tls.key``, ``sa.key``, ``sa.pub``."""
        return {
            "ca": write_private(folder / "ca.crt", self.ca.cert_pem),
            "tls.crt": write_private(folder / "tls.crt", self.serving.cert_pem),
            "tls.key": write_private(folder / "tls.key", self.serving.key_pem),
            "sa.key": write_private(folder / "sa.key", self.sa_key_pem),
            "sa.pub": write_private(folder / "sa.pub", self.sa_pub_pem),
        }

    def kubeconfig(self, name: str, server: str, namespace: str | None = None) -> dict[str, Any]:
        """An admin kubeconfig for ``server``: CA, client certificate and key as data."""
        config = make_kubeconfig(server, self.ca.cert_pem, "", cluster=name, user=name, namespace=namespace)
        config["users"] = [{"name": name, "user": {"client-certificate-data": _b64(self.admin.cert_pem),
                                                   "client-key-data": _b64(self.admin.key_pem)}}]  # fmt: skip
        return config
