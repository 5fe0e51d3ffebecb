"""The web console end to end: a real ``serve`` (a loopback upstream, the real
``mcp-server-time`` over stdio, the in-process terminal, the local OCR engine) driven in real
Chromium by clicks and keys, with axe-core on every view and screenshots of each at
1280x800 and 390x844 kept under build/console-screenshots/.

One gateway for the module (starting it, and the OCR engine's first image, is the cost);
each test leaves the allow lists as it found them. Beside it, the MCP tests' loopback OAuth
server (tests/mcp_host/oauth_server.py) on a thread of its own: a protected MCP server the
console signs in to with the authorization-code flow.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image, ImageDraw, ImageFont

import mcp_peers
from browser.support import require_browser
from helpers import ServedGateway, serve_gateway
from mcp_host.oauth_server import OAuthFixture, serve_oauth
from runtime.upstream import LoopbackUpstream

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "console-screenshots"
AXE = ROOT / "build" / "console-npm" / "node_modules" / "axe-core" / "axe.min.js"
HOSTILE = "<img src=x onerror=alert(1)>"
VIEWS = ("conversations", "conversation", "approvals", "mcp", "vision", "audit", "usage")
SIZES = {"desktop": (1280, 800), "phone": (390, 844)}
START_DEADLINE_S = 60
LINK = re.compile(r"web console login \(one use\): (\S+)")


def hostile_png() -> bytes:
    """An image whose OCR text is markup (read exactly by the local engine)."""
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf", 40)
    image = Image.new("RGB", (900, 260), "white")
    draw = ImageDraw.Draw(image)
    draw.text((30, 40), HOSTILE, fill="black", font=font)
    draw.text((30, 150), "Total 42.00 EUR", fill="black", font=font)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


class OAuthThread:
    """The loopback OAuth server and its protected MCP server, on a loop of their own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.stop: asyncio.Event | None = None
        self.fx: OAuthFixture | None = None
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as exc:  # said by __enter__, not lost on the thread
            self.failure = exc
        finally:
            self.ready.set()
            self.loop.close()

    async def _serve(self) -> None:
        self.stop = asyncio.Event()
        async with serve_oauth() as fx:
            self.fx = fx
            self.ready.set()
            await self.stop.wait()

    def __enter__(self) -> OAuthFixture:
        self.thread.start()
        assert self.ready.wait(30), "the OAuth server did not start"
        assert self.fx is not None, self.failure
        return self.fx

    def __exit__(self, *exc: object) -> None:
        if self.stop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)


class Live:
    def __init__(self, gateway: ServedGateway, upstream: LoopbackUpstream, config: Path,
                 work: Path, browser: Any, oauth: OAuthFixture) -> None:
        self.oauth = oauth
        self.gateway = gateway
        self.upstream = upstream
        self.config = config
        self.work = work
        self.browser = browser
        self.origin = gateway.base.removesuffix("/v1")
        self.page: Any = None
        self.dialogs: list[str] = []
        self.errors: list[str] = []  # script errors on the console's pages

    def newest_link(self, after: int = 0) -> str:
        """The newest one-time link the gateway printed (each login prints the next)."""
        deadline = time.monotonic() + 30
        while True:
            found = LINK.findall(self.gateway.stderr)
            if len(found) > after:
                return str(found[-1])
            assert time.monotonic() < deadline, self.gateway.stderr[-2000:]
            self.gateway.wait_for_stderr("web console login (one use): ", 1)

    def links(self) -> int:
        return len(LINK.findall(self.gateway.stderr))

    def chat(self, content: Any, *, stream: bool = False) -> httpx.Response:
        return httpx.post(f"{self.gateway.base}/chat/completions", headers=self.gateway.headers,
                          json={"model": "deepseek-v4-pro", "stream": stream,
                                "messages": [{"role": "user", "content": content}]},
                          timeout=120)

    def offered(self) -> set[str]:
        before = len(self.upstream.requests)
        assert self.chat("hello").status_code == 200
        payload = self.upstream.requests[before]
        return {t["function"]["name"] for t in payload.get("tools") or ()
                if t["function"]["name"].startswith("mcp__")}

    def show(self, view: str) -> None:
        """Open a view by its link in the navigation, with the keyboard."""
        page = self.page
        target = "conversations" if view == "conversation" else view
        link = page.locator(f'#views a[data-view="{target}"]')
        link.focus()
        page.keyboard.press("Enter")
        page.wait_for_function(f"document.body.dataset.view === {target!r}")
        if view == "conversation":
            page.get_by_role("link", name=re.compile("receipt")).first.click()
            page.wait_for_function("document.body.dataset.view === 'conversation'")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    require_browser()
    server = mcp_peers.need(mcp_peers.TIME_SERVER)
    if not AXE.is_file():
        pytest.skip("axe-core is not installed (scripts/ci-deps.sh puts it in build/)")
    from playwright.sync_api import sync_playwright

    from deepseek_eyes.browser.session import find_chromium
    from deepseek_eyes.settings import BrowserSettings

    root = tmp_path_factory.mktemp("console")
    work = root / "work"
    work.mkdir()
    with LoopbackUpstream() as upstream, OAuthThread() as oauth:
        config = root / "eyes.toml"
        config.write_text(
            f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\n'
            'model = "deepseek-v4-pro"\ntimeout = 20\n\n'
            '[[llm.models]]\nid = "deepseek-v4-pro"\ninput = ["text"]\n\n'
            # A second route, never reached (local first, no health check or probe):
            # the one the vision view reorders.
            '[vision]\nroute_priority = ["local", "spare"]\n\n'
            '[vision.deepseek]\nenabled = false\n\n'
            f'[[vision.routes]]\nname = "spare"\nbase_url = "{upstream.base_url}"\n'
            'model = "spare-vision"\nhealth_check = "none"\nprobe = false\n\n'
            '[runtime]\ntool_sources = ["look", "mcp", "terminal"]\napproval_timeout = 60\n\n'
            f'[terminal]\nworkspaces = ["{work}"]\n\n'
            f'[[mcp.servers]]\nid = "time"\ntransport = "stdio"\ncommand = "{server}"\n'
            'allow = { tools = ["get_current_time"] }\n', encoding="utf-8")
        # No terminal token: no terminal console; plans wait in the web console.
        env = {k: v for k, v in os.environ.items() if k != "DEEPSEEK_EYES_TERMINAL_TOKEN"}
        env["DEEPSEEK_EYES_HOME"] = str(root / "data")
        with serve_gateway(config, env, deadline_s=START_DEADLINE_S) as gateway, \
                sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(find_chromium(BrowserSettings())),
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            try:
                state = Live(gateway, upstream, config, work, browser, oauth)
                image = base64.b64encode(hostile_png()).decode()
                seeded = state.chat([
                    {"type": "text", "text": f"What does this receipt say? {HOSTILE}"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}},
                ])
                assert seeded.status_code == 200, seeded.text
                # axe-core is injected as an inline script, which the console's CSP would
                # refuse; with the CSP bypassed, markup rendered as HTML would also run, so
                # the hostile-text test shows textContent at work, not the CSP.
                context = browser.new_context(viewport={"width": 1280, "height": 800},
                                              bypass_csp=True)
                page = context.new_page()
                page.on("pageerror", lambda e: state.errors.append(str(e)))
                page.on("dialog", lambda d: (state.dialogs.append(d.message), d.dismiss()))
                page.goto(state.newest_link())
                page.wait_for_function("document.body.dataset.view === 'conversations'")
                state.page = page
                yield state
            finally:
                browser.close()


