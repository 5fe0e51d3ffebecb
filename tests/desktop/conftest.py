"""Fixtures of the desktop tests: one private headless desktop (Xvfb, D-Bus, AT-SPI) for
the session, our GTK window per test, and services bound to that desktop."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from deepseek_eyes.desktop.headless import HeadlessDesktop
from deepseek_eyes.desktop.service import DesktopService
from deepseek_eyes.settings import DesktopSettings
from desktop.support import GtkApp, require_desktop

_titles = itertools.count(1)


@pytest.fixture(scope="session")
def desktop_env() -> Iterator[dict[str, str]]:
    require_desktop()
    with HeadlessDesktop() as desktop:
        yield desktop.environment


@pytest.fixture
def gtk_app(desktop_env: dict[str, str]) -> Iterator[GtkApp]:
    app = GtkApp(desktop_env, f"Eyes Test {next(_titles)}")
    yield app
    app.close()


@pytest.fixture
async def desktop(desktop_env: dict[str, str]) -> AsyncIterator[Callable[..., DesktopService]]:
    """``desktop(**settings)`` → a service on the test desktop, closed after."""
    made: list[DesktopService] = []

    def make(**overrides: Any) -> DesktopService:
        settings = DesktopSettings.model_validate({"settle": 0.05, **overrides})
        service = DesktopService(settings, environment=desktop_env)
        made.append(service)
        return service

    yield make
    for service in made:
        await service.aclose()
