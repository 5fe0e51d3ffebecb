"""A desktop tool call's arguments, checked, and its result.

Arguments come from a model and are checked before anything reaches the desktop: the right
type, within bounds, or ``DESKTOP_ARGUMENT_INVALID`` naming the argument. Booleans are never
numbers; numbers are finite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deepseek_eyes.desktop.screenshots import Screenshot
from deepseek_eyes.errors import DesktopError
from deepseek_eyes.serving.arguments import ToolArguments

__all__ = ["Args", "ToolResult"]

MAX_TEXT = 20_000


@dataclass(frozen=True)
class Args(ToolArguments):
    """The checked arguments of one desktop tool call (``DESKTOP_ARGUMENT_INVALID``)."""

    error = DesktopError
    code = "DESKTOP_ARGUMENT_INVALID"

    def point(self) -> tuple[float, float] | None:
        """``x`` and ``y`` together (one without the other is invalid), or None."""
        x = self.number("x", minimum=0, maximum=100_000)
        y = self.number("y", minimum=0, maximum=100_000)
        if (x is None) != (y is None):
            raise self.invalid("x" if x is None else "y", "is required with the other coordinate")
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
