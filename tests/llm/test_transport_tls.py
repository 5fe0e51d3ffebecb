"""The chat client's own transport over TLS (llm/transport.py), against a real loopback TLS
server whose certificate a test authority made: the upstream a user reaches is https, so the
transport must trust what httpx trusts (``SSL_CERT_FILE`` here), check the host's name, keep
its connections alive, and refuse a certificate nobody vouched for."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from deepseek_eyes.llm.transport import KeepAliveTransport

pytestmark = pytest.mark.anyio


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _issue(tmp: Path, *, names: list[x509.GeneralName]) -> tuple[Path, Path, Path]:
    """A test authority and a server certificate for ``names``; (ca, cert, key) PEM files."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("eyes test CA"))
          .issuer_name(_name("eyes test CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name("upstream"))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = tmp / "ca.pem", tmp / "cert.pem", tmp / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


@asynccontextmanager
async def tls_server(cert: Path, key: Path) -> AsyncIterator[tuple[str, list[int]]]:
    """Answers every request on a connection with which connection it came on."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    accepted: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(len(accepted) + 1)
        number = accepted[-1]
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                body = b'{"connection": %d}' % number
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"https://127.0.0.1:{port}", accepted


@pytest.fixture
def localhost_cert(tmp_path: Path) -> tuple[Path, Path, Path]:
    return _issue(tmp_path, names=[x509.DNSName("localhost"),
                                   x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])


async def test_https_is_trusted_through_ssl_cert_file_and_kept_alive(
        localhost_cert: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    ca, cert, key = localhost_cert
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    async with tls_server(cert, key) as (url, accepted), httpx.AsyncClient(
            transport=KeepAliveTransport()) as client:
        answers = [(await client.post(f"{url}/v1/chat/completions", json={"n": i})).json()
                   for i in range(3)]
    assert answers == [{"connection": 1}] * 3
    assert accepted == [1]


async def test_a_certificate_no_trusted_authority_signed_is_refused(
        localhost_cert: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _ca, cert, key = localhost_cert
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    async with tls_server(cert, key) as (url, _), httpx.AsyncClient(
            transport=KeepAliveTransport()) as client:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.post(f"{url}/v1/chat/completions", json={})


async def test_a_certificate_for_another_host_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ca, cert, key = _issue(tmp_path, names=[x509.DNSName("api.example.test")])
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    async with tls_server(cert, key) as (url, _), httpx.AsyncClient(
            transport=KeepAliveTransport()) as client:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.post(f"{url}/v1/chat/completions", json={})
