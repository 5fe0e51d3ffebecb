"""private_key_jwt client authentication (RFC 7523) for client_credentials, against the
loopback authorization server verifying each assertion, and the settings and key checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from oauth_server import CLIENT_ID, serve_oauth
from pydantic import ValidationError

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.client_assertion import assertion_provider
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import McpOAuthSettings, McpServerSettings, McpSettings
from deepseek_eyes.store.blobs import BlobStore

pytestmark = pytest.mark.anyio

ID_ENV, KEY_ENV = "DSE_TEST_JWT_CLIENT", "DSE_TEST_JWT_KEY"


def pem(key: Any) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def jwt_settings(url: str, **oauth: Any) -> McpSettings:
    server = McpServerSettings.model_validate({
        "id": "keyed", "transport": "streamable-http", "url": url,
        "oauth": {"client_id": {"env": ID_ENV}, "token_endpoint_auth_method": "private_key_jwt",
                  **oauth},
        "allow": {"tools": ["whoami"]},
    })
    return McpSettings(servers=(server,))


def make_host(settings: McpSettings, tmp_path: Path) -> McpHost:
    return McpHost(McpManager(settings), blobs=BlobStore(tmp_path / "blobs"),
                   artifacts=tmp_path / "artifacts", audit=McpAudit(None))


async def test_es256_key_from_env_signs_verified_assertions_with_kid(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    monkeypatch.setenv(ID_ENV, CLIENT_ID)
    monkeypatch.setenv(KEY_ENV, pem(key))
    async with serve_oauth(expires=[0, 3600], verify_key=key.public_key(),
                           expected_kid="k-2026") as fx:
        host = make_host(jwt_settings(fx.url, private_key={"env": KEY_ENV}, key_id="k-2026",
                                      signing_algorithm="ES256"), tmp_path)
        await host.manager.start()
        try:
            state = host.manager.servers["keyed"]
            assert state.status == "ready", (state.view(), fx.assertion_refusals)
            result = await host.call_tool("mcp__keyed__whoami", {})
            assert not result.is_error
            # The first token arrived expired: a second request, a second fresh assertion.
            assert len(fx.assertions) == 2
            assert fx.assertion_refusals == []
            assert fx.token_auth == ["", ""]  # no Basic header: the assertion authenticates
            for header, claims in fx.assertions:
                assert (header["alg"], header["kid"]) == ("ES256", "k-2026")
                assert claims["aud"] == fx.base
                assert claims["exp"] - claims["iat"] == 300
            exposed = json.dumps([state.view(), host.manager.status(), host.audit.recent()],
                                 default=str)
            assert "PRIVATE KEY" not in exposed
        finally:
            await host.manager.stop()


async def test_rs256_key_file_and_a_wrong_key_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path / "client.pem"
    path.write_text(pem(key))
    path.chmod(0o600)
    monkeypatch.setenv(ID_ENV, CLIENT_ID)
    async with serve_oauth(verify_key=other.public_key()) as fx:
        host = make_host(jwt_settings(fx.url, private_key_file=str(path)), tmp_path)
        await host.manager.start(wait=5)
        try:
            state = host.manager.servers["keyed"]
            assert state.status != "ready"
            assert state.last_error == "MCP_AUTH_FAILED"
            assert fx.assertion_refusals
            assert "Signature verification failed" in fx.assertion_refusals[0]
        finally:
            await host.manager.stop()
    async with serve_oauth(verify_key=key.public_key()) as fx:
        host = make_host(jwt_settings(fx.url, private_key_file=str(path)), tmp_path)
        await host.manager.start()
        try:
            assert host.manager.servers["keyed"].status == "ready"
            assert fx.assertions[0][0]["alg"] == "RS256"
            assert "kid" not in fx.assertions[0][0]
        finally:
            await host.manager.stop()


def _oauth(**fields: Any) -> McpOAuthSettings:
    return McpOAuthSettings.model_validate(
        {"client_id": {"env": ID_ENV}, "token_endpoint_auth_method": "private_key_jwt",
         **fields})


def test_key_file_readable_by_others_missing_or_not_a_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ID_ENV, CLIENT_ID)
    path = tmp_path / "client.pem"
    path.write_text(pem(ec.generate_private_key(ec.SECP256R1())))
    path.chmod(0o644)
    with pytest.raises(McpError) as loose:
        assertion_provider(_oauth(private_key_file=str(path), signing_algorithm="ES256"))
    assert loose.value.code == "MCP_CLIENT_KEY_INVALID"
    assert "chmod 600" in loose.value.message
    assert loose.value.details == {"private_key_file": str(path)}
    path.chmod(0o600)
    assertion_provider(_oauth(private_key_file=str(path), signing_algorithm="ES256"))
    # An EC key cannot sign RS256.
    with pytest.raises(McpError) as family:
        assertion_provider(_oauth(private_key_file=str(path)))
    assert "cannot sign RS256" in family.value.message
    with pytest.raises(McpError) as missing:
        assertion_provider(_oauth(private_key_file=str(tmp_path / "absent.pem")))
    assert missing.value.code == "MCP_CLIENT_KEY_INVALID"
    monkeypatch.setenv(KEY_ENV, "not a key at all")
    with pytest.raises(McpError) as garbage:
        assertion_provider(_oauth(private_key={"env": KEY_ENV}))
    assert garbage.value.details == {"private_key": KEY_ENV}
    assert "not a key at all" not in garbage.value.message


@pytest.mark.parametrize(("fields", "message"), [
    ({}, "exactly one of private_key"),
    ({"private_key": {"env": KEY_ENV}, "private_key_file": "/k.pem"}, "exactly one"),
    ({"private_key": {"env": KEY_ENV}, "client_secret": {"env": "S"}}, "no client_secret"),
    ({"private_key_file": "relative.pem"}, "absolute path"),
    ({"private_key": "-----BEGIN PRIVATE KEY-----"}, "literal secret"),
    ({"private_key": {"env": KEY_ENV}, "signing_algorithm": "HS256"}, "signing_algorithm"),
])
def test_private_key_jwt_settings_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _oauth(**fields)


def test_secret_methods_take_no_key_fields_and_still_need_a_secret() -> None:
    base = {"client_id": {"env": ID_ENV}}
    with pytest.raises(ValidationError, match="needs client_secret"):
        McpOAuthSettings.model_validate(base)
    with pytest.raises(ValidationError, match="for token_endpoint_auth_method private_key_jwt"):
        McpOAuthSettings.model_validate({**base, "client_secret": {"env": "S"},
                                         "key_id": "k"})
    ok = McpOAuthSettings.model_validate({**base, "client_secret": {"env": "S"}})
    assert [ref.env for ref in ok.secret_refs()] == [ID_ENV, "S"]
    keyed = _oauth(private_key={"env": KEY_ENV})
    assert [ref.env for ref in keyed.secret_refs()] == [ID_ENV, KEY_ENV]
