"""The certificates a local control plane needs, generated at start (``cryptography``).

One CA signs everything: the API servers' and Kueue webhooks' serving certificates, and
the admin client certificate (``O=system:masters``, as controller-runtime's envtest makes
its admin user: ``pkg/internal/testing/controlplane/auth.go``). A separate key pair signs
service-account tokens. Kubeconfigs carry every credential as data: Kueue refuses file
references in MultiKueue Secrets (``multikueuecluster.go``, ``validateKubeconfig``).
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mkpolicy.kube.certs import KeyPair, make_ca, make_client_cert, make_serving_cert
from mkpolicy.kube.kubeconfig import make_kubeconfig

#: Names every serving certificate holds: loopback, and Kueue's webhook Service name.
SERVING_HOSTS = ["127.0.0.1", "localhost", "kueue-webhook-service.kueue-system.svc"]


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