def test_the_login_is_its_own_an_httponly_strict_cookie_and_a_strict_csp(live: Live) -> None:
    cookies = {c["name"]: c for c in live.page.context.cookies()}
    cookie = cookies["deepseek_eyes_web_console"]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/console/api/"
    assert live.page.evaluate("document.cookie") == ""  # script cannot read it
    page = httpx.get(f"{live.origin}/console/", timeout=30)
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "style-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    # The gateway key opens nothing here, and the link's code is spent.
    refused = httpx.get(f"{live.origin}/console/api/conversations",
                        headers=live.gateway.headers, timeout=30)
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "CONSOLE_LOGIN_REQUIRED"
    first = LINK.findall(live.gateway.stderr)[0].split("#login=", 1)[1]
    spent = httpx.post(f"{live.origin}/console/api/login", json={"code": first}, timeout=30)
    assert spent.status_code == 401
    assert spent.json()["error"]["code"] == "CONSOLE_LOGIN_INVALID"


def test_a_conversation_shows_its_evidence_over_the_pixels_as_text(live: Live) -> None:
    page = live.page
    live.show("conversations")
    search = page.get_by_label("Search conversations")
    search.fill("receipt")
    search.press("Enter")
    page.wait_for_function("location.hash.includes('q=receipt')")
    link = page.get_by_role("link", name=re.compile("What does this receipt say"))
    assert link.count() == 1
    link.click()
    page.wait_for_function("document.body.dataset.view === 'conversation'")
    page.wait_for_selector(".box.ocr")
    labels = [page.locator(".box.ocr").nth(i).get_attribute("aria-label")
              for i in range(page.locator(".box.ocr").count())]
    assert any(HOSTILE in (label or "") for label in labels), labels
    assert any("Total 42.00 EUR" in (label or "") for label in labels), labels
    # The markup stayed text: one <img> per image, no handler ran, the model's echo too.
    assert page.locator(".stage img").count() == 1
    assert page.locator('img[src="x"]').count() == 0
    assert page.get_by_text(HOSTILE, exact=False).count() >= 1
    assert live.dialogs == []
    assert live.errors == []
    # Keyboard: a box's text and confidence show on focus.
    box = page.locator(".box.ocr").first
    box.focus()
    tip = page.locator(".tip")
    assert tip.is_visible()
    assert "confidence" in tip.inner_text()
    # A layer toggles off and on with the keyboard.
    toggle = page.locator('input[data-layer="ocr"]')
    toggle.focus()
    page.keyboard.press("Space")
    assert page.locator(".box.ocr.hidden").count() == page.locator(".box.ocr").count()
    page.keyboard.press("Space")
    assert page.locator(".box.ocr.hidden").count() == 0
    # Beside the image: its attempts (the local route) and the chain badge.
    assert page.locator(".attempts").get_by_text("local").count() >= 1
    assert page.locator(".attempts h4 .badge").inner_text() == "verified"
    # Its provenance, opened by the keyboard: image -> attempts -> evidence -> upstream
    # request -> usage, each link verified against its chain entry.
    summary = page.locator(".provenance summary")
    summary.focus()
    page.keyboard.press("Enter")
    steps = page.locator(".provenance li")
    texts = [steps.nth(i).inner_text() for i in range(steps.count())]
    names = [t.split(" ", 1)[0] for t in texts]
    assert names[0] == "image", texts
    assert {"attempt", "evidence"} <= set(names), texts
    assert any(t.startswith("upstream request") for t in texts), texts
    assert any(t.startswith("usage") and "prompt_tokens" in t for t in texts), texts
    assert all("verified (entry " in t for t in texts), texts
    # The page says where the conversation came from; a part it lacks (no fork tree) is
    # left out, not written as "null".
    assert "client OpenAI" in page.locator("main").inner_text()
    assert "null" not in page.locator("main").inner_text()


