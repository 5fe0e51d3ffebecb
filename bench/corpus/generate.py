"""Write the OCR evaluation corpus: eight PNG images and ``truth.json``.

Run by hand from the repository root, then commit what it writes::

    .venv/bin/python bench/corpus/generate.py

Each image is drawn with Pillow and the DejaVu fonts, and every piece of text goes through
:class:`Canvas`, which records the exact line it draws. ``truth.json`` maps each file name to
``{"kind": "document" | "screen", "lines": [...]}``; ``examples/receipt.png`` is a copy of
the clean receipt (the image the README tells a newcomer to try first).

Decisions a newcomer would otherwise undo:

* **A truth line is what a human reads as one line.** Pieces that belong together on one
  baseline (a receipt's item and its price, a table row's cells, a KPI tile's label and
  value, a nav bar's links) form one line, joined with single spaces; runs of whitespace
  inside a piece (aligned terminal columns) also count as one space. Separate elements
  that merely share a height (a logo and the nav links, two KPI tiles) are separate lines.
  Lines are listed in reading order: top to bottom, and where a screen has side-by-side
  regions, the left region (sidebar, chart) before the one to its right.
* **The images are committed, not generated at test time.** Font rasterisation and JPEG
  encoding differ across Pillow/FreeType/libjpeg versions; a committed PNG is the same
  bytes everywhere, so a score measured today is comparable with one measured next year.
  The script checks its own output (ASCII only, text ≥ 12 px, every line inside the
  image, no two lines overlapping) so a layout edit cannot silently corrupt the truth.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

__all__ = ["Canvas", "Piece", "build_corpus", "main"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
MAX_PNG_BYTES = 300 * 1024
MIN_FONT_PX = 12

Color = tuple[int, int, int]
Box = tuple[int, int, int, int]


def font(size: int, style: str = "Sans") -> ImageFont.FreeTypeFont:
    """A DejaVu font, e.g. ``font(16, "Sans-Bold")`` or ``font(14, "SansMono")``."""
    if size < MIN_FONT_PX:
        raise ValueError(f"font size {size} px is below the corpus minimum of {MIN_FONT_PX}")
    return ImageFont.truetype(str(FONT_DIR / f"DejaVu{style}.ttf"), size)


@dataclass(frozen=True)
class Piece:
    """One run of text on a row: ``anchor`` is Pillow's (``ls`` left, ``rs`` right,
    ``ms`` centre, all on the baseline)."""

    x: float
    text: str
    font: ImageFont.FreeTypeFont
    fill: Color
    anchor: str = "ls"


@dataclass
class Canvas:
    """An RGB image plus the truth lines drawn on it, in reading order."""

    width: int
    height: int
    background: Color = (255, 255, 255)
    image: Image.Image = field(init=False)
    draw: ImageDraw.ImageDraw = field(init=False)
    lines: list[str] = field(default_factory=list)
    boxes: list[Box] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.image = Image.new("RGB", (self.width, self.height), self.background)
        self.draw = ImageDraw.Draw(self.image)

    def row(self, baseline: float, pieces: Sequence[Piece]) -> Box:
        """Draw pieces on one baseline and record them as one truth line."""
        texts: list[str] = []
        union: Box | None = None
        for piece in pieces:
            xy = (piece.x, baseline)
            self.draw.text(xy, piece.text, font=piece.font, fill=piece.fill, anchor=piece.anchor)
            left, top, right, bottom = self.draw.textbbox(
                xy, piece.text, font=piece.font, anchor=piece.anchor
            )
            box = (int(left), int(top), int(right), int(bottom))
            union = (
                box
                if union is None
                else (
                    min(union[0], box[0]),
                    min(union[1], box[1]),
                    max(union[2], box[2]),
                    max(union[3], box[3]),
                )
            )
            texts.append(piece.text)
        if union is None:
            raise ValueError("a row needs at least one piece")
        self._record(" ".join(texts), union)
        return union

    def text(
        self,
        x: float,
        baseline: float,
        text: str,
        face: ImageFont.FreeTypeFont,
        fill: Color = (20, 20, 20),
        anchor: str = "ls",
    ) -> Box:
        """Draw a single-piece line."""
        return self.row(baseline, [Piece(x, text, face, fill, anchor)])

    def _record(self, text: str, box: Box) -> None:
        line = re.sub(r"\s+", " ", text).strip()
        if not line or not line.isascii():
            raise ValueError(f"truth line {text!r} is empty or not ASCII")
        left, top, right, bottom = box
        if left < 0 or top < 0 or right > self.width or bottom > self.height:
            raise ValueError(f"line {line!r} at {box} leaves the {self.width}x{self.height} image")
        for other_line, other in zip(self.lines, self.boxes, strict=True):
            if left < other[2] and other[0] < right and top < other[3] and other[1] < bottom:
                raise ValueError(f"line {line!r} at {box} overlaps {other_line!r} at {other}")
        self.lines.append(line)
        self.boxes.append(box)


def wrap(text: str, face: ImageFont.FreeTypeFont, width: float) -> list[str]:
    """Greedy word wrap to ``width`` pixels."""
    out: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}" if current else word
        if current and face.getlength(candidate) > width:
            out.append(current)
            current = word
        else:
            current = candidate
    if current:
        out.append(current)
    return out


# --------------------------------------------------------------------------- documents

INK: Color = (25, 25, 25)
GREY: Color = (110, 110, 110)

RECEIPT_ITEMS = [
    ("Organic bananas 1.2 kg", "2.38"),
    ("Whole milk 2 L", "3.49"),
    ("Sourdough bread", "5.25"),
    ("Free range eggs 12", "4.99"),
    ("Cheddar cheese 400 g", "6.75"),
    ("Coffee beans 1 kg", "18.90"),
    ("Olive oil 750 ml", "9.80"),
    ("Paper towels 6 pack", "7.45"),
]


def receipt() -> Canvas:
    """A till receipt lying on a grey table, shot from above."""
    page = Canvas(900, 700, background=(118, 124, 130))
    paper = (250, 248, 240)
    left, right, top = 230, 670, 22
    page.draw.rectangle((left, top, right, 688), fill=paper)
    regular, bold, big = font(17, "SansMono"), font(17, "SansMono-Bold"), font(22, "SansMono-Bold")
    centre = (left + right) / 2
    page.text(centre, top + 40, "GREEN LEAF MARKET", big, INK, "ms")
    page.text(centre, top + 68, "214 Harbor Street, Portland OR", regular, INK, "ms")
    page.text(centre, top + 92, "Tel 503-555-0148", regular, INK, "ms")
    page.row(
        top + 126,
        [
            Piece(left + 24, "2025-03-14 17:42", regular, INK),
            Piece(right - 24, "Register 3", regular, INK, "rs"),
        ],
    )
    _dashes(page, left + 24, right - 24, top + 140)
    y = top + 168
    for name, price in RECEIPT_ITEMS:
        page.row(
            y, [Piece(left + 24, name, regular, INK), Piece(right - 24, price, regular, INK, "rs")]
        )
        y += 25
    _dashes(page, left + 24, right - 24, y - 12)
    subtotal = sum(float(p) for _, p in RECEIPT_ITEMS)
    tax = round(subtotal * 0.085 + 1e-9, 2)
    y += 14
    for label, amount, face in (
        ("Subtotal", subtotal, regular),
        ("Tax 8.5%", tax, regular),
        ("TOTAL", subtotal + tax, bold),
    ):
        page.row(
            y,
            [
                Piece(left + 24, label, face, INK),
                Piece(right - 24, f"{amount:.2f}", face, INK, "rs"),
            ],
        )
        y += 25
    page.row(
        y + 6,
        [
            Piece(left + 24, "VISA **** 4821", regular, INK),
            Piece(right - 24, f"{subtotal + tax:.2f}", regular, INK, "rs"),
        ],
    )
    page.text(centre, y + 50, "Thank you for shopping with us!", regular, INK, "ms")
    return page


def _dashes(page: Canvas, x0: int, x1: int, y: int) -> None:
    for x in range(x0, x1, 12):
        page.draw.line((x, y, min(x + 6, x1), y), fill=GREY, width=1)


def degrade(image: Image.Image, seed: int = 7) -> Image.Image:
    """Rotate 1.2°, blur, add sensor noise, and pass through JPEG quality 60.

    The result is grayscale: a phone scan of a receipt usually is, and a noisy RGB PNG
    would not stay under the corpus size cap.
    """
    rotated = image.rotate(1.2, resample=Image.Resampling.BICUBIC, fillcolor=(118, 124, 130))
    blurred = rotated.filter(ImageFilter.GaussianBlur(radius=0.9)).convert("L")
    rng = np.random.default_rng(seed)
    pixels = np.asarray(blurred, dtype=np.float32)
    noisy = np.clip(pixels + rng.normal(0.0, 5.0, pixels.shape), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(noisy).save(buffer, format="JPEG", quality=60)
    buffer.seek(0)
    with Image.open(buffer) as jpeg:
        return jpeg.convert("L")


LETTER_PARAGRAPHS = [
    "Thank you for your order of March 3. We are writing to confirm that the replacement "
    "parts for your model 42 espresso machine left our warehouse this morning. The parcel "
    "contains a new steam wand, two gaskets and a descaling kit, and it should reach your "
    "address within four working days. The tracking number is RX 2093 4417 GB, and you can "
    "follow the delivery on our website at any time. Please keep the old steam wand until the "
    "new one is fitted, because our courier will collect it free of charge on the same day.",
    "If any part is missing or damaged, please reply to this letter or call our service team "
    "on 0161 555 0192 between 9:00 and 17:30, Monday to Friday. Your warranty has been "
    "extended by 12 months at no cost, so the machine is now covered until June 2027. We "
    "apologise for the delay and hope you enjoy many more good mornings with your coffee. "
    "A short guide to fitting "
    "the gaskets is printed on the back of this page.",
]


def letter() -> Canvas:
    """A one-page business letter: letterhead, heading and two wrapped paragraphs."""
    page = Canvas(1000, 1100)
    body = font(19, "Serif")
    margin = 90
    page.text(margin, 95, "Brightwater Appliances Ltd", font(26, "Serif-Bold"), INK)
    page.text(margin, 125, "17 Canal Road, Manchester M1 4BT", font(15, "Serif"), GREY)
    page.draw.line((margin, 145, 1000 - margin, 145), fill=GREY, width=2)
    page.text(1000 - margin, 190, "14 March 2025", body, INK, "rs")
    page.text(margin, 240, "Ms Laura Bennett", body, INK)
    page.text(margin, 268, "8 Elm Grove, York YO10 3HU", body, INK)
    page.text(margin, 340, "Your replacement parts are on their way", font(24, "Serif-Bold"), INK)
    y = 400
    for paragraph in LETTER_PARAGRAPHS:
        for line in wrap(paragraph, body, 1000 - 2 * margin):
            page.text(margin, y, line, body, INK)
            y += 30
        y += 22
    page.text(margin, y + 10, "Yours sincerely,", body, INK)
    page.text(margin, y + 90, "Daniel Okafor", body, INK)
    page.text(margin, y + 118, "Customer Service Manager", body, GREY)
    return page


INVOICE_LINES = [
    ("Wireless mouse", 3, "24.90"),
    ("USB-C docking station", 1, "189.00"),
    ("27 inch monitor", 2, "329.50"),
    ("Mechanical keyboard", 3, "94.00"),
    ("HDMI cable 2 m", 5, "8.75"),
    ("Laptop stand", 2, "39.99"),
]


def invoice_table() -> Canvas:
    """An invoice with a ruled four-column table, header row and totals."""
    page = Canvas(1000, 760)
    regular, bold = font(17), font(17, "Sans-Bold")
    page.text(60, 80, "INVOICE", font(32, "Sans-Bold"), (30, 60, 120))
    page.row(80, [Piece(940, "No. INV-2025-0412", regular, INK, "rs")])
    page.text(940, 110, "Date 2025-04-02", regular, INK, "rs")
    page.text(60, 160, "Bill to: Northgate Consulting GmbH", regular, INK)
    page.text(60, 188, "Friedrichstrasse 88, 10117 Berlin", regular, GREY)
    columns = (60, 520, 640, 800, 940)  # edges: item | qty | unit price | amount
    top, height = 230, 44
    header = ("Item", "Qty", "Unit price", "Amount")
    rows: list[tuple[str, str, str, str]] = [
        (name, str(qty), price, f"{qty * float(price):.2f}") for name, qty, price in INVOICE_LINES
    ]
    page.draw.rectangle((columns[0], top, columns[-1], top + height), fill=(228, 234, 244))
    for index, cells in enumerate([header, *rows]):
        y0 = top + index * height
        face = bold if index == 0 else regular
        baseline = y0 + height / 2 + 6
        page.row(
            baseline,
            [
                Piece(columns[0] + 12, cells[0], face, INK),
                Piece(columns[2] - 12, cells[1], face, INK, "rs"),
                Piece(columns[3] - 12, cells[2], face, INK, "rs"),
                Piece(columns[4] - 12, cells[3], face, INK, "rs"),
            ],
        )
    bottom = top + (len(rows) + 1) * height
    for i in range(len(rows) + 2):
        y = top + i * height
        page.draw.line((columns[0], y, columns[-1], y), fill=(160, 160, 160), width=1)
    for x in columns:
        page.draw.line((x, top, x, bottom), fill=(160, 160, 160), width=1)
    subtotal = sum(qty * float(price) for _, qty, price in INVOICE_LINES)
    vat = round(subtotal * 0.19 + 1e-9, 2)
    y = bottom + 40
    for label, amount, face in (
        ("Subtotal", subtotal, regular),
        ("VAT 19%", vat, regular),
        ("Total EUR", subtotal + vat, bold),
    ):
        page.row(
            y,
            [
                Piece(640, label, face, INK),
                Piece(columns[4] - 12, f"{amount:,.2f}", face, INK, "rs"),
            ],
        )
        y += 32
    page.text(
        60, y + 40, "Payment due within 30 days. IBAN DE44 5001 0517 5407 3249 31", font(15), GREY
    )
    return page


# --------------------------------------------------------------------------- screens

UI_TEXT: Color = (32, 33, 36)
UI_MUTED: Color = (95, 99, 104)
ACCENT: Color = (26, 115, 232)


def settings_screen() -> Canvas:
    """A light-mode desktop settings window: title bar, sidebar, toggles, two buttons."""
    page = Canvas(1000, 640, background=(236, 238, 241))
    win = (20, 16, 980, 624)
    page.draw.rounded_rectangle(win, radius=10, fill=(255, 255, 255), outline=(200, 203, 208))
    page.draw.rounded_rectangle(
        (win[0], win[1], win[2], win[1] + 40), radius=10, fill=(242, 243, 245)
    )
    page.draw.rectangle((win[0] + 1, win[1] + 30, win[2] - 1, win[1] + 40), fill=(242, 243, 245))
    for i, colour in enumerate(((237, 106, 94), (245, 191, 79), (98, 197, 84))):
        cx = win[0] + 22 + i * 20
        page.draw.ellipse((cx - 6, win[1] + 14, cx + 6, win[1] + 26), fill=colour)
    page.text(500, win[1] + 26, "Settings - Acme Notes", font(14, "Sans-Bold"), UI_TEXT, "ms")
    page.draw.line((win[0], win[1] + 40, win[2], win[1] + 40), fill=(214, 216, 220))

    sidebar_right = win[0] + 220
    page.draw.rectangle((win[0] + 1, win[1] + 41, sidebar_right, win[3] - 10), fill=(247, 248, 250))
    page.draw.line((sidebar_right, win[1] + 41, sidebar_right, win[3] - 1), fill=(214, 216, 220))
    menu = ["General", "Appearance", "Notifications", "Privacy", "Accounts", "Sync", "Advanced"]
    y = win[1] + 90
    for item in menu:
        selected = item == "Notifications"
        if selected:
            page.draw.rounded_rectangle(
                (win[0] + 12, y - 22, sidebar_right - 12, y + 10), radius=6, fill=(225, 236, 253)
            )
        page.text(
            win[0] + 28,
            y,
            item,
            font(15, "Sans-Bold" if selected else "Sans"),
            ACCENT if selected else UI_TEXT,
        )
        y += 42

    x0 = sidebar_right + 36
    x1 = win[2] - 36
    page.text(x0, win[1] + 92, "Notifications", font(16, "Sans-Bold"), UI_TEXT)
    page.text(
        x0, win[1] + 118, "Choose how and when Acme Notes gets your attention.", font(13), UI_MUTED
    )
    toggles = [
        ("Enable desktop notifications", "Show a banner when a shared note changes.", True),
        ("Play a sound for new comments", "Uses the system alert sound.", False),
        ("Show message previews", "Hide previews on the lock screen for privacy.", True),
        (
            "Do not disturb from 22:00 to 07:00",
            "Notifications are collected and shown later.",
            False,
        ),
    ]
    y = win[1] + 175
    for label, hint, on in toggles:
        page.text(x0, y, label, font(15), UI_TEXT)
        page.text(x0, y + 22, hint, font(13), UI_MUTED)
        _toggle(page, x1 - 44, y - 16, on)
        page.draw.line((x0, y + 40, x1, y + 40), fill=(232, 234, 237))
        y += 72
    page.row(y + 8, [Piece(x0, "Email digest", font(15), UI_TEXT)])
    page.draw.rounded_rectangle(
        (x1 - 160, y - 16, x1, y + 16), radius=6, outline=(190, 194, 200), fill=(255, 255, 255)
    )
    page.text(x1 - 148, y + 6, "Weekly", font(14), UI_TEXT)
    page.draw.polygon(((x1 - 24, y - 3), (x1 - 12, y - 3), (x1 - 18, y + 4)), fill=UI_MUTED)

    by = win[3] - 60
    page.draw.rounded_rectangle(
        (x1 - 230, by, x1 - 130, by + 36), radius=6, outline=(190, 194, 200), fill=(255, 255, 255)
    )
    page.text(x1 - 180, by + 24, "Cancel", font(14), UI_TEXT, "ms")
    page.draw.rounded_rectangle((x1 - 110, by, x1, by + 36), radius=6, fill=ACCENT)
    page.text(x1 - 55, by + 24, "Save", font(14, "Sans-Bold"), (255, 255, 255), "ms")
    return page


def _toggle(page: Canvas, x: int, y: int, on: bool) -> None:
    track = ACCENT if on else (189, 193, 198)
    page.draw.rounded_rectangle((x, y, x + 44, y + 24), radius=12, fill=track)
    knob = x + 22 if on else x + 2
    page.draw.ellipse((knob, y + 2, knob + 20, y + 22), fill=(255, 255, 255))


TERMINAL_LINES = [
    "dev@buildbox:~/projects/eyes$ git status --short",
    " M src/deepseek_eyes/vision/intake/decode.py",
    "?? bench/corpus/generate.py",
    "dev@buildbox:~/projects/eyes$ du -sh /var/log /tmp",
    "412M    /var/log",
    "1.7G    /tmp",
    "dev@buildbox:~/projects/eyes$ python3 -m pytest -q tests/store",
    "........................................                [100%]",
    "40 passed in 2.31s",
    "dev@buildbox:~/projects/eyes$ df -h /",
    "Filesystem      Size  Used Avail Use% Mounted on",
    "/dev/nvme0n1p2  468G  301G  144G  68% /",
    "dev@buildbox:~/projects/eyes$ ",
]


def terminal_screen() -> Canvas:
    """A dark terminal window: title bar, shell prompts, command output with numbers."""
    page = Canvas(960, 480, background=(30, 31, 36))
    page.draw.rectangle((0, 0, 960, 34), fill=(48, 50, 56))
    for i, colour in enumerate(((237, 106, 94), (245, 191, 79), (98, 197, 84))):
        page.draw.ellipse((14 + i * 20, 11, 26 + i * 20, 23), fill=colour)
    page.text(
        480, 23, "dev@buildbox: ~/projects/eyes", font(13, "Sans-Bold"), (200, 202, 208), "ms"
    )
    mono = font(15, "SansMono")
    prompt_colour: Color = (126, 211, 135)
    text_colour: Color = (220, 223, 228)
    y = 66
    for line in TERMINAL_LINES:
        if line.startswith("dev@buildbox"):
            prompt, _, command = line.partition("$ ")
            width = page.draw.textlength(prompt + "$ ", font=mono)
            pieces = [Piece(16, prompt + "$", mono, prompt_colour)]
            if command:
                pieces.append(Piece(16 + width, command, mono, text_colour))
            box = page.row(y, pieces)
            if not command:  # the cursor
                page.draw.rectangle((box[2] + 10, y - 14, box[2] + 19, y + 4), fill=text_colour)
        else:
            page.text(16, y, line, mono, text_colour)
        y += 30
    return page


def web_screen() -> Canvas:
    """A product page: nav bar, headline, price, discount badge and a buy button."""
    page = Canvas(1200, 780)
    page.draw.rectangle((0, 0, 1200, 64), fill=(17, 24, 39))
    page.text(40, 41, "Northwind", font(22, "Sans-Bold"), (255, 255, 255))
    nav_font = font(15)
    page.row(
        39,
        [
            Piece(560, "Home", nav_font, (209, 213, 219)),
            Piece(640, "Laptops", nav_font, (209, 213, 219)),
            Piece(740, "Deals", nav_font, (209, 213, 219)),
            Piece(820, "Support", nav_font, (209, 213, 219)),
        ],
    )
    page.text(1160, 39, "Cart (2)", font(15, "Sans-Bold"), (255, 255, 255), "rs")
    page.text(40, 104, "Home / Laptops / Aurora 14 Pro", font(13), UI_MUTED)

    # Product photo placeholder: a grey panel with a drawn laptop, no text.
    page.draw.rounded_rectangle((40, 130, 560, 610), radius=12, fill=(243, 244, 246))
    page.draw.rounded_rectangle((140, 250, 460, 450), radius=8, fill=(55, 65, 81))
    page.draw.rectangle((152, 262, 448, 438), fill=(96, 165, 250))
    page.draw.polygon(((110, 455), (490, 455), (510, 480), (90, 480)), fill=(156, 163, 175))

    x = 620
    page.text(x, 180, "Aurora 14 Pro Laptop", font(36, "Sans-Bold"), UI_TEXT)
    page.text(x, 216, "14 inch 2.8K display, 32 GB memory, 1 TB SSD", font(17), UI_MUTED)
    page.text(x, 290, "$1,299.00", font(34, "Sans-Bold"), UI_TEXT)
    page.draw.rounded_rectangle((x + 200, 262, x + 300, 296), radius=17, fill=(220, 38, 38))
    page.text(x + 250, 286, "15% off", font(16, "Sans-Bold"), (255, 255, 255), "ms")
    page.text(x, 326, "Was $1,529.00. Free delivery by Friday, March 21.", font(15), UI_MUTED)
    bullets = [
        "Up to 18 hours of battery life",
        "Weighs 1.3 kg, 15.9 mm thin",
        "2 year warranty included",
    ]
    y = 382
    for bullet in bullets:
        page.draw.ellipse((x, y - 10, x + 7, y - 3), fill=UI_TEXT)
        page.text(x + 20, y, bullet, font(16), UI_TEXT)
        y += 32
    page.draw.rounded_rectangle((x, 500, x + 260, 556), radius=8, fill=ACCENT)
    page.text(x + 130, 535, "Add to cart", font(18, "Sans-Bold"), (255, 255, 255), "ms")
    page.text(x + 290, 535, "In stock: 7 left", font(15), (21, 128, 61))
    page.draw.line((0, 660, 1200, 660), fill=(229, 231, 235))
    page.text(
        40,
        710,
        "Secure checkout. 30 day returns. Questions? support@northwind.example",
        font(14),
        UI_MUTED,
    )
    return page


def dashboard_screen() -> Canvas:
    """A sales dashboard: KPI tiles (label and value on one row), a bar chart, a table."""
    page = Canvas(1200, 760, background=(243, 244, 246))
    page.draw.rectangle((0, 0, 1200, 60), fill=(255, 255, 255))
    page.text(32, 38, "Sales Overview", font(22, "Sans-Bold"), UI_TEXT)
    page.text(1168, 36, "March 2025 | Updated 09:15", font(14), UI_MUTED, "rs")
    kpis = [
        ("Revenue", "48,213 EUR", "+8.1% vs February", (21, 128, 61)),
        ("Users", "1,204", "+56 new this month", (21, 128, 61)),
        ("Churn", "2.4%", "-0.3 points", (21, 128, 61)),
        ("Orders", "3,917", "-1.2% vs February", (185, 28, 28)),
    ]
    tile_w, gap, x = 266, 22, 32
    for label, value, delta, delta_colour in kpis:
        page.draw.rounded_rectangle((x, 84, x + tile_w, 184), radius=10, fill=(255, 255, 255))
        page.row(
            128,
            [
                Piece(x + 20, label, font(16), UI_MUTED),
                Piece(x + tile_w - 20, value, font(16, "Sans-Bold"), UI_TEXT, "rs"),
            ],
        )
        page.text(x + 20, 162, delta, font(14), delta_colour)
        x += tile_w + gap

    # Bar chart panel.
    page.draw.rounded_rectangle((32, 208, 740, 728), radius=10, fill=(255, 255, 255))
    page.text(56, 246, "Monthly revenue (EUR)", font(16, "Sans-Bold"), UI_TEXT)
    months = ["Oct", "Nov", "Dec", "Jan", "Feb", "Mar"]
    values = [35_200, 39_870, 51_040, 41_300, 44_610, 48_213]
    base, scale = 660, 340 / 60_000
    for tick in (60_000, 40_000, 20_000, 0):  # top to bottom, the truth order
        ty = base - tick * scale
        page.draw.line((130, ty, 716, ty), fill=(229, 231, 235))
        page.text(116, ty + 5, f"{tick:,}", font(13), UI_MUTED, "rs")
    pieces: list[Piece] = []
    for i, (month, monthly) in enumerate(zip(months, values, strict=True)):
        cx = 180 + i * 92
        page.draw.rectangle((cx - 26, base - monthly * scale, cx + 26, base), fill=(96, 165, 250))
        pieces.append(Piece(cx, month, font(14), UI_MUTED, "ms"))
    page.row(base + 32, pieces)

    # Top regions table.
    page.draw.rounded_rectangle((764, 208, 1168, 728), radius=10, fill=(255, 255, 255))
    page.text(788, 246, "Top regions", font(16, "Sans-Bold"), UI_TEXT)
    regions = [
        ("Region", "Revenue", "Share"),
        ("Germany", "18,940", "39.3%"),
        ("France", "11,072", "23.0%"),
        ("Netherlands", "7,815", "16.2%"),
        ("Spain", "6,204", "12.9%"),
        ("Other", "4,182", "8.7%"),
    ]
    y = 296
    for i, (region, revenue, share) in enumerate(regions):
        face = font(14, "Sans-Bold") if i == 0 else font(15)
        colour = UI_MUTED if i == 0 else UI_TEXT
        page.row(
            y,
            [
                Piece(788, region, face, colour),
                Piece(1040, revenue, face, colour, "rs"),
                Piece(1144, share, face, colour, "rs"),
            ],
        )
        page.draw.line((788, y + 14, 1144, y + 14), fill=(229, 231, 235))
        y += 44
    page.text(788, 700, "Churn is measured on paid accounts.", font(13), UI_MUTED)
    return page


# --------------------------------------------------------------------------- output


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str
    image: Image.Image
    lines: list[str]


def build_corpus() -> list[Entry]:
    """Every corpus image with its truth, in file-name order."""
    clean = receipt()
    out = [
        Entry("01_receipt.png", "document", clean.image, clean.lines),
        Entry("02_receipt_degraded.png", "document", degrade(clean.image), clean.lines),
    ]
    for name, kind, make in (
        ("03_letter.png", "document", letter),
        ("04_invoice_table.png", "document", invoice_table),
        ("05_settings_light.png", "screen", settings_screen),
        ("06_terminal_dark.png", "screen", terminal_screen),
        ("07_web_product.png", "screen", web_screen),
        ("08_dashboard.png", "screen", dashboard_screen),
    ):
        canvas = make()
        out.append(Entry(name, kind, canvas.image, canvas.lines))
    return out


def main() -> None:
    truth: dict[str, dict[str, object]] = {}
    for entry in build_corpus():
        path = HERE / entry.name
        entry.image.save(path, format="PNG", optimize=True)
        size = path.stat().st_size
        if size > MAX_PNG_BYTES:
            raise SystemExit(f"{entry.name} is {size} bytes, over the {MAX_PNG_BYTES} byte cap")
        truth[entry.name] = {"kind": entry.kind, "lines": entry.lines}
        print(
            f"{entry.name}: {entry.image.width}x{entry.image.height} "
            f"{size // 1024} KB {len(entry.lines)} lines"
        )
    (HERE / "truth.json").write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    examples = ROOT / "examples"
    examples.mkdir(exist_ok=True)
    shutil.copyfile(HERE / "01_receipt.png", examples / "receipt.png")


if __name__ == "__main__":
    main()
