"""Sign-in with the authorization-code grant (PKCE) against a loopback authorization server:
``mcp login``'s flow, the token store, refresh on a later connection, and no secret outside
the store."""

from __future__ import annotations

import asyncio
import json
import logging
import stat
import sys
from pathlib import Path

import httpx2
import pytest
from oauth_server import CLIENT_ID, CLIENT_SECRET, serve_oauth
from pydantic import ValidationError

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.mcp_host.oauth import set_token_root
from deepseek_eyes.mcp_host.redirect import RedirectCatcher
from deepseek_eyes.mcp_host.settings_file import dumps
from deepseek_eyes.mcp_host.signin import sign_in, sign_out
from deepseek_eyes.mcp_host.tokens import token_path, token_root
from deepseek_eyes.settings import McpServerSettings, McpSettings
from deepseek_eyes.store.blobs import BlobStore

pytestmark = pytest.mark.anyio

ID_ENV, SECRET_ENV = "DSE_TEST_SIGNIN_CLIENT", "DSE_TEST_SIGNIN_PASSWORD"


def server_settings(url: str, **oauth: object) -> McpServerSettings:
    return McpServerSettings.model_validate({
        "id": "remote", "transport": "streamable-http", "url": url,
        "oauth": {"type": "authorization_code", **oauth},
        "allow": {"tools": ["whoami"]},
    })


async def follow(url: str) -> None:
    """The test's browser: the server approves at once, so following the redirect back to
    the loopback listener is the whole sign-in."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as http:
        await http.get(url)


def age(path: Path, seconds: float) -> None:
    """Move the stored token's issue time back, as if ``seconds`` had passed."""
    record = json.loads(path.read_text())
    record["obtained_at"] -= seconds
    path.write_text(json.dumps(record))


def make_host(server: McpServerSettings, home: Path) -> McpHost:
    set_token_root(token_root(home))
    return McpHost(McpManager(McpSettings(servers=(server,))), blobs=BlobStore(home / "blobs"),
                   artifacts=home / "artifacts", audit=McpAudit(None))


