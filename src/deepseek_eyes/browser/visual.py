"""When a screenshot reaches the model, and the one seam through which it does.

``browser.visual_mode`` decides *delivery* only; capture, hashing and storage happen the
same in every mode:

* ``auto`` — pixels go to the model only when the semantic state is not enough: the model
  asked (``browser_screenshot``, ``include_screenshot``, a visual assertion), or the
  viewport holds too little text and too few controls to act on (canvas apps, image-only
  pages);
* ``always`` — every observation and action result carries one;
* ``manual`` — only on ``include_screenshot: true`` (and visual assertions, which are
  nothing without pixels).

The browser never imports the vision capability. A caller that wants visual *evidence*
(the runtime, whose text model cannot take pixels) passes a :class:`Describe` — the runtime
fills it with the vision bridge; the MCP server, whose clients take images, sends the PNG.
"""

from __future__ import annotations

from typing import Protocol

from deepseek_eyes.settings import VisualMode

__all__ = ["Describe", "should_deliver"]


class Describe(Protocol):
    """Turn a screenshot into text the model can read (validated visual evidence);
    ``question`` is a visual assertion's question, None for a general description."""

    async def __call__(self, png: bytes, question: str | None) -> str: ...


def should_deliver(mode: VisualMode, *, requested: bool = False, explicit: bool = False,
                   thin: bool = False) -> bool:
    """Whether a screenshot of this result goes to the model.

    ``requested``: ``include_screenshot`` was true; ``explicit``: the tool's purpose is the
    pixels (``browser_screenshot`` without ``include_screenshot: false``, a visual
    assertion); ``thin``: the observation's semantic content is not enough.
    """
    if mode == "always":
        return True
    if mode == "manual":
        return requested
    return requested or explicit or thin
