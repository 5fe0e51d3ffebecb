"""The checks input must pass before anything reaches an application.

Two kinds, both before the first click or keystroke:

* **against the state** the call was planned on (:func:`resolve_point`,
  :func:`type_target`): the point lies inside the returned screenshot (coordinate space),
  inside its window, inside its element; the element belongs to the named window; typing
  has a resolved window (an element ref, or coordinates with ``window_ref`` or a
  window-scoped state);
* **against the live desktop** just read (:func:`check_live`): the target window still
  exists (``DESKTOP_TARGET_GONE``, never another window instead), it has not moved under
  coordinates planned on it, no modal dialog of its application is open over it, and the
  keyboard focus is not held by a window the observation never saw (a window that appeared
  since — a popup, a dialog, a thief).

The backend then focuses the window and rechecks the foreground itself right before text is
sent (see :meth:`~deepseek_eyes.desktop.backend.DesktopBackend.type_text`). Pure functions
over states, so every refusal is testable without a display.
"""

from __future__ import annotations

from dataclasses import dataclass

from deepseek_eyes.desktop.model import Element, Window, WindowList, contains
from deepseek_eyes.desktop.state import DesktopState
from deepseek_eyes.errors import DesktopError, DesktopGuardError, DesktopStaleError

__all__ = ["TypeTarget", "check_live", "element_of", "resolve_point", "type_target",
           "window_of"]


@dataclass(frozen=True)
class TypeTarget:
    window: Window
    element: Element | None = None
    point: tuple[int, int] | None = None  # global
    focused_only: bool = False  # allow_focused_target: whatever holds the focus


def element_of(state: DesktopState, ref: str) -> Element:
    element = state.elements.get(ref)
    if element is None:
        raise DesktopStaleError(f"ref {ref[:40]!r} is not an element of state "
                                f"{state.state_id}", code="DESKTOP_REF_NOT_FOUND",
                                details={"ref": ref[:40]})
    return element


def window_of(state: DesktopState, ref: str) -> Window:
    window = state.windows.get(ref)
    if window is None:
        raise DesktopStaleError(f"ref {ref[:40]!r} is not a window of state {state.state_id}",
                                code="DESKTOP_REF_NOT_FOUND", details={"ref": ref[:40]})
    return window


def resolve_point(state: DesktopState, x: float, y: float) -> tuple[int, int]:
    """A point of the state's screenshot on the screen. Raises DesktopGuardError
    DESKTOP_COORDINATES_INVALID when it lies outside the screenshot (or its window)."""
    shot = state.screenshot
    if shot is None:
        raise DesktopGuardError("this state has no screenshot to take coordinates from",
                                code="DESKTOP_COORDINATES_INVALID")
    if not (0 <= x < shot.width and 0 <= y < shot.height):
        raise DesktopGuardError(
            f"({x:g}, {y:g}) is outside the state's {shot.width}x{shot.height} screenshot",
            code="DESKTOP_COORDINATES_INVALID")
    gx, gy = shot.to_global(x, y)
    if state.window is not None and not contains(state.window.bounds, gx, gy):
        raise DesktopGuardError(f"({x:g}, {y:g}) is outside window {state.window.ref}",
                                code="DESKTOP_COORDINATES_INVALID")
    return gx, gy


def type_target(state: DesktopState, *, ref: str | None, point: tuple[float, float] | None,
                window_ref: str | None, allow_focused: bool) -> TypeTarget:
    """Where text would go, checked against the state. Raises DesktopError."""
    if ref is not None:
        element = element_of(state, ref)
        window = state.window
        if window is None:  # elements exist only in window-scoped states
            raise DesktopGuardError("the element has no window", code="DESKTOP_WINDOW_REQUIRED")
        if window_ref is not None and window_ref != window.ref:
            raise DesktopGuardError(f"element {ref} belongs to window {window.ref}, not "
                                    f"{window_ref[:40]}", code="DESKTOP_TARGET_MISMATCH")
        if not element.editable and "editable" not in element.states:
            raise DesktopError(f"element {ref} ({element.role}) does not take text",
                               code="DESKTOP_ACTION_FAILED")
        gpoint = None
        if point is not None:
            gpoint = resolve_point(state, *point)
            if not contains(element.bounds, *gpoint):
                raise DesktopGuardError(f"the point is outside element {ref}",
                                        code="DESKTOP_COORDINATES_INVALID")
        return TypeTarget(window, element, gpoint)
    if point is not None:
        gpoint = resolve_point(state, *point)
        if window_ref is not None:
            window = window_of(state, window_ref)
            if state.window is not None and state.window.ref != window.ref:
                raise DesktopGuardError(
                    f"the coordinates are of window {state.window.ref}'s screenshot, not "
                    f"{window.ref}", code="DESKTOP_TARGET_MISMATCH")
        elif state.window is not None:
            window = state.window
        else:
            raise DesktopGuardError("typing at coordinates needs window_ref or a window-scoped "
                                    "state", code="DESKTOP_WINDOW_REQUIRED")
        if not contains(window.bounds, *gpoint):
            raise DesktopGuardError(f"the point is outside window {window.ref}",
                                    code="DESKTOP_COORDINATES_INVALID")
        return TypeTarget(window, None, gpoint)
    if allow_focused:
        focus = state.windows.get(state.focus) if state.focus else None
        if focus is None:
            raise DesktopGuardError("no window holds the keyboard focus",
                                    code="DESKTOP_FOCUS_LOST")
        return TypeTarget(focus, None, None, focused_only=True)
    raise DesktopError("desktop_type needs a ref, or x and y (with a window), or "
                       "allow_focused_target=true", code="DESKTOP_ARGUMENT_INVALID")


def check_live(state: DesktopState, window: Window, live: WindowList, *,
               coordinates: bool = False) -> Window:
    """The target window as it is now, if input may go to it. Raises DesktopError."""
    now = live.get(window.ref)
    if now is None:
        raise DesktopError(f"window {window.ref} ({window.title[:60]!r}) is gone",
                           code="DESKTOP_TARGET_GONE", details={"window": window.ref})
    if coordinates and now.bounds != window.bounds:
        raise DesktopStaleError(f"window {window.ref} moved since state {state.state_id}",
                                code="DESKTOP_STATE_STALE")
    for other in live.windows:
        if other.ref != now.ref and other.modal and other.pid == now.pid:
            raise DesktopGuardError(
                f"modal dialog {other.ref} ({other.title[:60]!r}) is open over window "
                f"{now.ref}", code="DESKTOP_MODAL_BLOCKING", details={"modal": other.ref})
    known = {w.ref for w in state.windows.windows}
    if live.focus is not None and live.focus not in known:
        thief = live.get(live.focus)
        raise DesktopGuardError(
            f"the keyboard focus moved to window {live.focus} "
            f"({thief.title[:60] if thief else '?'!r}), which appeared after state "
            f"{state.state_id}", code="DESKTOP_FOCUS_LOST", details={"focus": live.focus})
    return now
