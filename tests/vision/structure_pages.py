"""A small generated corpus for the table and interface-element readers, with ground truth.

Every page is HTML drawn by real Chromium (Debian's, through Playwright) and screenshotted
once: tables with and without borders and with merged header cells, and interface screens
(a settings form, a sign-in card) with buttons, text fields, checkboxes, tabs and a banner.
The truth comes from the page itself: a table's cells are generated here with their grid
row and column (a merged cell names its first row and column), and every control carries a
``data-kind`` whose box and text are read back from the DOM after layout, so the truth is
where Chromium actually drew it rather than where we hoped it would land.

Used by ``tests/vision/test_tables.py``, ``tests/vision/test_controls.py`` and
``bench/structure_tables.py``; drawn at run time, so no PNG is kept in the repository.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CONTROL_PAGES",
    "TABLE_PAGES",
    "ControlTruth",
    "Rendered",
    "TableCell",
    "TablePage",
    "chromium_path",
    "render_pages",
]

VIEWPORT = {"width": 1000, "height": 640}


@dataclass(frozen=True)
class TableCell:
    """One cell as drawn: its first grid row and column, its spans and its text."""

    row: int
    col: int
    text: str
    rowspan: int = 1
    colspan: int = 1
    header: bool = False


@dataclass(frozen=True)
class TablePage:
    name: str
    bordered: bool
    cells: tuple[TableCell, ...]
    #: The facts a reader should state: (row name, column name, value).
    facts: tuple[tuple[str, str, float], ...]
    intro: str = "Quarterly figures, as reported to the board."


@dataclass(frozen=True)
class ControlTruth:
    kind: str  # button | text_field | checkbox | tab | banner
    text: str
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels


@dataclass
class Rendered:
    name: str
    png: bytes
    controls: list[ControlTruth] = field(default_factory=list)


def _grid(rows: list[list[str]], header_rows: int = 1) -> tuple[TableCell, ...]:
    return tuple(
        TableCell(r, c, text, header=r < header_rows)
        for r, row in enumerate(rows)
        for c, text in enumerate(row)
    )


_QUARTERS = [
    ["Region", "Q1", "Q2", "Q3", "Q4"],
    ["North", "1180", "1220", "1204", "1310"],
    ["South", "980", "1015", "1050", "990"],
    ["East", "770", "801", "815", "842"],
    ["West", "640", "662", "707", "721"],
]
_PRODUCTS = [
    ["Product", "Units", "Price", "Revenue"],
    ["Keyboard", "312", "$49.00", "$15,288"],
    ["Mouse", "1,024", "$19.50", "$19,968"],
    ["Monitor", "87", "$229.00", "$19,923"],
    ["Headset", "145", "$64.90", "$9,411"],
    ["Webcam", "66", "$39.00", "$2,574"],
]


def _facts(rows: list[list[str]], header_rows: int = 1) -> tuple[tuple[str, str, float], ...]:
    out = []
    for row in rows[header_rows:]:
        for col, text in enumerate(row[1:], start=1):
            value = float(text.replace("$", "").replace(",", ""))
            out.append((row[0], rows[0][col], value))
    return tuple(out)


_MERGED_CELLS = (
    TableCell(0, 0, "Team", rowspan=2, header=True),
    TableCell(0, 1, "2025", colspan=2, header=True),
    TableCell(0, 3, "2026", colspan=2, header=True),
    TableCell(1, 1, "H1", header=True),
    TableCell(1, 2, "H2", header=True),
    TableCell(1, 3, "H1", header=True),
    TableCell(1, 4, "H2", header=True),
    *(
        TableCell(r, c, text)
        for r, row in enumerate(
            [["Alpha", "41", "47", "52", "58"], ["Bravo", "33", "36", "31", "40"],
             ["Charlie", "27", "29", "35", "38"]],
            start=2,
        )
        for c, text in enumerate(row)
    ),
)
_MERGED_FACTS = tuple(
    (name, f"{year} {half}", value)
    for name, values in (("Alpha", (41, 47, 52, 58)), ("Bravo", (33, 36, 31, 40)),
                         ("Charlie", (27, 29, 35, 38)))
    for (year, half), value in zip(
        (("2025", "H1"), ("2025", "H2"), ("2026", "H1"), ("2026", "H2")), values, strict=True
    )
)

TABLE_PAGES: tuple[TablePage, ...] = (
    TablePage("quarters_bordered", True, _grid(_QUARTERS), _facts(_QUARTERS)),
    TablePage("products_borderless", False, _grid(_PRODUCTS), _facts(_PRODUCTS),
              intro="Sales by product in November."),
    TablePage("merged_bordered", True, _MERGED_CELLS, _MERGED_FACTS,
              intro="Tickets closed per team and half-year."),
    TablePage("merged_borderless", False, _MERGED_CELLS, _MERGED_FACTS,
              intro="Tickets closed per team and half-year, without rules."),
)


def _table_html(page: TablePage) -> str:
    rows: dict[int, list[TableCell]] = {}
    for cell in page.cells:
        rows.setdefault(cell.row, []).append(cell)
    body = []
    for index in sorted(rows):
        cells = []
        for cell in sorted(rows[index], key=lambda c: c.col):
            tag = "th" if cell.header else "td"
            spans = (f' rowspan="{cell.rowspan}"' if cell.rowspan > 1 else "") + (
                f' colspan="{cell.colspan}"' if cell.colspan > 1 else "")
            cells.append(f"<{tag}{spans}>{html.escape(cell.text)}</{tag}>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    border = (
        "table{border-collapse:collapse} th,td{border:1px solid #333}"
        if page.bordered else "table{border-collapse:collapse}"
    )
    return f"""<!doctype html><html><head><style>
