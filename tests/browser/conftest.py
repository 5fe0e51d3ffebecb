"""Fixtures for the browser tests: the site of test pages and services over real headless
Chromium (Debian's, through pip's playwright; never a downloaded browser)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from browser.site import Site
from browser.support import require_browser, settings
from deepseek_eyes.browser.service import BrowserService
from deepseek_eyes.store.blobs import BlobStore


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with Site() as served:
        yield served


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Callable[..., BrowserService]]:
    """``browser(**settings)`` → a service (started on its first call), closed after."""
    require_browser()
    made: list[BrowserService] = []

    def make(**overrides: Any) -> BrowserService:
        service = BrowserService(settings(**overrides), downloads_dir=tmp_path / "downloads",
                                 blobs=BlobStore(tmp_path / "blobs"))
        made.append(service)
        return service

    yield make
    for service in made:
        await service.aclose()
