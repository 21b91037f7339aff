"""The per-cluster certificate authority: one CA per cluster, generated when the cluster starts,
and the certificates it issues to the cluster's processes (mutual TLS for gRPC and data).

Keys are ECDSA P-256 (fast to generate, supported by gRPC and OpenSSL everywhere). A member
certificate is good for both ends of a connection (serverAuth and clientAuth) and names the
hosts it may serve as subject alternative names, so that clients verify hostnames as usual.
"""

from __future__ import annotations

import datetime
import ipaddress
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

# cryptography (~10 MB, its own OpenSSL) loads when a CA is generated or used, not in every
# process that imports the security package (a TaskExecutor only reads its PEM files).

#: Hosts every member certificate names: processes of a local cluster talk over loopback.
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
#: Validity of CA and member certificates (a cluster lives for days, not years).
VALIDITY = datetime.timedelta(days=365)
#: Tolerated clock skew between the machines of a cluster.
_BACKDATE = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class Issued:
    """A certificate (PEM) with its private key (PEM, unencrypted: kept in 0600 files)."""

    cert_pem: bytes
    key_pem: bytes


def _new_key() -> ec.EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    from cryptography import x509

    out: list[x509.GeneralName] = []
    seen: set[str] = set()
    for host in hosts:
        host = host.strip().strip("[]")
        if not host or host in seen or host in ("0.0.0.0", "::"):
            continue
        seen.add(host)
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            out.append(x509.DNSName(host))
    return out


class ClusterCA:
    """A cluster's CA. Only the process that starts the cluster holds the CA key; it issues the
    member certificates and may then forget the key (``LocalDirectoryHandOver`` does)."""

    def __init__(self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        self._cert = cert
        self._key = key

    @classmethod
    def generate(cls, cluster_name: str = "") -> ClusterCA:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.x509.oid import NameOID

        key = _new_key()
        name = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "yarnflink"),
                x509.NameAttribute(
                    NameOID.COMMON_NAME, f"yarnflink cluster CA {cluster_name or uuid.uuid4().hex[:12]}"[:64]
                ),
            ]
        )
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + VALIDITY)
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
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @property
    def cert_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self._cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, common_name: str, hosts: Iterable[str] = ()) -> Issued:
        """A member certificate for ``hosts`` (plus the loopback names), for server and client use."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = _new_key()
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(
                x509.Name(
                    [
                        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "yarnflink"),
                        x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64]),
                    ]
                )
            )
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_encipherment=False,
                    key_agreement=True,
                    content_commitment=False,
                    data_encipherment=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .add_extension(x509.SubjectAlternativeName(_names([*hosts, *LOOPBACK_HOSTS])), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))
