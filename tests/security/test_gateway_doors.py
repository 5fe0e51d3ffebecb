"""The gateway's doors, tried as a web page and a rebinding attacker would.

Attacker model: the user runs ``deepseek-eyes serve`` on loopback with no key (the default)
and visits any web page. That page runs in the user's Chromium and may send requests to
``127.0.0.1:<gateway port>`` of every kind a page can make, from its own origin (another
loopback port here, the closest origin a real attack can have) or from a DNS name it
controls that it rebinds to 127.0.0.1. It must not reach the upstream (spend the user's
key) nor leave anything in the session store. Proof by observation: the loopback upstream
counts every request it receives, and must count none.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import require_module
from inprocess_gateway import InProcessGateway, serve_in_process
from runtime.upstream import LoopbackUpstream

CHAT = "/v1/chat/completions"
BODY = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi"}]}
KEY = "96tMVVRXYUs2Eslmx3e6GVThSkhTgDa3ACN4gI4EJqw"
Gateway = InProcessGateway


def upstream_requests(upstream: LoopbackUpstream) -> int:
    """Every request the upstream received: the victim's own count."""
    return upstream.chat_calls + upstream.models_calls


@contextlib.contextmanager
def serve(upstream: LoopbackUpstream, *, key: str | None = None,
          gateway: dict[str, Any] | None = None) -> Iterator[InProcessGateway]:
    with serve_in_process({"base_url": upstream.base_url, "model": "deepseek-v4-pro"},
                          gateway=gateway, key=key) as door:
        yield door


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


@pytest.fixture
def gateway(upstream: LoopbackUpstream, isolated_home: Path) -> Iterator[Gateway]:
    upstream.reset()
    with serve(upstream) as door:
        yield door


def _code(response: httpx.Response) -> str:
    return str(response.json()["error"]["code"])


# -- DNS rebinding: a Host the attacker's DNS name puts there ------------------------------

_LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
_ATTACKER_HOSTS = st.one_of(
    st.builds(lambda a, b, tld: f"{a}.{b}.{tld}", _LABEL, _LABEL,
              st.sampled_from(["com", "test", "io", "localhost.evil", "nip.io"])),
    st.sampled_from(["127.0.0.1.nip.io", "localhost.attacker.test", "127.0.0.1.", "localhost.",
                     "0.0.0.0",  # noqa: S104 - a Host an attacker sends, not a bind
 "[::ffff:127.0.0.1]", "2130706433", "127.1", "LOCALHOST",
                     "127.0.0.1@evil.test", "evil.test#127.0.0.1", ""]),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(host=_ATTACKER_HOSTS, with_port=st.booleans())
def test_a_rebinding_host_is_refused_before_anything_runs(
    gateway: Gateway, upstream: LoopbackUpstream, host: str, with_port: bool
) -> None:
    value = f"{host}:{gateway.port}" if with_port and host else host
    response = gateway.http.post(CHAT, json=BODY, headers={"Host": value})
    assert response.status_code == 421, (value, response.text)
    assert _code(response) == "GATEWAY_FORBIDDEN"
    assert upstream_requests(upstream) == 0
    assert gateway.sessions() == []


def test_loopback_names_are_served(gateway: Gateway) -> None:
    for host in (f"127.0.0.1:{gateway.port}", f"localhost:{gateway.port}", "127.0.0.1"):
        response = gateway.http.post(CHAT, json=BODY, headers={"Host": host})
        assert response.status_code == 200, (host, response.text)


# -- what a page can send: an Origin, fetch metadata, a body that is not JSON -----------------

_ORIGINS = st.one_of(
    st.builds(lambda port: f"http://127.0.0.1:{port}", st.integers(1, 65535)),
    st.builds(lambda port: f"http://localhost:{port}", st.integers(1, 65535)),
    st.builds(lambda label: f"https://{label}.example", _LABEL),
    st.just("null"),
)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(origin=_ORIGINS)
def test_a_web_page_origin_is_refused_by_default(
    gateway: Gateway, upstream: LoopbackUpstream, origin: str
) -> None:
    response = gateway.http.post(CHAT, json=BODY, headers={"Origin": origin})
    assert response.status_code == 403
    assert _code(response) == "GATEWAY_FORBIDDEN"
    assert upstream_requests(upstream) == 0


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
@pytest.mark.parametrize("mode", ["no-cors", "navigate", "cors"])
def test_a_request_a_browser_marks_as_another_sites_is_refused(
    gateway: Gateway, upstream: LoopbackUpstream, site: str, mode: str
) -> None:
    # An <img> or a navigation carries no Origin; the fetch metadata still names its site.
    response = gateway.http.get("/v1/models", headers={"Sec-Fetch-Site": site,
                                                        "Sec-Fetch-Mode": mode})
    assert response.status_code == 403
    assert _code(response) == "GATEWAY_FORBIDDEN"
    assert upstream_requests(upstream) == 0


_NOT_JSON = st.one_of(
    st.sampled_from(["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                     "multipart/form-data; boundary=x", "text/json", "application/json-patch+json",
                     "application/jsonx", "application/x-json", ""]),
    st.from_regex(r"(text|application|multipart)/[a-z+.-]{1,20}", fullmatch=True).filter(
        lambda v: v != "application/json"),
)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content_type=_NOT_JSON)
def test_a_body_a_page_can_send_without_a_preflight_is_refused(
    gateway: Gateway, upstream: LoopbackUpstream, content_type: str
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    response = gateway.http.post(CHAT, content=json.dumps(BODY), headers=headers)
    assert response.status_code == 415, (content_type, response.text)
    assert _code(response) == "GATEWAY_UNSUPPORTED_MEDIA_TYPE"
    assert upstream_requests(upstream) == 0
    assert gateway.sessions() == []


@pytest.mark.parametrize("content_type", ["application/json", "Application/JSON",
                                          "application/json; charset=utf-8"])
def test_json_in_any_spelling_is_served(gateway: Gateway, content_type: str) -> None:
    response = gateway.http.post(CHAT, content=json.dumps(BODY),
                                 headers={"Content-Type": content_type})
    assert response.status_code == 200, response.text


def test_an_origin_named_in_the_settings_is_served(upstream: LoopbackUpstream,
                                                   isolated_home: Path) -> None:
    upstream.reset()
    with serve(upstream, gateway={"allowed_origins": ["http://localhost:3000"]}) as door:
        ok = door.http.post(CHAT, json=BODY, headers={"Origin": "http://localhost:3000",
                                                       "Sec-Fetch-Site": "same-site"})
        assert ok.status_code == 200, ok.text
        other = door.http.post(CHAT, json=BODY, headers={"Origin": "http://localhost:3001"})
        assert other.status_code == 403


# -- the key: the scheme in any case, a rate per key -----------------------------------------

@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scheme=st.sampled_from(["bearer", "BEARER", "Bearer", "bEaReR"]),
       spaces=st.integers(1, 3))
def test_the_bearer_scheme_is_case_insensitive(
    upstream: LoopbackUpstream, isolated_home: Path, scheme: str, spaces: int
) -> None:
    with serve(upstream, key=KEY) as door:
        auth = f"{scheme}{' ' * spaces}{KEY}"
        assert door.http.get("/v1/models", headers={"Authorization": auth}).status_code == 200
        for wrong in (f"Basic {KEY}", f"Token {KEY}", KEY, f"{scheme} {KEY[:-1]}",
                      f"{scheme}{KEY}"):
            refused = door.http.get("/v1/models", headers={"Authorization": wrong})
            assert refused.status_code == 401, wrong
            assert _code(refused) == "GATEWAY_UNAUTHORIZED"