def test_a_conversations_screens_show_the_latest_state_screenshot_and_steps(
        live: Live) -> None:
    """Browser steps recorded as the browser service records them (its audit rows, written
    here from another process as the CLI writes beside a running gateway)."""
    from deepseek_eyes.home import DataHome

    home = DataHome(live.work.parent / "data")
    try:
        sid = str(home.db.query_one("SELECT session_id FROM events WHERE body LIKE ?",
                                    ("%receipt%",))[0])
        shot = str(home.db.query_one("SELECT sha256 FROM images LIMIT 1")[0])
        for state, name in (("st-a", "browser_navigate"), ("st-b", "browser_click")):
            home.audit.write("browser.action", name, owner=sid, outcome="ok", code=None,
                             state_before="st-0", state_after=state, arguments=["ref"],
                             url=f"https://example.test/{HOSTILE}", ms=7,
                             screenshot_sha256=shot)
        # The session's report v2, stored at its close as the browser stores it, named by
        # the close's tool result in the conversation.
        from deepseek_eyes.browser.report import Assertion, ReportRecorder, Step
        from deepseek_eyes.store.events import SessionStore

        recorder = ReportRecorder()
        recorder.add_step(Step(1, "browser_navigate", {"url": "https://example.test/"}, None,
                               "st-a", "ok", None, "https://example.test/", time.time(), 9))
        recorder.add_assertion(Assertion("text", HOSTILE, HOSTILE, True, "st-a", 1))
        report = home.blobs.put(json.dumps(recorder.to_dict([])).encode()).sha256
        SessionStore(home.db).append(sid, [{
            "role": "tool", "tool_call_id": "close-1", "name": "browser_close",
            "content": f"browser closed.\nreport stored as sha256:{report}"}])
    finally:
        home.close()
    page = live.page
    live.show("conversation")
    screens = page.get_by_role("region", name="Screens")
    screens.get_by_role("heading", name=re.compile("^Browser: state st-b")).wait_for()
    assert screens.locator("img.screenshot").get_attribute("src").endswith(shot)
    steps = screens.get_by_role("region", name="browser steps, newest first")
    assert steps.locator("tbody tr").first.inner_text().count("browser_click") == 1
    assert "verified (entry" in steps.inner_text()
    reported = screens.get_by_role("region", name=f"report steps, {report[:12]}")
    assert "browser_navigate" in reported.inner_text()
    checks = screens.get_by_role("region", name=f"report assertions, {report[:12]}")
    assert HOSTILE in checks.inner_text()  # page text from the report, shown as text
    assert page.locator('img[src="x"]').count() == 0  # the URL's markup stayed text
    assert live.dialogs == []


def test_the_gateway_key_logs_in_to_its_own_conversations_only(live: Live) -> None:
    """A login made with the gateway key is bound to its client's scope: the conversations
    made with that key, no other scope's, and none of the person's views."""
    from deepseek_eyes.home import DataHome
    from deepseek_eyes.store import scopes
    from deepseek_eyes.store.events import SessionStore

    home = DataHome(live.work.parent / "data")
    try:
        SessionStore(home.db).append("cli-only", [{"role": "user", "content": "cli only words"}],
                                     create="cli", scope=scopes.CLI)
    finally:
        home.close()
    context = live.browser.new_context(viewport={"width": 390, "height": 844}, bypass_csp=True)
    try:
        page = context.new_page()
        page.goto(f"{live.origin}/console/")
        form = page.get_by_role("form", name="Log in with the gateway key")
        form.wait_for()
        SHOTS.mkdir(parents=True, exist_ok=True)
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            target = SHOTS / f"login-{size}.png"
            page.screenshot(path=str(target))
            _not_blank(target)
        page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
        found = page.evaluate("async () => (await axe.run(document)).violations"
                              ".filter(v => ['serious', 'critical'].includes(v.impact))"
                              ".map(v => v.id)")
        assert found == []
        form.get_by_label("Gateway key").fill("not-the-key")
        form.get_by_label("Gateway key").press("Enter")
        page.get_by_role("status").get_by_text("CONSOLE_LOGIN_INVALID").wait_for()
        assert live.gateway.key
        form.get_by_label("Gateway key").fill(live.gateway.key)
        form.get_by_role("button", name="Log in").click()
        page.wait_for_function("document.body.dataset.view === 'conversations'")
        assert "its own conversations only" in page.locator("#who").inner_text()
        assert page.get_by_role("link", name=re.compile("receipt")).count() >= 1
        assert page.get_by_text("cli only words").count() == 0
        visible = [v for v in ("approvals", "mcp", "vision", "audit", "usage")
                   if page.locator(f'#views a[data-view="{v}"]').is_visible()]
        assert visible == []
        # Its images load; another scope's conversation is not there; the person's views
        # and actions refuse the key's login.
        page.get_by_role("link", name=re.compile("receipt")).first.click()
        page.wait_for_function("document.body.dataset.view === 'conversation'")
        page.wait_for_function("document.querySelector('.stage img').naturalWidth > 0")
        page.goto(f"{live.origin}/console/#conversation/cli-only")
        page.get_by_text("CONSOLE_NOT_FOUND").wait_for()
        answers = page.evaluate("""async () => Promise.all(
            ['mcp', 'approvals', 'audit/export'].map((path) => fetch('/console/api/' + path)
              .then((r) => r.json().then((b) => [r.status, b.error.code]))))""")
        assert answers == [[403, "CONSOLE_SCOPE_DENIED"]] * 3
    finally:
        context.close()


