"""Synthetic 4K screenshots with small text, drawn at test time, and their exact lines.

Sixty lines of 13-px DejaVu Sans on a 3840x2160 canvas, each carrying a distinct amount, at
positions spread over the whole screen so that some lines cross the middle of the image
(where a reader that cuts the screen into tiles puts its seams) and some lie near it. Drawn
rather than committed: the OCR tests that use it assert exact reads at native resolution,
which hold across FreeType versions, and a 4K PNG is a large file to keep in the repository.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

__all__ = ["SCREEN_SIZE", "TEXT_PX", "ScreenLine", "screen_4k", "terminal_4k"]

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
MONO = Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf")
SCREEN_SIZE = (3840, 2160)
TEXT_PX = 13
_WORDS = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
    "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
    "sierra", "tango",
)
_NOUNS = ("balance", "payment", "transfer")


@dataclass(frozen=True)
class ScreenLine:
    """One drawn line: its text, the amount it carries and its box in pixels."""

    text: str
    amount: str
    box: tuple[int, int, int, int]


def screen_4k() -> tuple[Image.Image, list[ScreenLine]]:
    """The screenshot and its sixty lines, top to bottom."""
    width, height = SCREEN_SIZE
    image = Image.new("RGB", SCREEN_SIZE, (250, 250, 248))
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(str(FONT), TEXT_PX)
    lines: list[ScreenLine] = []
    for index in range(60):
        amount = f"{1000 + index * 137.31:.2f}"
        text = (
            f"The {_NOUNS[index % 3]} for account {_WORDS[index % 20]} reached {amount} EUR"
            " before the nightly close"
        )
        x = 60 + (index * 613) % 3200
        y = 40 + index * 35
        draw.text((x, y), text, fill=(20, 20, 24), font=font)
        left, top, right, bottom = draw.textbbox((x, y), text, font=font)
        assert right < width
        assert bottom < height
        lines.append(ScreenLine(text, amount, (left, top, right, bottom)))
    return image, lines


_LOG_WORDS = (
    "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "build", "queue", "status",
    "node", "ready", "pending", "error", "warning", "info", "deploy", "service", "cache", "miss",
    "hit", "latency", "ms", "bytes", "sent", "received",
)


def terminal_4k() -> tuple[Image.Image, list[ScreenLine]]:
    """A dark 4K terminal: forty long lines of 14-px monospace text at an 18-px pitch, each
    ending in a distinct number, packed around the screen's middle so that most cross the
    vertical middle and a dozen lie around the horizontal one (dense text at both seams)."""
    width, height = SCREEN_SIZE
    image = Image.new("RGB", SCREEN_SIZE, (30, 30, 34))
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(str(MONO), 14)
    rng = random.Random(7)
    lines: list[ScreenLine] = []
    for index in range(40):
        amount = str(1000 + index * 7)
        words = [rng.choice(_LOG_WORDS) for _ in range(rng.randint(20, 45))]
        x, y = rng.randint(20, 1500), 900 + index * 18
        text = " ".join([*words, amount])
        while draw.textbbox((x, y), text, font=font)[2] > width - 20:
            text = text.split(" ", 1)[1]
        draw.text((x, y), text, fill=(220, 220, 220), font=font)
        left, top, right, bottom = draw.textbbox((x, y), text, font=font)
        assert bottom < height
        lines.append(ScreenLine(text, amount, (left, top, right, bottom)))
    return image, lines