def test_calls_are_rate_limited_per_key(upstream: LoopbackUpstream, isolated_home: Path) -> None:
    upstream.reset()
    # One a minute: the bucket holds its burst of 10 and refills a token a minute, so no
    # refill lands within the test however slow the machine.
    with serve(upstream, key=KEY, gateway={"rate_limit_per_minute": 1}) as door:
        auth = {"Authorization": f"Bearer {KEY}"}
        statuses = [door.http.get("/healthz", headers=auth).status_code for _ in range(13)]
        assert statuses == [200] * 10 + [429] * 3
        limited = door.http.get("/v1/models", headers=auth)
        assert limited.status_code == 429
        assert _code(limited) == "GATEWAY_RATE_LIMITED"
        assert int(limited.headers["retry-after"]) >= 1


# -- a real page in a real Chromium -------------------------------------------------------------

_ATTACK = """<!doctype html><meta charset=utf-8><title>attacker</title>
<body><iframe name=sink></iframe>
<form id=f method=POST enctype=text/plain target=sink action="{gw}/v1/chat/completions">
<input name='{{"model":"deepseek-v4-pro","messages":[{{"role":"user","content":"x' value='"}}]}}'>
</form>
<img src="{gw}/v1/models"><link rel=stylesheet href="{gw}/v1/models">
<script>
const gw = "{gw}", body = JSON.stringify({body});
const tries = [
  fetch(gw + "/v1/chat/completions", {{method: "POST", mode: "no-cors",
    headers: {{"Content-Type": "text/plain"}}, body}}),
  fetch(gw + "/v1/chat/completions", {{method: "POST",
    headers: {{"Content-Type": "application/json"}}, body}}),
  fetch(gw + "/v1/models", {{mode: "no-cors"}}),
  new Promise(done => {{ const x = new XMLHttpRequest();
    x.open("POST", gw + "/v1/chat/completions");
    x.setRequestHeader("Content-Type", "text/plain"); x.onloadend = done; x.send(body); }}),
  Promise.resolve(navigator.sendBeacon(gw + "/v1/chat/completions",
    new Blob([body], {{type: "text/plain"}}))),
];
document.getElementById("f").submit();
Promise.allSettled(tries).then(() => {{ document.title = "done"; }});
</script>"""


class _Page(http.server.BaseHTTPRequestHandler):
    html = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.html)))
        self.end_headers()
        self.wfile.write(self.html)

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextlib.contextmanager
def attacker_site(html: str) -> Iterator[int]:
    handler = type("Attack", (_Page,), {"html": html.encode()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _chromium(playwright: Any, *args: str) -> Any:
    from deepseek_eyes.browser.session import find_chromium
    from deepseek_eyes.settings import BrowserSettings

    return playwright.chromium.launch(
        executable_path=find_chromium(BrowserSettings()), headless=True,
        args=["--no-sandbox", "--disable-gpu", *args])


@pytest.mark.parametrize("page_host", ["127.0.0.1", "attacker.test"])
def test_a_page_on_another_origin_reaches_nothing(
    gateway: Gateway, upstream: LoopbackUpstream, page_host: str
) -> None:
    """``attacker.test`` resolves to 127.0.0.1 in this Chromium (a rebinding attacker's name):
    its requests to ``attacker.test:<gateway port>`` carry that Host and are refused too."""
    sync_api = require_module("playwright.sync_api")
    gw = f"http://{page_host}:{gateway.port}"
    html = _ATTACK.format(gw=gw, body=json.dumps(BODY))
    with attacker_site(html) as port, sync_api.sync_playwright() as playwright:
        browser = _chromium(playwright, "--host-resolver-rules=MAP attacker.test 127.0.0.1")
        try:
            page = browser.new_page()
            page.goto(f"http://{page_host}:{port}/")
            page.wait_for_function("document.title === 'done'", timeout=20_000)
            # The form's navigation lands in the iframe; let it finish before counting.
            page.wait_for_load_state("load")
        finally:
            browser.close()
    assert upstream_requests(upstream) == 0
    assert gateway.sessions() == []
    # The same gateway still serves a client that is not a web page.
    assert gateway.http.post(CHAT, json=BODY).status_code == 200
    assert upstream_requests(upstream) == 1