def test_an_approval_in_the_console_releases_the_paused_stream(live: Live) -> None:
    target = live.work / "approved.txt"
    call = {"argv": ["touch", target.name], "cwd": str(live.work)}
    result: dict[str, Any] = {}

    def ask() -> None:
        result["answer"] = live.chat(f"CALL[terminal_run]: {json.dumps(call)}", stream=True)

    waiting_before = live.gateway.stderr.count("waits for approval")
    asker = threading.Thread(target=ask)
    asker.start()
    try:
        deadline = time.monotonic() + 60
        while live.gateway.stderr.count("waits for approval") == waiting_before:
            assert time.monotonic() < deadline, live.gateway.stderr[-2000:]
            live.gateway.wait_for_stderr("waits for approval", 1)
        assert not target.exists()
        live.show("approvals")
        row = live.page.get_by_role("row", name=re.compile("touch"))
        assert row.count() == 1
        assert "approved.txt" in row.inner_text()
        # Who asked: the conversation (a link to it) and its turn in progress, the mode.
        assert row.get_by_role("link").count() == 1
        assert re.search(r"turn turn-\w+", row.inner_text()), row.inner_text()
        assert "confirm" in row.inner_text()
        row.get_by_role("button", name=re.compile("^Approve")).click()
        asker.join(timeout=60)
        assert not asker.is_alive()
    finally:
        asker.join(timeout=60)
    text = result["answer"].text
    assert '\\"exit_code\\": 0' in text or '"exit_code": 0' in text, text[-1000:]
    assert target.exists()
    live.page.get_by_role("button", name="Refresh").click()
    live.page.get_by_text("Nothing waits for approval.").wait_for()


def test_an_allow_list_change_in_the_console_is_offered_in_the_next_turn(live: Live) -> None:
    assert "mcp__time__convert_time" not in live.offered()
    page = live.page
    live.show("mcp")
    row = page.get_by_role("row", name=re.compile("convert_time"))
    assert "not offered: not allowed" in row.inner_text()
    row.get_by_role("button", name="Allow convert_time").click()
    page.get_by_role("status").get_by_text("time: allow += convert_time").wait_for()
    assert "convert_time" in live.config.read_text(encoding="utf-8")
    assert "mcp__time__convert_time" in live.offered()  # applied before the click answered
    row = page.get_by_role("row", name=re.compile("convert_time"))
    assert "offered" in row.inner_text()
    assert "not offered" not in row.inner_text()
    row.get_by_role("button", name="Disallow convert_time").click()
    page.get_by_role("status").get_by_text("time: allow -= convert_time").wait_for()
    assert "mcp__time__convert_time" not in live.offered()


def test_an_ask_first_mcp_call_waits_in_approvals_and_a_denial_refuses_it(live: Live) -> None:
    page = live.page
    live.show("mcp")
    row = page.get_by_role("row", name=re.compile("get_current_time"))
    row.get_by_role("button", name="Ask first for get_current_time").click()
    page.get_by_role("status").get_by_text("time: ask += get_current_time").wait_for()
    assert 'ask = ["get_current_time"]' in live.config.read_text(encoding="utf-8")
    # An ask an earlier run of the gateway left waiting (its audit rows, written here as
    # that run wrote them): listed as expired, with nothing to approve.
    from deepseek_eyes.audit import AuditLog
    from deepseek_eyes.home import DataHome

    home = DataHome(live.work.parent / "data")
    try:
        AuditLog(home.db, clock=lambda: time.time() - 3600).write(
            "mcp.ask", "time", tool="get_current_time", status="asked", ask_id="a-earlier-run",
            arguments_sha256="0" * 64, session_id=None, via=None, by=None)
    finally:
        home.close()
    result: dict[str, Any] = {}

    def ask() -> None:
        result["answer"] = live.chat(
            'CALL[mcp__time__get_current_time]: {"timezone": "<b>UTC</b>"}')

    live.show("approvals")  # open before the call asks: the view must refresh by itself
    earlier = page.locator('tr[data-ask="a-earlier-run"]')
    assert "expired: the gateway restarted while it waited" in earlier.inner_text()
    assert earlier.get_by_role("button").count() == 0
    asker = threading.Thread(target=ask)
    asker.start()
    try:
        waiting = page.get_by_role("row", name=re.compile("get_current_time")).filter(
            has=page.get_by_role("button", name=re.compile("^Deny")))
        waiting.wait_for(timeout=30_000)  # no click: the view asked again by itself
        # The model's arguments are shown as text, never as markup.
        assert '"timezone":"<b>UTC</b>"' in waiting.inner_text()
        assert waiting.get_by_role("link").count() == 1  # the conversation that asked
        waiting.get_by_role("button", name=re.compile("^Deny")).click()
        asker.join(timeout=60)
        assert not asker.is_alive()
    finally:
        asker.join(timeout=60)
    assert "MCP_CALL_DENIED" in result["answer"].text, result["answer"].text[-1000:]
    live.show("approvals")
    decided = page.get_by_role("row", name=re.compile("get_current_time"))
    # The view may still show its last drawing (the ask waiting) until its next fetch lands.
    decided.filter(has_text="denied by").first.wait_for(timeout=30_000)
    assert "denied by" in decided.first.inner_text()  # this run's, listed before the past
    live.show("mcp")
    row = page.get_by_role("row", name=re.compile("get_current_time"))
    row.get_by_role("button", name="Stop asking first for get_current_time").click()
    page.get_by_role("status").get_by_text("time: ask -= get_current_time").wait_for()


