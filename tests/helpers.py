"""Helpers every test folder can import (``from helpers import …``). They live here, not in
conftest.py: each folder's conftest.py is imported as the module ``conftest``, so ``from
conftest import`` would find whichever was collected last."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

__all__ = ["mcp_peers", "require_module"]


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
