"""``chat`` follows the settings file as the gateway does (the same watch): a person chats
with no MCP server configured, registers the real ``mcp-server-time`` and allows a tool from
another terminal, and the next turn of the running chat offers and calls it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import mcp_peers
from helpers import Lines
from runtime.upstream import LoopbackUpstream

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60
APPLIED = "chat: settings change applied (1 MCP server(s))"


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
    out, err = Lines().follow(chat.stdout), Lines().follow(chat.stderr)

    def say(line: str) -> None:
        assert chat.stdin is not None
        chat.stdin.write(line + "\n")
        chat.stdin.flush()

    try:
        say("hello")
        assert out.wait_for("echo: hello", TIMEOUT_S), err.text()
        say("/tools")
        assert out.wait_for("no tools are offered now", TIMEOUT_S), out.text()

        registered = cli("mcp", "register", "time", "--", str(server))
        assert registered.returncode == 0, registered.stderr
        assert err.wait_for(APPLIED, TIMEOUT_S), err.text()
        allowed = cli("mcp", "allow", "time", "get_current_time")
        assert allowed.returncode == 0, allowed.stderr
        assert err.wait_for(APPLIED, TIMEOUT_S, times=2), err.text()

        say("/tools")
        assert out.wait_for("mcp__time__get_current_time", TIMEOUT_S), out.text()
        say("CALL[mcp__time__get_current_time]: " + json.dumps({"timezone": "UTC"}))
        assert out.wait_for("after mcp__time__get_current_time:", TIMEOUT_S), \
            out.text() + err.text()
        # The time server's answer, in the reply.
        assert out.wait_for("UTC", TIMEOUT_S), out.text()
        called = [r for r in upstream.requests if any(
            t["function"]["name"] == "mcp__time__get_current_time" for t in r.get("tools") or ())]
        assert called, "the model was never offered the tool"
    finally:
        assert chat.stdin is not None
        chat.stdin.close()
        code = chat.wait(TIMEOUT_S)
        for lines, pipe in ((out, chat.stdout), (err, chat.stderr)):
            lines.wait_ended(TIMEOUT_S)  # the rest read, then the pipe closed
            if pipe is not None:
                pipe.close()
    assert code == 0, err.text()
    assert "Traceback" not in err.text()
