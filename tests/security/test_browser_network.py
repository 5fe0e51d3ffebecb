"""Red team: a page tries every way a browser sends a request at a host it may not reach.

An attacker page is served on one loopback port (allowed explicitly); a victim listens on
another (not allowed) and records, at the socket level, every TCP connection and UDP
datagram it receives. The page tries navigations, iframes, 302/307 chains from the allowed
host to the victim (iframe, fetch, img, css, script, form POST), fetch, XHR, images, CSS
``@import`` and ``url()``, prefetch/preload/preconnect, WebSocket, EventSource,
``sendBeacon``, a dedicated and a service worker, popups and WebTransport: the victim must
receive nothing, and the refusals must be events, never documents. Hypothesis generates
spellings of loopback and private addresses for the decision function; a handful go through
the real browser; a name that resolves to loopback is refused by its address.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import ipaddress
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from browser.support import require_browser
from browser.support import settings as browser_settings
from deepseek_eyes.browser.hosts import canonical_host, is_private_address
from deepseek_eyes.browser.policy import NavigationPolicy
from deepseek_eyes.browser.proxy import RequestProxy
from deepseek_eyes.browser.service import BrowserService

Make = Callable[..., BrowserService]


# -- the victim: a socket that records everything -----------------------------------------
class Victim:
    """TCP and UDP on one loopback port; every connection and datagram is recorded (and a
    TCP peer gets a page with a button, so a leak would show in an observation)."""

    PAGE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 62\r\n"
            b"Connection: close\r\n\r\n<title>VICTIM</title><button>VICTIM-SECRET-BUTTON</button>")

    def __init__(self) -> None:
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", self.port))
        self.tcp.listen(64)
        self.received: list[str] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True),
                         threading.Thread(target=self._datagrams, daemon=True)]

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.tcp.accept()
            except OSError:
                return
            self.received.append("tcp connection")
            conn.settimeout(2)
            try:
                data = conn.recv(4096)
                self.received.append("tcp: " + data.split(b"\r\n", 1)[0].decode("latin-1"))
                conn.sendall(self.PAGE)
            except OSError:
                pass
            finally:
                conn.close()

    def _datagrams(self) -> None:
        while True:
            try:
                data, _ = self.udp.recvfrom(65536)
            except OSError:
                return
            self.received.append(f"udp datagram ({len(data)} bytes)")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> Victim:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        for sock in (self.tcp, self.udp):
            with_shutdown(sock)


def with_shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


# -- the attacker's site ------------------------------------------------------------------
ATTACK = """<!doctype html><html><head><title>Innocent page</title>
<link rel="prefetch" href="VICTIM/victim/prefetch">
<link rel="preload" as="fetch" crossorigin href="VICTIM/victim/preload">
<link rel="preconnect" href="VICTIM">
<link rel="dns-prefetch" href="VICTIM">
<link rel="stylesheet" href="REDIR302VICTIM/victim/redirect-css">
<style>@import url("VICTIM/victim/css-import");
body { background-image: url("VICTIM/victim/css-url"); }</style>
<script src="VICTIM/victim/script"></script>
<script src="REDIR302VICTIM/victim/redirect-script"></script>
</head><body><h1>Nothing to see</h1>
<img src="VICTIM/victim/img"><img src="REDIR302VICTIM/victim/redirect-img">
<img src="REDIR307VICTIM/victim/redirect-img-307">
<audio src="VICTIM/victim/audio"></audio>
<iframe name="sink" src="VICTIM/victim/iframe"></iframe>
<iframe src="REDIR302VICTIM/victim/redirect-iframe"></iframe>
<iframe src="REDIR307VICTIM/victim/redirect-iframe-307"></iframe>
<form id="direct" method="post" action="VICTIM/victim/form" target="sink">
  <input name="x" value="1"></form>
<form id="hop" method="post" action="REDIR307VICTIM/victim/redirect-form" target="sink">
  <input name="x" value="1"></form>
