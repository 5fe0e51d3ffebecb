"""What a desktop backend reports, platform-neutral: windows, elements, captures.

Refs are deterministic hashes of native identity (:func:`ref_for`): on Linux an element is
its AT-SPI (bus name, object path) and a window its X window id, so the same widget has the
same ref in every state while it lives, and a ref never comes back for another widget (a
D-Bus unique name is never reused while the bus lives, nor an object path within it). The
ref says which kind it is: ``w…`` windows, ``e…`` elements.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Box", "Capture", "Element", "SemanticStatus", "Tree", "Window", "WindowList",
           "contains", "ref_for"]

Box = tuple[int, int, int, int]  # x, y, width, height in global (screen) pixels

#: States that matter to a model or a guard; the rest are dropped from observations.
KEPT_STATES = frozenset({
    "active", "focused", "focusable", "checked", "pressed", "selected", "expanded",
    "collapsed", "editable", "enabled", "sensitive", "showing", "visible", "modal",
    "defunct", "indeterminate", "busy", "read-only", "required", "invalid-entry",
})


def ref_for(kind: str, identity: str) -> str:
    """A public ref: ``kind`` (``w`` or ``e``) and 10 hex digits of the identity's SHA-256."""
    return kind + hashlib.sha256(identity.encode()).hexdigest()[:10]


def contains(box: Box, x: float, y: float) -> bool:
    bx, by, bw, bh = box
    return bw > 0 and bh > 0 and bx <= x < bx + bw and by <= y < by + bh


@dataclass(frozen=True)
class Window:
    ref: str
    native: str  # the identity the ref hashes, e.g. "x11:0x200003"
    title: str
    app: str
    pid: int | None
    role: str
    states: frozenset[str]
    bounds: Box
    handle: dict[str, Any] = field(default_factory=dict, compare=False)  # backend's own

    @property
    def modal(self) -> bool:
        return "modal" in self.states

    def fields(self) -> dict[str, Any]:
        return {"title": self.title, "bounds": list(self.bounds),
                "states": sorted(self.states & KEPT_STATES)}


@dataclass(frozen=True)
class Element:
    ref: str
    native: str
    role: str
    name: str
    states: frozenset[str]
    bounds: Box
    actions: tuple[str, ...] = ()
    text: str | None = None
    editable: bool = False
    depth: int = 0
    parent: str | None = None
    handle: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def gone(self) -> bool:
        return "defunct" in self.states

    def fields(self) -> dict[str, Any]:
        return {"role": self.role, "name": self.name, "text": self.text,
                "bounds": list(self.bounds), "states": sorted(self.states & KEPT_STATES)}


@dataclass(frozen=True)
class WindowList:
    windows: tuple[Window, ...]
    focus: str | None  # the ref of the window holding the keyboard focus
    screen: tuple[int, int]

    def get(self, ref: str) -> Window | None:
        return next((w for w in self.windows if w.ref == ref), None)


@dataclass(frozen=True)
class SemanticStatus:
    elements: int
    truncated: bool
    reason: str | None  # "max_elements" | "time" | None
    elapsed_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {"elements": self.elements, "truncated": self.truncated, "reason": self.reason,
                "elapsed_ms": round(self.elapsed_ms, 1)}


@dataclass(frozen=True)
class Tree:
    elements: tuple[Element, ...]
    status: SemanticStatus


@dataclass(frozen=True)
class Capture:
    """Pixels of a screen region: packed RGB, ``width * height * 3`` bytes."""

    origin: tuple[int, int]
    width: int
    height: int
    rgb: bytes
