"""Draws evidence boxes over the image they describe, for a human to check at a glance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from deepseek_eyes.canonical_json import JsonObject

__all__ = ["draw_overlay"]

COLOURS = {
    "ocr": (230, 0, 120),
    "regions": (0, 110, 255),
    "objects": (0, 170, 60),
    "quantitative_facts": (255, 140, 0),
    "observations": (150, 0, 200),
}


def _pixels(bbox: Any, width: int, height: int) -> tuple[int, int, int, int] | None:
    if not (isinstance(bbox, list) and len(bbox) == 4):
        return None
    x, y, w, h = (float(v) for v in bbox)
    return (round(x * width), round(y * height), round((x + w) * width), round((y + h) * height))


def draw_overlay(pixels: Image.Image, evidence: JsonObject, out: Path) -> int:
    """Write ``pixels`` with every box of ``evidence`` drawn on it as a PNG; returns the
    number of boxes drawn. Regions are drawn first so text boxes stay visible on top."""
    image = pixels.convert("RGB").copy()
    draw = ImageDraw.Draw(image)
    width, height = image.size
    line = max(1, round(min(width, height) / 400))
    drawn = 0
    for field in ("regions", "objects", "quantitative_facts", "observations", "ocr"):
        for item in evidence.get(field) or []:
            box = _pixels(item.get("bbox") if isinstance(item, dict) else None, width, height)
            if box is None:
                continue
            draw.rectangle(box, outline=COLOURS[field], width=line)
            drawn += 1
    out.parent.mkdir(parents=True, exist_ok=True)
    image.save(out, format="PNG")
    return drawn