body{{font-family:'DejaVu Sans',sans-serif;font-size:16px;margin:40px;color:#111;background:#fff}}
{border} th,td{{padding:10px 22px;text-align:left}} th{{font-weight:bold}}
h1{{font-size:24px}}
</style></head><body><h1>{html.escape(page.intro)}</h1>
<table>{"".join(body)}</table>
<p>Figures are unaudited and may change.</p></body></html>"""


_FORM = """<!doctype html><html><head><style>
body{font-family:'DejaVu Sans',sans-serif;font-size:15px;margin:0;background:#fff;color:#222}
.tabs{display:flex;gap:36px;padding:18px 40px 0;border-bottom:1px solid #ccc}
.tab{padding:0 4px 10px}
.tab.active{border-bottom:3px solid #2563eb;color:#2563eb}
.banner{margin:20px 40px;padding:14px 18px;background:#fde68a;border-radius:4px}
form{margin:0 40px}
label.f{display:block;margin:18px 0 6px}
input[type=text],input[type=email]{width:360px;padding:8px 10px;border:1px solid #888;
  border-radius:4px;font-size:15px;font-family:inherit}
.check{display:flex;align-items:center;gap:10px;margin:16px 0}
input[type=checkbox]{width:18px;height:18px;margin:0}
.buttons{margin-top:26px;display:flex;gap:10px}
button{font-size:15px;font-family:inherit;padding:9px 18px;border-radius:4px}
.primary{background:#2563eb;color:#fff;border:1px solid #2563eb}
.secondary{background:#fff;color:#222;border:1px solid #888}
</style></head><body>
<div class="tabs"><span class="tab active" data-kind="tab">General</span>
<span class="tab" data-kind="tab">Security</span><span class="tab" data-kind="tab">Billing</span>
<span class="tab" data-kind="tab">Members</span></div>
<div class="banner" data-kind="banner">Your trial ends in 3 days. Add a payment method.</div>
<form>
<label class="f" for="n">Display name</label>
<input type="text" id="n" value="Ada Lovelace" data-kind="text_field">
<label class="f" for="e">Email address</label>
<input type="email" id="e" placeholder="name@example.com" data-kind="text_field">
<div class="check"><input type="checkbox" id="c1" checked data-kind="checkbox"
  data-text="Send me product updates"><label for="c1">Send me product updates</label></div>
<div class="check"><input type="checkbox" id="c2" data-kind="checkbox"
  data-text="Enable two-factor sign-in"><label for="c2">Enable two-factor sign-in</label></div>
<div class="buttons"><button type="button" class="primary" data-kind="button">Save changes</button>
<button type="button" class="secondary" data-kind="button">Cancel</button></div>
</form></body></html>"""

_SIGN_IN = """<!doctype html><html><head><style>
body{font-family:'DejaVu Sans',sans-serif;font-size:15px;margin:0;background:#f3f4f6;color:#222}
.bar{background:#b91c1c;color:#fff;padding:12px 40px}
.card{width:420px;margin:40px auto;background:#fff;border:1px solid #ddd;border-radius:6px;
  padding:26px 30px}
h2{margin:0 0 10px;font-size:22px}
label.f{display:block;margin:14px 0 6px}
input[type=text],input[type=password]{width:340px;padding:8px 10px;border:1px solid #888;
  border-radius:4px;font-size:15px;font-family:inherit;background:#fff}
.check{display:flex;align-items:center;gap:10px;margin:16px 0}
input[type=checkbox]{width:16px;height:16px;margin:0}
.row{display:flex;gap:12px;margin-top:18px}
button{font-size:15px;font-family:inherit;padding:9px 18px;border-radius:4px}
.primary{background:#15803d;color:#fff;border:1px solid #15803d}
.secondary{background:#fff;color:#222;border:1px solid #888}
</style></head><body>
<div class="bar" data-kind="banner">Sign-in failed: the password was not accepted.</div>
<div class="card"><h2>Sign in</h2>
<label class="f" for="u">Username</label>
<input type="text" id="u" placeholder="Your username" data-kind="text_field">
<label class="f" for="p">Password</label>
<input type="password" id="p" data-kind="text_field">
<div class="check"><input type="checkbox" id="r" data-kind="checkbox" data-text="Remember me">
<label for="r">Remember me</label></div>
<div class="row"><button type="button" class="primary" data-kind="button">Sign in</button>
<button type="button" class="secondary" data-kind="button">Forgot password</button>
<button type="button" class="secondary" data-kind="button">Help</button></div>
</div></body></html>"""

CONTROL_PAGES: dict[str, str] = {"settings_form": _FORM, "sign_in": _SIGN_IN}

_READ_CONTROLS = """() => [...document.querySelectorAll('[data-kind]')].map(e => {
  const r = e.getBoundingClientRect();
  const text = e.dataset.text || (e.tagName === 'INPUT' ? (e.value || e.placeholder || '')
    : e.innerText);
  return [e.dataset.kind, text.trim(), r.left, r.top, r.right, r.bottom];
})"""


_EXTENT = """() => {
  let right = 0, bottom = 0;
  const grow = r => { if (r.width && r.height) {
    right = Math.max(right, r.right); bottom = Math.max(bottom, r.bottom); } };
  for (const e of document.body.querySelectorAll('*')) {
    if (e.matches('table, input, button, [data-kind]')) { grow(e.getBoundingClientRect()); }
    const range = document.createRange();
    range.selectNodeContents(e);
    grow(range.getBoundingClientRect());
  }
  return [Math.ceil(right), Math.ceil(bottom)];
}"""


def chromium_path() -> str | None:
    for candidate in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if Path(candidate).is_file():
            return candidate
    return None


def render_pages(executable: str) -> dict[str, Rendered]:
    """Every table page and interface page, screenshotted by one Chromium launch."""
    from playwright.sync_api import sync_playwright

    pages: dict[str, str] = {p.name: _table_html(p) for p in TABLE_PAGES}
    pages.update(CONTROL_PAGES)
    out: dict[str, Rendered] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=executable, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run",
                  "--font-render-hinting=none"],
        )
        try:
            page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
            for name, markup in pages.items():
                page.set_content(markup)
                # Only the drawn part: OCR time grows with the pixels it is given.
                right, bottom = page.evaluate(_EXTENT)
                clip = {"x": 0, "y": 0, "width": min(VIEWPORT["width"], right + 30),
                        "height": min(VIEWPORT["height"], bottom + 24)}
                rendered = Rendered(name, page.screenshot(type="png", clip=clip))
                if name in CONTROL_PAGES:
                    for kind, text, x0, y0, x1, y1 in page.evaluate(_READ_CONTROLS):
                        rendered.controls.append(ControlTruth(kind, text, (x0, y0, x1, y1)))
                out[name] = rendered
        finally:
            browser.close()
    return out
