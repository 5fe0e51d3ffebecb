"""A malicious authorization server on loopback: what OAuth forbids is refused, with codes.

The real sign-in (``sign_in``, ``mcp login`` as a process) and a real client_credentials
connection run against the loopback authorization server of :mod:`oauth_server`, told to
publish plain-http endpoints under a name that is not this machine (``evil.example``), no
PKCE, or a 150 MiB metadata document. ``evil.example`` reaches a *victim*: a loopback HTTP
proxy that every plain-http request to a non-loopback name goes through (``HTTP_PROXY``),
which records whatever arrives. A refusal must leave it empty; a sanity check proves a
request to that name would have reached it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from oauth_server import CLIENT_ID, CLIENT_SECRET, OAuthFixture, serve_oauth

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.connection import build_client, map_error
from deepseek_eyes.mcp_host.oauth import oauth_handle
from deepseek_eyes.mcp_host.oauth_rules import DOCUMENT_LIMIT
from deepseek_eyes.mcp_host.settings_file import dumps
from deepseek_eyes.mcp_host.signin import sign_in
from deepseek_eyes.mcp_host.tokens import token_root
from deepseek_eyes.settings import McpServerSettings

pytestmark = pytest.mark.anyio

EVIL = "http://evil.example"


class Victim:
    """A loopback HTTP proxy that records each request line it is sent and answers 502."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.port = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            line = await asyncio.wait_for(reader.readline(), 5)
            self.requests.append(line.decode("latin-1").strip())
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n"
                         b"connection: close\r\n\r\n")
            await writer.drain()
        writer.close()


@contextlib.asynccontextmanager
async def victim_proxy(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Victim]:
    victim = Victim()
    server = await asyncio.start_server(victim._handle, "127.0.0.1", 0)
    victim.port = server.sockets[0].getsockname()[1]
    proxy = f"http://127.0.0.1:{victim.port}"
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    try:
        async with server:
            # Not vacuous: a plain request to the evil name does reach the victim.
            async with httpx2.AsyncClient(timeout=5) as http:
                await http.get(f"{EVIL}/sanity")
            assert victim.requests == [f"GET {EVIL}/sanity HTTP/1.1"]
            victim.requests.clear()
            yield victim
    finally:
        server.close()


def code_server(url: str) -> McpServerSettings:
    return McpServerSettings.model_validate({
        "id": "remote", "transport": "streamable-http", "url": url,
        "oauth": {"type": "authorization_code", "scope": "mcp:read"}})


class Browser:
    """The test's browser: follows the authorization URL (the server approves at once)."""

    def __init__(self) -> None:
        self.shown: list[str] = []

    async def __call__(self, url: str) -> None:
        self.shown.append(url)
        async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as http:
            await http.get(url)


async def refused_sign_in(fx: OAuthFixture, home: Path) -> tuple[McpError, Browser]:
    browser = Browser()
    with pytest.raises(McpError) as caught:
        await sign_in(code_server(fx.url), token_root(home), open_url=browser, timeout=60)
    return caught.value, browser


@pytest.mark.parametrize(("field", "where"), [
    ("token_endpoint", "/token"),
    ("authorization_endpoint", "/authorize"),
    ("registration_endpoint", "/register"),
])
async def test_plain_http_endpoints_elsewhere_are_refused(
        isolated_home: Path, monkeypatch: pytest.MonkeyPatch, field: str, where: str) -> None:
    async with victim_proxy(monkeypatch) as victim, serve_oauth() as fx:
        fx.asm_extra = {field: EVIL + where}
        error, browser = await refused_sign_in(fx, isolated_home)
        assert error.code == "MCP_OAUTH_INSECURE_ENDPOINT", error
        assert "evil.example" in error.message
        assert victim.requests == []
        assert browser.shown == []  # refused before a person was shown anything
        assert "register" not in fx.hits
        assert "token" not in fx.hits