class _Evil(BaseHTTPRequestHandler):
    target = ""

    def do_GET(self) -> None:
        script = (
            f"fetch({json.dumps(self.target)}, {{method: 'POST', mode: 'no-cors',"
            " credentials: 'include', headers: {'content-type': 'text/plain'},"
            " body: JSON.stringify({list: 'allow', op: 'add', selector: 'convert_time'})})"
            ".finally(() => { document.title = 'sent'; document.forms[0].submit(); });")
        body = (f"<!doctype html><title>evil</title><form method=post action="
                f"'{self.target}'><input name=list value=allow></form>"
                f"<script>{script}</script>").encode()
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_page_on_another_loopback_origin_cannot_act(live: Live) -> None:
    action = f"{live.origin}/console/api/mcp/time/tools"
    before = live.config.read_bytes()
    _Evil.target = action
    evil = ThreadingHTTPServer(("127.0.0.1", 0), _Evil)
    serving = threading.Thread(target=evil.serve_forever, daemon=True)
    serving.start()
    try:
        # Same site (loopback, another port): the browser sends the Strict cookie along.
        page = live.page.context.new_page()
        page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
        page.wait_for_url(action, timeout=30_000)  # the fetch settled, then the form went
        # Refused before any handler: a form's body is not JSON (a fetch's Origin is not
        # the console's own).
        assert "CONSOLE_UNSUPPORTED_MEDIA_TYPE" in page.content()
        page.close()
    finally:
        evil.shutdown()
        evil.server_close()
    assert live.config.read_bytes() == before
    # Without the page's CSRF token, or from another Origin, or with none: refused.
    code = live.newest_link().split("#login=", 1)[1]
    login = httpx.post(f"{live.origin}/console/api/login", json={"code": code}, timeout=30)
    assert login.status_code == 200, login.text
    cookie = login.headers["set-cookie"].split(";", 1)[0]
    csrf = login.json()["csrf"]
    body = {"list": "allow", "op": "add", "selector": "convert_time"}
    for headers, status, error in (
            ({"origin": live.origin}, 403, "CONSOLE_CSRF_INVALID"),
            ({"x-csrf-token": csrf}, 403, "CONSOLE_CSRF_INVALID"),
            ({"x-csrf-token": csrf, "origin": "http://127.0.0.1:1"}, 403, "CONSOLE_FORBIDDEN"),
            ({"x-csrf-token": "forged", "origin": live.origin}, 403, "CONSOLE_CSRF_INVALID")):
        answer = httpx.post(action, json=body, headers={"cookie": cookie, **headers},
                            timeout=30)
        assert answer.status_code == status, answer.text
        assert answer.json()["error"]["code"] == error
    assert live.config.read_bytes() == before


def _not_blank(path: Path) -> None:
    with Image.open(path) as shot:
        colours = shot.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 16, f"{path} looks blank"


_MARK_FOCUSABLE = """() => {
    const all = [...document.querySelectorAll(
        'a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex="-1"])')]
      .filter((e) => !e.disabled && e.checkVisibility());
    window.__reached = new Set();
    all.forEach((e, i) => { e.dataset.kb = String(i); });
    document.addEventListener('focusin', (ev) => {
      if (ev.target.dataset && ev.target.dataset.kb) window.__reached.add(ev.target.dataset.kb);
    });
    // Tab starts from the top of the page: a focus point before everything, not in the
    // tab order itself.
    const start = document.createElement('span');
    start.tabIndex = -1;
    start.id = 'kb-start';
    document.body.prepend(start);
    start.focus();
    return all.length;
}"""
_UNREACHED = """() => [...document.querySelectorAll('[data-kb]')]
    .filter((e) => !window.__reached.has(e.dataset.kb))
    .map((e) => e.tagName + ' ' + (e.getAttribute('aria-label') || e.textContent).slice(0, 40))"""


