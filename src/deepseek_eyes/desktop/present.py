"""What the model reads: an observation or a delta as compact lines, and the data beside it.

Element bounds are given in the pixels of the state's screenshot (origin and scale
applied), because those are the coordinates a model may send back. Names and texts come
from applications, so they are quoted and cut (:func:`deepseek_eyes.untrusted.quote`:
controls escaped, the fence's delimiter broken up), and the block is fenced as data. The
header line holds only our own values (state and window ids, screenshot geometry); a
window's title is inside the fence, on its window line.
"""

from __future__ import annotations

from typing import Any

from deepseek_eyes.desktop.model import KEPT_STATES, Element, Window
from deepseek_eyes.desktop.state import DesktopState, StateDelta
from deepseek_eyes.untrusted import fence, fence_end, fence_start, quote

__all__ = ["FENCE", "delta_text", "observation_text", "quote", "state_data"]

MAX_LINES = 400
_SHOWN_STATES = ("focused", "active", "modal", "checked", "selected", "pressed", "expanded",
                 "editable")
_SKIP_ROLES = frozenset({"filler", "panel", "scroll pane", "viewport", "layered pane",
                         "root pane", "glass pane", "separator"})


def _local_box(state: DesktopState, box: tuple[int, int, int, int]) -> str:
    shot = state.screenshot
    x, y, w, h = box
    if shot is None or w < 0:
        return f"{x},{y} {w}x{h}"
    lx, ly = shot.to_local(x, y)
    return f"{lx},{ly} {round(w * shot.scale)}x{round(h * shot.scale)}"


def window_line(state: DesktopState, window: Window) -> str:
    marks: list[str] = [s for s in ("active", "modal") if s in window.states]
    if state.focus == window.ref:
        marks.append("keyboard-focus")
    x, y, w, h = window.bounds
    return (f"[ref={window.ref}] {window.role} {quote(window.title)} app={quote(window.app, 40)}"
            f" pid={window.pid} at {x},{y} {w}x{h}" + (" " + " ".join(marks) if marks else ""))


def _shown(element: Element) -> bool:
    if element.gone:
        return True
    if element.role in _SKIP_ROLES and not element.name:
        return False
    return bool(element.name or element.text or element.actions or element.editable
                or element.depth == 0)


def _indent(state: DesktopState, element: Element, listed: set[str]) -> int:
    """How many listed ancestors the element has (unlisted containers add no indent)."""
    depth, parent = 0, element.parent
    for _ in range(64):
        if parent is None:
            break
        if parent in listed:
            depth += 1
        above = state.elements.get(parent)
        parent = above.parent if above is not None else None
    return depth


def element_line(state: DesktopState, element: Element, indent: int = 0) -> str:
    parts = [f"{'  ' * min(indent, 8)}[ref={element.ref}] {element.role}"]
    if element.name:
        parts.append(quote(element.name))
    if element.text is not None and element.text != element.name:
        parts.append(f"text={quote(element.text)}")
    parts.append(f"({_local_box(state, element.bounds)})")
    if element.actions:
        parts.append("actions=" + ",".join(element.actions[:4]))
    marks = [s for s in _SHOWN_STATES if s in element.states]
    if element.editable and "editable" not in marks:
        marks.append("editable")
    if "enabled" not in element.states and "sensitive" not in element.states:
        marks.append("disabled")
    if element.gone:
        marks = ["GONE"]
    return " ".join(parts + marks)


def header(state: DesktopState) -> str:
    shot = state.screenshot
    where = f"window {state.window.ref}" if state.window else "desktop"
    line = f"state {state.state_id} · {where}"
    if shot is not None:
        line += (f" · screenshot {shot.width}x{shot.height} origin {shot.origin[0]},"
                 f"{shot.origin[1]} scale {shot.scale:g}")
    if state.semantic is not None:
        s = state.semantic
        line += f" · semantic {s.elements} elements in {s.elapsed_ms:.0f} ms"
        if s.truncated:
            line += f" (TRUNCATED: {s.reason}; use pixels for the rest)"
    return line


FENCE = fence_start("desktop")
FENCE_END = fence_end("desktop")


def observation_text(state: DesktopState) -> str:
    lines = ["windows:"]
    lines += ["  " + window_line(state, w) for w in state.windows.windows[:64]]
    if state.window is not None:
        lines.append("elements (bounds in the screenshot's pixels):")
        shown = [e for e in state.elements.values() if _shown(e)]
        listed = {e.ref for e in shown}
        lines += ["  " + element_line(state, e, _indent(state, e, listed))
                  for e in shown[:MAX_LINES]]
        hidden = len(state.elements) - len(shown[:MAX_LINES])
        if hidden > 0:
            lines.append(f"  (+{hidden} unnamed containers or more elements not listed)")
    return "\n".join([header(state), fence(lines, "desktop")])


def delta_text(state: DesktopState, delta: StateDelta, action: str) -> str:
    head = [f"{action} → state {state.state_id} (was {delta.previous})",
            f"screenshotChanged: {delta.screenshot_changed}"]
    lines: list[str] = []
    added = (state.windows.get(ref) for ref in delta.windows_added)
    lines += ["window added: " + window_line(state, w) for w in added if w is not None]
    if delta.windows_removed:
        lines.append("windows removed: " + ", ".join(delta.windows_removed))
    for ref, fields in list(delta.windows_changed.items())[:20]:
        lines.append(f"window changed: {ref} ({', '.join(fields)})")
    if delta.focus_changed:
        lines.append(f"keyboard focus: {state.focus}")
    if state.window is not None:
        lines += ["added: " + element_line(state, state.elements[ref]).strip()
                  for ref in delta.elements_added[:60]]
        for ref, fields in list(delta.elements_changed.items())[:60]:
            lines.append("changed: " + element_line(state, state.elements[ref]).strip()
                         + f" [{', '.join(fields)}]")
        if delta.elements_removed:
            lines.append("removed: " + ", ".join(delta.elements_removed[:60]))
    if not lines:
        lines.append("no semantic change")
    return "\n".join([*head, fence(lines, "desktop")])


def state_data(state: DesktopState) -> dict[str, Any]:
    shot = state.screenshot
    data: dict[str, Any] = {
        "state_id": state.state_id, "scope": state.scope,
        "window": state.window.ref if state.window else None,
        "origin": list(shot.origin) if shot else None, "scale": shot.scale if shot else None,
        "screenshot": shot.to_dict() if shot else None,
        "windows": [{"ref": w.ref, "title": w.title, "app": w.app, "pid": w.pid,
                     "bounds": list(w.bounds), "states": sorted(w.states & KEPT_STATES)}
                    for w in state.windows.windows[:64]],
        "focus": state.focus,
    }
    if state.semantic is not None:
        data["semanticStatus"] = state.semantic.to_dict()
    return data