<a id="go" href="REDIR302VICTIM/victim/redirect-main">Continue</a>
<script>
const V = "VICTIM";
const settle = (p) => Promise.race([p, new Promise(r => setTimeout(r, 4000))]).catch(() => 0);
const tries = [];
tries.push(fetch(V + "/victim/fetch", {mode: "no-cors"}));
tries.push(fetch("REDIR302VICTIM/victim/redirect-fetch", {mode: "no-cors"}));
tries.push(fetch("REDIR307VICTIM/victim/redirect-fetch-307",
                 {mode: "no-cors", method: "POST", body: "x"}));
tries.push(new Promise(done => {
  const x = new XMLHttpRequest(); x.open("GET", V + "/victim/xhr");
  x.onloadend = done; x.send(); }));
tries.push(import(V + "/victim/module.js"));
tries.push(new Promise(done => { const s = new WebSocket("ws://VHOST/victim/ws");
  s.onerror = s.onclose = s.onopen = done; }));
tries.push(new Promise(done => { const e = new EventSource(V + "/victim/sse");
  e.onerror = () => { e.close(); done(); }; e.onopen = done; }));
navigator.sendBeacon(V + "/victim/beacon", "x");
tries.push(new Promise(done => { const w = new Worker("/worker.js");
  w.onmessage = done; w.onerror = done; }));
if (navigator.serviceWorker) {
  tries.push(navigator.serviceWorker.register("/sw.js").then(
    () => fetch("/sw-trigger")));
}
if (window.WebTransport) {
  tries.push((async () => { const t = new WebTransport("https://VHOST/victim/wt");
    await t.ready; })());
}
tries.push(new Promise(done => { const pc = new RTCPeerConnection({iceServers:
  [{urls: "stun:VHOST"}]}); pc.createDataChannel("x");
  pc.onicegatheringstatechange = () => { if (pc.iceGatheringState === "complete") done(); };
  pc.createOffer().then(o => pc.setLocalDescription(o)); }));
window.open(V + "/victim/popup");
window.open("REDIR302VICTIM/victim/redirect-popup");
document.getElementById("direct").submit();
setTimeout(() => document.getElementById("hop").submit(), 100);
Promise.all(tries.map(settle)).then(() => { window.attackDone = true; });
</script></body></html>"""

WORKER = """fetch("VICTIM/victim/worker", {mode: "no-cors"}).catch(() => 0)
  .then(() => fetch("REDIR302VICTIM/victim/redirect-worker", {mode: "no-cors"}))
  .catch(() => 0).then(() => postMessage("done"));"""
SERVICE_WORKER = """self.addEventListener("fetch", e => e.respondWith(
  fetch("VICTIM/victim/service-worker", {mode: "no-cors"})));"""

SPELLINGS = ("[::ffff:127.0.0.1]", "0.0.0.0", "localhost.",  # noqa: S104 - a URL host "2130706433", "0x7f.1", "127.1",
             "LOCALHOST", "017700000001")
SPELL = """<!doctype html><html><head><title>Spellings</title></head><body><script>
window.spelled = Promise.all(SPELLINGS.map((host, i) =>
  fetch("http://" + host + ":VPORT/victim/spell-" + i, {mode: "no-cors"}).then(
    () => "sent", () => "refused")));
