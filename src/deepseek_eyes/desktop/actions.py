"""One handler per desktop tool; :class:`~deepseek_eyes.desktop.service.DesktopService` runs
them under its lock, and they act through its :class:`DesktopDriver` side (this module never
imports the service: that would be a cycle).

Each mutation follows the same order: its arguments checked, the newest state
(``book.check``), the target resolved against it (:mod:`~deepseek_eyes.desktop.guards`),
the live window list read and checked, then — only then — the backend acts, and
:meth:`DesktopDriver.after` observes.
Clicking by ref uses the element's accessible action (it reaches the widget even when
something covers it, and needs no coordinates); clicking by point uses XTest, for canvases
and controls absent from the accessibility tree.
"""

from __future__ import annotations

import asyncio
import json
import time

from deepseek_eyes.desktop.calls import Args, ToolResult
from deepseek_eyes.desktop.driver import DesktopDriver, Handler
from deepseek_eyes.desktop.guards import (
    check_live,
    element_of,
    resolve_point,
    type_target,
)
from deepseek_eyes.desktop.model import Element, Window, contains
from deepseek_eyes.desktop.present import observation_text, state_data
from deepseek_eyes.desktop.report import Assertion
from deepseek_eyes.desktop.state import DesktopState
from deepseek_eyes.errors import DesktopError, DesktopGuardError
from deepseek_eyes.untrusted import fence, quote

__all__ = ["HANDLERS"]

_CLICK_ACTIONS = frozenset({"click", "press", "toggle", "jump"})
_ELEMENT_STATES = ("focused", "enabled", "checked", "selected", "editable", "showing",
                   "expanded", "pressed")


def _centre(box: tuple[int, int, int, int]) -> tuple[int, int]:
    x, y, w, h = box
    return x + w // 2, y + h // 2


async def _live_element(svc: DesktopDriver, element: Element) -> Element:
    backend = await svc.ensure()
    now = await backend.element(element)
    if now is None:
        raise DesktopError(f"element {element.ref} ({element.role} {element.name[:40]!r}) is "
                           "gone", code="DESKTOP_TARGET_GONE", details={"ref": element.ref})
    return now


async def observe(svc: DesktopDriver, args: Args) -> ToolResult:
    window = args.string("window")
    scope = args.string("scope", choices=("desktop", "window"),
                        default="window" if window else "desktop")
    assert scope is not None
    state = await svc.observe(scope, window)
    return svc.observation(state, requested=args.flag("include_screenshot"))


async def click(svc: DesktopDriver, args: Args) -> ToolResult:
    ref, point = args.string("ref"), args.point()
    button = args.string("button", choices=("left", "right", "middle"), default="left")
    assert button is not None
    count = 2 if args.flag("double") else 1
    state = svc.book.check(args.string("state_id"))
    backend = await svc.ensure()
    if ref is not None:
        element = element_of(state, ref)
        live = await backend.windows()
        if state.window is not None:
            check_live(state, state.window, live)
        now = await _live_element(svc, element)
        if button == "left" and count == 1 and _CLICK_ACTIONS & set(now.actions):
            action = await backend.act(now)
            return await svc.after(state, f"{action} {ref}")
        # No click-like action (a table cell, a canvas item): a real pointer click at the
        # element's centre, in its window raised and focused first.
        x, y = _centre(now.bounds)
        if state.window is not None:
            if not contains(state.window.bounds, x, y):
                raise DesktopGuardError(f"element {ref} is outside its window",
                                        code="DESKTOP_COORDINATES_INVALID")
            await _focus_checked(svc, state, state.window)
        await backend.click(x, y, button=button, count=count)
        return await svc.after(state, f"click {ref} at its centre")
    if point is None:
        raise DesktopError("desktop_click needs a ref or x and y",
                           code="DESKTOP_ARGUMENT_INVALID")
    gx, gy = resolve_point(state, *point)
    live = await backend.windows()
    target = state.window or next(
        (w for w in state.windows.windows if contains(w.bounds, gx, gy)), None)
    if target is not None:
        check_live(state, target, live, coordinates=True)
    await backend.click(gx, gy, button=button, count=count)
    return await svc.after(state, f"click at {point[0]:g},{point[1]:g}")


