"""A tool call's arguments, checked, and its result.

Arguments come from a model (through MCP or the runtime) and are checked here before
anything touches the page: the right type, within bounds, or ``BROWSER_ARGUMENT_INVALID``
naming the argument. Booleans are never numbers and numbers are finite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deepseek_eyes.browser.screenshots import Screenshot
from deepseek_eyes.errors import BrowserError
from deepseek_eyes.serving.arguments import ToolArguments

__all__ = ["Args", "ToolResult"]

MAX_TEXT = 20_000


@dataclass(frozen=True)
class Args(ToolArguments):
    """The checked arguments of one browser tool call (``BROWSER_ARGUMENT_INVALID``)."""

    error = BrowserError
    code = "BROWSER_ARGUMENT_INVALID"


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

    @property
    def code(self) -> str | None:
        error = self.data.get("error")
        return error.get("code") if isinstance(error, dict) else None
