"""The embedded local route on real images, with the network switched off."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.settings import Settings
from deepseek_eyes.store.home import DataHome
from deepseek_eyes.vision.bridge import VisionBridge
from deepseek_eyes.vision.evidence import validate_evidence
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
        result = await bridge.see((ROOT / "examples" / "receipt.png").read_bytes())
        await bridge.aclose()
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
    assert evidence["regions"]
    assert all(r["kind"] == "text_block" for r in evidence["regions"])
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