async def type_text(svc: DesktopDriver, args: Args) -> ToolResult:
    text = args.require("text", limit=20_000)
    ref, point, window_ref = args.string("ref"), args.point(), args.string("window_ref")
    allow_focused = args.flag("allow_focused_target")
    state = svc.book.check(args.string("state_id"))
    target = type_target(state, ref=ref, point=point, window_ref=window_ref,
                         allow_focused=allow_focused)
    backend = await svc.ensure()
    live = await backend.windows()
    check_live(state, target.window, live, coordinates=target.point is not None)
    if target.element is not None:
        await _live_element(svc, target.element)
    sent = await backend.type_text(target.window, text, element=target.element,
                                   point=target.point)
    what = target.element.ref if target.element else (
        f"{target.point[0]},{target.point[1]}" if target.point else "the focused window")
    result = await svc.after(state, f"typed {len(text)} characters into {what} "
                                    f"(via {sent.get('via')})")
    result.data["typed"] = sent
    return result


async def _focus_checked(svc: DesktopDriver, state: DesktopState, window: Window) -> None:
    backend = await svc.ensure()
    live = await backend.windows()
    check_live(state, window, live)
    focused = await backend.focus(window)
    if focused != window.ref:
        raise DesktopGuardError(f"window {window.ref} did not keep the keyboard focus "
                                f"(it is on {focused})", code="DESKTOP_FOCUS_LOST")


async def press(svc: DesktopDriver, args: Args) -> ToolResult:
    key = args.require("key", limit=64)
    state = svc.book.check(args.string("state_id"))
    window = state.window or (state.windows.get(state.focus) if state.focus else None)
    if window is None:
        raise DesktopGuardError("no window to press keys in: observe a window first",
                                code="DESKTOP_WINDOW_REQUIRED")
    await _focus_checked(svc, state, window)
    await (await svc.ensure()).press(key)
    return await svc.after(state, f"pressed {key}")


async def scroll(svc: DesktopDriver, args: Args) -> ToolResult:
    direction = args.require("direction", choices=("up", "down", "left", "right"))
    amount = args.integer("amount", default=3, minimum=1, maximum=50)
    ref, point = args.string("ref"), args.point()
    state = svc.book.check(args.string("state_id"))
    backend = await svc.ensure()
    if ref is not None:
        at = _centre((await _live_element(svc, element_of(state, ref))).bounds)
    elif point is not None:
        at = resolve_point(state, *point)
    elif state.window is not None:
        at = _centre(state.window.bounds)
    else:
        raise DesktopError("desktop_scroll needs a ref, x and y, or a window-scoped state",
                           code="DESKTOP_ARGUMENT_INVALID")
    if state.window is not None:
        check_live(state, state.window, await backend.windows(), coordinates=ref is None)
    await backend.scroll(at[0], at[1], direction, amount)
    return await svc.after(state, f"scrolled {direction} {amount}")


async def launch(svc: DesktopDriver, args: Args) -> ToolResult:
    name = args.require("app", limit=64)
    await svc.ensure()
    pid = svc.launcher.launch(name, svc.env)
    deadline = time.monotonic() + svc.settings.helper_timeout
    while time.monotonic() < deadline:
        live = await svc.live_windows()
        mine = [w for w in live.windows if w.pid == pid]
        if mine:
            state = await svc.observe("window", mine[0].ref, live=live)
            return svc.observation(state, note=f"launched {name} (pid {pid})")
        await asyncio.sleep(0.1)  # polling AT-SPI for the new window; bounded by the deadline
    state = await svc.observe("desktop")
    return svc.observation(state, note=f"launched {name} (pid {pid}); no window of it "
                                        f"appeared within {svc.settings.helper_timeout:g} s")


async def focus(svc: DesktopDriver, args: Args) -> ToolResult:
    wanted = args.require("window", limit=300)
    backend = await svc.ensure()
    live = await backend.windows()
    window = svc.find_window(live, wanted)
    focused = await backend.focus(window)
    if focused != window.ref:
        raise DesktopGuardError(f"window {window.ref} did not keep the keyboard focus "
                                f"(it is on {focused})", code="DESKTOP_FOCUS_LOST")
    state = await svc.observe("window", window.ref)
    return svc.observation(state, note=f"focused {window.ref}")