def _all_reached_by_tab(page: Any) -> list[str]:
    """Every visible control of the view, focused by Tab alone (none skipped, none trapped
    on the way): the ones never reached."""
    count = page.evaluate(_MARK_FOCUSABLE)
    missed: list[str] = []
    # A date-and-time field takes a Tab stop per part: some controls take more than one.
    for _ in range(3 + count // 4):
        for _ in range(10):
            page.keyboard.press("Tab")
        missed = list(page.evaluate(_UNREACHED))
        if not missed:
            break
    page.evaluate("document.getElementById('kb-start').remove()")
    return missed


def test_every_view_passes_axe_and_is_screenshotted_at_two_sizes(live: Live) -> None:
    page = live.page
    SHOTS.mkdir(parents=True, exist_ok=True)
    axe = AXE.read_text(encoding="utf-8")
    try:
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            for view in VIEWS:
                live.show(view)
                page.wait_for_selector("main h2")
                target = SHOTS / f"{view}-{size}.png"
                page.screenshot(path=str(target), full_page=False)
                _not_blank(target)
                with Image.open(target) as shot:
                    assert shot.size == (width, height)
                if page.evaluate("typeof window.axe") == "undefined":
                    page.add_script_tag(content=axe)
                found = page.evaluate("async () => (await axe.run(document)).violations"
                                      ".map(v => ({id: v.id, impact: v.impact,"
                                      " nodes: v.nodes.length}))")
                bad = [v for v in found if v["impact"] in ("serious", "critical")]
                assert bad == [], f"{view} at {size}: {bad}"
                if size == "desktop":
                    assert _all_reached_by_tab(page) == [], view
    finally:
        page.set_viewport_size({"width": 1280, "height": 800})


def test_the_vision_view_shows_routes_and_probes_a_models_sight_again(live: Live) -> None:
    page = live.page
    live.show("vision")
    routes = page.get_by_role("region", name="Vision routes")
    assert routes.get_by_role("row", name=re.compile("local")).count() == 1
    row = page.get_by_role("row", name=re.compile("deepseek-v4-pro"))
    assert "does not see (settings)" in row.inner_text()  # input = ["text"] says so
    row.get_by_role("button", name="Probe again: deepseek-v4-pro").focus()
    page.keyboard.press("Enter")
    page.get_by_role("status").get_by_text(re.compile(
        r"^deepseek-v4-pro: (sees|does not see) \(probe")).wait_for()
    row = page.get_by_role("row", name=re.compile("deepseek-v4-pro"))
    row.get_by_text(re.compile(r"\(probe.*checked")).wait_for()
    # What the settings say still rules: a probe informs, the settings decide.
    assert "does not see (settings)" in row.get_by_role("cell").nth(1).inner_text()
    # The order of preference, changed by the keyboard: written, and the running router's
    # own order (the table is its status) follows at once; then put back.
    routes = page.get_by_role("region", name="Vision routes")
    names = routes.locator("tbody tr td:nth-child(2)")
    assert names.all_inner_texts()[:2] == ["local", "spare"]
    page.get_by_role("button", name="Move spare up").focus()
    page.keyboard.press("Enter")
    page.get_by_role("status").get_by_text("Route order: spare, local").wait_for()
    assert 'route_priority = ["spare", "local"]' in live.config.read_text(encoding="utf-8")
    assert names.all_inner_texts()[:2] == ["spare", "local"]
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == (
        "Move spare down")  # the focus stays with the route that moved
    page.keyboard.press("Enter")
    page.get_by_role("status").get_by_text("Route order: local, spare").wait_for()
    assert names.all_inner_texts()[:2] == ["local", "spare"]


def test_audit_verifies_the_chain_and_usage_keeps_categories_apart(live: Live) -> None:
    page = live.page
    live.show("audit")
    assert page.get_by_text(re.compile(r"^Head: entry \d+")).count() == 1
    page.get_by_role("button", name="Verify the chain").click()
    page.locator("#verify-result.ok").wait_for()
    intact = page.locator("#verify-result").inner_text()
    assert intact.startswith("Intact:")
    # The bar shows the verifier's own count: full, and the very number it reported.
    entries = int(re.search(r"Intact: (\d+) entries", intact).group(1))
    bar = page.get_by_role("progressbar", name="Verifying the chain")
    assert bar.get_attribute("max") == bar.get_attribute("value") == str(entries)
    assert page.locator("#verify-count").inner_text().strip() == (
        f"{entries} of {entries} entries checked")
    # The whole chain exported, signed: the CLI's verifier checks the download alone.
    from deepseek_eyes.audit.keys import AuditKeyring, audit_directory
    from deepseek_eyes.audit.verify import verify_file

    with page.expect_download() as caught:
        page.get_by_role("link", name=re.compile("^Export the whole chain")).click()
    chain = Path(caught.value.path())
    header = json.loads(chain.read_text(encoding="utf-8").splitlines()[0])
    assert header["format"] == "deepseekeyes.audit.v1"
    assert header["entries"] >= entries
    data = live.work.parent / "data"
    assert verify_file(chain, AuditKeyring.read_only(audit_directory(data))).ok
    # Vision attempts filtered by route, each row verified against the chain.
    page.get_by_label("Of").select_option("vision")
    page.get_by_label("Route").fill("local")
    page.get_by_label("Route").press("Enter")
    rows = page.get_by_role("region", name="Vision attempts").locator("tbody tr")
    rows.first.wait_for()
    assert rows.count() >= 1
    assert all("local" in rows.nth(i).inner_text() and "verified (entry" in rows.nth(i).inner_text()
               for i in range(rows.count()))
    # Exported as a download of the same rows.
    with page.expect_download() as caught:
        page.get_by_role("link", name="Export these (JSON Lines)").click()
    exported = [json.loads(line) for line in
                Path(caught.value.path()).read_text(encoding="utf-8").splitlines()]
    assert len(exported) == rows.count()
    assert {row["route"] for row in exported} == {"local"}
    # Any record by id: chain entry 1.
    page.get_by_label("Record", exact=True).fill("1")
    page.get_by_role("button", name="Show").click()
    page.get_by_role("status").get_by_text("Record 1: chain_entry").wait_for()
    assert '"seq": 1' in page.locator("#record-shown").inner_text()
    live.show("usage")
    page.get_by_role("heading", name="Exact provider usage").wait_for()
    table = page.get_by_role("table", name="Exact provider usage")
    assert table.get_by_role("row").count() >= 2  # the header and the chat's category
    # The charts: inline SVG, each named for assistive technology, a title on every bar.
    health = page.get_by_role("region", name="Vision routes' health")
    assert health.get_by_role("row", name=re.compile("local")).count() == 1
    for name in ("Tokens per day", "Exact tokens per model", "Share of prompt tokens"):
        assert page.get_by_role("img", name=re.compile(name)).count() == 1
    bars = page.locator("#chart-categories rect")
    assert bars.count() >= 1
    assert "tokens exact provider usage" in bars.first.locator("title").text_content()
    assert page.locator("#chart-models text").get_by_text("deepseek-v4-pro").count() == 1
    # Under the real CSP (this module's page bypasses it for axe-core): drawn, nothing refused.
    strict = live.browser.new_context(viewport={"width": 390, "height": 844})
    try:
        strict.add_cookies(page.context.cookies())
        other = strict.new_page()
        refused: list[str] = []
        other.on("console", lambda m: refused.append(m.text)
                 if "Content Security Policy" in m.text else None)
        other.goto(f"{live.origin}/console/#usage")
        other.wait_for_selector("#chart-cache rect")
        assert other.locator("#chart-categories rect").count() == bars.count()
        # The streamed parts too: the verifier's progress and the MCP watch stream.
        other.goto(f"{live.origin}/console/#audit")
        other.get_by_role("button", name="Verify the chain").click()
        other.locator("#verify-result.ok").wait_for()
        other.goto(f"{live.origin}/console/#mcp")
        shown = other.locator('[data-status-for="time"]')  # (no eval under this CSP)
        shown.get_by_text("ready").wait_for()
        shown.evaluate("node => { node.textContent = 'stale'; }")
        other.evaluate("""async () => {
            const who = await (await fetch('/console/api/whoami')).json();
            await fetch('/console/api/mcp/time/restart', {method: 'POST', body: '{}',
              headers: {'content-type': 'application/json', 'x-csrf-token': who.csrf}});
        }""")
        shown.get_by_text("ready").wait_for()  # told by the stream, under the real CSP
        assert refused == []
    finally:
        strict.close()


def test_an_oauth_server_signs_in_from_the_console(live: Live) -> None:
    """The authorization-code flow, opened from the console: the server's authorization
    page in a new window, its redirect to the gateway's loopback listener, the connection
    restarted with the token; the server's tool is offered in the next turn."""
    page = live.page
    live.show("mcp")
    # Registered from the form as a server a person signs in to (mcp register --sign-in).
    form = page.get_by_role("form", name="Register a server")
    form.get_by_label("Id").fill("remote")
    form.get_by_label(re.compile("^Or URL")).fill(live.oauth.url)
    form.get_by_label(re.compile("A person signs in")).check()
    form.get_by_role("button", name="Register").click()
    page.get_by_role("status").get_by_text(
        "registered remote (streamable-http): nothing allowed yet").wait_for()
    assert "authorization_code" in live.config.read_text(encoding="utf-8")
    remote = page.get_by_role("region", name="server remote")
    remote.get_by_text("sign-in: no-token").wait_for()
    with page.context.expect_page() as opened:
        remote.get_by_role("button", name="Sign in to remote").click()
    window = opened.value
    page.get_by_role("status").get_by_text(re.compile("^remote: signed in")).wait_for(
        timeout=30_000)
    assert window.url.startswith("http://127.0.0.1:")  # the listener's own page
    window.close()
    params = live.oauth.authorize_params[-1]
    assert params["code_challenge_method"] == "S256"
    assert params["redirect_uri"].startswith("http://127.0.0.1:")
    page.locator('[data-status-for="remote"]').get_by_text("ready").wait_for(timeout=30_000)
    remote = page.get_by_role("region", name="server remote")
    assert "sign-in: token" in remote.inner_text()
    # Signed in, its tools are listed; allowed, one is offered in the next turn.
    remote.get_by_role("button", name="Allow whoami").click()
    page.get_by_role("status").get_by_text("remote: allow += whoami").wait_for()
    assert "mcp__remote__whoami" in live.offered()
    # No token reached the page, the settings file or the printed log.
    for token in live.oauth.issued:
        assert token not in page.content()
        assert token not in live.config.read_text(encoding="utf-8")
        assert token not in live.gateway.stderr


def test_the_control_centre_registers_imports_probes_restarts_and_switches(
        live: Live) -> None:
    """Last in the module: it adds servers the earlier tests' rows would also match."""
    page = live.page
    server = str(mcp_peers.need(mcp_peers.TIME_SERVER))
    status = page.get_by_role("status")
    live.show("mcp")
    # A secret in the command line is refused by the CLI's own check; nothing is written.
    before = live.config.read_bytes()
    form = page.get_by_role("form", name="Register a server")
    form.get_by_label("Id").fill("clock")
    form.get_by_label(re.compile("^Command")).fill(f"{server}\n--api-key=sk-live-123456")
    form.get_by_role("button", name="Register").click()
    status.get_by_text("MCP_CREDENTIAL_IN_ARGUMENTS").wait_for()
    assert live.config.read_bytes() == before
    # A stdio server from the form, by the keyboard; applied at once: its status goes live.
    form.get_by_label(re.compile("^Command")).fill(server)
    form.get_by_label(re.compile("^Command")).focus()
    page.keyboard.press("Tab")  # to the URL field, then submit from it with Enter
    page.keyboard.press("Enter")
    status.get_by_text("registered clock (stdio): nothing allowed yet").wait_for()
    assert 'id = "clock"' in live.config.read_text(encoding="utf-8")
    page.locator('[data-status-for="clock"]').get_by_text("ready").wait_for(timeout=30_000)
    clock = page.get_by_role("region", name="server clock")
    assert "not offered: not allowed" in clock.inner_text()
    # A pasted Claude config: a literal secret is refused, a ${VAR} reference carried over.
    pasted = page.get_by_label("Config JSON")
    pasted.fill(json.dumps({"mcpServers": {"leaky": {
        "url": "http://127.0.0.1:9/mcp", "headers": {"X-Api-Key": "sk-literal-abcdef123456"}}}}))
    page.get_by_role("button", name="Import").click()
    status.get_by_text("MCP_").wait_for()
    assert "leaky" not in live.config.read_text(encoding="utf-8")
    pasted.fill(json.dumps({"mcpServers": {"pasted": {
        "type": "http", "url": "http://127.0.0.1:9/mcp",
        "headers": {"X-Api-Key": "${CONSOLE_TEST_KEY}"}}}}))
    page.get_by_role("button", name="Import").click()
    status.get_by_text("imported pasted").wait_for()
    text = live.config.read_text(encoding="utf-8")
    assert 'id = "pasted"' in text
    assert 'X-Api-Key = {env = "CONSOLE_TEST_KEY"}' in text
    # Disable: written, and the gateway stops it before the click answers.
    page.get_by_role("button", name="Disable pasted").click()
    status.get_by_text("pasted: disabled").wait_for()
    page.locator('[data-status-for="pasted"]').get_by_text("disabled").wait_for()
    # Probe and restart act on the running gateway's manager.
    page.get_by_role("button", name="Probe time").click()
    status.get_by_text(re.compile(r"^time: probe ok in [\d.]+ ms, 2 tool\(s\)$")).wait_for()
    page.get_by_role("button", name="Restart clock").click()
    status.get_by_text("clock: restarted, ready").wait_for(timeout=30_000)
    # Live status is the manager's watch stream: a restart made behind the page's back
    # (its own API, not a button, so nothing redraws) reaches the status words by itself.
    shown = page.locator('[data-status-for="time"]')
    shown.evaluate("node => { node.textContent = 'stale'; }")
    page.evaluate("""async () => {
        const who = await (await fetch('/console/api/whoami')).json();
        await fetch('/console/api/mcp/time/restart', {method: 'POST', body: '{}',
          headers: {'content-type': 'application/json', 'x-csrf-token': who.csrf}});
    }""")
    shown.get_by_text("ready").wait_for(timeout=30_000)
    assert "mcp__time__get_current_time" in live.offered()


def test_removing_a_server_asks_first_then_writes_and_stops_it(live: Live) -> None:
    """After the control centre's test: removes the signed-in server."""
    page = live.page
    live.show("mcp")
    ask = page.get_by_role("button", name="Remove remote")
    ask.focus()
    page.keyboard.press("Enter")
    confirm = page.get_by_role("button", name="Yes, remove remote")
    assert page.evaluate("document.activeElement.textContent") == "Yes, remove remote"
    assert page.get_by_role("alert").get_by_text("Remove remote from the settings file?").count()
    # The confirmation is checked too (axe), then declined: nothing written.
    if page.evaluate("typeof window.axe") == "undefined":
        page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
    found = page.evaluate("async () => (await axe.run(document)).violations"
                          ".filter(v => ['serious', 'critical'].includes(v.impact))"
                          ".map(v => v.id)")
    assert found == []
    before = live.config.read_bytes()
    page.get_by_role("button", name="Keep it").click()
    assert confirm.count() == 0
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Remove remote"
    assert live.config.read_bytes() == before
    page.keyboard.press("Enter")
    page.get_by_role("button", name="Yes, remove remote").click()
    page.get_by_role("status").get_by_text("remote: removed").wait_for()
    assert 'id = "remote"' not in live.config.read_text(encoding="utf-8")
    assert page.get_by_role("region", name="server remote").count() == 0
    assert "mcp__remote__whoami" not in live.offered()  # stopped before the click answered
