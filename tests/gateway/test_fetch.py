"""Bounded image-URL download against a real loopback HTTP server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


@pytest.mark.parametrize(
    ("path", "max_bytes", "detail"),
    [("/img.png", 100, "limit"), ("/missing", 10_000, "status"), ("/redirect", 10_000, "status")],
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
