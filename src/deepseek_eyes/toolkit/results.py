"""What one tool call returns, whichever capability ran it.

One type for the browser, the desktop and the vision server: the text the model reads,
the structured content beside it, and — for a screen — the screenshot that should reach the
model (``deliver``) and what to ask of it (``question``). An MCP server turns it into a
``CallToolResult`` (:func:`deepseek_eyes.toolkit.registration.to_call_result`); the runtime
reads ``text`` and hands the screenshot to the vision bridge instead of sending pixels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Shot", "ToolResult"]


class Shot(Protocol):
    """A lossless PNG a result carries, known by the SHA-256 of its bytes."""

    @property
    def png(self) -> bytes: ...

    @property
    def sha256(self) -> str: ...


@dataclass
class ToolResult:
    """``data`` is the structured content (empty: none); its ``error`` entry, when there is
    one, is a :meth:`DeepSeekEyesError.to_dict`. ``meta`` travels as the MCP result's
    ``_meta`` (where an object that may hold nothing extra came from)."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
    screenshot: Shot | None = None
    deliver: bool = False
    question: str | None = None
    meta: Mapping[str, Any] | None = None

    @property
    def code(self) -> str | None:
        """The error's stable code, or None for a result that is not an error."""
        error = self.data.get("error")
        return error.get("code") if isinstance(error, dict) else None
