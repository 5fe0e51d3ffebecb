"""When a desktop screenshot reaches the model, and the one seam through which it does.

``desktop.visual_mode`` decides *delivery* only; every state is captured, hashed and kept
the same in every mode:

* ``auto`` — pixels go to the model only when the semantic state is not enough: the model
  asked (``desktop_screenshot``, ``include_screenshot``, a visual assertion), or the state
  has too few semantic elements to act on (a canvas, a game, an app without accessibility),
  or the semantic collection was cut by time;
* ``always`` — every observation and action result carries one;
* ``manual`` — only on ``include_screenshot: true`` (and visual assertions).

A caller whose model takes no pixels passes a :class:`Describe` (the runtime fills it with
the vision bridge). When that fails — every vision route exhausted — the result keeps only
the validated semantic state and says so with an explicit pixels-not-decoded marker
(:data:`PIXELS_NOT_DECODED`); it never forwards unvalidated pixels or guesses.
"""

from __future__ import annotations

from typing import Protocol

from deepseek_eyes.settings import VisualMode

__all__ = ["PIXELS_NOT_DECODED", "Describe", "should_deliver"]

PIXELS_NOT_DECODED = "[pixels not decoded"
#: Fewer actionable elements than this makes a window-scoped state "thin".
THIN_ELEMENTS = 3


class Describe(Protocol):
    """Turn a screenshot into text the model can read (validated visual evidence)."""

    async def __call__(self, png: bytes, question: str | None) -> str: ...


def should_deliver(mode: VisualMode, *, requested: bool = False, explicit: bool = False,
                   thin: bool = False) -> bool:
    if mode == "always":
        return True
    if mode == "manual":
        return requested
    return requested or explicit or thin
