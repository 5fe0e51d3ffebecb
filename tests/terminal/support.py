"""Helpers shared by the terminal tests (imported as ``terminal.support``)."""

from __future__ import annotations

import importlib
import os
import shutil
import socket
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
import uvicorn

from deepseek_eyes.terminal.sandbox import bwrap_available
from deepseek_eyes.terminal.service import TerminalService

__all__ = [
    "ServiceFactory", "require_bwrap", "require_executable", "require_module", "serve_in_thread",
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
