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
