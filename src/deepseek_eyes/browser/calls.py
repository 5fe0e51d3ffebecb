"""A tool call's arguments, checked, and its result.

Arguments come from a model (through MCP or the runtime) and are checked here before
anything touches the page: the right type, within bounds, or ``BROWSER_ARGUMENT_INVALID``
naming the argument. Booleans are never numbers and numbers are finite. The result is the
toolkit's :class:`~deepseek_eyes.toolkit.results.ToolResult`, the same for every capability.
"""

from __future__ import annotations

from dataclasses import dataclass

from deepseek_eyes.errors import BrowserError
from deepseek_eyes.toolkit.arguments import ToolArguments
from deepseek_eyes.toolkit.results import ToolResult

__all__ = ["Args", "ToolResult"]

MAX_TEXT = 20_000


@dataclass(frozen=True)
class Args(ToolArguments):
    """The checked arguments of one browser tool call (``BROWSER_ARGUMENT_INVALID``)."""

    error = BrowserError
    code = "BROWSER_ARGUMENT_INVALID"
