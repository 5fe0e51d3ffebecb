"""Bounded image-URL download against a real loopback HTTP server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from deepseek_eyes.errors import TurnError
from deepseek_eyes.gateway.fetch import fetch_image

pytestmark = pytest.mark.anyio

BODY = b"\x89PNG" + b"x" * 1000


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/img.png":
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)
        elif self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/img.png")
            self.end_headers()
        elif self.path.startswith("/loop"):
            self.send_response(307)
            self.send_header("Location", f"/loop{len(self.path)}")
            self.end_headers()
        else:
            self.send_response(404)
            self.end_headers()

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=10)


async def test_fetches_within_limits(server: str) -> None:
    data = await fetch_image(f"{server}/img.png", max_bytes=10_000, timeout=5, allow_private=True)
    assert data == BODY
    followed = await fetch_image(f"{server}/redirect", max_bytes=10_000, timeout=5,
                                 allow_private=True)
    assert followed == BODY


@pytest.mark.parametrize(
    ("path", "max_bytes", "detail"),
    [("/img.png", 100, "limit"), ("/missing", 10_000, "status"), ("/loop", 10_000, "redirects")],
)
async def test_refusals_have_one_code(server: str, path: str, max_bytes: int, detail: str) -> None:
    with pytest.raises(TurnError) as info:
        await fetch_image(f"{server}{path}", max_bytes=max_bytes, timeout=5, allow_private=True)
    assert info.value.code == "RUNTIME_IMAGE_FETCH_FAILED"
    assert detail in info.value.details


async def test_private_addresses_are_refused_by_default(server: str) -> None:
    with pytest.raises(TurnError) as info:
        await fetch_image(f"{server}/img.png", max_bytes=10_000, timeout=5)
    assert info.value.details["reason"] == "private"
    with pytest.raises(TurnError):
        await fetch_image("http://user:pw@example.test/x.png", max_bytes=10, timeout=5)


# A "public" host and a victim on loopback, in a network namespace of their own: 1.2.3.4 is
# a global address there, so the default guard lets the first hop through and must stop
# the redirect into the gateway's own network. The victim records every request it gets.
_NETNS_SCRIPT = r"""
import asyncio, json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from deepseek_eyes.errors import TurnError
from deepseek_eyes.gateway.fetch import fetch_image

hits = []

class Victim(BaseHTTPRequestHandler):
    def do_GET(self):
        hits.append(self.path)
        self.send_response(200); self.end_headers(); self.wfile.write(b"secret")
    def log_message(self, *a): pass

victim = ThreadingHTTPServer(("127.0.0.1", 0), Victim)
vport = victim.server_address[1]

class Public(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/img.png":
            self.send_response(200); self.end_headers(); self.wfile.write(b"\x89PNGpublic")
        else:
            target = {"/to-private": f"http://127.0.0.1:{vport}/secret",
                      "/to-localhost": f"http://localhost:{vport}/secret",
                      "/to-mapped": f"http://[::ffff:127.0.0.1]:{vport}/secret",
                      "/to-public": "/img.png"}[self.path]
            self.send_response(302); self.send_header("Location", target); self.end_headers()
    def log_message(self, *a): pass

public = ThreadingHTTPServer(("1.2.3.4", 0), Public)
for s in (victim, public):
    threading.Thread(target=s.serve_forever, daemon=True).start()
base = f"http://1.2.3.4:{public.server_address[1]}"

async def main():
    out = {}
    for path in ("/img.png", "/to-public", "/to-private", "/to-localhost", "/to-mapped"):
        try:
            got = await fetch_image(base + path, max_bytes=1000, timeout=5)
            out[path] = got.decode("latin-1")
        except TurnError as exc:
            out[path] = exc.details.get("reason") or exc.code
    out["victim_hits"] = hits
    print(json.dumps(out))

asyncio.run(main())
"""


def test_a_public_page_cannot_redirect_the_fetch_into_the_gateways_network(
    tmp_path: Path,
) -> None:
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if unshare is None or ip is None:
        pytest.fail("unshare and ip (util-linux, iproute2) are needed for a network namespace")
    script = tmp_path / "netns_fetch.py"
    script.write_text(_NETNS_SCRIPT)
    done = subprocess.run(  # noqa: S603 - our own script in a namespace of its own
        [unshare, "-rn", "sh", "-c",
         f"{ip} link set lo up && {ip} addr add 1.2.3.4/32 dev lo"
         f" && exec {sys.executable} {script}"],
        capture_output=True, text=True, timeout=60, check=False, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen["/img.png"] == "\x89PNGpublic"
    assert seen["/to-public"] == "\x89PNGpublic"  # a redirect to a public page is followed
    for path in ("/to-private", "/to-localhost", "/to-mapped"):
        assert seen[path] == "private", path
    assert seen["victim_hits"] == []  # the gateway's own network saw nothing
