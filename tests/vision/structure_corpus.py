"""A small generated corpus with ground truth for the local route's structure (issue 42).

Drawn at test time, not committed: documents with a title, two columns, a header and a
footer; a page with a figure and its caption; a bar chart drawn by matplotlib whose axis
ticks sit beside the values printed on the bars; photo-like images with no text at all
(noise, gradients, shapes). Each sample carries what a reader should find: typed regions
with their boxes in pixels, the reading order of the text, the chart's ticks and values.

Text is DejaVu (the Debian fonts the other vision tests draw with); the chart is
matplotlib's own rendering, so its ticks are where a real chart puts them.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter, ImageFont

__all__ = ["Sample", "TruthRegion", "corpus"]

FONTS = Path("/usr/share/fonts/truetype/dejavu")
_TEXT = (
    "the river carries light sediment from upper valleys toward a slow delta where farmers "
    "plant rice on narrow terraces each season brings new water and old stories about "
    "floods harvests markets and the long roads between villages along the coast"
)
_WORDS = _TEXT.split()


@dataclass(frozen=True)
class TruthRegion:
    """A region a reader should find: its type (our names: title, text, figure, caption,
    table, header, footer, list) and its box in pixels."""

    kind: str
    box: tuple[int, int, int, int]


@dataclass
class Sample:
    name: str
    image: Image.Image
    regions: list[TruthRegion] = field(default_factory=list)
    #: Lines in reading order (a subset is enough: the order of those found is scored).
    order: list[str] = field(default_factory=list)
    has_text: bool = True
    #: Chart truth: the tick labels of the value axis and the values printed on bars.
    ticks: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)


def _font(size: int, bold: bool = False) -> ImageFont.FreeTypeFont:
    name = "DejaVuSerif-Bold.ttf" if bold else "DejaVuSerif.ttf"
    return ImageFont.truetype(str(FONTS / name), size)


def _sentence_lines(seed: int, count: int, words_per_line: int) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for index in range(count):
        words = [rng.choice(_WORDS) for _ in range(words_per_line)]
        lines.append(f"{index + 1:02d} " + " ".join(words))
    return lines


def _paragraph(
    draw: ImageDraw.ImageDraw, x: int, y: int, lines: list[str], font: ImageFont.FreeTypeFont,
    leading: int,
) -> tuple[int, int, int, int]:
    right = bottom = 0
    for index, text in enumerate(lines):
        box = draw.textbbox((x, y + index * leading), text, font=font)
        draw.text((x, y + index * leading), text, fill=(15, 15, 15), font=font)
        right, bottom = max(right, box[2]), max(bottom, box[3])
    return (x, y, right, bottom)


def two_columns() -> Sample:
    """A journal page: header, title, two columns of numbered lines, footer."""
    image = Image.new("RGB", (1000, 800), "white")
    draw = ImageDraw.Draw(image)
    small, body = _font(16), _font(20)
    header = _paragraph(draw, 60, 30, ["Journal of River Studies  Vol. 12"], small, 20)
    title_font = _font(40, bold=True)
    title_text = "Sediment and Seasons"
    title_box = draw.textbbox((60, 100), title_text, font=title_font)
    draw.text((60, 100), title_text, fill="black", font=title_font)
    left = _sentence_lines(1, 14, 4)
    right = [f"{int(t[:2]) + 14:02d}{t[2:]}" for t in _sentence_lines(2, 14, 4)]
    left_box = _paragraph(draw, 60, 200, left, body, 32)
    right_box = _paragraph(draw, 530, 200, right, body, 32)
    footer = _paragraph(draw, 480, 740, ["Page 7"], small, 20)
    return Sample(
        name="two_columns",
        image=image,
        regions=[
            TruthRegion("header", header),
            TruthRegion("title", title_box),
            TruthRegion("text", left_box),
            TruthRegion("text", right_box),
            TruthRegion("footer", footer),
        ],
        order=[title_text, *left, *right],
    )


def figure_page() -> Sample:
    """A single-column page: title, a paragraph, a figure (a drawn diagram), its caption and
    another paragraph."""
    image = Image.new("RGB", (1000, 1000), "white")
    draw = ImageDraw.Draw(image)
    body = _font(22)
    title_font = _font(40, bold=True)
    title_text = "Delta Survey Results"
    title_box = draw.textbbox((80, 70), title_text, font=title_font)
    draw.text((80, 70), title_text, fill="black", font=title_font)
    first = _sentence_lines(3, 5, 8)
    first_box = _paragraph(draw, 80, 160, first, body, 34)
    figure_box = (200, 370, 800, 720)
    rng = random.Random(5)
    draw.rectangle(figure_box, fill=(235, 240, 250), outline=(40, 40, 40), width=3)
    for _ in range(14):
        cx, cy = rng.randint(260, 740), rng.randint(420, 670)
        r = rng.randint(15, 45)
        colour = (rng.randint(40, 200), rng.randint(60, 160), rng.randint(90, 230))
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=colour)
    draw.line((230, 700, 770, 400), fill=(200, 40, 40), width=5)
    caption_text = "Figure 1. Sample sites along the delta in the dry season."
    caption_font = _font(18)
    caption_box = draw.textbbox((200, 740), caption_text, font=caption_font)
    draw.text((200, 740), caption_text, fill=(30, 30, 30), font=caption_font)
    second = _sentence_lines(4, 4, 8)
    second_box = _paragraph(draw, 80, 800, second, body, 34)
    return Sample(
        name="figure_page",
        image=image,
        regions=[
            TruthRegion("title", title_box),
            TruthRegion("text", first_box),
            TruthRegion("figure", figure_box),
            TruthRegion("caption", caption_box),
            TruthRegion("text", second_box),
        ],
        order=[title_text, *first, caption_text, *second],
    )


def bar_chart() -> Sample:
    """A matplotlib bar chart: value-axis ticks 0..20 and a value printed on each bar, one
    of them (18.9) at the height of the tick 20's row."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    categories = ["North", "South", "East", "West"]
    values = [18.9, 12.4, 7.5, 15.2]
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    bars = ax.bar(categories, values, color=["#4c72b0", "#55a868", "#c44e52", "#8172b2"])
    ax.set_ylim(0, 20)
    ax.set_yticks([0, 5, 10, 15, 20])
    ax.set_ylabel("Revenue (M EUR)")
    ax.set_title("Revenue by region")
    for bar, value in zip(bars, values, strict=True):
        ax.annotate(
            f"{value}", (bar.get_x() + bar.get_width() / 2, value), ha="center",
            va="bottom", fontsize=12, xytext=(0, 2), textcoords="offset points",
        )
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    buffer.seek(0)
    image = Image.open(buffer).convert("RGB")
    return Sample(
        name="bar_chart", image=image, ticks=["0", "5", "10", "15", "20"],
        values=[str(v) for v in values],
    )


