"""When a desktop state is too thin for words alone, and what a result says when its pixels
could not be read.

``desktop.visual_mode`` decides *delivery* only (:func:`deepseek_eyes.toolkit.visual.
should_deliver`); every state is captured, hashed and kept the same in every mode. In
``auto`` a window-scoped state is *thin* — its pixels go to the model — when it has fewer
than :data:`THIN_ELEMENTS` actionable elements (a canvas, a game, an app without
accessibility) or its semantic collection was cut by time.

A caller whose model takes no pixels passes a :class:`~deepseek_eyes.toolkit.visual.
Describe` (the runtime fills it with the vision bridge). When that fails — every vision
route exhausted — the result keeps only the validated semantic state and says so with an
explicit pixels-not-decoded marker (:data:`PIXELS_NOT_DECODED`); it never forwards
unvalidated pixels or guesses.
"""

from __future__ import annotations

__all__ = ["PIXELS_NOT_DECODED", "THIN_ELEMENTS"]

PIXELS_NOT_DECODED = "[pixels not decoded"
#: Fewer actionable elements than this makes a window-scoped state "thin".
THIN_ELEMENTS = 3
