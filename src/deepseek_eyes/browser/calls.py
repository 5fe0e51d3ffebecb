"""A tool call's arguments, checked, and its result.

Arguments come from a model (through MCP or the runtime) and are checked here before
anything touches the page: the right type, within bounds, or ``BROWSER_ARGUMENT_INVALID``
naming the argument. Booleans are never numbers and numbers are finite.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deepseek_eyes.browser.screenshots import Screenshot
from deepseek_eyes.errors import BrowserError

__all__ = ["Args", "ToolResult"]

MAX_TEXT = 20_000
MAX_STRING = 2_000
MAX_ITEMS = 32


def _invalid(name: str, what: str) -> BrowserError:
    return BrowserError(f"argument {name!r} {what}", code="BROWSER_ARGUMENT_INVALID",
                        details={"argument": name})


@dataclass(frozen=True)
class Args:
    values: Mapping[str, Any]

    def raw(self, name: str) -> Any:
        return self.values.get(name)

    def string(self, name: str, *, required: bool = False, limit: int = MAX_STRING,
               choices: Sequence[str] | None = None, default: str | None = None) -> str | None:
        value = self.values.get(name)
        if value is None:
            if required:
                raise _invalid(name, "is required")
            return default
        if not isinstance(value, str):
            raise _invalid(name, "must be a string")
        if len(value) > limit:
            raise _invalid(name, f"is longer than {limit} characters")
        if choices is not None and value not in choices:
            raise _invalid(name, f"must be one of {', '.join(choices)}")
        return value

    def require(self, name: str, **kwargs: Any) -> str:
        value = self.string(name, required=True, **kwargs)
        if value is None:
            raise _invalid(name, "is required")
        return value

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.values.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise _invalid(name, "must be true or false")
        return value

    def number(self, name: str, *, default: float, minimum: float, maximum: float) -> float:
        value = self.values.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or not minimum <= value <= maximum:
            raise _invalid(name, f"must be a number from {minimum:g} to {maximum:g}")
        return float(value)

    def integer(self, name: str, *, default: int, minimum: int, maximum: int) -> int:
        value = self.values.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) \
                or not minimum <= value <= maximum:
            raise _invalid(name, f"must be an integer from {minimum} to {maximum}")
        return value

    def strings(self, name: str, *, required: bool = False) -> list[str]:
        value = self.values.get(name)
        if value is None:
            if required:
                raise _invalid(name, "is required")
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or len(value) > MAX_ITEMS \
                or not all(isinstance(v, str) and len(v) <= MAX_STRING for v in value):
            raise _invalid(name, f"must be a list of 1 to {MAX_ITEMS} strings")
        return list(value)


@dataclass
class ToolResult:
    """What one tool call returns: the text the model reads, the structured content, and a
    screenshot when one was taken (``deliver``: it should reach the model as pixels or
    visual evidence; ``question``: what to ask of it)."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
    screenshot: Screenshot | None = None
    deliver: bool = False
    question: str | None = None
    secret: bool = False  # the call typed into a secret field: the report keeps no text

    @property
    def code(self) -> str | None:
        error = self.data.get("error")
        return error.get("code") if isinstance(error, dict) else None
