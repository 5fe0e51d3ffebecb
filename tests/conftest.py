"""Shared fixtures: every test runs against a temporary data directory with no API keys;
tests that need a remote model get the session's loopback OpenAI-compatible server, which
decodes every image it is sent (see :mod:`vision.loopback`). Tests that need counters of
their own use a tagged behaviour, ``loopback.url("healthy~" + tag)``."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from vision.loopback import LoopbackVisionServer

SECRET_ENV_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_KEY")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "eyes-home"
    monkeypatch.setenv("DEEPSEEK_EYES_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    for name in list(os.environ):
        if name.endswith(SECRET_ENV_SUFFIXES):
            monkeypatch.delenv(name, raising=False)
    return home


def require_module(name: str) -> ModuleType:
    """Import an optional test dependency: skip locally, but fail under CI=true, where a
    missing dependency is a broken setup and never a silent skip."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and the test dependency {name!r} is missing")
        pytest.skip(f"{name} is not installed")


def mcp_peers() -> ModuleType:
    """``tests/mcp/mcp_peers.py`` from any test directory. The folder shares its name with
    the SDK's ``mcp`` package, so the module is loaded by path, once."""
    loaded = sys.modules.get("mcp_peers")
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(
        "mcp_peers", Path(__file__).resolve().parent / "mcp" / "mcp_peers.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mcp_peers"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def loopback() -> Iterator[LoopbackVisionServer]:
    with LoopbackVisionServer() as server:
        yield server
