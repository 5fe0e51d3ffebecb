"""Browser latency with the request policy (the proxy every request goes through) on vs off.

    .venv/bin/python bench/browser_policy.py [--runs N]

Both run the same Debian ``chromium`` on the same loopback pages of ``tests/browser/site.py``
plus a page that loads 30 sub-resources (images, a stylesheet, scripts and fetches), one
browser each, in the same process, in alternating rounds. Ours: the proxy on (every request,
hop and socket decided by the policy; loopback let through with
``browser.allow_private_network`` so the pages load). Baseline: the same session launched
without the proxy (``request_proxy=False``, the benchmark's switch only).

Printed per page:

* ``navigate_ms``: median ``browser_navigate`` (load, settle, first observation) — the
  requests of the load all pass the proxy;
* ``observe_ms``: median ``browser_observe`` of the loaded page.

Ratio = ours / baseline (target: at most 1.1).
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from browser.site import Site
from deepseek_eyes.browser.service import BrowserService
from deepseek_eyes.settings import BrowserSettings

PAGES = ("/form.html", "/frames.html", "/table.html")
HEAVY = ("<!doctype html><html><head><title>Heavy</title><link rel=stylesheet href=/s.css>"
         + "".join(f"<script src=/j{n}.js></script>" for n in range(5)) + "</head><body>"
         + "".join(f'<img alt="i{n}" src=/i{n}.svg>' for n in range(20))
         + "<button>Ready</button><script>Promise.all([" + ",".join(
             f'fetch("/f{n}.txt")' for n in range(4)) + "]).then(() => "
         "document.querySelector('button').textContent = 'Loaded')</script></body></html>")
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>'


class _Heavy(http.server.BaseHTTPRequestHandler):
    def log_message(self, *_: Any) -> None:
        return

    def do_GET(self) -> None:
        if self.path == "/heavy.html":
            body, kind = HEAVY.encode(), "text/html"
        elif self.path.endswith(".svg"):
            body, kind = SVG, "image/svg+xml"
        elif self.path.endswith(".css"):
            body, kind = b"body { margin: 1em }", "text/css"
        elif self.path.endswith(".js"):
            body, kind = b"window.n = (window.n || 0) + 1;", "text/javascript"
        else:
            body, kind = b"ok", "text/plain"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


async def measure(service: BrowserService, url: str) -> tuple[float, float]:
    started = time.perf_counter()
    loaded = await service.call("browser_navigate", {"url": url})
    navigate = time.perf_counter() - started
    assert not loaded.is_error, loaded.text
    started = time.perf_counter()
    seen = await service.call("browser_observe", {})
    observe = time.perf_counter() - started
    assert not seen.is_error, seen.text
    return navigate, observe


async def main(runs: int) -> None:
    heavy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Heavy)
    threading.Thread(target=heavy.serve_forever, daemon=True).start()
    settings = BrowserSettings(allow_private_network=True, settle_timeout=3.0)
    with Site() as site, tempfile.TemporaryDirectory() as tmp:
        ours = BrowserService(settings, downloads_dir=Path(tmp) / "a")
        base = BrowserService(settings, downloads_dir=Path(tmp) / "b", request_proxy=False)
        urls = [site.url(p) for p in PAGES]
        urls.append(f"http://127.0.0.1:{heavy.server_address[1]}/heavy.html")
        try:
            for url in urls:  # warm both browsers and caches of the page
                await measure(ours, url)
                await measure(base, url)
            for url in urls:
                times: dict[str, list[tuple[float, float]]] = {"ours": [], "base": []}
                for _ in range(runs):
                    times["ours"].append(await measure(ours, url))
                    times["base"].append(await measure(base, url))
                name = url.rsplit("/", 1)[-1].removesuffix(".html")
                for index, what in enumerate(("navigate_ms", "observe_ms")):
                    mine = statistics.median(t[index] for t in times["ours"]) * 1000
                    theirs = statistics.median(t[index] for t in times["base"]) * 1000
                    print(f"{name} {what}: ours={mine:.1f} baseline={theirs:.1f} "
                          f"ratio={mine / theirs:.2f}")
        finally:
            await ours.aclose()
            await base.aclose()
            heavy.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    asyncio.run(main(parser.parse_args().runs))
