"""Our GTK window on a private Xvfb through AT-SPI and XTest: observe, type and click by
ref, read the result back from the application itself (its ``dump``), and every refusal
— stale state, stolen focus, a modal, a destroyed widget — sends nothing."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from deepseek_eyes.desktop.calls import ToolResult
from deepseek_eyes.desktop.model import Element
from deepseek_eyes.desktop.service import DesktopService
from desktop.support import GtkApp, wait_for

pytestmark = pytest.mark.anyio


def find(service: DesktopService, role: str, name: str | None = None) -> Element:
    state = service.book.current
    assert state is not None
    for element in state.elements.values():
        if element.role == role and (name is None or element.name == name):
            return element
    raise AssertionError(f"no {role} {name!r} in {state.state_id}")


async def focus_on(service: DesktopService, title: str) -> None:
    """Wait (bounded) until the window titled ``title`` holds the keyboard focus."""
    with anyio.fail_after(10):
        while True:
            live = await service.live_windows()
            focused = live.get(live.focus) if live.focus else None
            if focused is not None and focused.title == title:
                return
            await anyio.sleep(0.02)


async def observe(service: DesktopService, app: GtkApp) -> ToolResult:
    result = await service.call("desktop_observe", {"scope": "window", "window": app.title})
    assert not result.is_error, result.text
    return result


async def test_observe_type_and_click_by_ref_read_back_from_the_app(
    desktop: Callable[..., DesktopService], gtk_app: GtkApp
) -> None:
    service = desktop()
    listing = await service.call("desktop_observe", {})
    assert f'frame "{gtk_app.title}"' in listing.text
    assert listing.data["origin"] == [0, 0]
    seen = await observe(service, gtk_app)
    assert seen.data["origin"] == [40, 40]  # window capture moves the origin
    assert seen.data["scale"] == 1.0
    assert seen.data["screenshot"]["width"] == 420
    assert 'push button "Apply" (0,63 71x34) actions=click' in seen.text
    entry = find(service, "text")
    typed = await service.call("desktop_type", {"state_id": seen.data["state_id"],
                                                "ref": entry.ref, "text": "Ada Lovelace"})
    assert not typed.is_error, typed.text
    assert f'changed: [ref={entry.ref}] text "Name" text="Ada Lovelace"' in typed.text
    # Field-level: its text changed, and its states (it took the focus).
    assert typed.data["delta"]["elements"]["changed"][entry.ref] == ["text", "states"]
    assert gtk_app.state()["entry"] == "Ada Lovelace"
    apply = find(service, "push button", "Apply")
    clicked = await service.call("desktop_click", {"state_id": typed.data["state_id"],
                                                   "ref": apply.ref})
    assert not clicked.is_error, clicked.text
    assert 'label "clicked 1"' in clicked.text
    assert clicked.data["delta"]["screenshotChanged"] is True
    assert gtk_app.state()["clicks"]["Apply"] == 1
    # Same ref for the same widget in every state (a hash of its native identity).
    assert find(service, "push button", "Apply").ref == apply.ref
    cherry = find(service, "table cell", "Cherry")
    await service.call("desktop_click", {"state_id": clicked.data["state_id"],
                                         "ref": cherry.ref})
    assert wait_for(lambda: gtk_app.state()["selected"] == "Cherry", what="row selected")


async def test_a_stale_state_types_nothing_and_reobserves(
    desktop: Callable[..., DesktopService], gtk_app: GtkApp
) -> None:
    service = desktop()
    first = await observe(service, gtk_app)
    entry = find(service, "text")
    await observe(service, gtk_app)  # a newer state exists now
    stale = await service.call("desktop_type", {"state_id": first.data["state_id"],
                                                "ref": entry.ref, "text": "nope"})
    assert stale.code == "DESKTOP_STATE_STALE"
    assert "nothing was done; the current state:" in stale.text
    assert stale.data["state_id"] != first.data["state_id"]
    assert gtk_app.state()["entry"] == ""


async def test_focus_stolen_by_a_new_window_is_refused_before_any_key(
    desktop: Callable[..., DesktopService], gtk_app: GtkApp
) -> None:
    service = desktop()
    seen = await observe(service, gtk_app)
    entry = find(service, "text")
    gtk_app.send("thief")  # a second window appears and takes the focus
    await focus_on(service, "Thief")
    refused = await service.call("desktop_type", {"state_id": seen.data["state_id"],
                                                  "ref": entry.ref, "text": "secret"})
    assert refused.code == "DESKTOP_FOCUS_LOST", refused.text
    assert "appeared after state" in refused.text  # caught before entering the helper
    state = gtk_app.state()
    assert state["entry"] == ""
    assert state["thief"] == ""  # nothing went to the thief either


async def test_a_window_that_takes_the_focus_back_is_refused_after_focusing(
    desktop: Callable[..., DesktopService], gtk_app: GtkApp
) -> None:
    service = desktop()
    gtk_app.send("thief")
    seen = await observe(service, gtk_app)  # the thief is part of this state
    assert '"Thief"' in seen.text
    entry = find(service, "text")
    coords = await service.call("desktop_type", {"state_id": seen.data["state_id"],
                                                 "x": 100, "y": 40, "text": "by point"})
    # A refusal makes no new state: the same state is still the newest.
    assert service.book.current.state_id == seen.data["state_id"]  # type: ignore[union-attr]
    refused = await service.call("desktop_type", {"state_id": seen.data["state_id"],
                                                  "ref": entry.ref, "text": "secret"})
    for result in (coords, refused):
        assert result.code == "DESKTOP_FOCUS_LOST", result.text
        assert "after focusing window" in result.text  # the helper's recheck
    state = gtk_app.state()
    assert state["entry"] == ""
    assert state["thief"] == ""


async def test_a_modal_dialog_blocks_input_to_its_parent(
    desktop: Callable[..., DesktopService], gtk_app: GtkApp
) -> None:
    service = desktop()
    seen = await observe(service, gtk_app)
    entry, apply = find(service, "text"), find(service, "push button", "Apply")
    gtk_app.send("modal")
    typed = await service.call("desktop_type", {"state_id": seen.data["state_id"],
                                                "ref": entry.ref, "text": "blocked"})
    assert typed.code == "DESKTOP_MODAL_BLOCKING", typed.text
    clicked = await service.call("desktop_click", {"state_id": seen.data["state_id"],
                                                   "ref": apply.ref})
    assert clicked.code == "DESKTOP_MODAL_BLOCKING", clicked.text
    state = gtk_app.state()
    assert state["entry"] == ""
    assert state["clicks"]["Apply"] == 0
    listing = await service.call("desktop_observe", {})
    assert 'dialog "Confirm"' in listing.text
    assert "modal" in listing.text


async def test_a_destroyed_widget_fails_explicitly(
    desktop: Callable[..., DesktopService], gtk_app: GtkApp
) -> None:
    service = desktop()
    seen = await observe(service, gtk_app)
    apply = find(service, "push button", "Apply")
    gtk_app.send("destroy")
    clicked = await service.call("desktop_click", {"state_id": seen.data["state_id"],
                                                   "ref": apply.ref})
    assert clicked.code == "DESKTOP_TARGET_GONE", clicked.text
    assert gtk_app.state()["clicks"]["Apply"] == 0
    again = await observe(service, gtk_app)
    assert apply.ref not in service.book.current.elements  # type: ignore[union-attr]
    assert apply.ref in again.data["delta"]["elements"]["removed"]


async def test_a_closed_window_is_gone_never_widened_to_the_desktop(
    desktop: Callable[..., DesktopService], gtk_app: GtkApp
) -> None:
    service = desktop()
    seen = await observe(service, gtk_app)
    window = seen.data["window"]
    gtk_app.close()
    gone = await service.call("desktop_observe", {"scope": "window", "window": window})
    assert gone.code == "DESKTOP_TARGET_GONE"
    assert gone.screenshot is None


async def test_a_tree_over_max_elements_is_cut_and_says_so(
    desktop: Callable[..., DesktopService], gtk_app: GtkApp
) -> None:
    gtk_app.send("many 60")
    service = desktop(max_elements=25)
    seen = await observe(service, gtk_app)
    status = seen.data["semanticStatus"]
    assert status["truncated"] is True
    assert status["reason"] == "max_elements"
    assert status["elements"] == 25
    assert "TRUNCATED: max_elements" in seen.text
    whole = desktop(max_elements=400)
    full = await observe(whole, gtk_app)
    assert full.data["semanticStatus"]["truncated"] is False
    assert '"Extra 59"' in full.text


async def test_typing_at_coordinates_needs_a_window_and_lands_in_it(
    desktop: Callable[..., DesktopService], gtk_app: GtkApp
) -> None:
    service = desktop()
    listing = await service.call("desktop_observe", {})
    no_window = await service.call("desktop_type", {"state_id": listing.data["state_id"],
                                                    "x": 100, "y": 80, "text": "x"})
    assert no_window.code == "DESKTOP_WINDOW_REQUIRED"
    seen = await observe(service, gtk_app)
    outside = await service.call("desktop_type", {"state_id": seen.data["state_id"],
                                                  "x": 500, "y": 10, "text": "x"})
    assert outside.code == "DESKTOP_COORDINATES_INVALID"
    # The entry is at (0,23 420x34) of the window's screenshot.
    typed = await service.call("desktop_type", {"state_id": seen.data["state_id"],
                                                "x": 50, "y": 40, "text": "Grace"})
    assert not typed.is_error, typed.text
    assert typed.data["typed"]["via"] == "xtest"
    assert wait_for(lambda: gtk_app.state()["entry"] == "Grace", what="typed by XTest")
    assert gtk_app.state()["entry"] == "Grace"


async def test_press_and_report(desktop: Callable[..., DesktopService],
                                gtk_app: GtkApp) -> None:
    service = desktop()
    seen = await observe(service, gtk_app)
    entry = find(service, "text")
    typed = await service.call("desktop_type", {"state_id": seen.data["state_id"],
                                                "ref": entry.ref, "text": "abc"})
    pressed = await service.call("desktop_press", {"state_id": typed.data["state_id"],
                                                   "key": "BackSpace"})
    assert not pressed.is_error, pressed.text
    assert wait_for(lambda: gtk_app.state()["entry"] == "ab", what="backspace")
    checked = await service.call("desktop_assert", {"kind": "element", "ref": entry.ref,
                                                    "value": "ab"})
    assert checked.text.startswith("PASS element"), checked.text
    chord = await service.call("desktop_press", {"state_id": checked.data["state_id"],
                                                 "key": "ctrl+a"})
    erased = await service.call("desktop_press", {"state_id": chord.data["state_id"],
                                                  "key": "Delete"})
    assert not erased.is_error, erased.text
    assert wait_for(lambda: gtk_app.state()["entry"] == "", what="select all, delete")
    unknown = await service.call("desktop_press", {"state_id": erased.data["state_id"],
                                                   "key": "hyper+q"})
    assert unknown.code == "DESKTOP_ARGUMENT_INVALID"
    report = await service.call("desktop_report", {"format": "json"})
    steps = report.data["report"]["steps"]
    assert [s["tool"] for s in steps][:3] == ["desktop_observe", "desktop_type",
                                              "desktop_press"]
    assert steps[1]["arguments"]["text"]["redacted"] is True  # typed text is never kept


async def test_a_semantic_walk_cut_by_time_says_so_and_delivers_pixels(
    desktop: Callable[..., DesktopService], gtk_app: GtkApp
) -> None:
    gtk_app.send("many 40")
    service = desktop(semantic_time_cap=0.000001)
    seen = await observe(service, gtk_app)
    status = seen.data["semanticStatus"]
    assert status["truncated"] is True
    assert status["reason"] == "time"
    assert seen.deliver is True  # auto mode: a cut walk is not enough to act on


async def test_focus_by_title_then_type_into_the_focused_target(
    desktop: Callable[..., DesktopService], gtk_app: GtkApp
) -> None:
    service = desktop()
    focused = await service.call("desktop_focus", {"window": gtk_app.title})
    assert not focused.is_error, focused.text
    assert focused.text.startswith("focused w")
    assert "keyboard-focus" in focused.text
    entry = find(service, "text")
    assert "focused" in entry.states
    typed = await service.call("desktop_type", {"state_id": focused.data["state_id"],
                                                "text": "hi", "allow_focused_target": True})
    assert not typed.is_error, typed.text
    assert wait_for(lambda: gtk_app.state()["entry"] == "hi", what="typed into the focus")
    assert (await service.call("desktop_assert", {"kind": "window",
                                                  "text": gtk_app.title})).text.startswith(
        "PASS window")
    absent = await service.call("desktop_assert", {"kind": "text", "text": "Nowhere"})
    assert absent.text.startswith("FAIL text")
    scrolled = await service.call("desktop_scroll", {"state_id": absent.data["state_id"],
                                                     "direction": "down", "amount": 2})
    assert not scrolled.is_error, scrolled.text
    report = await service.call("desktop_report", {"format": "json"})
    summary = report.data["report"]["summary"]
    assert summary["assertions_passed"] == 1
    assert summary["assertions_failed"] == 1


async def test_a_pixel_click_lands_where_the_png_says(
    desktop: Callable[..., DesktopService], gtk_app: GtkApp
) -> None:
    service = desktop(screenshot_max_side=210)  # a scaled PNG: 420x360 → 210x180
    seen = await observe(service, gtk_app)
    assert seen.data["scale"] == 0.5
    # "Apply" is at (0,32 36x17) of this PNG; click its middle.
    assert 'push button "Apply" (0,32 36x17)' in seen.text
    clicked = await service.call("desktop_click", {"state_id": seen.data["state_id"],
                                                   "x": 18, "y": 40})
    assert not clicked.is_error, clicked.text
    assert wait_for(lambda: gtk_app.state()["clicks"]["Apply"] == 1, what="a pixel click")


async def test_the_local_route_finds_the_windows_controls_where_at_spi_puts_them(
    desktop: Callable[..., DesktopService], gtk_app: GtkApp
) -> None:
    """Issue 42's interface elements on a real GTK screenshot (the other corpus pages are
    Chromium's): the ground truth is AT-SPI's own box for each push button and the text
    field, and the local route's OCR and control finder must find each at IoU >= 0.5, of
    the right kind, with the button's text."""
    import io
    import re

    import numpy as np
    from PIL import Image

    from deepseek_eyes.vision.routes.controls import find_controls
    from deepseek_eyes.vision.routes.local_ocr import LocalOcrEngine

    seen = await observe(desktop(), gtk_app)
    assert seen.screenshot is not None
    rgb = np.asarray(Image.open(io.BytesIO(seen.screenshot.png)).convert("RGB"))
    found = find_controls(rgb, LocalOcrEngine.shared().read(rgb))
    element = r'(push button|text) "([^"]*)"(?: text="[^"]*")? \((\d+),(\d+) (\d+)x(\d+)\)'
    truth = [(role, name, (int(x), int(y), int(x) + int(w), int(y) + int(h)))
             for role, name, x, y, w, h in re.findall(element, seen.text)]
    assert sorted((role, name) for role, name, _ in truth) == [
        ("push button", "Apply"), ("push button", "Clear"), ("text", "Name")]

    def iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
        w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
        h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
        union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
        return w * h / union if union else 0.0

    scored = []
    for role, name, box in truth:
        kind = "button" if role == "push button" else "text_field"
        best = max(found, key=lambda c, box=box: iou(c.box, box), default=None)
        ok = (best is not None and iou(best.box, box) >= 0.5 and best.kind == kind
              and (kind != "button" or best.text == name))
        scored.append((role, name, ok, best))
    print("\nGTK window (AT-SPI boxes):", ", ".join(
        f"{role} {name!r}: {'found' if ok else f'missed ({best})'}"
        for role, name, ok, best in scored))
    assert all(ok for *_, ok, _ in scored), scored
