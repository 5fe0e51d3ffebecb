"""``gateway/settings_watch.py`` on a real :class:`McpManager` with real stdio servers (the
tests' ``slow_server.py``): only complete, valid, settled versions are applied. An in-place
writer's truncate and a half-written ``[[mcp.servers]]`` entry are seen once and never
applied, the good file applies at the second look; an emptied file that settles is
``CONFIG_EMPTY`` and the running set is kept; a version our writer wrote applies at the first
look; a hanging server of one version does not hold the next one back. Each look here is
one poll of the running watch (``interval=0``: the test is the clock)."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from deepseek_eyes.gateway.settings_watch import SettingsWatch
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import validate_settings_file
from deepseek_eyes.settings.writer import rewrite

SLOW = Path(__file__).parents[1] / "mcp_host" / "slow_server.py"


def server(server_id: str, *, args: bool = True, extra: str = "") -> str:
    text = (f'[[mcp.servers]]\nid = "{server_id}"\ntransport = "stdio"\n'
            f'command = "{sys.executable}"\n')
    if args:
        text += f'args = ["{SLOW}"]\nallow = {{ tools = ["pid"] }}\n'
    return text + extra


class Watched:
    def __init__(self, path: Path, manager: McpManager, watch: SettingsWatch,
                 said: list[str]) -> None:
        self.path = path
        self.manager = manager
        self.watch = watch
        self.said = said

    async def look(self) -> str:
        """One poll; the state of the version it found."""
        return (await self.watch.check()).state

    def running(self) -> dict[str, str]:
        return {sid: state.status for sid, state in self.manager.servers.items()}


@pytest.fixture
async def watched(tmp_path: Path) -> AsyncIterator[Watched]:
    path = tmp_path / "eyes.toml"
    path.write_text("# kept by hand\n" + server("a"), encoding="utf-8")
    manager = McpManager(validate_settings_file(path).mcp)
    await manager.start(wait=30)
    said: list[str] = []
    watch = SettingsWatch(path, manager, say=said.append, interval=0.0, wait=30.0)
    try:
        assert manager.servers["a"].status == "ready"
        yield Watched(path, manager, watch, said)
    finally:
        await manager.stop()


@pytest.mark.anyio
async def test_an_in_place_writers_truncate_is_not_applied_and_its_file_is(
        watched: Watched) -> None:
    start = watched.watch.last.applied_sha256
    new = "# kept by hand\n" + server("a") + server("b")
    with watched.path.open("r+", encoding="utf-8") as handle:
        handle.truncate(0)  # an editor that saves in place: first the truncate
        handle.flush()
        assert await watched.look() == "pending"
        assert watched.running() == {"a": "ready"}  # nothing stopped
        handle.write(new)  # then the text
    assert await watched.look() == "pending"  # a new version: seen once
    assert watched.running() == {"a": "ready"}
    assert await watched.look() == "applied"  # the second look: settled, applied
    assert watched.running() == {"a": "ready", "b": "ready"}
    last = watched.watch.last
    assert last.applied_sha256 != start
    assert last.applying is None
    assert watched.said == ["settings change applied (2 MCP server(s))"]


@pytest.mark.anyio
async def test_a_half_written_entry_is_never_started(watched: Watched) -> None:
    with watched.path.open("a", encoding="utf-8") as handle:
        handle.write(server("half", args=False))  # a bare interpreter: valid TOML, valid
        handle.flush()                            # settings, and the wrong program to run
        assert await watched.look() == "pending"
        assert "half" not in watched.manager.servers
        handle.write(f'args = ["{SLOW}"]\n')
    assert await watched.look() == "pending"
    assert "half" not in watched.manager.servers
    assert await watched.look() == "applied"
    half = watched.manager.servers["half"]
    assert (half.status, half.settings.args) == ("ready", (str(SLOW),))


@pytest.mark.anyio
async def test_an_emptied_file_is_refused_once_and_the_running_set_kept(
        watched: Watched) -> None:
    watched.path.write_text("", encoding="utf-8")
    assert await watched.look() == "pending"
    assert await watched.look() == "refused"
    assert await watched.look() == "refused"
    last = watched.watch.last
    assert last.error is not None
    assert last.error["code"] == "CONFIG_EMPTY"
    assert watched.running() == {"a": "ready"}
    assert watched.watch.manager.settings.servers[0].id == "a"
    assert len(watched.said) == 1  # said once for this version
    assert watched.said[0].startswith(
        "settings change refused, the running MCP servers are kept: CONFIG_EMPTY")

    watched.path.unlink()  # gone (an editor between delete and create) is no better
    assert await watched.look() == "pending"
    assert await watched.look() == "refused"
    assert watched.watch.last.error["code"] == "CONFIG_EMPTY"  # type: ignore[index]
    assert watched.running() == {"a": "ready"}

    watched.path.write_text("# kept by hand\n" + server("a"), encoding="utf-8")
    assert await watched.look() == "applied"  # the version in force again: nothing to do
    assert watched.watch.last.error is None


@pytest.mark.anyio
async def test_an_invalid_version_is_refused_with_its_code(watched: Watched) -> None:
    watched.path.write_text(server("a", extra='connect_timeout = "soon"\n'), encoding="utf-8")
    assert await watched.look() == "pending"
    assert await watched.look() == "refused"
    error = watched.watch.last.error
    assert error is not None
    assert error["code"] == "CONFIG_INVALID"
    assert "connect_timeout" in watched.said[0]
    watched.path.write_text("not toml [", encoding="utf-8")
    assert await watched.look() == "pending"
    assert await watched.look() == "refused"
    assert watched.watch.last.error["code"] == "CONFIG_UNREADABLE"  # type: ignore[index]
    assert watched.running() == {"a": "ready"}


@pytest.mark.anyio
async def test_our_writers_version_applies_at_the_first_look_and_comments_alone_rebuild_nothing(
        watched: Watched) -> None:
    generation = watched.manager.servers["a"].generation
    rewrite(watched.path, lambda text: (text or "") + "# a note\n")
    assert await watched.look() == "applied"  # ours: whole by construction
    assert watched.manager.servers["a"].generation == generation  # same [mcp]: left be
    assert watched.said == []

    rewrite(watched.path, lambda text: (text or "").replace('["pid"]', '["pid", "slow"]'))
    assert await watched.look() == "applied"
    assert watched.manager.servers["a"].settings.allow.tools == ("pid", "slow")
    assert watched.manager.servers["a"].generation == generation  # policy alone: no reconnect


@pytest.mark.anyio
async def test_the_good_version_does_not_wait_behind_a_hanging_one(watched: Watched) -> None:
    start = watched.watch.last.applied_sha256
    hanging = server("hang", args=False, extra='args = ["-c", "import time; time.sleep(600)"]\n'
                     "connect_timeout = 30\n")
    rewrite(watched.path, lambda text: (text or "") + hanging)
    assert (await watched.watch.check(wait=False)).state == "applying"
    last = watched.watch.last
    assert last.applying == last.sha256  # the version being applied ...
    assert last.applied_sha256 == start  # ... and the one in force, both reported
    assert watched.manager.servers["hang"].task is not None  # started: its handshake waits
    assert not watched.manager.servers["hang"].settled.is_set()

    began = time.monotonic()
    good = rewrite(watched.path, lambda text: "# kept by hand\n" + server("a") + server("b"))
    assert await watched.look() == "applied"
    took = time.monotonic() - began
    assert took < 15, took  # not the hanging server's 30 s connect timeout
    assert watched.watch.last.applied_sha256 == good.sha256
    assert watched.watch.last.applying is None
    assert watched.running() == {"a": "ready", "b": "ready"}
    assert not watched.manager.suspended
