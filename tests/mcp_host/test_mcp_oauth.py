"""OAuth client_credentials against a loopback authorization server and protected resource."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from oauth_server import CLIENT_ID, CLIENT_SECRET, serve_oauth

from deepseek_eyes.errors import ConfigError
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import McpServerSettings, McpSettings
from deepseek_eyes.store.blobs import BlobStore

pytestmark = pytest.mark.anyio

ID_ENV, SECRET_ENV = "DSE_TEST_OAUTH_CLIENT", "DSE_TEST_OAUTH_PASSWORD"


def oauth_settings(url: str) -> McpSettings:
    server = McpServerSettings.model_validate({
        "id": "secure", "transport": "streamable-http", "url": url,
        "oauth": {"client_id": {"env": ID_ENV}, "client_secret": {"env": SECRET_ENV}},
        "resources_enabled": True,
        "allow": {"tools": ["whoami"], "resources": ["note://*"]},
    })
    return McpSettings(servers=(server,))


def make_host(settings: McpSettings, tmp_path: Path) -> McpHost:
    return McpHost(McpManager(settings), blobs=BlobStore(tmp_path / "blobs"),
                   artifacts=tmp_path / "artifacts", audit=McpAudit(None))


async def test_client_credentials_discovery_refresh_and_health(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(ID_ENV, CLIENT_ID)
    monkeypatch.setenv(SECRET_ENV, CLIENT_SECRET)
    # The first token is expired on arrival: the client must fetch another before reusing it.
    async with serve_oauth(expires=[0, 3600]) as fx:
        host = make_host(oauth_settings(fx.url), tmp_path)
        await host.manager.start()
        try:
            state = host.manager.servers["secure"]
            assert state.status == "ready", state.view()
            # Discovery: a 401 led to RFC 9728 and RFC 8414 metadata, then the token endpoint.
            assert fx.hits["401"] >= 1
            assert fx.hits["prm"] >= 1
            assert fx.hits["asm"] >= 1
            assert set(fx.token_auth) == {"Basic"}
            assert len(fx.issued) == 2, fx.hits  # the expired one was replaced, once
            health = state.view()["oauth"]
            assert health["status"] == "token"
            assert health["expires_at"] == pytest.approx(time.time() + 3600, abs=60)

            # Both planes ride the one provider: no new token for a call and a read.
            tool = await host.call_tool("mcp__secure__whoami", {})
            assert "client_credentials" in tool.preview
            note = await host.read_resource("secure", "note://one")
            assert "note body" in note.preview
            assert len(fx.issued) == 2

            # A 401 on a live connection (tokens revoked) fetches a fresh token and succeeds.
            fx.revoke_all()
            again = await host.call_tool("mcp__secure__whoami", {})
            assert not again.is_error
            assert len(fx.issued) == 3
            # A probe's separate connection shares the provider and its token.
            probe = await host.manager.probe("secure")
            assert probe["tools"] == ["whoami"]
            assert len(fx.issued) == 3

            exposed = json.dumps([state.view(), host.manager.status(), host.audit.recent(),
                                  probe], default=str)
            for secret in [CLIENT_SECRET, *fx.issued]:
                assert secret not in exposed
        finally:
            await host.manager.stop()
    for record in caplog.records:
        text = record.getMessage()
        for secret in [CLIENT_SECRET, *fx.issued]:
            assert secret not in text, record.name


async def test_missing_credential_fails_before_any_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ID_ENV, CLIENT_ID)
    monkeypatch.delenv(SECRET_ENV, raising=False)
    async with serve_oauth() as fx:
        host = make_host(oauth_settings(fx.url), tmp_path)
        await host.manager.start()
        try:
            state = host.manager.servers["secure"]
            assert (state.status, state.last_error) == ("failed", "CONFIG_ENV_MISSING")
            assert state.tools_status == "failed"
            with pytest.raises(ConfigError) as missing:
                await host.manager.probe("secure")
            assert missing.value.code == "CONFIG_ENV_MISSING"
            assert missing.value.details == {"env": SECRET_ENV}
        finally:
            await host.manager.stop()
        assert fx.hits == {}  # nothing reached the server
