"""Fixtures for the terminal tests: a workspace, a keyring, and services over both
sandboxes (none, and bubblewrap where it works; under CI=true a missing bwrap fails)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.terminal.keyring import Keyring
from deepseek_eyes.terminal.paths import Workspace
from deepseek_eyes.terminal.service import ServiceConfig, TerminalService
from terminal.support import ServiceFactory, require_bwrap, require_module

# Re-exported: this file shadows tests/conftest.py as the module ``conftest`` once imported,
# and other directories do ``from conftest import require_module``.
__all__ = ["require_module"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    (root / "b.txt").write_text("beta\n")
    return root


@pytest.fixture
def keyring() -> Keyring:
    return Keyring([b"k" * 32])


@pytest.fixture(params=["none", "bwrap"])
def sandbox(request: pytest.FixtureRequest) -> str | None:
    return require_bwrap() if request.param == "bwrap" else None



@pytest.fixture
async def make_service(
    workspace: Path, keyring: Keyring, tmp_path: Path
) -> AsyncIterator[ServiceFactory]:
    made: list[TerminalService] = []

    def factory(**overrides: Any) -> TerminalService:
        service_kwargs = {k: overrides.pop(k) for k in ("clock", "redactor") if k in overrides}
        config = ServiceConfig(workspace=Workspace.of([workspace]), **overrides)
        service = TerminalService(config, keyring, tmp_path / "receipts", **service_kwargs)
        made.append(service)
        return service

    yield factory
    for service in made:
        await service.aclose()
