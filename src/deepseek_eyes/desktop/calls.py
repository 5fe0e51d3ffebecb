"""A desktop tool call's arguments, checked, and its result.

Arguments come from a model and are checked before anything reaches the desktop: the right
type, within bounds, or ``DESKTOP_ARGUMENT_INVALID`` naming the argument. Booleans are never
numbers; numbers are finite. The result is the toolkit's
:class:`~deepseek_eyes.toolkit.results.ToolResult`, the same for every capability.
"""

from __future__ import annotations

from dataclasses import dataclass

from deepseek_eyes.errors import DesktopError
from deepseek_eyes.toolkit.arguments import ToolArguments
from deepseek_eyes.toolkit.results import ToolResult

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