def noise_photo() -> Sample:
    """Coloured noise over a gradient: texture everywhere, text nowhere."""
    rng = random.Random(11)
    width, height = 480, 360
    image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    pixels = image.load()
    assert pixels is not None
    for y in range(0, height, 2):
        for x in range(0, width, 2):
            r, g, _ = pixels[x, y]  # type: ignore[misc]
            pixels[x, y] = (
                min(255, r // 2 + rng.randint(0, 120)), min(255, g // 3 + rng.randint(0, 90)),
                min(255, 90 + rng.randint(0, 120)),
            )
    return Sample(name="noise_photo", image=image.filter(ImageFilter.GaussianBlur(1)),
                  has_text=False)


def shapes_photo() -> Sample:
    """A blurred scene of overlapping shapes on a sky-to-ground gradient."""
    rng = random.Random(17)
    width, height = 560, 420
    sky = Image.new("RGB", (width, height), (120, 170, 230))
    ground = Image.new("RGB", (width, height), (70, 120, 50))
    mask = Image.linear_gradient("L").resize((width, height))
    image = Image.composite(ground, sky, mask)
    draw = ImageDraw.Draw(image)
    for _ in range(25):
        x, y = rng.randint(0, width), rng.randint(0, height)
        r = rng.randint(8, 60)
        colour = (rng.randint(0, 255), rng.randint(0, 255), rng.randint(0, 255))
        if rng.random() < 0.5:
            draw.ellipse((x - r, y - r, x + r, y + r), fill=colour)
        else:
            draw.polygon([(x, y - r), (x + r, y + r), (x - r, y + r)], fill=colour)
    return Sample(name="shapes_photo", image=image.filter(ImageFilter.GaussianBlur(2)),
                  has_text=False)


def corpus() -> list[Sample]:
    """Every sample, freshly drawn (about a tenth of a second)."""
    return [two_columns(), figure_page(), bar_chart(), noise_photo(), shapes_photo()]


if __name__ == "__main__":  # draw the corpus to a folder to look at it
    import sys

    out = Path(sys.argv[1] if len(sys.argv) > 1 else "structure-corpus")
    out.mkdir(parents=True, exist_ok=True)
    for sample in corpus():
        sample.image.save(out / f"{sample.name}.png")
        print(out / f"{sample.name}.png")