async def test_insecure_authorization_server_and_metadata_url_are_refused(
        isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with victim_proxy(monkeypatch) as victim, serve_oauth() as fx:
        fx.prm_extra = {"authorization_servers": [EVIL]}
        error, _ = await refused_sign_in(fx, isolated_home)
        assert error.code == "MCP_OAUTH_INSECURE_ENDPOINT"
        fx.prm_extra = {}
        fx.resource_metadata = f"{EVIL}/.well-known/oauth-protected-resource"
        error, _ = await refused_sign_in(fx, isolated_home)
        assert error.code == "MCP_OAUTH_INSECURE_ENDPOINT"
        assert error.details["endpoint"] == "metadata URL"
        assert victim.requests == []
        assert "authorize" not in fx.hits


async def test_client_credentials_token_endpoint_is_held_to_https(
        isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSE_RULES_ID", CLIENT_ID)
    monkeypatch.setenv("DSE_RULES_PASSWORD", CLIENT_SECRET)
    async with victim_proxy(monkeypatch) as victim, serve_oauth() as fx:
        server = McpServerSettings.model_validate({
            "id": "remote", "transport": "streamable-http", "url": fx.url,
            "oauth": {"client_id": {"env": "DSE_RULES_ID"},
                      "client_secret": {"env": "DSE_RULES_PASSWORD"}, "issuer": fx.base}})

        async def connect() -> None:
            assert server.oauth is not None
            assert server.url is not None
            client = build_client(server, mode="legacy",
                                  oauth=oauth_handle(server.url, server.oauth),
                                  message_handler=None)
            async with client:
                await client.list_tools()

        await connect()  # the honest server: the grant works through the rules
        assert fx.grants == ["client_credentials"]
        fx.revoke_all()
        fx.asm_extra = {"token_endpoint": f"{EVIL}/token"}
        with pytest.raises(BaseException) as caught:  # noqa: PT011 - the SDK's group
            await connect()
        assert map_error(caught.value).code == "MCP_OAUTH_INSECURE_ENDPOINT"
        assert victim.requests == []
        assert fx.grants == ["client_credentials"]  # no secret went anywhere


@pytest.mark.parametrize("methods", [None, ["plain"], "S256"])
async def test_sign_in_without_advertised_s256_is_refused(
        isolated_home: Path, methods: Any) -> None:
    async with serve_oauth() as fx:
        if methods is None:
            fx.asm_drop = ("code_challenge_methods_supported",)
        else:
            fx.asm_extra = {"code_challenge_methods_supported": methods}
        error, browser = await refused_sign_in(fx, isolated_home)
        assert error.code == "MCP_OAUTH_NO_PKCE", error
        assert browser.shown == []
        assert "register" not in fx.hits
        assert "authorize" not in fx.hits


async def test_no_metadata_at_all_is_no_pkce(isolated_home: Path) -> None:
    """The SDK's legacy fallback (no metadata: /authorize and /token on the server's
    origin) advertises nothing, so it is refused too."""
    async with serve_oauth() as fx:
        fx.asm_status = 404
        error, browser = await refused_sign_in(fx, isolated_home)
        assert error.code == "MCP_OAUTH_NO_PKCE"
        assert browser.shown == []


async def test_an_honest_server_still_signs_in(isolated_home: Path) -> None:
    async with serve_oauth() as fx:
        health = await sign_in(code_server(fx.url), token_root(isolated_home),
                               open_url=Browser(), timeout=60)
        assert health["status"] == "token"
        assert fx.grants == ["authorization_code"]


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0  # pragma: no cover - Linux only


async def test_a_150_mib_metadata_document_is_not_read_whole(isolated_home: Path) -> None:
    async with serve_oauth() as fx:
        fx.asm_bytes = 150 * 1024 * 1024
        before = rss_kib()
        error, browser = await refused_sign_in(fx, isolated_home)
        grown_mib = (rss_kib() - before) / 1024
        assert error.code == "MCP_OAUTH_DOCUMENT_TOO_LARGE", error
        assert error.details["limit"] == DOCUMENT_LIMIT
        assert browser.shown == []
        # What left the server before the client hung up: the bound plus what the socket
        # buffers held, far from 150 MiB.
        assert fx.asm_sent < 24 * 1024 * 1024, fx.asm_sent
        assert grown_mib < 64, grown_mib
        print(f"metadata bomb: sent={fx.asm_sent / 2**20:.1f} MiB rss+={grown_mib:.1f} MiB")


async def test_mcp_login_prints_one_coded_line_and_no_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with victim_proxy(monkeypatch) as victim, serve_oauth() as fx:
        config = tmp_path / "eyes.toml"
        config.write_text(dumps({"mcp": {"servers": [
            code_server(fx.url).model_dump(mode="json", exclude_defaults=True)]}}))
        cases: list[tuple[str, str]] = []
        for setup, code in (
                (lambda: fx.asm_extra.update(token_endpoint=f"{EVIL}/token"),
                 "MCP_OAUTH_INSECURE_ENDPOINT"),
                (lambda: (fx.asm_extra.clear(), fx.asm_extra.update(
                    code_challenge_methods_supported=["plain"])), "MCP_OAUTH_NO_PKCE"),
                (lambda: setattr(fx, "asm_bytes", 150 * 1024 * 1024),
                 "MCP_OAUTH_DOCUMENT_TOO_LARGE")):
            setup()
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "deepseek_eyes", "--config", str(config), "mcp",
                "login", "remote", "--no-browser", "--timeout", "60",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env=dict(os.environ))
            out, err = await asyncio.wait_for(process.communicate(), 120)
            text = (out + err).decode()
            assert process.returncode == 1, text
            assert "Traceback" not in text
            assert "OAuth flow error" not in text
            errors = [line for line in text.splitlines() if line.startswith("error ")]
            assert len(errors) == 1, text
            assert errors[0].startswith(f"error {code}:"), text
            cases.append((code, errors[0]))
        assert victim.requests == []
        assert "token" not in fx.hits
