"""The documentation site: ``mkdocs build --strict`` (no broken link, anchor or page, as
the test command requires), the generated reference counted against the code (100% of
commands, long options, settings keys and error codes), and screenshots of the home page
and a tutorial taken in real Chromium, saved under build/docs-screenshots/."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from browser.support import require_browser
from deepseek_eyes.docsgen import command_docs, setting_docs
from deepseek_eyes.errors import ERROR_CODES

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "docs-screenshots"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(  # noqa: S603 - mkdocs of this environment, argv list
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def _text(page: Path) -> str:
    return html.unescape(page.read_text(encoding="utf-8"))


def test_every_command_and_option_is_in_the_site(site: Path) -> None:
    page = _text(site / "reference" / "commands.html")
    sections = dict(re.findall(r'<h2 id="([^"]+)">(.*?)<a class="headerlink"', page))
    docs = command_docs()
    missing = [d.path for d in docs if d.path not in sections.values()]
    assert missing == [], f"commands missing from the site: {missing}"
    chunks = re.split(r"<h2 id=", page)
    options = [(d.path, o) for d in docs for o in d.long_options]
    absent = [(path, o) for path, o in options
              if not any(f">{path}<" in c and f"<code>{o}" in c for c in chunks)]
    assert absent == [], f"options missing from their command's section: {absent}"
    print(f"site covers {len(docs)}/{len(docs)} commands and {len(options)}/{len(options)} "
          "long options")


def test_every_settings_key_is_in_the_site(site: Path) -> None:
    page = _text(site / "reference" / "settings.html")
    keys = sorted({d.key for d in setting_docs()})
    missing = [k for k in keys if f"<code>{k}</code>" not in page]
    assert missing == [], f"settings keys missing from the site: {missing}"
    print(f"site covers {len(keys)}/{len(keys)} settings keys")


def test_every_error_code_is_in_the_site(site: Path) -> None:
    page = _text(site / "errors.html")
    missing = [c for c in ERROR_CODES if f"<code>{c}</code>" not in page]
    assert missing == [], f"error codes missing from the site: {missing}"
    print(f"site covers {len(ERROR_CODES)}/{len(ERROR_CODES)} error codes")


def test_site_loads_nothing_from_the_network(site: Path) -> None:
    remote = re.compile(r'<(?:link|script|img)[^>]+(?:href|src)="(?:https?:)?//')
    pages = [p for p in site.rglob("*.html") if remote.search(p.read_text(encoding="utf-8"))]
    assert pages == [], f"pages that load from the network: {pages}"


def _not_blank(path: Path) -> None:
    with Image.open(path) as shot:
        colours = shot.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 16, f"{path} looks blank"


def test_screenshots_in_chromium(site: Path) -> None:
    require_browser()
    from playwright.sync_api import sync_playwright

    from deepseek_eyes.browser.session import find_chromium
    from deepseek_eyes.settings import BrowserSettings

    SHOTS.mkdir(parents=True, exist_ok=True)
    pages = {"home": ("index.html", "DeepSeekEyes"),
             "tutorial-first-run": ("tutorials/first-run.html", "First run, offline")}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(find_chromium(BrowserSettings())),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            requested: list[str] = []
            page.on("request", lambda r: requested.append(r.url))
            for name, (path, heading) in pages.items():
                page.goto((site / path).as_uri())
                assert heading in page.locator("article h1").inner_text()
                target = SHOTS / f"{name}.png"
                page.screenshot(path=str(target), full_page=False)
                _not_blank(target)
        finally:
            browser.close()
    assert [u for u in requested if not u.startswith("file:")] == []