async def test_dynamic_registration_sign_in_refresh_and_logout(
        isolated_home: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with serve_oauth() as fx:
        server = server_settings(fx.url, scope="mcp:read")
        root = token_root(isolated_home)
        health = await sign_in(server, root, open_url=follow)
        assert health["status"] == "token"
        assert fx.hits["register"] == 1
        params = fx.authorize_params[0]
        assert params["code_challenge_method"] == "S256"
        assert params["resource"] == fx.url  # RFC 8707
        assert params["scope"] == "mcp:read"
        assert params["redirect_uri"].startswith("http://127.0.0.1:")
        assert fx.grants == ["authorization_code"]

        path = token_path(root, fx.url)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        # Two hours pass while nothing runs: the next connection must refresh the token.
        age(path, 7200)

        host = make_host(server, isolated_home)
        await host.manager.start()
        try:
            state = host.manager.servers["remote"]
            assert state.status == "ready", state.view()
            assert fx.grants == ["authorization_code", "refresh_token"]
            assert state.view()["oauth"]["status"] == "token"
            result = await host.call_tool("mcp__remote__whoami", {})
            assert not result.is_error
            assert fx.hits["register"] == 1  # the registration was kept, not repeated
            # The server revokes the access token early: a refresh, not a person.
            fx.revoke_all()
            again = await host.call_tool("mcp__remote__whoami", {})
            assert not again.is_error, again.preview
            assert fx.grants == ["authorization_code", "refresh_token", "refresh_token"]
            assert fx.hits["authorize"] == 1
            exposed = json.dumps([state.view(), host.manager.status(), host.audit.recent()],
                                 default=str)
        finally:
            await host.manager.stop()
        for value in fx.issued:
            assert value not in exposed

        assert sign_out(server, root) is True
        assert not path.exists()
        assert sign_out(server, root) is False

    # Every token the server issued is in the store only: not in logs, audit, artifacts.
    for record in caplog.records:
        for value in fx.issued:
            assert value not in record.getMessage(), record.name
    for file in isolated_home.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            for value in fx.issued:
                assert value.encode() not in data, file


async def test_pre_registered_secret_never_reaches_the_disk(
        isolated_home: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(ID_ENV, CLIENT_ID)
    monkeypatch.setenv(SECRET_ENV, CLIENT_SECRET)
    async with serve_oauth() as fx:
        server = server_settings(fx.url, client_id={"env": ID_ENV},
                                 client_secret={"env": SECRET_ENV})
        root = token_root(isolated_home)
        await sign_in(server, root, open_url=follow)
        assert "register" not in fx.hits
        assert fx.token_auth[-1] == "Basic"
        host = make_host(server, isolated_home)
        await host.manager.start()
        try:
            assert host.manager.servers["remote"].status == "ready"
            assert not (await host.call_tool("mcp__remote__whoami", {})).is_error
        finally:
            await host.manager.stop()
        stored = token_path(root, fx.url).read_text()
        assert fx.issued[0] in stored  # the store holds the tokens...
    # ...and the canary, the client secret, is nowhere on the disk, the store included.
    files = [f for f in isolated_home.rglob("*") if f.is_file()]
    assert files
    for file in files:
        assert CLIENT_SECRET.encode() not in file.read_bytes(), file
    for record in caplog.records:
        assert CLIENT_SECRET not in record.getMessage()


async def test_no_sign_in_fails_before_anything_is_sent_then_a_login_is_picked_up(
        isolated_home: Path) -> None:
    async with serve_oauth() as fx:
        server = server_settings(fx.url)
        host = make_host(server, isolated_home)
        await host.manager.start()
        try:
            state = host.manager.servers["remote"]
            assert (state.status, state.last_error) == ("failed", "MCP_LOGIN_REQUIRED")
            assert fx.hits == {}  # no request, no registration
            # A login made meanwhile (by another process: its own storage) is read back.
            await sign_in(server, token_root(isolated_home), open_url=follow)
            await host.manager.restart("remote")
            assert host.manager.servers["remote"].status == "ready"
        finally:
            await host.manager.stop()


async def test_revoked_refresh_needs_a_person(isolated_home: Path) -> None:
    async with serve_oauth() as fx:
        server = server_settings(fx.url)
        await sign_in(server, token_root(isolated_home), open_url=follow)
        age(token_path(token_root(isolated_home), fx.url), 7200)
        fx.refresh_tokens.clear()
        fx.revoke_all()
        host = make_host(server, isolated_home)
        await host.manager.start()
        try:
            state = host.manager.servers["remote"]
            assert (state.status, state.last_error) == ("failed", "MCP_LOGIN_REQUIRED")
            assert "mcp login" in state.view()["error"]
        finally:
            await host.manager.stop()
        assert fx.hits.get("authorize", 0) == 1  # only the sign-in's; no browser opened


async def test_scope_step_up_at_login_and_on_a_connection(isolated_home: Path) -> None:
    async with serve_oauth() as fx:
        fx.required_scope = "notes:read"
        server = server_settings(fx.url)
        root = token_root(isolated_home)
        # At login a person is there: the 403 leads to a second authorization, for more.
        await sign_in(server, root, open_url=follow)
        assert [p.get("scope") for p in fx.authorize_params] == [None, "notes:read"]
        host = make_host(server, isolated_home)
        await host.manager.start()
        try:
            assert host.manager.servers["remote"].status == "ready"
            # The server wants more later: a connection names the scope, opens nothing.
            fx.required_scope = "notes:write"
            await host.manager.restart("remote")
            state = host.manager.servers["remote"]
            assert (state.status, state.last_error) == ("failed", "MCP_LOGIN_REQUIRED")
            assert "notes:write" in state.view()["error"]
            assert len(fx.authorize_params) == 2
        finally:
            await host.manager.stop()


async def test_redirect_with_another_state_is_ignored() -> None:
    async with RedirectCatcher() as catcher:
        catcher.expect("https://as.example/authorize?state=expected-state&x=1")
        async with httpx2.AsyncClient(timeout=5) as http:
            wrong = await http.get(catcher.redirect_uri, params={"code": "c", "state": "other"})
            assert wrong.status_code == 400
            elsewhere = await http.get(catcher.redirect_uri.replace("/callback", "/x"))
            assert elsewhere.status_code == 404
            right = await http.get(catcher.redirect_uri,
                                   params={"code": "c1", "state": "expected-state"})
            assert right.status_code == 200
        result = await catcher.wait()
        assert (result.code, result.state) == ("c1", "expected-state")


async def test_refused_sign_in_is_login_failed() -> None:
    async with RedirectCatcher() as catcher:
        catcher.expect("https://as.example/authorize?state=s1")
        async with httpx2.AsyncClient(timeout=5) as http:
            await http.get(catcher.redirect_uri, params={"error": "access_denied", "state": "s1"})
        with pytest.raises(McpError) as refused:
            await catcher.wait()
        assert refused.value.code == "MCP_LOGIN_FAILED"


async def test_login_on_a_client_credentials_server_is_unsupported(tmp_path: Path) -> None:
    server = McpServerSettings.model_validate({
        "id": "cc", "transport": "streamable-http", "url": "https://mcp.example/mcp",
        "oauth": {"client_id": {"env": ID_ENV}, "client_secret": {"env": SECRET_ENV}}})
    assert server.oauth is not None
    assert server.oauth.type == "client_credentials"
    with pytest.raises(McpError) as refused:
        await sign_in(server, tmp_path, open_url=follow)
    assert refused.value.code == "MCP_LOGIN_UNSUPPORTED"


@pytest.mark.parametrize("oauth", [
    {"client_secret": {"env": "X"}},                                  # a secret, no id
    {"client_id": {"env": "X"}, "token_endpoint_auth_method": "client_secret_post"},
    {"client_id": {"env": "X"}, "client_secret": {"env": "Y"},
     "token_endpoint_auth_method": "none"},
    {"token_endpoint_auth_method": "none"},                           # method, no id
    {"client_id": "literal-id"},                                      # not a reference
    {"client_metadata_url": "http://client.example/meta.json"},       # not https
    {"client_metadata_url": "https://client.example/"},               # no path
    {"redirect_port": 80},
    {"grant": "implicit"},                                            # unknown key
])
def test_authorization_code_settings_are_strict(oauth: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        server_settings("https://mcp.example/mcp", **oauth)


def test_unknown_grant_type_is_refused() -> None:
    with pytest.raises(ValidationError):
        McpServerSettings.model_validate({
            "id": "x", "transport": "streamable-http", "url": "https://mcp.example/mcp",
            "oauth": {"type": "password"}})


async def test_login_status_and_logout_commands(isolated_home: Path, tmp_path: Path) -> None:
    """``mcp login`` as a process: it prints the URL, a person (here: the test) follows it,
    the redirect reaches the command's listener; ``status`` and ``logout`` see the sign-in."""
    async with serve_oauth() as fx:
        config = tmp_path / "eyes.toml"
        entry = server_settings(fx.url).model_dump(mode="json", exclude_defaults=True)
        config.write_text(dumps({"mcp": {"servers": [entry]}}), encoding="utf-8")
        argv = [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "mcp"]
        login = await asyncio.create_subprocess_exec(
            *argv, "login", "remote", "--no-browser", "--json", "--timeout", "60",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert login.stderr is not None
        async with asyncio.timeout(60):
            url = ""
            while not url:
                line = (await login.stderr.readline()).decode()
                assert line, "login ended before printing the URL"
                if line.strip().startswith("http"):
                    url = line.strip()
            await follow(url)
            out, _ = await login.communicate()
        assert login.returncode == 0
        assert json.loads(out)["signed_in"] is True

        async def command(*args: str) -> tuple[int, str]:
            proc = await asyncio.create_subprocess_exec(
                *argv, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            async with asyncio.timeout(60):
                stdout, _ = await proc.communicate()
            return proc.returncode or 0, stdout.decode()

        code, status = await command("status", "--json")
        assert code == 0, status
        assert json.loads(status)["servers"][0]["oauth"]["status"] == "token"
        code, logout = await command("logout", "remote", "--json")
        assert (code, json.loads(logout)["removed"]) == (0, True)
        code, status = await command("status", "--json")
        assert json.loads(status)["servers"][0]["last_error"] == "MCP_LOGIN_REQUIRED"
