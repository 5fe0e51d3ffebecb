"""Fixtures for the terminal tests: a workspace, a keyring, and services over both
sandboxes (none, and bubblewrap where it works; under CI=true a missing bwrap fails)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from deepseek_eyes.terminal.execution.redact import Redactor
from deepseek_eyes.terminal.policy.paths import Workspace
from deepseek_eyes.terminal.receipts.keyring import Keyring
from deepseek_eyes.terminal.service import ServiceConfig, TerminalService
from deepseek_eyes.terminal.transport.console_login import ConsoleLogins
from deepseek_eyes.terminal.transport.http import HttpOptions, build_http_app
from terminal.support import (
    Running,
    ServiceFactory,
    require_bwrap,
    require_module,
    serve_in_thread,
)

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


@pytest.fixture
def running(workspace: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Running]:
    """The HTTP server (confirm mode) on a loopback port. Parametrize indirectly with a dict
    of :class:`HttpOptions` fields, plus ``redact`` (secrets for the redactor, the token is
    always one) and ``advisor`` (the name of a fixture that gives one)."""
    options = dict(getattr(request, "param", {}))
    advisor_fixture = options.pop("advisor", None)
    advisor = request.getfixturevalue(advisor_fixture) if advisor_fixture else None
    token = secrets.token_urlsafe(32)
    keyring = Keyring([b"h" * 32])
    config = ServiceConfig(workspace=Workspace.of([workspace]), mode="confirm")
    service = TerminalService(config, keyring, tmp_path / "receipts",
                              redactor=Redactor([token, *options.pop("redact", ())]))
    codes: list[str] = []
    logins = ConsoleLogins(codes.append)
    logins.issue()
    app = build_http_app(service, HttpOptions(token=token, **options), advisor, logins=logins)
    url, server, thread = serve_in_thread(app)
    yield Running(url, token, keyring, service, logins, codes)
    server.should_exit = True
    thread.join(30)


@pytest.fixture
async def http(running: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=running.url, timeout=30) as client:
        yield client