</script></body></html>"""


#: A page on the allowed host framing a CDN host's document, directly and by a redirect
#: hop: a frame is a document the model reads, held to allow_hosts, not the CDN list.
CDN_FRAMES = ("<title>frames</title><h1>framed</h1>"
              "<iframe src='http://localhost:APORT/cdn-doc.html'></iframe>"
              "<iframe src='/redirect?code=302&to=http://localhost:APORT/cdn-doc.html'></iframe>")
CDN_DOC = "<title>cdn</title><button>CDN-FRAME-BUTTON</button>"


class Attacker:
    def __init__(self, victim: Victim) -> None:
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                outer.hits.append(parts.path)
                if parts.path == "/redirect":
                    query = parse_qs(parts.query)
                    self.send_response(int(query["code"][0]))
                    self.send_header("Location", query["to"][0])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                bodies = {"/attack.html": (ATTACK, "text/html"),
                          "/spell.html": (SPELL, "text/html"),
                          "/worker.js": (WORKER, "text/javascript"),
                          "/sw.js": (SERVICE_WORKER, "text/javascript"),
                          "/cdn-frames.html": (CDN_FRAMES, "text/html"),
                          "/cdn-doc.html": (CDN_DOC, "text/html")}
                text, kind = bodies.get(parts.path, ("<h1>hello</h1>", "text/html"))
                body = outer.fill(text).encode()
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET  # a 307 keeps the method

        self.victim = victim
        self.hits: list[str] = []
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def redirect(self, code: int) -> str:
        return f"http://127.0.0.1:{self.port}/redirect?code={code}&to="

    def fill(self, text: str) -> str:
        spellings = "[" + ",".join(f'"{s}"' for s in SPELLINGS) + "]"
        return (text.replace("REDIR302VICTIM", self.redirect(302) + self.victim.url(""))
                .replace("REDIR307VICTIM", self.redirect(307) + self.victim.url(""))
                .replace("VICTIM", self.victim.url("")).replace("VHOST",
                                                                 f"127.0.0.1:{self.victim.port}")
                .replace("VPORT", str(self.victim.port)).replace("SPELLINGS", spellings)
                .replace("APORT", str(self.port)))

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> Attacker:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture
def victim() -> Iterator[Victim]:
    with Victim() as served:
        yield served


@pytest.fixture
def attacker(victim: Victim) -> Iterator[Attacker]:
    with Attacker(victim) as served:
        yield served


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Make]:
    require_browser()
    made: list[BrowserService] = []

    def make(resolver: Any = None, request_proxy: bool = True, **overrides: Any
             ) -> BrowserService:
        service = BrowserService(browser_settings(**overrides),
                                 downloads_dir=tmp_path / f"downloads-{len(made)}",
                                 resolver=resolver, request_proxy=request_proxy)
        made.append(service)
        return service

    yield make
    for service in made:
        await service.aclose()


async def refused_paths(svc: BrowserService, wanted: set[str], timeout: float = 20) -> set[str]:
    """Wait (on the proxy's refusal event) until every path in ``wanted`` was refused, or
    the timeout; the refused victim paths."""
    assert svc.session is not None
    proxy = svc.session.proxy
    assert proxy is not None

    def seen() -> set[str]:
        return {urlsplit(r.target).path for r in proxy.refused if r.method != "CONNECT"}

    async def until() -> None:
        while not wanted <= seen():
            await proxy.changed.wait()

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(until(), timeout)
    return seen()


# Requests that reach the proxy (sub-resources and every redirect hop); direct navigations
# (iframe, popup, form) are refused earlier by the navigation router.
REACH_PROXY = {"/victim/fetch", "/victim/redirect-fetch", "/victim/redirect-fetch-307",
               "/victim/xhr", "/victim/img", "/victim/redirect-img",
               "/victim/redirect-img-307", "/victim/css-import", "/victim/css-url",
               "/victim/redirect-css", "/victim/script", "/victim/redirect-script",
               "/victim/redirect-iframe", "/victim/redirect-iframe-307", "/victim/sse",
               "/victim/beacon", "/victim/worker", "/victim/redirect-worker",
               "/victim/redirect-form", "/victim/redirect-popup"}


pytestmark = pytest.mark.anyio


async def test_a_page_reaches_nothing_but_its_allowed_host(
    browser: Make, attacker: Attacker, victim: Victim
) -> None:
    svc = browser(allow_private_network=False, allow_hosts=[f"127.0.0.1:{attacker.port}"],
                  max_tabs=8)
    page = await svc.call("browser_navigate", {"url": attacker.url("/attack.html")})
    assert not page.is_error, page.text
    assert svc.session is not None
    (attack,) = [p for p in svc.session.page.context.pages if p.url.endswith("attack.html")]
    await attack.wait_for_function("window.attackDone === true", timeout=30_000)
    refused = await refused_paths(svc, REACH_PROXY)
    assert refused >= REACH_PROXY, REACH_PROXY - refused
    assert any(r.method == "CONNECT" for r in svc.session.proxy.refused)  # the WebSocket
    seen = await svc.call("browser_observe", {})
    events = page.data.get("events", []) + seen.data.get("events", [])
    assert any(e.startswith('blocked: GET "http://127.0.0.1:') and "allow list" in e
               for e in events), events
    assert any("navigation to" in e and "/victim/popup" in e for e in events), events
    for text in (page.text, seen.text):
        assert "VICTIM-SECRET" not in text
    # A main-frame navigation redirected to the victim: refused at the hop, blanked.
    moved = await svc.call("browser_navigate", {"url": attacker.redirect(302)
                                                + victim.url("/victim/redirect-main")})
    assert moved.code == "BROWSER_NAVIGATION_BLOCKED", moved.text
    assert "/redirect" in attacker.hits
    direct = await svc.call("browser_navigate", {"url": victim.url("/")})
    assert direct.code == "BROWSER_NAVIGATION_BLOCKED"
    after = await svc.call("browser_observe", {})
    assert "VICTIM-SECRET" not in after.text
    assert victim.received == []


async def test_without_the_proxy_the_same_page_reaches_the_victim(
    browser: Make, attacker: Attacker, victim: Victim
) -> None:
    """The control: the attack is real. Without the proxy (the route handler alone, as
    before), redirect hops and sockets reach the victim."""
    svc = browser(request_proxy=False, allow_hosts=[f"127.0.0.1:{attacker.port}"],
                  max_tabs=8)
    await svc.call("browser_navigate", {"url": attacker.url("/attack.html")})
    assert svc.session is not None
    (attack,) = [p for p in svc.session.page.context.pages if p.url.endswith("attack.html")]
    await attack.wait_for_function("window.attackDone === true", timeout=30_000)
    lines = " ".join(victim.received)
    assert "/victim/redirect-iframe" in lines
    assert "/victim/ws" in lines


async def test_loopback_spellings_do_not_pass_a_deny(
    browser: Make, attacker: Attacker, victim: Victim
) -> None:
    svc = browser(allow_private_network=True, deny_hosts=[f"127.0.0.1:{victim.port}"])
    page = await svc.call("browser_navigate", {"url": attacker.url("/spell.html")})
    assert not page.is_error, page.text
    assert svc.session is not None
    await svc.session.page.evaluate("window.spelled")  # each got our 403, or failed
    wanted = {f"/victim/spell-{i}" for i in range(len(SPELLINGS))}
    refused = await refused_paths(svc, wanted)
    assert wanted <= refused, sorted(wanted - refused)
    assert svc.session.proxy is not None
    assert all("deny list" in r.reason for r in svc.session.proxy.refused)
    for host in ("[::ffff:127.0.0.1]", "0x7f.1", "localhost.", "2130706433"):
        refused = await svc.call("browser_navigate",
                                 {"url": f"http://{host}:{victim.port}/x"})
        assert refused.code == "BROWSER_NAVIGATION_BLOCKED", host
        assert "deny list" in refused.text
    assert victim.received == []


async def test_a_name_that_resolves_to_loopback_is_refused_by_its_address(
    browser: Make, victim: Victim
) -> None:
    asked: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        asked.append(host)  # Chromium's own background requests come here too
        return ["127.0.0.1"] if host == "rebind.test" else []

    svc = browser(resolver=rebinding, allow_private_network=False)
    refused = await svc.call("browser_navigate", {"url": f"http://rebind.test:{victim.port}/"})
    assert refused.code == "BROWSER_NAVIGATION_BLOCKED", refused.text
    assert "resolves to '127.0.0.1'" in refused.text
    assert asked.count("rebind.test") == 1  # looked up once, refused by its answer
    secure = await svc.call("browser_navigate", {"url": f"https://rebind.test:{victim.port}/"})
    assert secure.code == "BROWSER_NAVIGATION_BLOCKED", secure.text
    assert victim.received == []


async def test_the_proxy_connects_to_the_address_it_checked(victim: Victim) -> None:
    """One lookup per request, and the connection goes to its answer (no second lookup a
    rebinding server could answer differently)."""
    answers = iter([["127.0.0.1"], ["192.0.2.1"]])
    events: list[Any] = []

    async def once(host: str, port: int) -> list[str]:
        return next(answers)

    proxy = RequestProxy(NavigationPolicy(private_network=True), on_refusal=events.append,
                         resolver=once, connect_timeout=5)
    await proxy.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(f"GET http://intranet.test:{victim.port}/hello HTTP/1.1\r\n"
                     f"Host: intranet.test:{victim.port}\r\n\r\n".encode())
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert b"VICTIM-SECRET" in answer
        assert victim.received[-1] == "tcp: GET /hello HTTP/1.1"
        assert events == []
    finally:
        await proxy.close()


# -- the decision function, on generated spellings ----------------------------------------
def _ipv4_spelling(address: ipaddress.IPv4Address, data: st.DataObject) -> str:
    value = int(address)
    octets = list(address.packed)
    form = data.draw(st.sampled_from(["dotted", "int", "hex", "octal", "short3", "short2",
                                      "mixed", "mapped", "mapped-hex", "compatible",
                                      "fullwidth"]))
    if form == "int":
        text = str(value)
    elif form == "hex":
        text = data.draw(st.sampled_from(["0x", "0X"])) + format(value, "x")
    elif form == "octal":
        text = "0" + format(value, "o")
    elif form == "short3":
        text = f"{octets[0]}.{octets[1]}.{(octets[2] << 8) + octets[3]}"
    elif form == "short2":
        text = f"{octets[0]}.{value & 0xFFFFFF}"
    elif form == "mixed":
        parts = [data.draw(st.sampled_from([str(o), hex(o), "0" + format(o, "o")]))
                 for o in octets]
        text = ".".join(parts)
    elif form == "mapped":
        text = f"[::ffff:{address}]"
    elif form == "mapped-hex":
        text = f"[::ffff:{value >> 16:x}:{value & 0xFFFF:x}]"
    elif form == "compatible":
        text = f"[::{address}]" if value > 1 else str(address)
    elif form == "fullwidth":
        text = str(address).translate(str.maketrans("0123456789.", "０１２３４５６７８９。"))
    else:
        text = str(address)
    if not text.startswith("[") and data.draw(st.booleans()):
        text += "."
    return text.upper() if data.draw(st.booleans()) else text


PRIVATE_V4 = ["127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
              "169.254.0.0/16", "100.64.0.0/10", "0.0.0.0/32"]
PRIVATE_V6 = ["::1/128", "fc00::/7", "fe80::/10", "::/128"]


def _in(network: str, data: st.DataObject) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    net = ipaddress.ip_network(network)
    offset = data.draw(st.integers(0, net.num_addresses - 1))
    return net[offset]


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_every_spelling_of_a_private_ipv4_address_is_refused(data: st.DataObject) -> None:
    address = _in(data.draw(st.sampled_from(PRIVATE_V4)), data)
    assert isinstance(address, ipaddress.IPv4Address)
    spelling = _ipv4_spelling(address, data)
    assert canonical_host(spelling).address == address, spelling
    url = f"http://{spelling}:8080/x"
    default = NavigationPolicy()
    assert default.refusal(url) is not None, url
    assert default.refusal(url, navigation=False) is not None, url
    denied = NavigationPolicy(private_network=True, deny=(str(address),))
    assert "deny list" in (denied.refusal(url, navigation=False) or ""), url


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_every_spelling_of_a_private_ipv6_address_is_refused(data: st.DataObject) -> None:
    address = _in(data.draw(st.sampled_from(PRIVATE_V6)), data)
    text = data.draw(st.sampled_from([address.compressed, address.exploded]))
    text = text.upper() if data.draw(st.booleans()) else text
    url = f"http://[{text}]:443/"
    assert NavigationPolicy().refusal(url, navigation=False) is not None, url
    assert "deny list" in (NavigationPolicy(private_network=True, deny=(
        f"[{address.compressed}]",)).refusal(url) or ""), url


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["localhost", "LOCALHOST", "localhost.", "LocalHost.", "a.localhost",
                        "x.y.LOCALHOST.", "ｌｏｃａｌｈｏｓｔ"]), st.integers(1, 65535))
def test_localhost_names_are_the_local_machine(name: str, port: int) -> None:
    url = f"http://{name}:{port}/"
    assert NavigationPolicy().refusal(url) is not None, url
    assert "deny list" in (NavigationPolicy(private_network=True, deny=("localhost",))
                           .refusal(url) or ""), url
    assert "deny list" in (NavigationPolicy(private_network=True, deny=("127.0.0.1",))
                           .host_refusal(canonical_host(name), port,
                                         [ipaddress.ip_address("127.0.0.1")]) or "")


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_public_addresses_in_any_spelling_are_let_through(data: st.DataObject) -> None:
    """The guard refuses private addresses, not everything that looks odd."""
    address = data.draw(st.sampled_from([ipaddress.IPv4Address("8.8.8.8"),
                                         ipaddress.IPv4Address("93.184.216.34"),
                                         ipaddress.IPv4Address("1.1.1.1")]))
    spelling = _ipv4_spelling(address, data)
    assert canonical_host(spelling).address == address
    assert not is_private_address(address)
    assert NavigationPolicy().refusal(f"https://{spelling}/") is None, spelling


def test_names_resolving_to_private_addresses_are_refused_by_address() -> None:
    policy = NavigationPolicy()
    host = canonical_host("intranet.example.org")
    assert policy.host_refusal(host, 443) is None  # by name, nothing is wrong
    for address in ("127.0.0.1", "10.1.2.3", "169.254.169.254", "::ffff:192.168.0.1",
                    "fd00::1", "100.64.0.1", "0.0.0.0", "64:ff9b::a00:1"):  # noqa: S104
        reason = policy.host_refusal(host, 443, [ipaddress.ip_address(address)])
        assert "resolves to" in (reason or ""), address
    # The user named the host: its private address is what they meant.
    named = NavigationPolicy(allow=("intranet.example.org",))
    assert named.host_refusal(host, 443, [ipaddress.ip_address("10.1.2.3")]) is None
    # Sub-resources are held to the allow lists too; CDNs are named separately.
    cdn = NavigationPolicy(allow=("docs.example.org",), subresource_allow=("cdn.example.net",))
    assert cdn.refusal("https://cdn.example.net/x.js", navigation=False) is None
    assert cdn.refusal("https://cdn.example.net/", navigation=True) is not None
    assert cdn.refusal("https://other.example.net/x.js", navigation=False) is not None
    # deny wins over every allow.
    both = NavigationPolicy(allow=("a.example",), deny=("a.example",), private_network=True)
    assert "deny list" in (both.refusal("https://a.example/") or "")


@pytest.mark.parametrize("cdn_allowed_as_visit", [False, True])
async def test_a_frame_is_a_visit_not_a_cdn_fetch(
    browser: Make, attacker: Attacker, cdn_allowed_as_visit: bool
) -> None:
    """``allow_subresource_hosts`` lets a page load a CDN's scripts and images, never put a
    CDN-hosted document in front of the model: a frame that ends there (directly or at a
    redirect hop) is emptied before a snapshot. The control (the host allowed as a visit)
    shows the frame's button, so the refusal is the policy's doing."""
    cdn = f"localhost:{attacker.port}"
    allow = [f"127.0.0.1:{attacker.port}", *([cdn] if cdn_allowed_as_visit else [])]
    svc = browser(allow_private_network=False, allow_hosts=allow,
                  allow_subresource_hosts=[cdn])
    page = await svc.call("browser_navigate", {"url": attacker.url("/cdn-frames.html")})
    assert not page.is_error, page.text
    seen = await svc.call("browser_observe", {})
    text = page.text + seen.text
    if cdn_allowed_as_visit:
        assert "CDN-FRAME-BUTTON" in text
        return
    assert "CDN-FRAME-BUTTON" not in text
    assert "/cdn-doc.html" in attacker.hits  # the redirect hop did load it (a sub-resource)
    events = page.data.get("events", []) + seen.data.get("events", [])
    assert any("frame" in e and "cdn-doc.html" in e for e in events), events
