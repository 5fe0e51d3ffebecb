"""A desktop tool call's arguments, checked, and its result.

Arguments come from a model and are checked before anything reaches the desktop: the right
type, within bounds, or ``DESKTOP_ARGUMENT_INVALID`` naming the argument. Booleans are never
numbers; numbers are finite.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deepseek_eyes.desktop.screenshots import Screenshot
from deepseek_eyes.errors import DesktopError

__all__ = ["Args", "ToolResult"]

MAX_TEXT = 20_000
MAX_STRING = 2_000


def invalid(name: str, what: str) -> DesktopError:
    return DesktopError(f"argument {name!r} {what}", code="DESKTOP_ARGUMENT_INVALID",
                        details={"argument": name})


@dataclass(frozen=True)
class Args:
    values: Mapping[str, Any]

    def has(self, name: str) -> bool:
        return self.values.get(name) is not None

    def string(self, name: str, *, required: bool = False, limit: int = MAX_STRING,
               choices: Sequence[str] | None = None, default: str | None = None) -> str | None:
        value = self.values.get(name)
        if value is None:
            if required:
                raise invalid(name, "is required")
            return default
        if not isinstance(value, str):
            raise invalid(name, "must be a string")
        if len(value) > limit:
            raise invalid(name, f"is longer than {limit} characters")
        if choices is not None and value not in choices:
            raise invalid(name, f"must be one of {', '.join(choices)}")
        return value

    def require(self, name: str, **kwargs: Any) -> str:
        value = self.string(name, required=True, **kwargs)
        assert value is not None
        return value

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.values.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise invalid(name, "must be true or false")
        return value

    def number(self, name: str, *, minimum: float, maximum: float) -> float | None:
        value = self.values.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or not minimum <= value <= maximum:
            raise invalid(name, f"must be a number from {minimum:g} to {maximum:g}")
        return float(value)

    def integer(self, name: str, *, default: int, minimum: int, maximum: int) -> int:
        value = self.values.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) \
                or not minimum <= value <= maximum:
            raise invalid(name, f"must be an integer from {minimum} to {maximum}")
        return value

    def point(self) -> tuple[float, float] | None:
        """``x`` and ``y`` together (one without the other is invalid), or None."""
        x = self.number("x", minimum=0, maximum=100_000)
        y = self.number("y", minimum=0, maximum=100_000)
        if (x is None) != (y is None):
            raise invalid("x" if x is None else "y", "is required with the other coordinate")
        return None if x is None or y is None else (x, y)


@dataclass
class ToolResult:
    """What one tool call returns: the text the model reads, structured data, and the
    state's screenshot when one should reach the model (``deliver``)."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
    screenshot: Screenshot | None = None
    deliver: bool = False
    question: str | None = None

    @property
    def code(self) -> str | None:
        error = self.data.get("error")
        return error.get("code") if isinstance(error, dict) else None
