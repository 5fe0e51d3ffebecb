"""Desktop states, and the delta between two of them.

* **Every observation is a new state** (``d1``, ``d2``, … never reused while the service
  lives). Every mutation ends in a new observation.
* **Only the newest state can be acted on.** A mutation names the ``state_id`` it was
  planned on; any other is refused with ``DESKTOP_STATE_STALE`` and answered with a fresh
  observation — the requested action never runs.
* **Refs are native identity** (:func:`~deepseek_eyes.desktop.model.ref_for`), so a ref is
  the same widget in every state and the delta can say which fields of it changed.
* **The delta compares pixels, not PNG bytes** (``screenshot_changed`` uses the decoded
  pixel hash), and lists windows and elements added, removed and changed field by field.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any, TypedDict

from deepseek_eyes.desktop.model import Element, SemanticStatus, Window, WindowList
from deepseek_eyes.desktop.screenshots import Screenshot
from deepseek_eyes.errors import DesktopStaleError

__all__ = ["DesktopState", "StateBook", "StateDelta", "StateSummary", "diff"]


class StateSummary(TypedDict):
    """A state as a report lists it: ids and counts, the screenshot by its pixel hash."""

    state_id: str
    scope: str
    window: str | None
    windows: int
    elements: int
    screenshot: str | None

MAX_DELTA_ITEMS = 60


@dataclass
class DesktopState:
    state_id: str
    scope: str  # "desktop" | "window"
    windows: WindowList
    window: Window | None = None  # the target of a window-scoped state
    elements: dict[str, Element] = field(default_factory=dict)
    semantic: SemanticStatus | None = None
    screenshot: Screenshot | None = None
    created: float = field(default_factory=time.monotonic)

    @property
    def focus(self) -> str | None:
        return self.windows.focus

    def summary(self) -> StateSummary:
        return {"state_id": self.state_id, "scope": self.scope,
                "window": self.window.ref if self.window else None,
                "windows": len(self.windows.windows), "elements": len(self.elements),
                "screenshot": self.screenshot.pixel_sha256 if self.screenshot else None}


@dataclass(frozen=True)
class StateDelta:
    previous: str | None
    state_id: str
    screenshot_changed: bool | None  # None: one of the two states has no screenshot
    windows_added: tuple[str, ...] = ()
    windows_removed: tuple[str, ...] = ()
    windows_changed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    elements_added: tuple[str, ...] = ()
    elements_removed: tuple[str, ...] = ()
    elements_changed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    focus_changed: bool = False

    @property
    def size(self) -> int:
        return (len(self.windows_added) + len(self.windows_removed) + len(self.windows_changed)
                + len(self.elements_added) + len(self.elements_removed)
                + len(self.elements_changed))

    def to_dict(self) -> dict[str, Any]:
        return {"previous": self.previous, "state_id": self.state_id,
                "screenshotChanged": self.screenshot_changed,
                "windows": {"added": list(self.windows_added),
                            "removed": list(self.windows_removed),
                            "changed": {k: list(v) for k, v in self.windows_changed.items()}},
                "elements": {"added": list(self.elements_added),
                             "removed": list(self.elements_removed),
                             "changed": {k: list(v) for k, v in self.elements_changed.items()}},
                "focus_changed": self.focus_changed}


def _changed_fields(old: dict[str, Any], new: dict[str, Any]) -> tuple[str, ...]:
    return tuple(key for key in new if old.get(key) != new.get(key))


def diff(old: DesktopState | None, new: DesktopState) -> StateDelta:
    """What changed from ``old`` to ``new`` (everything is new when there is no ``old``)."""
    if old is None:
        return StateDelta(None, new.state_id, None,
                          windows_added=tuple(w.ref for w in new.windows.windows),
                          elements_added=tuple(new.elements))
    shot_changed = None
    if old.screenshot is not None and new.screenshot is not None:
        shot_changed = (old.screenshot.pixel_sha256 != new.screenshot.pixel_sha256
                        or old.screenshot.origin != new.screenshot.origin)
    old_w = {w.ref: w for w in old.windows.windows}
    new_w = {w.ref: w for w in new.windows.windows}
    w_changed = {ref: f for ref, w in new_w.items() if ref in old_w
                 and (f := _changed_fields(old_w[ref].fields(), w.fields()))}
    # Elements are compared only within the same window target (a desktop state has none).
    same_target = (old.window is not None and new.window is not None
                   and old.window.ref == new.window.ref)
    if same_target:
        e_added = tuple(r for r in new.elements if r not in old.elements)
        e_removed = tuple(r for r in old.elements if r not in new.elements)
        e_changed = {ref: f for ref, e in new.elements.items() if ref in old.elements
                     and (f := _changed_fields(old.elements[ref].fields(), e.fields()))}
    else:
        e_added, e_removed, e_changed = tuple(new.elements), (), {}
    return StateDelta(
        old.state_id, new.state_id, shot_changed,
        windows_added=tuple(r for r in new_w if r not in old_w),
        windows_removed=tuple(r for r in old_w if r not in new_w),
        windows_changed=w_changed,
        elements_added=e_added, elements_removed=e_removed, elements_changed=e_changed,
        focus_changed=old.windows.focus != new.windows.focus)


class StateBook:
    """The states of one desktop session, newest last; only the newest can be acted on."""

    def __init__(self) -> None:
        self.current: DesktopState | None = None
        self._seq = itertools.count(1)
        self.history: list[StateSummary] = []

    def next_id(self) -> str:
        return f"d{next(self._seq)}"

    def commit(self, state: DesktopState) -> StateDelta:
        delta = diff(self.current, state)
        self.current = state
        if len(self.history) < 2000:
            self.history.append(state.summary())
        return delta

    def check(self, state_id: str | None) -> DesktopState:
        """The newest state, if ``state_id`` names it. Raises DesktopStaleError."""
        current = self.current
        if current is None or state_id != current.state_id:
            raise DesktopStaleError(
                f"state {state_id!r} is not the newest state "
                f"({current.state_id if current else 'none yet'}); nothing was done",
                code="DESKTOP_STATE_STALE",
                details={"state_id": state_id,
                         "current": current.state_id if current else None})
        return current
