"""When a screenshot reaches the model, and the one seam through which evidence replaces it.

A screen capability (browser, desktop) captures, hashes and stores every screenshot the
same way; its ``visual_mode`` decides *delivery* only:

* ``auto`` — pixels go to the model only when the semantic state is not enough: the model
  asked (a screenshot tool, ``include_screenshot``, a visual assertion), or the state is
  too thin to act on;
* ``always`` — every observation and action result carries one;
* ``manual`` — only on ``include_screenshot: true``.

A capability never imports the vision capability. A caller whose model takes no pixels (the
runtime) passes a :class:`Describe`, filled with the vision bridge; an MCP server, whose
clients take images, sends the PNG.
"""

from __future__ import annotations

from typing import Protocol

from deepseek_eyes.settings import VisualMode
from deepseek_eyes.toolkit.results import ToolResult

__all__ = ["EVIDENCE_HEADING", "Describe", "add_evidence", "should_deliver"]

EVIDENCE_HEADING = "visual evidence of the screenshot:"


class Describe(Protocol):
    """Turn a screenshot (PNG bytes) into text the model can read (validated visual
    evidence); ``question`` is a visual assertion's question, None for a general
    description.

    Raises:
        DeepSeekEyesError: every vision route failed; the capability decides what its
            result says then.
    """

    async def __call__(self, png: bytes, question: str | None) -> str: ...


def should_deliver(mode: VisualMode, *, requested: bool = False, explicit: bool = False,
                   thin: bool = False) -> bool:
    """Whether a screenshot of this result goes to the model.

    ``requested``: ``include_screenshot`` was true; ``explicit``: the tool's purpose is the
    pixels (a screenshot tool without ``include_screenshot: false``, a visual assertion);
    ``thin``: the observation's semantic content is not enough.
    """
    if mode == "always":
        return True
    if mode == "manual":
        return requested
    return requested or explicit or thin


def add_evidence(result: ToolResult, evidence: str) -> None:
    """Append what was seen in the result's screenshot (or why nothing was) to its text."""
    result.text = f"{result.text}\n{EVIDENCE_HEADING}\n{evidence}"
