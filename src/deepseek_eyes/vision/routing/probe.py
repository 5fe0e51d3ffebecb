"""The randomized 3×3 pixel probe: proof that a route reads the pixels it is sent.

A model that declares image input may still answer from the prompt alone (a text model
behind an image-accepting endpoint, a proxy that drops image parts). Schema-valid evidence
from such a route would look trustworthy and be invented, so before a route is trusted it
must name the colours of a fresh random 3×3 grid. The grid comes from ``secrets``: it cannot
be guessed or cached by the far side, and nine cells from eight colours leave a blind
guess about one chance in 134 million.
"""

from __future__ import annotations

import io
import json
import re
import secrets
from dataclasses import dataclass

__all__ = [
    "PROBE_COLOURS",
    "ProbeChallenge",
    "judge_probe",
    "make_challenge",
    "probe_prompts",
]

#: Colour names and the flat RGB each cell is painted with; far apart in every channel mix.
PROBE_COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (255, 0, 0),
    "green": (0, 160, 0),
    "blue": (0, 0, 255),
    "yellow": (255, 255, 0),
    "black": (0, 0, 0),
    "white": (255, 255, 255),
    "cyan": (0, 255, 255),
    "magenta": (255, 0, 255),
}
GRID = 3
CELL_PX = 64
MIN_DISTINCT = 4


@dataclass(frozen=True)
class ProbeChallenge:
    """One pixel probe: the grid's colour names and the PNG that shows them."""

    cells: tuple[tuple[str, ...], ...]  # row-major colour names
    png: bytes
    width: int
    height: int


def make_challenge(cell_px: int = CELL_PX) -> ProbeChallenge:
    """A fresh grid with at least four distinct colours, as a lossless PNG."""
    names = list(PROBE_COLOURS)
    while True:
        flat = [secrets.choice(names) for _ in range(GRID * GRID)]
        if len(set(flat)) >= MIN_DISTINCT:
            break
    size = GRID * cell_px
    # Imported here: a probe is rare, and every command that opens the router (a cached
    # `see` among them) would otherwise pay for Pillow at start-up.
    from PIL import Image

    image = Image.new("RGB", (size, size))
    for index, name in enumerate(flat):
        row, col = divmod(index, GRID)
        box = (col * cell_px, row * cell_px, (col + 1) * cell_px, (row + 1) * cell_px)
        image.paste(PROBE_COLOURS[name], box)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    cells = tuple(tuple(flat[r * GRID : (r + 1) * GRID]) for r in range(GRID))
    return ProbeChallenge(cells=cells, png=buffer.getvalue(), width=size, height=size)


def probe_prompts() -> tuple[str, str]:
    """(system, user) prompts for a probe; the same for every route."""
    palette = ", ".join(PROBE_COLOURS)
    system = (
        "You are a precise image reader. Answer with one JSON object and nothing else."
    )
    user = (
        "PROBE: the image is a 3x3 grid of equal square cells, each filled with one flat "
        f"colour from this list: {palette}. Name every cell's colour, row by row from the "
        'top-left, as {"cells": [["c11","c12","c13"],["c21","c22","c23"],'
        '["c31","c32","c33"]]} using only words from the list.'
    )
    return system, user


_WORD = re.compile(r"[a-z]+")


def _cells_from_text(text: str) -> list[str]:
    # Strip a reasoning block first: a model may think aloud about colours before answering.
    text = re.sub(r"(?is)<think>.*?</think>", " ", text)
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match:
        try:
            value = json.loads(match.group(0))
        except ValueError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("cells"), list):
            flat: list[str] = []
            for row in value["cells"]:
                if isinstance(row, list):
                    flat.extend(str(cell).strip().lower() for cell in row)
                else:
                    flat.append(str(row).strip().lower())
            return flat
    # Fallback: the palette words in the order they appear.
    return [w for w in _WORD.findall(text.lower()) if w in PROBE_COLOURS]


def judge_probe(text: str, challenge: ProbeChallenge) -> int:
    """How many of the nine cells the answer names correctly (the caller requires all)."""
    answer = _cells_from_text(text)[: GRID * GRID]
    expected = [name for row in challenge.cells for name in row]
    return sum(1 for got, want in zip(answer, expected, strict=False) if got == want)
