"""One headless Chromium, driven by Playwright: its lifecycle, tabs, dialogs, downloads,
its request proxy (where the network policy is enforced) and the navigation router.

Choices a newcomer might undo:

* **Debian's chromium, never a downloaded browser.** ``executable_path`` points at the
  system's Chromium; ``playwright install`` is never needed or run.
* **A fresh, non-persistent context per session.** Nothing a site stores (cookies, local
  storage, saved passwords) outlives :meth:`BrowserSession.close`; no profile directory is
  ever written, so no credential can be persisted.
* **Shadow roots are opened.** The same init script makes ``attachShadow`` create open
  roots: a closed shadow root hides its controls from the accessibility snapshot, and every
  control must be addressable. (A page that checks ``element.shadowRoot === null`` for its
  own closed roots would see them; that is the price.)
* **Documents carry a token.** An init script gives every document (main frame and
  iframes) a random, non-writable ``window.__deepseekEyesDoc`` before any page script runs.
  Playwright's refs restart at ``e1`` in a new document; the token is how the state machine
  tells "the same element" from "a new element that happens to reuse the name".
* **A dialog never hangs an action.** A JavaScript ``alert``/``confirm``/``prompt`` blocks
  the page, and a Playwright action waiting on it would never return. Actions run through
  :meth:`BrowserSession.guarded`, which returns as soon as a dialog opens and parks the
  action until ``browser_dialog`` answers it.
* **Every request goes through our proxy.** Chromium is launched with the session's
  :class:`~deepseek_eyes.browser.proxy.RequestProxy` as its only way out (loopback
  included); the proxy decides each request, redirect hop and socket. The ``route`` handler
  only keeps navigation bookkeeping (page-load counting, early refusals with clear words).
* **A dialog storm ends.** Past ``browser.max_dialogs_per_minute`` dialogs, the tab that
  opens them is closed (a new empty tab replaces the last one), so ``for (;;) alert()``
  cannot hold the browser; stopping the script instead does not work between two alerts.
* **Settling waits on events, not sleeps.** After an action we wait (bounded by
  ``settle_timeout``) until the document requests and fetches it started have finished and
  the DOM has had no mutation for a short quiet period, measured inside the page.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from deepseek_eyes.browser.observe import SECRET_FIELD_JS
from deepseek_eyes.browser.policy import DEFAULT_PORTS, NavigationPolicy
from deepseek_eyes.browser.proxy import PROXY_ARGS, Refusal, RequestProxy, Resolver
from deepseek_eyes.errors import (
    FIX_CHROMIUM,
    FIX_PACKAGE,
    BrowserError,
    BrowserPolicyError,
    BrowserTimeoutError,
)
from deepseek_eyes.settings import BrowserSettings

if TYPE_CHECKING:
    from playwright.async_api import (
        Browser,
        BrowserContext,
        Dialog,
        Download,
        Page,
        Playwright,
        Request,
        Route,
    )

__all__ = ["CHROMIUM_ARGS", "BrowserSession", "DocInfo", "PendingDialog", "find_chromium"]

T = TypeVar("T")

CHROMIUM_ARGS = (
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
    "--disable-dev-shm-usage", "--password-store=basic",
)
DOC_TOKEN = "__deepseekEyesDoc"  # noqa: S105 - a property name, not a secret
_INIT_SCRIPT = f"""(() => {{
  try {{
    const attach = Element.prototype.attachShadow;
    Element.prototype.attachShadow = function (init) {{
      return attach.call(this, Object.assign({{}}, init, {{ mode: "open" }}));
    }};
  }} catch (e) {{}}
  try {{
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    const token = Array.from(bytes, b => b.toString(16).padStart(2, "0")).join("");
    Object.defineProperty(window, "{DOC_TOKEN}", {{
      value: token, writable: false, enumerable: false, configurable: false }});
  }} catch (e) {{}}
}})();"""
_DOC_INFO = f"""() => {{
  let modal = null;
  try {{
    const found = document.querySelector("dialog:modal") || Array.from(
      document.querySelectorAll('[aria-modal="true"]')).find(
        e => e.checkVisibility ? e.checkVisibility() : true);
    if (found) {{
      const heading = found.querySelector("h1,h2,h3,h4,legend");
      modal = (found.getAttribute("aria-label") || (heading ? heading.textContent : "")
               || "dialog").trim().slice(0, 120);
    }}
  }} catch (e) {{}}
  return {{ doc: window.{DOC_TOKEN} || null, url: location.href, title: document.title,
           width: innerWidth, height: innerHeight, x: scrollX, y: scrollY,
           scroll_height: document.documentElement ? document.documentElement.scrollHeight
                                                    : 0,
           modal }};
}}"""
_FRAME_TOKEN = f"e => e.ownerDocument.defaultView.{DOC_TOKEN} || null"
# Resolves once the DOM has not changed for quietMs (or after maxMs).
_QUIET = """([quietMs, maxMs]) => new Promise(resolve => {
  const start = performance.now(); let last = start;
  const observer = new MutationObserver(() => { last = performance.now(); });
  observer.observe(document, {subtree: true, childList: true, attributes: true,
                              characterData: true});
  const tick = () => {
    const now = performance.now();
    if (now - last >= quietMs || now - start >= maxMs) { observer.disconnect(); resolve(0); }
    else setTimeout(tick, 25);
  };
  setTimeout(tick, 25);
})"""
_QUIET_MS = 120
#: How long an action's settle waits, at most, for the tabs past ``max_tabs`` it opened to
#: be closed.
CLOSE_WAIT_S = 5.0
_TRACKED_REQUESTS = frozenset({"document", "xhr", "fetch"})
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._ -]+")
#: Events kept between two observations; more are counted, not kept.
MAX_EVENTS = 40
_DIALOG_WINDOW_S = 60.0
#: Frame URLs that name no host: their content is their parent's (srcdoc, data, blob).
_INLINE_FRAME_SCHEMES = frozenset({"about", "data", "blob"})
_MAX_FRAMES_CHECKED = 256


def find_chromium(settings: BrowserSettings) -> str:
    """The Chromium executable to drive.

    Raises:
        BrowserError: ``BROWSER_UNAVAILABLE`` when none is installed.
    """
    if settings.executable is not None:
        if settings.executable.is_file():
            return str(settings.executable)
        raise BrowserError(f"browser.executable {settings.executable} does not exist; point it "
                           f"at a Chromium, or install one: {FIX_CHROMIUM}",
                           code="BROWSER_UNAVAILABLE", details={"fix": FIX_CHROMIUM})
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file():
            return candidate
    raise BrowserError(f"Chromium is not installed; install it: {FIX_CHROMIUM}",
                       code="BROWSER_UNAVAILABLE", details={"fix": FIX_CHROMIUM})


@dataclass
class PendingDialog:
    """A JavaScript dialog waiting for an answer."""

    kind: str  # alert | confirm | prompt | beforeunload
    message: str
    default: str
    handle: Any  # playwright Dialog

    def describe(self) -> str:
        return f"{self.kind} {self.message[:500]!r}"


@dataclass(frozen=True)
class DocInfo:
    doc: str | None
    url: str
    title: str
    width: float
    height: float
    x: float
    y: float
    scroll_height: float
    modal: str | None


class BrowserSession:
    """A Chromium with one context; tabs, dialogs and downloads tracked.

    Not safe for concurrent actions: the caller (:class:`BrowserService`) serializes them.
    """

    def __init__(self, settings: BrowserSettings, *, downloads_dir: Path,
                 policy: NavigationPolicy | None = None, resolver: Resolver | None = None,
                 request_proxy: bool = True) -> None:
        """``resolver`` replaces the proxy's DNS (tests); ``request_proxy=False`` launches
        Chromium without the proxy, for the benchmark's baseline only."""
        self.settings = settings
        self.policy = policy or NavigationPolicy.from_settings(settings)
        self.downloads_dir = downloads_dir
        self.events: list[str] = []  # things that happened outside an action's own result
        self.proxy: RequestProxy | None = None
        self._resolver = resolver
        self._use_proxy = request_proxy
        self._dropped_events = 0
        self._refused: deque[Refusal] = deque(maxlen=64)
        self._dialog_times: deque[float] = deque()
        self._storming: set[Any] = set()  # pages closed for a dialog storm
        self.main_refusal: str | None = None  # the last main-frame load the policy blanked
        self.last_main_url: str | None = None  # the last main-frame request (or hop) sent
        self.dialog: PendingDialog | None = None
        self.navigations = 0
        self._pw: Playwright | None = None
        self._browser: Browser | None = None
        self._context: BrowserContext | None = None
        self._page: Page | None = None
        self._dialog_event = asyncio.Event()
        self._parked: list[asyncio.Future[Any]] = []
        self._inflight: set[Request] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._tasks: set[asyncio.Future[Any]] = set()
        #: Tabs being closed for ``max_tabs`` (see _on_page): an action's settle waits for
        #: them, so no observation after it counts more tabs than the limit.
        self._capped: set[asyncio.Future[Any]] = set()
        self._closing = False

    # -- lifecycle -----------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._context is not None

    async def start(self) -> None:
        """Launch Chromium and open one empty tab (idempotent).

        Raises:
            BrowserError: ``BROWSER_UNAVAILABLE``.
        """
        if self._context is not None:
            return
        executable = find_chromium(self.settings)
        try:
            from playwright.async_api import Error as PlaywrightError
            from playwright.async_api import async_playwright
        except ImportError as exc:
            raise BrowserError(
                f"the playwright package is not installed; reinstall DeepSeekEyes: {FIX_PACKAGE}",
                code="BROWSER_UNAVAILABLE", details={"fix": FIX_PACKAGE}) from exc
        incoming = self.downloads_dir / ".incoming"
        try:
            incoming.mkdir(parents=True, exist_ok=True)
            args = list(CHROMIUM_ARGS)
            proxy: dict[str, str] | None = None
            if self._use_proxy:
                self.proxy = RequestProxy(
                    self.policy, on_refusal=self._on_refusal, on_event=self._note,
                    resolver=self._resolver, connect_timeout=self.settings.navigation_timeout,
                    max_download_bytes=self.settings.max_download_bytes)
                await self.proxy.start()
                proxy = {"server": self.proxy.url, "bypass": "<-loopback>"}
                args += PROXY_ARGS
            self._pw = await async_playwright().start()
            self._browser = await self._pw.chromium.launch(
                executable_path=executable, headless=self.settings.headless,
                args=args, downloads_path=str(incoming), proxy=proxy,  # type: ignore[arg-type]
                timeout=self.settings.navigation_timeout * 1000)
            self._context = await self._browser.new_context(
                viewport={"width": self.settings.viewport_width,
                          "height": self.settings.viewport_height},
                accept_downloads=True, service_workers="block")
        except (PlaywrightError, OSError) as exc:
            await self.close()
            raise BrowserError(f"Chromium could not start: {str(exc).splitlines()[0][:300]}",
                               code="BROWSER_UNAVAILABLE") from None
        context = self._context
        context.set_default_timeout(self.settings.action_timeout * 1000)
        context.set_default_navigation_timeout(self.settings.navigation_timeout * 1000)
        await context.add_init_script(_INIT_SCRIPT)
        await context.route("**/*", self._route)
        context.on("page", self._on_page)
        self._page = await context.new_page()

    async def close(self) -> None:
        """Close the browser; answers a pending dialog first. Nothing is kept."""
        self._closing = True
        for task in list(self._tasks) + self._parked:
            task.cancel()
        self._parked.clear()
        if self.dialog is not None:
            with contextlib.suppress(Exception):
                await self.dialog.handle.dismiss()
            self.dialog = None
        for closer in (self._context, self._browser):
            if closer is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(closer.close(), 15)
        if self._pw is not None:
            with contextlib.suppress(Exception):
                await self._pw.stop()
        if self.proxy is not None:
            await self.proxy.close()
        self._pw = self._browser = self._context = self._page = None
        self.proxy = None
        self._closing = False

    @property
    def page(self) -> Page:
        if self._page is None:
            raise BrowserError("the browser is not started", code="BROWSER_UNAVAILABLE")
        return self._page

    @property
    def tabs(self) -> int:
        return len(self._context.pages) if self._context is not None else 0

    # -- events --------------------------------------------------------------------------
    def _spawn(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Future[Any]) -> None:
        """A background task's failure (a tab closed under it) is no one's to raise."""
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()

    def _note(self, text: str) -> None:
        """An event for the next observation; past MAX_EVENTS they are only counted."""
        if len(self.events) < MAX_EVENTS:
            self.events.append(text)
        else:
            self._dropped_events += 1

    def _on_refusal(self, refusal: Refusal) -> None:
        self._refused.append(refusal)
        self._note(refusal.describe())

    def proxy_refusal(self, url: str) -> str | None:
        """Why the proxy refused a load of ``url`` recently (its URL, or its origin for a
        tunnel), or None."""
        try:
            parts = urlsplit(url)
            origin = f"{parts.hostname}:{parts.port or DEFAULT_PORTS.get(parts.scheme, 0)}"
        except ValueError:
            return None
        bare = url.split("#", 1)[0]
        for refusal in reversed(self._refused):
            if refusal.target == bare or (refusal.method == "CONNECT"
                                          and refusal.origin == origin):
                return refusal.reason
        return None

    def _on_page(self, page: Page) -> None:
        self._watch(page)
        if self._context is not None and len(self._context.pages) > self.settings.max_tabs:
            self._note(f"a new tab was closed: at most {self.settings.max_tabs} tabs "
                               "(browser.max_tabs)")
            closing = asyncio.ensure_future(page.close())
            self._capped.add(closing)
            closing.add_done_callback(self._capped.discard)
            self._spawn(closing)
            return
        if self._page is not None:
            self._note("a new tab opened and is now the active tab")
        self._page = page

    def _watch(self, page: Page) -> None:
        page.on("dialog", self._on_dialog)
        page.on("download", lambda d: self._spawn(self._save_download(d)))
        page.on("close", self._on_close)
        page.on("framenavigated", lambda frame: self._on_navigated(page, frame))
        page.on("request", self._on_request)
        page.on("requestfinished", self._on_request_done)
        page.on("requestfailed", self._on_request_done)

    def _on_close(self, page: Page) -> None:
        if self._closing or page is not self._page or self._context is None:
            return
        remaining = [p for p in self._context.pages if p is not page]
        if remaining:
            self._page = remaining[-1]
            self._note("the tab closed; the previous tab is active again")
        else:
            self._page = None
            self._note("the last tab closed; a new empty tab was opened")
            self._spawn(self._context.new_page())

    def _on_dialog(self, dialog: Dialog) -> None:
        if self.dialog is not None:  # cannot happen while one blocks; never leave one open
            self._spawn(dialog.dismiss())
            return
        now = time.monotonic()
        while self._dialog_times and now - self._dialog_times[0] > _DIALOG_WINDOW_S:
            self._dialog_times.popleft()
        if len(self._dialog_times) >= self.settings.max_dialogs_per_minute:
            self._spawn(self._end_storm(dialog))
            return
        self._dialog_times.append(now)
        self.dialog = PendingDialog(dialog.type, dialog.message, dialog.default_value, dialog)
        self._dialog_event.set()

    async def _end_storm(self, dialog: Dialog) -> None:
        """A dialog past the per-minute bound: its tab is closed (Chromium stops the script
        with it; ``Runtime.terminateExecution`` does not reach a script between two
        alerts) and the rest of the browser carries on."""
        page = dialog.page
        if page is not None and page not in self._storming:
            self._storming.add(page)
            self._note(f"more than {self.settings.max_dialogs_per_minute} dialogs in a "
                       "minute: the tab that opened them was closed "
                       "(browser.max_dialogs_per_minute)")
            self._spawn(page.close(run_before_unload=False))
        with contextlib.suppress(Exception):
            await dialog.dismiss()

    def _on_navigated(self, page: Page, frame: Any) -> None:
        if frame is not page.main_frame:
            self._check_subframe(frame)
            return
        url = frame.url
        if url.startswith("chrome-error:"):
            # A load that failed shows Chromium's error page: nothing was loaded. When the
            # proxy refused it (a hop included), say so and show an empty tab instead.
            url = self.last_main_url or ""
            reason = self.proxy_refusal(url) if url else None
        else:
            reason = self.policy.refusal(url) or self.proxy_refusal(url)
        if reason is not None:
            self.main_refusal = reason
            self._note(f"navigation to {json.dumps(url[:200])} was blocked ({reason}); the "
                       "tab shows about:blank")
            self._spawn(page.goto("about:blank"))

    def _frame_refusal(self, frame: Any) -> str | None:
        """A frame is a document the model reads, so it is held to what a visit is
        (``allow_hosts``, not the CDN list ``allow_subresource_hosts``), whichever hop its
        load ended on."""
        url = str(frame.url)
        scheme = url.split(":", 1)[0].lower()
        if scheme in _INLINE_FRAME_SCHEMES or url.startswith("chrome-error:"):
            return None
        return self.policy.refusal(url)

    def _check_subframe(self, frame: Any) -> None:
        """A frame whose load ended somewhere refused is emptied (and said so) at once."""
        reason = self._frame_refusal(frame)
        if reason is None:
            return
        self._note(f"a frame's page {json.dumps(str(frame.url)[:200])} was blocked ({reason}); "
                   "the frame shows about:blank")
        self._spawn(frame.goto("about:blank"))

    async def _empty_refused_frames(self) -> None:
        """Before a snapshot: any frame still on a refused page is emptied first, so the
        snapshot never races the emptying :meth:`_check_subframe` started."""
        page = self.page
        for frame in page.frames[:_MAX_FRAMES_CHECKED]:
            if frame is page.main_frame or self._frame_refusal(frame) is None:
                continue
            with contextlib.suppress(Exception):
                await frame.goto("about:blank", timeout=self.settings.action_timeout * 1000)

    def _on_request(self, request: Request) -> None:
        if request.resource_type == "document" and self._main_frame_request(request):
            self.last_main_url = request.url  # redirect hops come as requests of their own
        if request.resource_type in _TRACKED_REQUESTS:
            self._inflight.add(request)
            self._idle.clear()

    def _on_request_done(self, request: Request) -> None:
        self._inflight.discard(request)
        if not self._inflight:
            self._idle.set()

    async def _route(self, route: Route) -> None:
        request = route.request
        navigation = request.is_navigation_request()
        if not navigation and self.proxy is not None and request.url.startswith(
                ("http:", "https:")):
            reason = None  # the proxy decides every fetch (and says so in an event)
        else:
            reason = self.policy.refusal(request.url, navigation=navigation)
        main = navigation and self._main_frame_request(request)
        if reason is None and main:
            if self.navigations >= self.settings.max_navigations:
                reason = (f"the session's limit of {self.settings.max_navigations} page "
                          "loads is reached (browser.max_navigations)")
            else:
                self.navigations += 1
        if reason is None:
            with contextlib.suppress(Exception):  # the page may be gone already
                await route.continue_()
            return
        if navigation:
            self._note(f"navigation to {request.url[:200]!r} was blocked: {reason}")
        with contextlib.suppress(Exception):
            await route.abort("blockedbyclient")

    @staticmethod
    def _main_frame_request(request: Request) -> bool:
        try:
            return request.frame.parent_frame is None
        except Exception:  # a popup's first request comes before its frame exists
            return True

    async def _save_download(self, download: Download) -> None:
        base = download.suggested_filename.replace("\\", "/").rsplit("/", 1)[-1]
        name = _SAFE_NAME.sub("_", base).lstrip(". ")[:120] or "download"
        target = self.downloads_dir / name
        stem, suffix = target.stem, target.suffix
        number = 1
        while target.exists():
            number += 1
            target = self.downloads_dir / f"{stem} ({number}){suffix}"
        origin: tuple[str, int] | None = None
        with contextlib.suppress(ValueError):
            parts = urlsplit(download.url)
            if parts.hostname:
                origin = (parts.hostname, parts.port or DEFAULT_PORTS.get(parts.scheme, 0))
        if self.proxy is not None and origin is not None:
            self.proxy.cap_origin(*origin)  # cut while streaming, not after it is on disk
        try:
            await download.save_as(target)
        except Exception as exc:  # a failed or cancelled download is reported, not raised
            self._note(f"download {name!r} failed: {str(exc).splitlines()[0][:200]}")
            return
        finally:
            if self.proxy is not None and origin is not None:
                self.proxy.uncap_origin(*origin)
            with contextlib.suppress(Exception):
                await download.delete()
        size = target.stat().st_size
        if size > self.settings.max_download_bytes:
            target.unlink(missing_ok=True)
            self._note(f"download {name!r} ({size} bytes) was deleted: over "
                               f"browser.max_download_bytes ({self.settings.max_download_bytes})")
            return
        self._note(f"downloaded {target.name!r} ({size} bytes) to {self.downloads_dir}")

    async def background_done(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) for the work started by page events so far:
        downloads being saved, dialogs being dismissed."""
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    def drain_events(self) -> list[str]:
        out, self.events = self.events, []
        if self._dropped_events:
            out.append(f"{self._dropped_events} more events were not kept")
            self._dropped_events = 0
        return out

    # -- guarded actions -----------------------------------------------------------------
    async def guarded(self, work: Callable[[], Awaitable[T]], *, timeout: float,
                      what: str) -> tuple[bool, T | None]:
        """Run ``work``; (True, result) when it finished, (False, None) when a dialog opened
        first (the work is parked until the dialog is answered).

        Raises:
            BrowserError: ``BROWSER_DIALOG_OPEN`` when a dialog is already open;
                ``BROWSER_ACTION_TIMEOUT`` after ``timeout`` seconds.
        """
        if self.dialog is not None:
            raise BrowserError(f"a {self.dialog.kind} dialog blocks the page; answer it with "
                               "browser_dialog first", code="BROWSER_DIALOG_OPEN")
        self._dialog_event.clear()
        task = asyncio.ensure_future(work())
        opened = asyncio.ensure_future(self._dialog_event.wait())
        try:
            done, _ = await asyncio.wait({task, opened}, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            opened.cancel()
        if task in done:
            return True, task.result()
        if self.dialog_open():  # opened while the work ran (a fresh read, not the check above)
            self._parked.append(task)
            return False, None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise BrowserTimeoutError(f"{what} did not finish within {timeout:g} s",
                                  code="BROWSER_ACTION_TIMEOUT", details={"timeout_s": timeout})

    def dialog_open(self) -> bool:
        return self.dialog is not None

    async def answer_dialog(self, accept: bool, text: str | None) -> PendingDialog:
        """Accept or dismiss the open dialog, then let the action it interrupted finish.

        Raises:
            BrowserError: ``BROWSER_NO_DIALOG``.
        """
        dialog = self.dialog
        if dialog is None:
            raise BrowserError("no dialog is open", code="BROWSER_NO_DIALOG")
        self.dialog = None
        self._dialog_event.clear()
        with contextlib.suppress(Exception):  # the page may have closed it already
            if accept:
                await dialog.handle.accept(text if text is not None else None)
            else:
                await dialog.handle.dismiss()
        # Let the interrupted action finish, unless it opens the next dialog (a prompt,
        # then a confirm): then it stays parked behind that one.
        pending = {t for t in self._parked if not t.done()}
        opened = asyncio.ensure_future(self._dialog_event.wait())
        deadline = time.monotonic() + self.settings.action_timeout
        try:
            while pending and not opened.done():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                done, _ = await asyncio.wait({*pending, opened}, timeout=left,
                                             return_when=asyncio.FIRST_COMPLETED)
                pending -= done
        finally:
            opened.cancel()
        for task in self._parked:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: the action's own failure is not ours to raise
            elif not task.done() and not self.dialog_open():
                task.cancel()  # no dialog holds it and it did not finish in time
        self._parked = [t for t in self._parked if not t.done()]
        return dialog

    async def settle(self) -> None:
        """Wait until the requests an action started are done and the DOM is quiet, at most
        ``settle_timeout`` seconds in all, and until the tabs it opened past ``max_tabs``
        are closed (their closes run as page events arrive; at most :data:`CLOSE_WAIT_S`
        more). Never raises: a page that does not settle is observed as it is."""
        await self._settle_page()
        closing = [t for t in self._capped if not t.done()]
        if closing:
            await asyncio.wait(closing, timeout=CLOSE_WAIT_S)

    async def _settle_page(self) -> None:
        budget = self.settings.settle_timeout
        if budget <= 0 or self.dialog is not None:
            return
        deadline = time.monotonic() + budget
        for _ in range(3):  # a navigation or a late request restarts it, a few times at most
            left = deadline - time.monotonic()
            if left <= 0 or self.dialog is not None:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), left)
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                page = self.page
                ok, _ = await self.guarded(
                    lambda page=page, left=left: page.evaluate(  # type: ignore[misc]
                        _QUIET, [_QUIET_MS, int(left * 1000)]),
                    timeout=left + 1, what="settling")
                if ok:
                    with contextlib.suppress(Exception):
                        await page.wait_for_load_state(
                            "load", timeout=max(1.0, deadline - time.monotonic()) * 1000)
                if self._idle.is_set():
                    return
                # A request the action started reached us only while the DOM was quiet
                # (Playwright reports it a moment after the click returns): wait for it,
                # and for the DOM it changes, again.
            except BrowserError:
                return
            except Exception:  # the document was replaced while we waited: wait for it
                with contextlib.suppress(Exception):
                    await self.page.wait_for_load_state(
                        "domcontentloaded", timeout=max(0.1, deadline - time.monotonic()) * 1000)

    # -- reading -------------------------------------------------------------------------
    async def doc_info(self) -> DocInfo:
        ok, raw = await self.guarded(lambda: self.page.evaluate(_DOC_INFO),
                                     timeout=self.settings.action_timeout, what="reading the page")
        if not ok or not isinstance(raw, dict):
            return DocInfo(None, self.page.url, "", self.settings.viewport_width,
                           self.settings.viewport_height, 0, 0, 0, None)
        return DocInfo(raw.get("doc"), str(raw.get("url", "")), str(raw.get("title", "")),
                       float(raw.get("width") or 0), float(raw.get("height") or 0),
                       float(raw.get("x") or 0), float(raw.get("y") or 0),
                       float(raw.get("scroll_height") or 0), raw.get("modal"))

    async def snapshot(self) -> str | None:
        """The AI-mode aria snapshot with boxes; None when a dialog opened meanwhile.

        Raises:
            BrowserTimeoutError: ``BROWSER_ACTION_TIMEOUT``.
        """
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        # Reading a loaded page may take as long as loading it: a 1 MB documentation page's
        # snapshot takes seconds on two cores.
        timeout = self.settings.navigation_timeout
        await self._empty_refused_frames()
        try:
            ok, text = await self.guarded(
                lambda: self.page.aria_snapshot(mode="ai", boxes=True, timeout=timeout * 1000),
                timeout=timeout + 1, what="the accessibility snapshot")
        except PlaywrightTimeout:
            raise BrowserTimeoutError(
                f"the page is too large to read within {timeout:g} s "
                "(browser.navigation_timeout)", code="BROWSER_ACTION_TIMEOUT") from None
        return text if ok else None

    async def frame_token(self, iframe_ref: str) -> str | None:
        """The document token of the frame an iframe element (by Playwright ref) holds."""
        with contextlib.suppress(Exception):
            value = await self.page.get_by_ref(iframe_ref).content_frame.locator(
                ":root").evaluate(_FRAME_TOKEN, timeout=2000)
            return value if isinstance(value, str) else None
        return None

    async def secret_values(self) -> set[str]:
        """The current values of secret fields (passwords, one-time codes, card data: see
        :data:`~deepseek_eyes.browser.observe.SECRET_FIELD_JS`; every frame, shadow DOM
        included), so an observation can hide them wherever the accessibility tree shows
        them."""
        found: set[str] = set()
        for frame in self.page.frames[:32]:
            with contextlib.suppress(Exception):
                values = await frame.locator("input, textarea").evaluate_all(
                    f"els => els.filter({SECRET_FIELD_JS}).map(e => e.value).filter(v => v)")
                found.update(v for v in values if isinstance(v, str))
        return found

    def check_navigation(self, url: str) -> None:
        """Raises BrowserPolicyError before a navigation the policy or a bound refuses."""
        self.policy.check(url)
        if self.navigations >= self.settings.max_navigations:
            raise BrowserPolicyError(
                f"the session's limit of {self.settings.max_navigations} page loads is reached",
                code="BROWSER_LIMIT", details={"max_navigations": self.settings.max_navigations})
