"""HTTPS with `--tls-cert/--tls-key`: a certificate made in the test, TLS 1.3 negotiated, TLS 1.2 refused."""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.helpers import free_port, http_server
from tests.http import rpc
from tests.store.backends import Backend


def _certificate(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "memhub test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def test_https_with_tls_1_3_minimum(tmp_path: Path, backend: Backend) -> None:
    cert, key = _certificate(tmp_path)
    context = ssl.create_default_context(cafile=str(cert))
    port = free_port()
    with http_server(
        backend.url(tmp_path, "m.db"),
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
        context=context,
        port=port,
    ):
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            assert tls.version() == "TLSv1.3"
        old = ssl.create_default_context(cafile=str(cert))
        old.maximum_version = ssl.TLSVersion.TLSv1_2
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, pytest.raises(ssl.SSLError):
            old.wrap_socket(raw, server_hostname="127.0.0.1").close()
        # MCP over HTTPS
        https = f"https://127.0.0.1:{port}"
        import urllib.request

        opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context))
        urllib.request.install_opener(opener)
        try:
            assert rpc.initialize(https)[0] == 200
        finally:
            urllib.request.install_opener(urllib.request.build_opener())
