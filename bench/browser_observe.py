"""First observation of a page: our compact observation vs Playwright MCP's browser_snapshot.

    .venv/bin/python bench/browser_observe.py [--runs N] [--page-chars N] [URL_OR_DOC_PATH...]

Both drive the same Debian ``chromium`` on the same pages, served over loopback HTTP: the
test pages of ``tests/browser/site.py`` (a form, a 50-row paginated table, an iframe with
shadow DOM, a long document) and large real documentation pages from Debian's HTML docs
packages when installed (``/usr/share/doc/nodejs/api/*.html``, valgrind's and libxslt's
manuals; ``apt-get install python3-doc`` adds Python's). The baseline is Playwright MCP as
shipped inside the pip package (``playwright/driver/node …/package/cli.js mcp``), driven by
the official MCP SDK client over stdio.

Printed per page:

* ``chars``: characters of our first observation (``browser_navigate``'s answer: the
  viewport page of the compact view) vs the text of ``browser_snapshot`` (MCP's
  ``browser_navigate`` writes its snapshot to a file and returns a few lines);
* ``observe_ms``: median latency of a fresh observation of the loaded page
  (``browser_observe`` vs ``browser_snapshot``), both including their own transport;
* ``first_ms``: navigate plus first observation, end to end (``browser_navigate`` vs
  ``browser_navigate`` + ``browser_snapshot``);
* ``tokens``: our first observation in estimated tokens (chars / 4; target ≤ 25k), and how
  many controls the page has and over how many pages they are all addressable.

Ratios are ours / baseline: below 1 is smaller or faster.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import http.server
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import playwright
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from browser.site import Site
from deepseek_eyes.browser.service import BrowserService
from deepseek_eyes.settings import BrowserSettings

DRIVER = Path(playwright.__file__).parent / "driver"
SITE_PAGES = ("/form.html", "/table.html", "/frames.html", "/long.html")
DOC_PAGES = (
    "/usr/share/doc/nodejs/api/url.html",
    "/usr/share/doc/nodejs/api/fs.html",
    "/usr/share/doc/valgrind/html/manual-core.html",
    "/usr/share/doc/libxslt1-dev/html/xslt.html",
    "/usr/share/doc/python3/html/library/functions.html",
    "/usr/share/doc/python3/html/library/stdtypes.html",
)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *_: Any) -> None:
        return


def serve_docs() -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory="/usr/share/doc")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def ours(url: str, runs: int, page_chars: int, tmp: Path) -> dict[str, Any]:
    service = BrowserService(BrowserSettings(observe_page_chars=page_chars),
                             downloads_dir=tmp / "downloads")
    try:
        await service.call("browser_navigate", {"url": "about:blank"})
        started = time.perf_counter()
        first = await service.call("browser_navigate", {"url": url})
        first_ms = (time.perf_counter() - started) * 1000
        if first.is_error:
            raise RuntimeError(first.text)
        latencies = []
        for _ in range(runs):
            started = time.perf_counter()
            again = await service.call("browser_observe", {})
            latencies.append((time.perf_counter() - started) * 1000)
        state = service.book.current
        controls = len(state.view.controls) if state else 0
        return {"chars": len(first.text), "first_ms": first_ms,
                "observe_ms": statistics.median(latencies), "controls": controls,
                "pages": again.data.get("pages", 1)}
    finally:
        await service.aclose()


async def baseline(url: str, runs: int, tmp: Path) -> dict[str, Any]:
    params = StdioServerParameters(
        command=str(DRIVER / "node"),
        args=[str(DRIVER / "package" / "cli.js"), "mcp", "--headless", "--isolated",
              "--no-sandbox", "--executable-path", "/usr/bin/chromium"],
        env={**os.environ}, cwd=str(tmp))  # it writes snapshot files into its directory
    async with Client(params, mode="legacy") as client:
        await client.call_tool("browser_navigate", {"url": "about:blank"})
        started = time.perf_counter()
        await client.call_tool("browser_navigate", {"url": url})
        snapshot = await client.call_tool("browser_snapshot", {})
        first_ms = (time.perf_counter() - started) * 1000
        latencies = []
        for _ in range(runs):
            started = time.perf_counter()
            await client.call_tool("browser_snapshot", {})
            latencies.append((time.perf_counter() - started) * 1000)
        text = text_of(snapshot)
        return {"chars": len(text), "first_ms": first_ms,
                "observe_ms": statistics.median(latencies), "refs": text.count("[ref=")}


def ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "n/a"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3, help="observations timed per page")
    parser.add_argument("--page-chars", type=int, default=BrowserSettings().observe_page_chars)
    parser.add_argument("pages", nargs="*", help="URLs or /usr/share/doc paths (default: all)")
    args = parser.parse_args()
    docs, docs_url = serve_docs()
    with Site() as site, tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        targets: list[tuple[str, str]] = []
        wanted = args.pages or [*SITE_PAGES, *DOC_PAGES]
        for item in wanted:
            if item.startswith("http"):
                targets.append((item, item))
            elif item.startswith("/usr/share/doc/"):
                if Path(item).is_file():
                    targets.append((item.removeprefix("/usr/share/doc/"),
                                    docs_url + item.removeprefix("/usr/share/doc")))
                else:
                    print(f"# skipped {item}: not installed", file=sys.stderr)
            else:
                targets.append((f"site{item}", site.url(item)))
        total_ours = total_base = 0
        for name, url in targets:
            mine = await ours(url, args.runs, args.page_chars, tmp)
            theirs = await baseline(url, args.runs, tmp)
            total_ours += mine["chars"]
            total_base += theirs["chars"]
            print(f"{name} chars: ours={mine['chars']} baseline={theirs['chars']} "
                  f"ratio={ratio(mine['chars'], theirs['chars'])}")
            print(f"{name} observe_ms: ours={mine['observe_ms']:.0f} "
                  f"baseline={theirs['observe_ms']:.0f} "
                  f"ratio={ratio(mine['observe_ms'], theirs['observe_ms'])}")
            print(f"{name} first_ms: ours={mine['first_ms']:.0f} "
                  f"baseline={theirs['first_ms']:.0f} "
                  f"ratio={ratio(mine['first_ms'], theirs['first_ms'])}")
            print(f"{name} tokens: ours={mine['chars'] // 4} baseline={theirs['chars'] // 4} "
                  f"controls={mine['controls']} over pages={mine['pages']} "
                  f"baseline_refs={theirs['refs']}")
        print(f"all chars: ours={total_ours} baseline={total_base} "
              f"ratio={ratio(total_ours, total_base)}")
    docs.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
