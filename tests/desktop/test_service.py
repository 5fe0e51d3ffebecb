"""The service's contract over a recorded AT-SPI session (no display needed): every guard
refuses before any input reaches the helper, deltas are field-level and compare pixels,
coordinates are relative to the returned PNG and translated back, and a screenshot whose
vision routes are exhausted forwards only the semantic state, marked."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from PIL import Image

from deepseek_eyes.desktop.model import Capture
from deepseek_eyes.desktop.screenshots import encode_capture
from deepseek_eyes.desktop.visual import PIXELS_NOT_DECODED
from deepseek_eyes.errors import FailoverExhaustedError
from deepseek_eyes.vision.intake.decode import pixel_digest
from desktop.recorded import RecordedHelper, recorded_service

pytestmark = pytest.mark.anyio

WINDOW = "Eyes Test"


def ref(text: str, line: str) -> str:
    found = re.search(r"\[ref=([ew][0-9a-f]{10})\] " + re.escape(line), text)
    assert found, f"{line!r} not in {text}"
    return found.group(1)


async def observe(helper: RecordedHelper, **settings: object):  # type: ignore[no-untyped-def]
    service = recorded_service(helper, **settings)
    seen = await service.call("desktop_observe", {"scope": "window", "window": WINDOW})
    assert not seen.is_error, seen.text
    return service, seen


async def test_refs_are_hashes_of_native_identity_and_stable() -> None:
    helper = RecordedHelper()
    service, seen = await observe(helper)
    again = await service.call("desktop_observe", {"scope": "window", "window": WINDOW})
    assert ref(seen.text, 'push button "Apply"') == ref(again.text, 'push button "Apply"')
    other = await recorded_service(RecordedHelper()).call(
        "desktop_observe", {"scope": "window", "window": WINDOW})
    assert ref(other.text, 'push button "Apply"') == ref(seen.text, 'push button "Apply"')
    assert again.data["delta"]["screenshotChanged"] is False
    assert again.data["delta"]["elements"] == {"added": [], "removed": [], "changed": {}}


async def test_a_stale_state_only_reobserves() -> None:
    helper = RecordedHelper()
    service, seen = await observe(helper)
    entry = ref(seen.text, 'text "Name"')
    await service.call("desktop_observe", {})
    for tool, extra in (("desktop_type", {"ref": entry, "text": "x"}),
                        ("desktop_click", {"ref": entry}),
                        ("desktop_press", {"key": "Enter"}),
                        ("desktop_scroll", {"direction": "down"})):
        refused = await service.call(tool, {"state_id": seen.data["state_id"], **extra})
        assert refused.code == "DESKTOP_STATE_STALE", tool
    assert helper.inputs == []


@pytest.mark.parametrize(("arguments", "code"), [
    ({"x": 420, "y": 10}, "DESKTOP_COORDINATES_INVALID"),  # outside the 420-wide PNG
    ({"x": -1, "y": 10}, "DESKTOP_ARGUMENT_INVALID"),
    ({"x": 10}, "DESKTOP_ARGUMENT_INVALID"),  # half a point
    ({"ref": "e0000000000"}, "DESKTOP_REF_NOT_FOUND"),
    ({"window_ref": "w0000000000", "x": 10, "y": 10}, "DESKTOP_REF_NOT_FOUND"),
    ({}, "DESKTOP_ARGUMENT_INVALID"),
])
async def test_type_targets_are_checked_before_any_input(
    arguments: dict[str, object], code: str
) -> None:
    helper = RecordedHelper()
    service, seen = await observe(helper)
    refused = await service.call("desktop_type", {"state_id": seen.data["state_id"],
                                                  "text": "x", **arguments})
    assert refused.code == code, refused.text
    assert helper.inputs == []


async def test_element_and_window_must_agree_and_the_point_be_inside_the_element() -> None:
    helper = RecordedHelper()
    second = helper.add_window(name="Other", xid=999, path="/other", pid=4242,
                               bounds=[600, 40, 300, 200])
    del second["states"][0]  # not active
    service, seen = await observe(helper)
    entry, other = ref(seen.text, 'text "Name"'), ref(seen.text, 'frame "Other"')
    state_id = seen.data["state_id"]
    mismatch = await service.call("desktop_type", {"state_id": state_id, "ref": entry,
                                                   "window_ref": other, "text": "x"})
    assert mismatch.code == "DESKTOP_TARGET_MISMATCH"
    outside = await service.call("desktop_type", {"state_id": state_id, "ref": entry,
                                                  "x": 10, "y": 200, "text": "x"})
    assert outside.code == "DESKTOP_COORDINATES_INVALID"
    listing = await service.call("desktop_observe", {})
    required = await service.call("desktop_type", {"state_id": listing.data["state_id"],
                                                   "x": 50, "y": 70, "text": "x"})
    assert required.code == "DESKTOP_WINDOW_REQUIRED"
    assert helper.inputs == []


async def test_modal_unseen_focus_and_gone_targets_refuse_before_input() -> None:
    helper = RecordedHelper()
    service, seen = await observe(helper)
    entry, apply = ref(seen.text, 'text "Name"'), ref(seen.text, 'push button "Apply"')
    state_id = seen.data["state_id"]
    modal = helper.add_window(name="Confirm", role="dialog", xid=777, path="/modal",
                              states=["modal", "showing", "active"])
    assert (await service.call("desktop_type", {"state_id": state_id, "ref": entry,
                                                "text": "x"})).code == "DESKTOP_MODAL_BLOCKING"
    helper.windows["windows"].remove(modal)
    helper.add_window(name="Thief", xid=555, path="/thief", pid=1)
    helper.windows["focus_xid"] = 555
    stolen = await service.call("desktop_type", {"state_id": state_id, "ref": entry,
                                                 "text": "x"})
    assert stolen.code == "DESKTOP_FOCUS_LOST"
    assert "appeared after state" in stolen.text
    helper.windows["windows"].pop()
    helper.windows["focus_xid"] = helper.window()["xid"]
    helper.gone.add(next(n["path"] for n in helper.tree["nodes"] if n["name"] == "Apply"))
    gone = await service.call("desktop_click", {"state_id": state_id, "ref": apply})
    assert gone.code == "DESKTOP_TARGET_GONE"
    assert helper.inputs == []
    # The helper's own recheck (focus taken back after focusing) also sends nothing.
    helper.focus_after_focusing = 555
    assert (await service.call("desktop_type", {"state_id": state_id, "ref": entry,
                                                "text": "x"})).code == "DESKTOP_FOCUS_LOST"
    helper.windows["windows"].clear()
    closed = await service.call("desktop_observe", {"scope": "window",
                                                    "window": seen.data["window"]})
    assert closed.code == "DESKTOP_TARGET_GONE"
    assert not any(op == "capture" for op, _ in helper.log[-2:])  # never widened


async def test_coordinates_are_relative_to_the_scaled_png_and_translated_back() -> None:
    helper = RecordedHelper()
    service, seen = await observe(helper, screenshot_max_side=210)  # 420x360 → 210x180
    assert seen.data["scale"] == 0.5
    assert seen.data["origin"] == [40, 40]
    assert seen.data["screenshot"]["width"] == 210
    assert 'push button "Apply" (0,32 36x17)' in seen.text  # bounds in PNG pixels
    clicked = await service.call("desktop_click", {"state_id": seen.data["state_id"],
                                                   "x": 100, "y": 40})
    assert not clicked.is_error, clicked.text
    (fields,) = [f for op, f in helper.log if op == "click"]
    assert (fields["x"], fields["y"]) == (240, 120)  # 40 + 100 / 0.5, 40 + 40 / 0.5


async def test_the_delta_compares_decoded_pixels_and_fields() -> None:
    helper = RecordedHelper()
    service, seen = await observe(helper)
    label = next(n for n in helper.tree["nodes"] if n["name"].startswith("clicked"))
    label["name"] = label["text"] = "clicked 9"
    helper.pixel = 10
    apply = ref(seen.text, 'push button "Apply"')
    clicked = await service.call("desktop_click", {"state_id": seen.data["state_id"],
                                                   "ref": apply})
    delta = clicked.data["delta"]
    assert delta["screenshotChanged"] is True
    changed = delta["elements"]["changed"]
    assert list(changed.values()) == [["name", "text"]]
    assert 'changed: [ref=' in clicked.text
    # Same pixels, different PNG bytes: the same pixel hash (the vision intake's).
    capture = Capture((0, 0), 8, 4, bytes(range(96)))
    shot = encode_capture(capture, 100)
    with Image.open(io.BytesIO(shot.png)) as image:
        assert pixel_digest(image) == shot.pixel_sha256
        other = io.BytesIO()
        image.save(other, "PNG", compress_level=9)
    assert other.getvalue() != shot.png


@pytest.mark.parametrize(("mode", "requested", "delivered"), [
    ("manual", False, False), ("manual", True, True), ("always", False, True),
    ("auto", False, False), ("auto", True, True)])
async def test_visual_mode_decides_delivery_only(mode: str, requested: bool,
                                                 delivered: bool) -> None:
    helper = RecordedHelper()
    service = recorded_service(helper, visual_mode=mode)
    seen = await service.call("desktop_observe", {"scope": "window", "window": WINDOW,
                                                  "include_screenshot": requested})
    assert seen.deliver is delivered
    assert seen.screenshot is not None  # captured and hashed in every mode
    assert seen.data["screenshot"]["pixel_sha256"]


async def test_exhausted_vision_forwards_only_the_semantic_state_marked() -> None:
    helper = RecordedHelper()
    service = recorded_service(helper, visual_mode="always")

    async def exhausted(png: bytes, question: str | None) -> str:
        raise FailoverExhaustedError("every route failed")

    seen = await service.call("desktop_observe", {"scope": "window", "window": WINDOW},
                              describe=exhausted)
    assert not seen.is_error
    assert PIXELS_NOT_DECODED + " (VISION_FAILOVER_EXHAUSTED)" in seen.text
    assert 'push button "Apply"' in seen.text  # the validated semantic state stays
    assert seen.data["visual"] == {"sha256": seen.screenshot.sha256,  # type: ignore[union-attr]
                                   "delivered": False, "pixels_decoded": False,
                                   "code": "VISION_FAILOVER_EXHAUSTED"}


async def test_launch_only_configured_apps_within_the_bound() -> None:
    helper = RecordedHelper()
    service = recorded_service(helper, apps={"sleeper": ["sleep", "30"]}, max_processes=1,
                               helper_timeout=0.3)
    refused = await service.call("desktop_launch", {"app": "bash"})
    assert refused.code == "DESKTOP_LAUNCH_REFUSED"
    started = await service.call("desktop_launch", {"app": "sleeper"})
    assert "no window of it appeared" in started.text
    (pid,) = service.launcher.running
    over = await service.call("desktop_launch", {"app": "sleeper"})
    assert over.code == "DESKTOP_LAUNCH_REFUSED"
    closed = await service.call("desktop_close", {})
    assert "1 launched apps stopped" in closed.text
    assert service.launcher.running == {}
    import os

    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_every_call_is_on_the_audit_chain_without_typed_text(tmp_path: Path) -> None:
    from deepseek_eyes.audit.verify import verify_database
    from deepseek_eyes.home import DataHome

    home = DataHome(tmp_path / "home")
    helper = RecordedHelper()
    service = recorded_service(helper, audit=home.audit)
    seen = await service.call("desktop_observe", {"scope": "window", "window": WINDOW})
    entry = ref(seen.text, 'text "Name"')
    typed = await service.call("desktop_type", {"state_id": seen.data["state_id"],
                                                "ref": entry, "text": "correct horse"})
    assert not typed.is_error, typed.text
    stale = await service.call("desktop_type", {"state_id": seen.data["state_id"],
                                                "ref": entry, "text": "Mallory"})
    assert stale.code == "DESKTOP_STATE_STALE"
    rows = [r for r in reversed(home.audit.recent()) if r["kind"] == "desktop.action"]
    assert [(r["subject"], r["details"]["outcome"], r["details"]["code"]) for r in rows] == [
        ("desktop_observe", "ok", None), ("desktop_type", "ok", None),
        ("desktop_type", "refused", "DESKTOP_STATE_STALE")]
    assert rows[1]["details"]["arguments"] == ["ref", "state_id", "text"]
    assert rows[1]["details"]["window"] == seen.data["window"]
    stored = home.db.query("SELECT details FROM audit")
    assert not any("correct horse" in r["details"] or "Mallory" in r["details"]
                   or "Eyes Test" in r["details"] for r in stored)
    home.seal()  # a chain verifies under a signed checkpoint
    report = verify_database(home.db, home.audit_keys())
    assert report.ok, report.as_json()
    assert report.kinds["desktop.action"] == 3
    home.close()


async def test_the_close_keeps_the_report_as_a_blob_the_console_finds(tmp_path: Path) -> None:
    import json as jsonlib

    from deepseek_eyes.console.reports import stored_reports
    from deepseek_eyes.home import DataHome
    from deepseek_eyes.store.events import SessionStore

    home = DataHome(tmp_path / "home")
    try:
        service = recorded_service(RecordedHelper())
        service.blobs = home.blobs
        await service.call("desktop_observe", {"scope": "window", "window": WINDOW})
        closed = await service.call("desktop_close", {})
        sha = closed.data["report_sha256"]
        assert f"report stored as sha256:{sha}" in closed.text
        kept = jsonlib.loads(home.blobs.get(sha))
        assert kept["schema"] == "deepseekeyes.desktop.report.v2"
        assert kept["summary"]["steps"] == 1
        SessionStore(home.db).append("d1", [
            {"role": "tool", "tool_call_id": "c", "name": "desktop_close", "content": closed.text}],
            create="cli")
        (shown,) = stored_reports(home.db, home.blobs, "d1")
        assert (shown["sha256"], shown["schema"]) == (sha, "deepseekeyes.desktop.report.v2")
        assert [s["tool"] for s in shown["steps"]] == ["desktop_observe"]
    finally:
        home.close()
