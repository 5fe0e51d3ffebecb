"""The control centre's writes over a real settings file, without a gateway: removing a
server, the vision routes' order, and a sign-in's refusals (each before anything starts)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deepseek_eyes.console.control import ConsoleParts, order_routes, remove
from deepseek_eyes.console.signin import signin_state, start_signin
from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.home import DataHome

pytestmark = pytest.mark.anyio

SETTINGS = '''[vision]
route_priority = ["local", "spare"]

[[vision.routes]]
name = "spare"
base_url = "http://127.0.0.1:9/v1"
model = "m"

[[mcp.servers]]
id = "one"
transport = "stdio"
command = "true"

[[mcp.servers]]
id = "two"
transport = "stdio"
command = "true"
'''


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[ConsoleParts]:
    path = tmp_path / "eyes.toml"
    path.write_text(SETTINGS, encoding="utf-8")
    home = DataHome(tmp_path / "data")
    yield ConsoleParts(home, path)
    home.close()


async def _refused(code: str, call: object) -> None:
    with pytest.raises(DeepSeekEyesError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.code == code


async def test_remove_writes_through_the_settings_writer_and_audits_it(
        parts: ConsoleParts) -> None:
    assert parts.settings_path is not None
    answer = await remove(parts, "one")
    assert answer["removed"] is True
    text = parts.settings_path.read_text(encoding="utf-8")
    assert 'id = "one"' not in text
    assert 'id = "two"' in text
    parts.home.db.flush()
    assert parts.home.db.query_one(
        "SELECT COUNT(*) FROM audit WHERE kind = 'settings.change'")[0] == 1
    before = parts.settings_path.read_bytes()
    await _refused("MCP_SERVER_UNKNOWN", remove(parts, "one"))
    assert parts.settings_path.read_bytes() == before


async def test_the_route_order_is_validated_like_the_file(parts: ConsoleParts) -> None:
    assert parts.settings_path is not None
    answer = await order_routes(parts, ["spare", "local"])
    assert answer["order"] == ["spare", "local"]
    assert 'route_priority = ["spare", "local"]' in parts.settings_path.read_text(
        encoding="utf-8")
    before = parts.settings_path.read_bytes()
    await _refused("CONFIG_INVALID", order_routes(parts, ["spare", "nowhere"]))
    await _refused("CONSOLE_ARGUMENT_INVALID", order_routes(parts, ["spare", "spare"]))
    await _refused("CONSOLE_ARGUMENT_INVALID", order_routes(parts, []))
    assert parts.settings_path.read_bytes() == before


async def test_a_sign_in_is_refused_before_it_starts(parts: ConsoleParts) -> None:
    await _refused("MCP_SERVER_UNKNOWN", start_signin(parts, "nope"))
    await _refused("MCP_LOGIN_UNSUPPORTED", start_signin(parts, "one"))  # no oauth
    with pytest.raises(DeepSeekEyesError) as caught:
        signin_state(parts, "one")
    assert caught.value.code == "CONSOLE_NOT_FOUND"


async def _signed_in_server(tmp_path: Path, url: str) -> ConsoleParts:
    path = tmp_path / "oauth.toml"
    path.write_text(f'[[mcp.servers]]\nid = "remote"\ntransport = "streamable-http"\n'
                    f'url = "{url}"\noauth = {{ type = "authorization_code" }}\n',
                    encoding="utf-8")
    return ConsoleParts(DataHome(tmp_path / "oauth-data"), path)


async def test_a_sign_in_runs_in_the_background_from_its_url_to_the_token(
        tmp_path: Path) -> None:
    import asyncio

    import httpx2

    from mcp_host.oauth_server import serve_oauth

    async with serve_oauth() as fx:
        parts = await _signed_in_server(tmp_path, fx.url)
        try:
            started = await start_signin(parts, "remote")
            assert started["state"] == "waiting"
            assert started["url"].startswith(f"{fx.base}/authorize?")
            # The person's browser: the server approves at once and redirects back.
            async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as browser:
                await browser.get(started["url"])
            task = parts.signins["remote"].task
            assert task is not None
            async with asyncio.timeout(10):
                await task  # the background sign-in's own end, no polling
            done = signin_state(parts, "remote")
            assert (done["state"], done["health"]["status"]) == ("signed in", "token")
            assert all(token not in str(done) for token in fx.issued)
        finally:
            parts.home.close()


async def test_a_server_naming_a_script_url_signs_nobody_in(tmp_path: Path) -> None:
    from mcp_host.oauth_server import serve_oauth

    async with serve_oauth() as fx:
        fx.asm_extra = {"authorization_endpoint": "javascript:alert(1)//"}
        parts = await _signed_in_server(tmp_path, fx.url)
        try:
            with pytest.raises(DeepSeekEyesError) as caught:
                await start_signin(parts, "remote")
            assert caught.value.code in ("MCP_LOGIN_FAILED", "MCP_OAUTH_INSECURE_ENDPOINT")
            assert "remote" not in parts.signins
            assert fx.hits.get("authorize", 0) == 0
        finally:
            parts.home.close()
