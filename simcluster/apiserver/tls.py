"""Self-signed TLS material for the fake API server.

Generates an EC P-256 CA and a server certificate signed by it.  The result is
accepted by Go's crypto/tls (kubectl) and by Python's :mod:`ssl` when the CA is
used as the trust anchor.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["TLSMaterial", "make_tls"]

_DEFAULT_DNS = ("kubernetes", "kubernetes.default")


@dataclass(frozen=True)
class TLSMaterial:
    """PEM encoded CA certificate, server certificate and server private key."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path) -> tuple[Path, Path, Path]:
        """Write ``ca.crt``, ``server.crt`` and ``server.key`` (0600) into *directory*."""
        directory.mkdir(parents=True, exist_ok=True)
        paths = (directory / "ca.crt", directory / "server.crt", directory / "server.key")
        for path, data, mode in zip(
            paths, (self.ca_pem, self.cert_pem, self.key_pem), (0o644, 0o644, 0o600), strict=True
        ):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.chmod(path, mode)
        return paths

    def ssl_context(self) -> ssl.SSLContext:
        """Server side :class:`ssl.SSLContext` presenting the server certificate."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        with tempfile.TemporaryDirectory(prefix="simcluster-tls-") as tmp:
            os.chmod(tmp, 0o700)
            _, cert, key = self.write(Path(tmp))
            ctx.load_cert_chain(certfile=cert, keyfile=key)
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """Client side context trusting only the generated CA (handy for tests)."""
        ctx = ssl.create_default_context(cadata=self.ca_pem.decode("ascii"))
        return ctx


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _san_entries(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    seen: set[str] = set()
    for host in (*hosts, *_DEFAULT_DNS):
        host = host.strip()
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not host or host in seen:
            continue
        seen.add(host)
        if _is_ip(host):
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        else:
            names.append(x509.DNSName(host))
    return names


def make_tls(
    hosts: Sequence[str] = ("127.0.0.1", "localhost"),
    directory: Path | None = None,
) -> TLSMaterial:
    """Create a fresh CA and a server certificate valid for *hosts*.

    If *directory* is given, ``ca.crt``, ``server.crt`` and ``server.key`` are
    written there as well (the key with mode 0600).
    """
    now = _dt.datetime.now(_dt.UTC)
    not_before = now - _dt.timedelta(minutes=5)
    not_after = now + _dt.timedelta(days=365)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "simcluster"),
            x509.NameAttribute(NameOID.COMMON_NAME, "simcluster-ca"),
        ]
    )
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    hostnames = [h for h in hosts if h and not _is_ip(h.strip("[]"))]
    cn = hostnames[0] if hostnames else "kube-apiserver"
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "simcluster"),
                    x509.NameAttribute(NameOID.COMMON_NAME, cn),
                ]
            )
        )
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(_san_entries(hosts)), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    material = TLSMaterial(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    if directory is not None:
        material.write(Path(directory))
    return material
