"""Helpers of the browser tests: what they need installed, and reading observations."""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.browser.calls import ToolResult
from deepseek_eyes.browser.service import BrowserService
from deepseek_eyes.browser.session import find_chromium
from deepseek_eyes.errors import BrowserError
from deepseek_eyes.settings import BrowserSettings

__all__ = ["ref", "require_browser", "value"]


def _missing(what: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {what} is missing")
    pytest.skip(f"{what} is not installed")


def require_browser() -> None:
    """Playwright and Debian's chromium: skip locally, fail under CI=true."""
    try:
        importlib.import_module("playwright.async_api")
    except ImportError:
        _missing("the test dependency 'playwright'")
    try:
        find_chromium(BrowserSettings())
    except BrowserError:
        _missing("chromium")


def ref(text: str, pattern: str) -> str:
    """The ref on the first line of ``text`` that contains ``pattern`` (a plain string)."""
    for line in text.splitlines():
        if pattern in line:
            found = re.search(r"\[ref=(e\d+)\]", line)
            if found:
                return found.group(1)
    raise AssertionError(f"no line with {pattern!r} and a ref in:\n{text}")


def refs(text: str, pattern: str) -> list[str]:
    """Every ref on lines of ``text`` containing ``pattern``."""
    return [m.group(1) for line in text.splitlines() if pattern in line
            for m in re.finditer(r"\[ref=(e\d+)\]", line)]


async def value(service: BrowserService, expression: str) -> Any:
    """Evaluate ``expression`` in the active tab's page (the test's own eyes)."""
    assert service.session is not None
    return await service.session.page.evaluate(expression)


def state(result: ToolResult) -> str:
    state_id = result.data.get("state_id")
    assert isinstance(state_id, str), result.text
    return state_id


def settings(**overrides: Any) -> BrowserSettings:
    """Test settings: the test site is on loopback, so the private-network guard lets it
    through (tests of the guard itself turn it back on)."""
    return BrowserSettings.model_validate({"settle_timeout": 3.0, "allow_private_network": True,
                                           **overrides})


def downloads(tmp_path: Path) -> Path:
    return tmp_path / "downloads"
