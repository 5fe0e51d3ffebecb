"""The embedded local route on real images, with the network switched off."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import Settings
from deepseek_eyes.vision.bridge import VisionBridge
from deepseek_eyes.vision.evidence.gate import validate_evidence
from deepseek_eyes.vision.types import Variant

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "bench" / "corpus"


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OSError("network access is not allowed in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def texts(evidence: dict[str, Any]) -> list[str]:
    return [line["text"] for line in evidence["ocr"]]


async def test_receipt_offline_gives_full_valid_evidence(no_network: None) -> None:
    settings = Settings()
    with DataHome.open(settings) as home:
        bridge = VisionBridge(settings, home)
        data = (ROOT / "examples" / "receipt.png").read_bytes()
        result = await bridge.see(data)
        again = await bridge.see(data)
        await bridge.aclose()
        usage = home.usage.summary()
    # The local engine is no provider: its read is counted, never listed as exact usage,
    # and a cache hit on its evidence avoided no provider tokens.
    assert again.cached
    assert usage["exact"] == {}
    assert usage["estimated"] == {"local_ocr": {"events": 1, "estimated_tokens": 0}}
    evidence = result.record.evidence
    assert validate_evidence(evidence, Variant.EVIDENCE) == []
    assert result.route == "local"
    assert ("local", "probe", "exempt") in [
        (a["route"], a["phase"], a["outcome"]) for a in result.attempts
    ]
    lines = texts(evidence)
    assert "GREEN LEAF MARKET" in lines
    assert "TOTAL 64.03" in lines
    facts = {(f["label"], f["value"], f["unit"]) for f in evidence["quantitative_facts"]}
    assert ("TOTAL", 64.03, "") in facts
    assert ("Tax", 8.5, "%") in facts
    assert ("Olive oil", 750.0, "ml") in facts
    # The photographed paper is a figure to the layout model; its lines are text blocks
    # inside it, read in order.
    kinds = [r["kind"] for r in evidence["regions"]]
    assert "text_block" in kinds
    assert set(kinds) <= {"text_block", "figure"}
    if "figure" in kinds:
        assert any(r["predicate"] == "inside" for r in evidence["relations"])
    assert evidence["objects"] == []  # it does not pretend to see objects
    assert evidence["uncertainties"][0]["topic"] == "coverage"
    for line in evidence["ocr"]:
        x, y, w, h = line["bbox"]
        assert min(x, y) >= 0
        assert max(x + w, y + h) <= 1
        assert 0 <= line["confidence"] <= 1


async def test_screen_and_terminal_text_is_read(no_network: None) -> None:
    truth = json.loads((CORPUS / "truth.json").read_text())
    settings = Settings()
    with DataHome.open(settings) as home:
        bridge = VisionBridge(settings, home)
        for name in ("05_settings_light.png", "06_terminal_dark.png"):
            result = await bridge.see((CORPUS / name).read_bytes())
            joined = " ".join(texts(result.record.evidence))
            found = [line for line in truth[name]["lines"] if " ".join(line.split()) in joined]
            assert len(found) >= len(truth[name]["lines"]) - 1, name
        await bridge.aclose()


async def test_targeted_reread_on_the_local_route(no_network: None) -> None:
    settings = Settings()
    data = (ROOT / "examples" / "receipt.png").read_bytes()
    with DataHome.open(settings) as home:
        bridge = VisionBridge(settings, home)
        base = await bridge.see(data)
        target = await bridge.reread(data, "What is the TOTAL?", base_route=base.route)
        await bridge.aclose()
    evidence = target.record.evidence
    assert validate_evidence(evidence, Variant.TARGET) == []
    assert "64.03" in evidence["answer"]
    assert evidence["confidence"] <= 0.5


async def test_blank_image_says_no_text(no_network: None, tmp_path: Path) -> None:
    from PIL import Image

    path = tmp_path / "blank.png"
    Image.new("RGB", (320, 200), "white").save(path)
    settings = Settings()
    with DataHome.open(settings) as home:
        bridge = VisionBridge(settings, home)
        result = await bridge.see(path.read_bytes())
        await bridge.aclose()
    assert result.record.evidence["ocr"] == []
    assert "no legible text" in result.record.evidence["summary"]


EXTREME_SHAPES = [(20000, 2), (2, 20000), (1, 1), (3, 4000)]


def solid(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), rgb).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize(("width", "height"), EXTREME_SHAPES)
async def test_extreme_shapes_through_the_local_route(
    no_network: None, width: int, height: int
) -> None:
    from PIL import Image

    from deepseek_eyes.vision.routes.local_ocr import LocalRoute
    from deepseek_eyes.vision.types import VisionRequest

    pixels = Image.new("RGB", (width, height), "white")
    request = VisionRequest(
        purpose="evidence", image_bytes=b"", media_type="image/png", width=width,
        height=height, system_prompt="", user_prompt="", variant=Variant.EVIDENCE,
        pixels=pixels,
    )
    answer = await LocalRoute().call(request)
    assert answer.value is not None
    assert validate_evidence(answer.value, Variant.EVIDENCE) == []
    assert answer.value["ocr"] == []


@pytest.mark.parametrize(("width", "height"), EXTREME_SHAPES)
async def test_extreme_shapes_through_the_router(
    no_network: None, width: int, height: int
) -> None:
    settings = Settings()
    with DataHome.open(settings) as home:
        bridge = VisionBridge(settings, home)
        result = await bridge.see(solid(width, height, (250, 250, 245)))
        await bridge.aclose()
    assert result.route == "local"
    assert validate_evidence(result.record.evidence, Variant.EVIDENCE) == []
    assert "no legible text" in result.record.evidence["summary"]


async def test_a_long_text_strip_is_read_across_its_tiles(no_network: None) -> None:
    import io

    from PIL import Image, ImageDraw, ImageFont

    items = [f"item{i} costs {i}.50 EUR;" for i in range(18)]
    image = Image.new("RGB", (6000, 48), "white")
    ImageDraw.Draw(image).text(
        (10, 8), " ".join(items), fill="black", font=ImageFont.load_default(size=28)
    )
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    settings = Settings()
    with DataHome.open(settings) as home:
        bridge = VisionBridge(settings, home)
        result = await bridge.see(buffer.getvalue())
        await bridge.aclose()
    evidence = result.record.evidence
    assert validate_evidence(evidence, Variant.EVIDENCE) == []
    joined = " ".join(texts(evidence))
    read = [item for item in items if item in joined]
    assert len(read) >= len(items) - 3, joined
    for line in evidence["ocr"]:
        x, y, w, h = line["bbox"]
        assert min(x, y) >= 0
        assert max(x + w, y + h) <= 1


async def test_any_engine_exception_is_a_route_error_not_a_traceback() -> None:
    from PIL import Image

    from deepseek_eyes.errors import RouteError
    from deepseek_eyes.vision.routes.local_ocr import LocalOcrEngine, LocalRoute
    from deepseek_eyes.vision.types import VisionRequest

    class EngineOwnError(Exception):  # like rapidocr's ResizeImgError: not a RuntimeError
        pass

    def explode(_: Any) -> None:
        raise EngineOwnError("resize_w or resize_h is less than or equal to 0")

    engine = LocalOcrEngine()
    engine._engine = explode
    request = VisionRequest(
        purpose="evidence", image_bytes=b"", media_type="image/png", width=40, height=30,
        system_prompt="", user_prompt="", variant=Variant.EVIDENCE,
        pixels=Image.new("RGB", (40, 30), "white"),
    )
    with pytest.raises(RouteError) as info:
        await LocalRoute(engine=engine).call(request)
    assert info.value.code == "VISION_ROUTE_ENGINE_FAILED"
    assert isinstance(info.value.__cause__, RuntimeError)


def test_every_read_hands_the_freed_heap_back() -> None:
    import numpy as np

    from deepseek_eyes.vision.routes.local_ocr import LocalOcrEngine

    releases: list[int] = []
    engine = LocalOcrEngine()
    engine._release_heap = lambda: releases.append(1)
    engine._engine = lambda pixels: None  # reads nothing
    assert engine.read(np.full((30, 40, 3), 255, dtype=np.uint8)) == []
    assert len(releases) == 1

    def explode(_: Any) -> None:
        raise ValueError("engine failure")

    engine._engine = explode
    with pytest.raises(RuntimeError):
        engine.read(np.full((30, 40, 3), 255, dtype=np.uint8))
    assert len(releases) == 2  # a failed read releases too


def test_the_heap_trimmer_runs_here() -> None:
    from deepseek_eyes.vision.routes.local_ocr import _heap_trimmer

    _heap_trimmer()()  # glibc's malloc_trim on Linux, a no-op elsewhere: never raises


def test_the_local_answer_fingerprint_names_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    from deepseek_eyes.settings import LocalRouteSettings
    from deepseek_eyes.vision.routes import local_ocr
    from deepseek_eyes.vision.routes.local_ocr import LocalOcrEngine, LocalRoute

    engine = LocalOcrEngine()  # never loaded: identity needs no model
    route = LocalRoute(engine=engine)
    base = route.answer_fingerprint
    assert base == LocalRoute(engine=engine).answer_fingerprint
    assert LocalRoute(
        settings=LocalRouteSettings(min_confidence=0.9), engine=engine
    ).answer_fingerprint != base
    installed = local_ocr._engine_version()
    monkeypatch.setattr(local_ocr, "_engine_version", lambda: "99.0.0")
    assert route.answer_fingerprint != base
    monkeypatch.setattr(local_ocr, "_engine_version", lambda: installed)
    assert route.answer_fingerprint == base
    monkeypatch.setattr(local_ocr, "READ_VERSION", local_ocr.READ_VERSION + ";next")
    assert route.answer_fingerprint != base  # a change in how images are fed, alone


async def test_a_4k_screenshot_with_small_text_is_read_at_full_resolution(
    no_network: None,
) -> None:
    from deepseek_eyes.vision.routes.local_ocr import LocalRoute
    from deepseek_eyes.vision.routes.tiling import TILE_SIDE, plan_tiles
    from deepseek_eyes.vision.types import VisionRequest
    from vision.screens import SCREEN_SIZE, screen_4k

    image, lines = screen_4k()
    width, height = SCREEN_SIZE
    # The screen is larger than the engine reads unshrunk, and its lines meet the seams.
    assert max(width, height) > TILE_SIDE
    tiles = plan_tiles(width, height)
    assert len(tiles) == 4
    seam_x = (tiles[1].x0, tiles[0].x1)
    seam_y = (tiles[2].y0, tiles[0].y1)
    across_x = [ln for ln in lines if ln.box[0] < seam_x[0] and ln.box[2] > seam_x[1]]
    near_y = [ln for ln in lines if ln.box[3] > seam_y[0] and ln.box[1] < seam_y[1]]
    assert len(across_x) >= 5
    assert len(near_y) >= 3
    assert any(ln in across_x for ln in near_y)  # one at the corner
    request = VisionRequest(
        purpose="evidence", image_bytes=b"", media_type="image/png", width=width,
        height=height, system_prompt="", user_prompt="", variant=Variant.EVIDENCE,
        pixels=image,
    )
    answer = await LocalRoute().call(request)
    evidence = answer.value
    assert evidence is not None
    assert validate_evidence(evidence, Variant.EVIDENCE) == []
    read = texts(evidence)
    missed = [ln.text for ln in lines if ln.text not in read]
    assert missed == [], read
    assert len(read) == len(lines)  # nothing read twice at a seam
    facts = {(f["text"], f["value"], f["unit"]) for f in evidence["quantitative_facts"]}
    for ln in lines:
        assert (ln.amount, float(ln.amount), "EUR") in facts
    boxes = {entry["text"]: entry["bbox"] for entry in evidence["ocr"]}
    for ln in lines:  # each box mapped back to where the line was drawn
        x, y, w, h = boxes[ln.text]
        left, top, right, bottom = ln.box
        assert abs(x * width - left) <= 6
        assert abs((x + w) * width - right) <= 6
        assert abs(y * height - top) <= 6
        assert abs((y + h) * height - bottom) <= 6