async def screenshot(svc: DesktopDriver, args: Args) -> ToolResult:
    if args.has("state_id"):
        svc.book.check(args.string("state_id"))
    current = svc.book.current
    scope = current.scope if current else "desktop"
    state = await svc.observe(scope, current.window.ref if current and current.window else None)
    result = svc.observation(state, requested=args.flag("include_screenshot", True),
                             explicit=True)
    shot = state.screenshot
    if shot is not None and svc.blobs is not None:
        svc.blobs.put(shot.png, sha256=shot.sha256)
        result.data["stored"] = True
    return result


async def assert_(svc: DesktopDriver, args: Args) -> ToolResult:
    if args.has("state_id"):
        svc.book.check(args.string("state_id"))
    kind = args.require("kind", choices=("text", "window", "element", "visual"))
    current = svc.book.current
    scope = current.scope if current else "desktop"
    state = await svc.observe(scope, current.window.ref if current and current.window else None)
    passed: bool | None
    if kind == "text":
        wanted = args.require("text")
        present = args.flag("present", True)
        found = any(wanted in (e.name or "") or wanted in (e.text or "")
                    for e in state.elements.values()) or any(
            wanted in w.title for w in state.windows.windows)
        passed, expected, actual = found == present, f"{'present' if present else 'absent'}: " \
            f"{wanted}", "present" if found else "absent"
    elif kind == "window":
        wanted = args.require("text")
        titles = [w.title for w in state.windows.windows]
        passed = any(wanted in t for t in titles)
        expected, actual = wanted, "; ".join(titles)[:300]
    elif kind == "element":
        ref = args.require("ref")
        element = element_of(state, ref)
        if args.has("value"):
            expected = args.require("value")
            actual = element.text if element.text is not None else element.name
            passed = actual == expected
        else:
            wanted_state = args.require("state", choices=_ELEMENT_STATES)
            expected = wanted_state
            actual = ",".join(sorted(element.states))
            passed = wanted_state in element.states
    else:
        question = args.require("question")
        svc.report.add_assertion(Assertion("visual", question, "evidence", None,
                                           state.state_id))
        return svc.observation(state, explicit=True, requested=True, question=question)
    svc.report.add_assertion(Assertion(kind, expected, actual, passed, state.state_id))
    verdict = "PASS" if passed else "FAIL"
    data = state_data(state)
    data["assertion"] = {"kind": kind, "passed": passed, "expected": expected,
                         "actual": actual}
    return ToolResult(f"{verdict} {kind}\n" + observation_text(state).split("\n", 1)[0] + "\n"
                      + fence([f"expected {quote(expected, 300)}",
                               f"actual {quote(actual, 300)}"], "desktop"), data)


async def report(svc: DesktopDriver, args: Args) -> ToolResult:
    fmt = args.string("format", choices=("text", "json"), default="text")
    data = svc.report_data()
    if fmt == "json":
        return ToolResult(json.dumps(data, ensure_ascii=False)[:200_000], {"report": data})
    return ToolResult(svc.report.text(svc.book.history), {"report": data})


async def close(svc: DesktopDriver, args: Args) -> ToolResult:  # noqa: ARG001
    killed = len(svc.launcher.running)
    await svc.aclose()
    data = svc.report_data()
    # Kept as the browser keeps its own: the report as a blob, named in the answer (the web
    # console finds a conversation's reports by that sentence).
    stored: str | None = None
    if svc.blobs is not None:
        blob = json.dumps(data, ensure_ascii=False, sort_keys=True).encode()
        stored = (await asyncio.to_thread(svc.blobs.put, blob)).sha256
    text = (f"desktop session closed ({killed} launched apps stopped)\n"
            + svc.report.text(svc.book.history))
    if stored:
        text += f"\nreport stored as sha256:{stored}"
    return ToolResult(text, {"report": data, "report_sha256": stored})


HANDLERS: dict[str, Handler] = {
    "desktop_observe": observe,
    "desktop_click": click,
    "desktop_type": type_text,
    "desktop_press": press,
    "desktop_scroll": scroll,
    "desktop_launch": launch,
    "desktop_focus": focus,
    "desktop_screenshot": screenshot,
    "desktop_assert": assert_,
    "desktop_report": report,
    "desktop_close": close,
}
