"""Helpers shared by the terminal tests (imported as ``terminal.support``)."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from deepseek_eyes.terminal.execution.sandbox import bwrap_available
from deepseek_eyes.terminal.receipts.keyring import Keyring
from deepseek_eyes.terminal.service import TerminalService
from deepseek_eyes.terminal.transport.console_login import COOKIE, ConsoleLogins

__all__ = [
    "Running", "ServiceFactory", "mcp_client", "require_bwrap", "require_executable",
    "require_module", "serve_in_thread", "tool_error",
]

ServiceFactory = Callable[..., TerminalService]


def require_executable(name: str) -> str:
    """An executable a test needs: skip locally, fail under CI=true."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and the executable {name!r} is missing")
        pytest.skip(f"{name} is not installed")
    return path


def require_bwrap() -> str:
    require_executable("bwrap")
    path = bwrap_available()
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and bwrap cannot create a sandbox here")
        pytest.skip("bwrap cannot create a sandbox here")
    return path


def serve_in_thread(app: Any) -> tuple[str, uvicorn.Server, threading.Thread]:
    """Serve ``app`` with uvicorn on a loopback socket bound here, in a daemon thread.

    The socket listens before uvicorn starts, so clients can connect at once: early
    connections wait in the backlog until uvicorn accepts them (no readiness polling).
    """
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server, thread


def require_module(name: str) -> ModuleType:
    """As ``require_module`` in tests/conftest.py (which this directory's conftest shadows):
    skip locally, fail under CI=true."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and the test dependency {name!r} is missing")
        pytest.skip(f"{name} is not installed")


@dataclass
class Running:
    """A terminal HTTP server serving in a thread (the ``running`` fixture).

    ``headers`` carry the MCP bearer token (for ``/mcp``); ``console_headers`` carry a
    console login's cookie (for ``/api/``), made in-process from a code the server issued
    (the login over HTTP has tests of its own)."""

    url: str
    token: str
    keyring: Keyring
    service: TerminalService
    logins: ConsoleLogins
    codes: list[str]
    console_credential: str = ""
    _cookie: str = ""

    def headers(self, **extra: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}", **extra}

    def console_headers(self, **extra: str) -> dict[str, str]:
        if not self._cookie:
            secret, self.console_credential = self.logins.login(self.codes[-1])
            self._cookie = f"{COOKIE}={secret}"
        return {"cookie": self._cookie, "content-type": "application/json", **extra}


@contextlib.asynccontextmanager
async def mcp_client(running: Running, mode: str = "legacy") -> AsyncIterator[Client]:
    """A real MCP SDK client over Streamable HTTP: its own connection (``legacy``: one MCP
    session; ``2026-07-28``: the stateless revision)."""
    async with (
        httpx2.AsyncClient(headers=running.headers(), timeout=30) as http_client,
        Client(streamable_http_client(running.url + "/mcp", http_client=http_client),
               mode=mode) as client,
    ):
        yield client


def tool_error(result: CallToolResult) -> dict[str, Any]:
    """The ``{"code", "message", "details"}`` object of a tool error."""
    assert result.is_error, result
    text = result.content[0].text  # type: ignore[union-attr]
    error: dict[str, Any] = json.loads(text[text.index("{"):])
    return error


def receipt_body() -> dict[str, Any]:
    """A minimal, well-formed receipt body (unsigned, unchained) for receipt-log tests."""
    return {
        "schema": "deepseek-eyes/terminal-receipt", "schema_version": "1.0",
        "receipt_id": uuid.uuid4().hex, "session_id": "s", "plan_id": "p",
        "plan_hash": "sha256:0", "mode": "read-only", "command": {"argv": ["true"]},
        "policy": {"reasons": []}, "approval": {}, "sandbox": {"kind": "none"},
        "started_at": "t", "ended_at": "t", "duration_ms": 1.0, "status": "completed",
        "exit_code": 0, "signal": None, "stdout": {"text": ""}, "stderr": {"text": ""},
        "redactions": 0, "sharing_redacted": False,
    }
