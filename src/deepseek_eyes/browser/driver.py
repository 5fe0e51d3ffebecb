"""What a browser tool acts through: the session, the state book, capture and results.

:class:`BrowserDriver` owns the browser of one session and everything a handler
(:mod:`~deepseek_eyes.browser.actions`) needs to act on it: observe the page into a new
state (snapshot, refs bound to the documents they were seen in, the delta), resolve a ref of
a state (refused when its document was replaced), capture and store screenshots, and build
results. The call pipeline that runs a handler under the lock and records it is
:class:`~deepseek_eyes.browser.service.BrowserService`, a driver with a ``call``; keeping
the two apart is what lets the handlers import this module and the service import the
handlers, with no cycle.

The browser starts on the first call that needs it and restarts after ``browser_close``;
state ids and refs keep counting across restarts, so an id from before a restart is stale,
never mistaken for a new one.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from deepseek_eyes.audit import AuditLog
from deepseek_eyes.browser.calls import Args, ToolResult
from deepseek_eyes.browser.observe import PageView, build_view
from deepseek_eyes.browser.pages import Rendered, render_page
from deepseek_eyes.browser.present import (
    clean_event,
    delta_text,
    observation_text,
    state_data,
    state_header,
)
from deepseek_eyes.browser.proxy import Resolver
from deepseek_eyes.browser.report import ReportRecorder
from deepseek_eyes.browser.screenshots import MAX_SCREENSHOT_PIXELS, Screenshot, identify_png
from deepseek_eyes.browser.session import BrowserSession, DocInfo
from deepseek_eyes.browser.snapshot import AriaNode, parse_snapshot
from deepseek_eyes.browser.state import BrowserState, StateBook, StateDelta
from deepseek_eyes.errors import BrowserError, BrowserStaleError, DeepSeekEyesError
from deepseek_eyes.settings import BrowserSettings
from deepseek_eyes.store.blobs import BlobStore
from deepseek_eyes.toolkit.visual import should_deliver
from deepseek_eyes.untrusted import escape_controls, fence, redact_url, redact_urls_in

if TYPE_CHECKING:
    from playwright.async_api import Locator

__all__ = ["BrowserDriver", "Handler"]

#: One tool: checks its arguments, acts through the driver, answers (or raises a coded error).
Handler = Callable[["BrowserDriver", Args], Awaitable[ToolResult]]

#: A delta larger than this many changed controls is answered with a whole observation.
DELTA_LIMIT = 40
MAX_FRAMES = 32
_THREAD_SNAPSHOT_CHARS = 200_000


def _iframe_refs(roots: list[AriaNode]) -> list[str]:
    out: list[str] = []
    stack = list(roots)
    while stack and len(out) < MAX_FRAMES:
        node = stack.pop()
        if node.role == "iframe" and node.ref:
            out.append(node.ref)
        stack.extend(node.children)
    return out


class BrowserDriver:
    def __init__(self, settings: BrowserSettings, *, downloads_dir: Path,
                 blobs: BlobStore | None = None, audit: AuditLog | None = None,
                 owner: str | None = None, data_dir: Path | None = None,
                 resolver: Resolver | None = None, request_proxy: bool = True) -> None:
        """``resolver`` and ``request_proxy`` are the session's (tests and the benchmark)."""
        self.settings = settings
        self._resolver = resolver
        self._request_proxy = request_proxy
        self.downloads_dir = downloads_dir
        self.blobs = blobs
        # The data directory, whose files are never uploaded (by identity, not only by
        # path); the blob store lives at <data dir>/blobs, so it names it when not given.
        self.data_dir = data_dir if data_dir is not None else (
            blobs.root.parent if blobs is not None else None)
        self.audit = audit  # one privacy-reduced row per call, on the audit chain
        self.owner = owner
        self.book = StateBook()
        self.report = ReportRecorder()
        self.session: BrowserSession | None = None
        self.stored_reports: list[str] = []
        # Set by a handler once it has resolved the element its typed text goes to and
        # found it not secret; until then (a refusal before resolution included) the report
        # keeps only that text's length and hash.
        self.typed_target_plain = False
        self._lock = asyncio.Lock()

    # -- results -------------------------------------------------------------------------
    def failure(self, exc: DeepSeekEyesError, *, extra: Mapping[str, Any] | None = None,
                text: str = "") -> ToolResult:
        current = self.book.current
        error = exc.to_dict()
        # A message may carry a browser error's words or a URL the page chose: redacted and
        # escaped; page strings a handler attached (a select's options) go in the fence.
        error["message"] = escape_controls(redact_urls_in(str(error.get("message", ""))))
        error["details"] = details = dict(error.get("details") or {})
        page_text = details.pop("page_text", None)
        data: dict[str, Any] = {"error": error, **(extra or {})}
        if current is not None:
            data.setdefault("state_id", current.state_id)
        head = f"{exc.code}: {error['message']}"
        if isinstance(page_text, list) and page_text:
            head += "\n" + fence([str(line) for line in page_text[:40]])
        return ToolResult(f"{head}\n{text}" if text else head, data, is_error=True)

    async def refused(self, exc: BrowserStaleError) -> ToolResult:
        """A refusal that carries a fresh observation (a new state to plan on)."""
        try:
            state, _, events = await self.observe()
        except DeepSeekEyesError:
            return self.failure(exc)
        rendered = render_page(state.view, 1, self.settings.observe_page_chars)
        text = observation_text(state, rendered, events=events,
                                lead=["Nothing was done. The page now:"])
        return self.failure(exc, extra={**state_data(state, rendered)}, text=text)

    def page_result(self, state: BrowserState, *, page: int = 1, detail: str = "compact",
                    find: str | None = None, lead: tuple[str, ...] = (),
                    events: tuple[str, ...] | list[str] = (),
                    delta: StateDelta | None = None) -> ToolResult:
        rendered: Rendered = render_page(state.view, page, self.settings.observe_page_chars,
                                         detail=detail, find=find)
        text = observation_text(state, rendered, events=events, lead=lead, find=find)
        data = state_data(state, rendered)
        if delta is not None:
            data["delta"] = delta.to_dict()
        if events:
            data["events"] = list(events)
        return ToolResult(text, data)

    def delta_result(self, state: BrowserState, delta: StateDelta, *, action: str,
                     events: list[str]) -> ToolResult:
        """The delta, or the whole first page when the document was replaced or most of
        the page changed."""
        if delta.document_replaced or delta.size > DELTA_LIMIT:
            return self.page_result(state, lead=(f"after {action}:",), events=events,
                                    delta=delta)
        text = delta_text(state, delta, action=action, events=events)
        data = state_data(state)
        data["delta"] = delta.to_dict()
        if events:
            data["events"] = events
        return ToolResult(text, data)

    # -- the browser -----------------------------------------------------------------------
    async def ensure_session(self) -> BrowserSession:
        if self.session is None:
            self.session = BrowserSession(self.settings, downloads_dir=self.downloads_dir,
                                          resolver=self._resolver,
                                          request_proxy=self._request_proxy)
        if not self.session.started:
            await self.session.start()
        return self.session

    async def observe(self) -> tuple[BrowserState, StateDelta, list[str]]:
        """A new state of the active tab: snapshot, refs bound to documents, delta."""
        session = await self.ensure_session()
        for _ in range(2):  # the document may be replaced while we read it: read it again
            state = await self._read_state(session)
            if state is not None:
                break
        else:
            state = await self._read_state(session, settle_for_document=False)
        if state is None:  # still moving; take what we have
            raise BrowserError("the page kept changing while it was read; try again",
                               code="BROWSER_ACTION_FAILED")
        delta = self.book.commit(state)
        return state, delta, [clean_event(e) for e in session.drain_events()]

    async def _read_state(self, session: BrowserSession, *,
                          settle_for_document: bool = True) -> BrowserState | None:
        if session.dialog is not None:
            return self._dialog_state(session)
        info = await session.doc_info()
        text = await session.snapshot()
        if text is None or session.dialog is not None:
            return self._dialog_state(session)
        if len(text) > _THREAD_SNAPSHOT_CHARS:
            parsed = await anyio.to_thread.run_sync(parse_snapshot, text)
        else:
            parsed = parse_snapshot(text)
        frames: dict[str, str | None] = {}
        refs = _iframe_refs(parsed.roots)
        tokens = await asyncio.gather(*(session.frame_token(r) for r in refs))
        frames.update(zip(refs, tokens, strict=True))
        document = info.doc or f"unknown:{uuid.uuid4().hex}"
        keys = {"": document, **{r: t or f"unknown:{uuid.uuid4().hex}" for r, t in
                                 frames.items()}}
        registry = self.book.registry

        def allocate(frame: str, pw_ref: str) -> str:
            return registry.public(keys.get(frame) or keys[""], pw_ref)

        viewport = (info.width or self.settings.viewport_width,
                    info.height or self.settings.viewport_height)
        secrets = frozenset(await session.secret_values())
        view: PageView = build_view(parsed.roots, allocate, viewport, secrets=secrets)
        if settle_for_document:
            again = await session.doc_info()
            if session.dialog is None and again.doc != info.doc:
                return None
        return self._state(info, view, frames, truncated=parsed.truncated)

    def _state(self, info: DocInfo, view: PageView, frames: dict[str, str | None], *,
               truncated: bool) -> BrowserState:
        if truncated:
            view.notices.append("note: the page is larger than the snapshot limit; its end "
                                "is not shown")
        return BrowserState(self.book.next_id(), redact_url(info.url), info.title, info.doc,
                            view,
                            modal=info.modal, frames=frames,
                            viewport=(info.width, info.height), scroll=(info.x, info.y),
                            scroll_height=info.scroll_height)

    def _dialog_state(self, session: BrowserSession) -> BrowserState:
        dialog = session.dialog
        page = session.page
        current = self.book.current
        return BrowserState(self.book.next_id(), redact_url(page.url),
                            current.title if current else "", current.document if current
                            else None, PageView(),
                            dialog=dialog.kind if dialog else None,
                            dialog_message=dialog.message if dialog else "")

    async def resolve(self, state: BrowserState, ref: str) -> Locator:
        """The element ``ref`` names in ``state``, if that is still the page's element.

        Raises:
            BrowserStaleError: ``BROWSER_REF_NOT_FOUND`` (unknown ref, element gone, or its
                frame's document replaced) or ``BROWSER_STATE_STALE`` (the main document was
                replaced since the state was observed).
        """
        session = await self.ensure_session()
        if session.dialog is not None:
            raise BrowserError(f"a {session.dialog.kind} dialog blocks the page; answer it "
                               "with browser_dialog first", code="BROWSER_DIALOG_OPEN")
        control = state.control(ref)
        if control is None:
            raise BrowserStaleError(
                f"ref {ref[:40]!r} is not in state {state.state_id} (refs belong to the state "
                "they were observed in)", code="BROWSER_REF_NOT_FOUND",
                details={"ref": ref[:40], "state_id": state.state_id})
        if control.frame == "":
            info = await session.doc_info()
            if info.doc != state.document:
                raise BrowserStaleError(
                    f"the page loaded a new document since state {state.state_id}; the "
                    "action was not executed", code="BROWSER_STATE_STALE",
                    details={"state_id": state.state_id})
        else:
            token = await session.frame_token(control.frame)
            if token is None or token != state.frames.get(control.frame):
                raise BrowserStaleError(
                    f"the frame holding {ref} loaded a new document since state "
                    f"{state.state_id}", code="BROWSER_REF_NOT_FOUND",
                    details={"ref": ref, "state_id": state.state_id})
        locator = session.page.get_by_ref(control.pw_ref)
        if await locator.count() != 1:
            raise BrowserStaleError(f"the element {ref} is no longer on the page",
                                    code="BROWSER_REF_NOT_FOUND",
                                    details={"ref": ref, "state_id": state.state_id})
        return locator

    async def capture(self, *, locator: Locator | None = None, full_page: bool = False,
                      state_id: str | None, ref: str | None = None) -> Screenshot:
        """A lossless PNG of the viewport, the page or one element, hashed and stored."""
        session = await self.ensure_session()
        timeout = self.settings.action_timeout * 1000
        if locator is not None:
            png = await locator.screenshot(type="png", timeout=timeout, animations="disabled")
        else:
            page = session.page
            clip = None
            if full_page:
                info = await session.doc_info()
                across = max(1.0, info.width)
                down = min(info.scroll_height or info.height, MAX_SCREENSHOT_PIXELS / across)
                clip = {"x": 0, "y": 0, "width": across, "height": down}
            png = await page.screenshot(type="png", timeout=timeout, full_page=full_page,
                                        clip=clip, animations="disabled")  # type: ignore[arg-type]
        sha, pixels, width, height = await anyio.to_thread.run_sync(identify_png, png)
        stored = False
        if self.blobs is not None:
            await anyio.to_thread.run_sync(lambda: self.blobs.put(png, sha256=sha))  # type: ignore[union-attr]
            stored = True
        shot = Screenshot(png, sha, pixels, width, height, state_id, ref, full_page, stored)
        self.report.add_screenshot(shot.to_dict())
        return shot

    def wants_pixels(self, *, requested: bool = False, explicit: bool = False,
                     thin: bool = False) -> bool:
        return should_deliver(self.settings.visual_mode, requested=requested,
                              explicit=explicit, thin=thin)

    async def with_pixels(self, result: ToolResult, *, requested: bool = False,
                          thin: bool = False) -> ToolResult:
        """Attach a viewport screenshot when the visual mode says this result needs one."""
        if result.is_error or not self.wants_pixels(requested=requested, thin=thin):
            return result
        state = self.book.current
        if state is None or state.dialog:
            return result
        shot = await self.capture(state_id=state.state_id)
        result.screenshot, result.deliver = shot, True
        result.data["screenshot"] = shot.to_dict()
        return result

    def header(self) -> list[str]:
        return state_header(self.book.current) if self.book.current else []

    async def aclose(self) -> None:
        async with self._lock:
            if self.session is not None:
                await self.session.close()
                self.session = None
