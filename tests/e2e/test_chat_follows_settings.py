"""``chat`` follows the settings file as the gateway does (the same watch): a person chats
with no MCP server configured, registers the real ``mcp-server-time`` and allows a tool from
another terminal, and the next turn of the running chat offers and calls it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

import mcp_peers
from runtime.upstream import LoopbackUpstream

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60


class Lines:
    """A stream's lines, read by a thread; waited on by count."""

    def __init__(self, stream: Iterable[str] | None) -> None:
        self.lines: list[str] = []
        self._ended = False
        self._changed = threading.Condition()
        self._stream = stream
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Once the process ended: the rest read, the pipe closed."""
        self._thread.join(TIMEOUT_S)
        if hasattr(self._stream, "close"):
            self._stream.close()

    def _read(self, stream: Iterable[str] | None) -> None:
        for line in stream or ():
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def count(self, fragment: str) -> int:
        return sum(fragment in line for line in self.lines)

    def wait_for(self, fragment: str, times: int = 1) -> bool:
        with self._changed:
            self._changed.wait_for(lambda: self._ended or self.count(fragment) >= times,
                                   TIMEOUT_S)
            return self.count(fragment) >= times

    def text(self) -> str:
        with self._changed:
            return "".join(self.lines)


@pytest.fixture
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


def test_mcp_register_and_allow_reach_a_running_chat(tmp_path: Path,
                                                     upstream: LoopbackUpstream) -> None:
    server = mcp_peers.need(mcp_peers.TIME_SERVER)
    config = tmp_path / "eyes.toml"
    config.write_text(f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\n'
                      'model = "deepseek-v4-pro"\ntimeout = 20\n', encoding="utf-8")
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(tmp_path / "data")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603 - our own CLI, argv list
            [sys.executable, "-m", "deepseek_eyes", "--config", str(config), *args],
            env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)

    chat = subprocess.Popen(  # noqa: S603 - our own CLI, argv list
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "chat"],
        env=env, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    assert chat.stdin is not None
    out, err = Lines(chat.stdout), Lines(chat.stderr)

    def say(line: str) -> None:
        assert chat.stdin is not None
        chat.stdin.write(line + "\n")
        chat.stdin.flush()

    try:
        say("hello")
        assert out.wait_for("echo: hello"), err.text()
        say("/tools")
        assert out.wait_for("no tools are offered now"), out.text()

        registered = cli("mcp", "register", "time", "--", str(server))
        assert registered.returncode == 0, registered.stderr
        assert err.wait_for("chat: settings change applied (1 MCP server(s))"), err.text()
        allowed = cli("mcp", "allow", "time", "get_current_time")
        assert allowed.returncode == 0, allowed.stderr
        assert err.wait_for("chat: settings change applied (1 MCP server(s))", 2), err.text()

        say("/tools")
        assert out.wait_for("mcp__time__get_current_time"), out.text()
        say("CALL[mcp__time__get_current_time]: " + json.dumps({"timezone": "UTC"}))
        assert out.wait_for("after mcp__time__get_current_time:"), out.text() + err.text()
        assert out.wait_for("UTC"), out.text()  # the time server's answer, in the reply
        called = [r for r in upstream.requests if any(
            t["function"]["name"] == "mcp__time__get_current_time" for t in r.get("tools") or ())]
        assert called, "the model was never offered the tool"
    finally:
        assert chat.stdin is not None
        chat.stdin.close()
        code = chat.wait(TIMEOUT_S)
        out.close()
        err.close()
    assert code == 0, err.text()
    assert "Traceback" not in err.text()
