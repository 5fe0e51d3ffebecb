"""One handler per browser tool; :class:`~deepseek_eyes.browser.service.BrowserService`
runs them under its lock, and they act through its :class:`BrowserDriver` side (this module
never imports the service: that would be a cycle).

Each handler checks its arguments, then (for anything that touches an element) the state
and the ref through :meth:`BrowserDriver.resolve`, and only then acts. Cheap checks that
fail at once come before Playwright's own waits: a disabled button or a read-only field is
refused immediately instead of after the action timeout.
"""

from __future__ import annotations

import json
import mimetypes
import os
import re
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from deepseek_eyes.browser.calls import MAX_TEXT, Args, ToolResult
from deepseek_eyes.browser.driver import BrowserDriver, Handler
from deepseek_eyes.browser.observe import SECRET_FIELD_JS
from deepseek_eyes.browser.report import Assertion
from deepseek_eyes.errors import (
    BrowserError,
    BrowserPolicyError,
    BrowserTimeoutError,
)
from deepseek_eyes.store.identity import DataFiles, refusal_reason
from deepseek_eyes.toolkit.report import verdict
from deepseek_eyes.toolkit.visual import should_deliver
from deepseek_eyes.untrusted import fence, quote, redact_url, redact_url_part, secret_digest

if TYPE_CHECKING:
    from playwright.async_api import FilePayload, Locator

__all__ = ["HANDLERS"]

MAX_PAGE_TEXT = 2_000_000
MAX_FRAMES = 32
_SELECT_OPTIONS = ("e => e.tagName === 'SELECT' ? Array.from(e.options).map(o => [o.value, "
                   "o.label || o.text]) : null")
_IS_FILE_INPUT = "e => e.tagName === 'INPUT' && e.type === 'file'"
_SCROLL = """([dx, dy]) => {
  const el = document.scrollingElement || document.documentElement;
  const before = [el.scrollLeft, el.scrollTop];
  el.scrollBy({left: dx, top: dy, behavior: "instant"});
  return before[0] !== el.scrollLeft || before[1] !== el.scrollTop;
}"""
_FRAMES_SETTLED = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
_KEY = re.compile(r"^[\x21-\x7e]([\x20-\x7e]{0,58}[\x21-\x7e])?$")


def _playwright_errors() -> tuple[type[Exception], type[Exception]]:
    from playwright.async_api import Error, TimeoutError

    return Error, TimeoutError


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


async def _act(svc: BrowserDriver, work: Callable[[], Awaitable[Any]], *, action: str,
               full: bool = False) -> ToolResult:
    """Run ``work`` on the page, let it settle, observe: the delta (or, with ``full``, the
    new first page)."""
    session = await svc.ensure_session()
    error, timeout_error = _playwright_errors()
    try:
        finished, _ = await session.guarded(work, timeout=svc.settings.action_timeout + 2,
                                            what=action)
    except timeout_error as exc:
        raise BrowserTimeoutError(
            f"{action} did not finish within {svc.settings.action_timeout:g} s (is the element "
            f"covered, hidden or still loading?): {_first_line(exc)}",
            code="BROWSER_ACTION_TIMEOUT") from None
    except error as exc:
        raise BrowserError(f"{action} failed: {_first_line(exc)}",
                           code="BROWSER_ACTION_FAILED") from None
    if finished:
        await session.settle()
    state, delta, events = await svc.observe()
    if full:
        result = svc.page_result(state, lead=(f"after {action}:",), events=events, delta=delta)
    else:
        result = svc.delta_result(state, delta, action=action, events=events)
    return await svc.with_pixels(result, thin=full and state.view.thin)


async def _target(svc: BrowserDriver, args: Args) -> tuple[Locator, str]:
    state = svc.book.require(args.raw("state_id"))
    ref = args.require("ref", limit=40)
    return await svc.resolve(state, ref), ref


async def _refuse_unless(locator: Locator, check: str, what: str, ref: str) -> None:
    error, _ = _playwright_errors()
    try:
        ok = await getattr(locator, check)(timeout=2000)
    except error as exc:
        raise BrowserError(f"{ref} cannot take this action: {_first_line(exc)}",
                           code="BROWSER_ACTION_FAILED") from None
    if not ok:
        raise BrowserError(f"{ref} is {what}; nothing was done", code="BROWSER_ACTION_FAILED",
                           details={"ref": ref})


# -- tools --------------------------------------------------------------------------------


async def navigate(svc: BrowserDriver, args: Args) -> ToolResult:
    url = args.require("url", limit=8192)
    session = await svc.ensure_session()
    session.check_navigation(url)
    error, timeout_error = _playwright_errors()
    timeout = svc.settings.navigation_timeout
    notes: list[str] = []
    status: int | None = None
    session.main_refusal = session.last_main_url = None
    try:
        _, response = await session.guarded(
            lambda: session.page.goto(url, wait_until="load", timeout=timeout * 1000),
            timeout=timeout + 5, what="loading the page")
        status = response.status if response is not None else None
    except timeout_error:
        notes.append(f"the page did not finish loading within {timeout:g} s; this is how far "
                     "it got")
    except error as exc:
        message = _first_line(exc)
        refused = session.proxy_refusal(session.last_main_url or url)
        if "ERR_BLOCKED_BY_CLIENT" in message or refused is not None:
            reasons = [e for e in session.drain_events() if "blocked" in e]
            raise BrowserPolicyError(
                f"navigation refused: {refused}" if refused else (
                    reasons[0] if reasons else "navigation refused by the policy"),
                code="BROWSER_NAVIGATION_BLOCKED",
                details={"url": redact_url(url, limit=300)}) from None
        raise BrowserError(f"the page could not be loaded: {message}",
                           code="BROWSER_NAVIGATION_FAILED",
                           details={"url": redact_url(url, limit=300)}) from None
    if session.main_refusal is not None:  # the proxy refused it (or where it redirected)
        raise BrowserPolicyError(f"navigation refused: {session.main_refusal}",
                                 code="BROWSER_NAVIGATION_BLOCKED",
                                 details={"url": redact_url(url, limit=300),
                                          "reason": session.main_refusal})
    if status is not None and status >= 400:
        notes.append(f"the server answered HTTP {status}")
    await session.settle()
    state, delta, events = await svc.observe()
    result = svc.page_result(state, lead=tuple(notes), events=events, delta=delta)
    result.data["http_status"] = status
    return await svc.with_pixels(result, thin=state.view.thin)


async def observe(svc: BrowserDriver, args: Args) -> ToolResult:
    page = args.integer("page", default=1, minimum=1, maximum=100_000)
    detail = args.string("detail", choices=("compact", "text"), default="compact") or "compact"
    find = args.string("find", limit=200) or None
    state_id = args.string("state_id", limit=40)
    requested = args.flag("include_screenshot")
    current = svc.book.current
    live = svc.session is not None and svc.session.started
    if state_id is not None and (page > 1 or find or detail != "compact") and live:
        state = svc.book.require(state_id)  # further pages of one state: no new state
        result = svc.page_result(state, page=page, detail=detail, find=find)
    else:
        state, delta, events = await svc.observe()
        result = svc.page_result(state, page=page, detail=detail, find=find, events=events,
                                 delta=delta if current is not None else None)
    return await svc.with_pixels(result, requested=requested,
                                 thin=state.view.thin and page == 1 and not find)


async def click(svc: BrowserDriver, args: Args) -> ToolResult:
    button = args.string("button", choices=("left", "right", "middle"), default="left")
    double = args.flag("double")
    locator, ref = await _target(svc, args)
    if await locator.evaluate("e => 'disabled' in e"):
        await _refuse_unless(locator, "is_enabled", "disabled", ref)
    timeout = svc.settings.action_timeout * 1000

    async def work() -> None:
        if double:
            await locator.dblclick(button=button, timeout=timeout)  # type: ignore[arg-type]
        else:
            await locator.click(button=button, timeout=timeout)  # type: ignore[arg-type]

    return await _act(svc, work, action=f"browser_click {ref}")


async def _is_secret(svc: BrowserDriver, locator: Locator) -> bool:
    """Whether the element holds a secret; once it is known not to, the report may keep
    what was typed into it (until then it keeps the text's length and hash only)."""
    secret = bool(await locator.evaluate(SECRET_FIELD_JS))
    svc.typed_target_plain = not secret
    return secret


def _hidden(value: str) -> str:
    return f"(hidden: {len(value)} characters, {secret_digest(value)})"


async def type_text(svc: BrowserDriver, args: Args) -> ToolResult:
    text = args.require("text", limit=MAX_TEXT)
    submit, slowly = args.flag("submit"), args.flag("slowly")
    locator, ref = await _target(svc, args)
    await _is_secret(svc, locator)
    await _refuse_unless(locator, "is_editable", "not editable (disabled or read-only)", ref)
    timeout = svc.settings.action_timeout * 1000

    async def work() -> None:
        if slowly:
            await locator.fill("", timeout=timeout)
            await locator.press_sequentially(text, timeout=timeout)
        else:
            await locator.fill(text, timeout=timeout)
        if submit:
            await locator.press("Enter", timeout=timeout)

    return await _act(svc, work, action=f"browser_type {ref}" + (" + Enter" if submit else ""))


async def select(svc: BrowserDriver, args: Args) -> ToolResult:
    wanted = args.strings("options", required=True)
    locator, ref = await _target(svc, args)
    available = await locator.evaluate(_SELECT_OPTIONS)
    if available is None:
        raise BrowserError(f"{ref} is not a <select>: click it, then click the option",
                           code="BROWSER_ACTION_FAILED", details={"ref": ref})
    await _refuse_unless(locator, "is_enabled", "disabled", ref)
    values: list[str] = []
    for want in wanted:
        match = next((v for v, label in available if label == want), None) \
            or next((v for v, label in available if label.casefold() == want.casefold()), None) \
            or next((v for v, _ in available if v == want), None)
        if match is None:
            raise BrowserError(f"{ref} has no option {quote(want, 80)} (its options are in "
                               "the page content)", code="BROWSER_ARGUMENT_INVALID",
                               details={"ref": ref, "page_text": [
                                   f"option {quote(label, 80)}" for _, label in available[:20]]})
        values.append(match)
    timeout = svc.settings.action_timeout * 1000
    return await _act(svc, lambda: locator.select_option(value=values, timeout=timeout),
                      action=f"browser_select {ref}")


async def press(svc: BrowserDriver, args: Args) -> ToolResult:
    key = args.require("key", limit=60)
    if not _KEY.match(key):
        raise BrowserError("argument 'key' must be a key name such as Enter or Control+A",
                           code="BROWSER_ARGUMENT_INVALID", details={"argument": "key"})
    timeout = svc.settings.action_timeout * 1000
    if args.raw("ref") is not None:
        locator, ref = await _target(svc, args)
        return await _act(svc, lambda: locator.press(key, timeout=timeout),
                          action=f"browser_press {key} on {ref}")
    svc.book.require(args.raw("state_id"))
    session = await svc.ensure_session()
    if session.dialog is not None:
        raise BrowserError("a dialog blocks the page; answer it with browser_dialog first",
                           code="BROWSER_DIALOG_OPEN")
    return await _act(svc, lambda: session.page.keyboard.press(key),
                      action=f"browser_press {key}")


async def scroll(svc: BrowserDriver, args: Args) -> ToolResult:
    direction = args.string("direction", choices=("up", "down", "left", "right"))
    amount = args.number("amount", default=0.8, minimum=0.01, maximum=20)
    state = svc.book.require(args.raw("state_id"))
    session = await svc.ensure_session()
    page = session.page
    width, height = state.viewport if state.viewport[0] else (
        svc.settings.viewport_width, svc.settings.viewport_height)
    locator: Locator | None = None
    ref = args.string("ref", limit=40)
    if ref is not None:
        locator = await svc.resolve(state, ref)
    if locator is not None and direction is None:
        target = locator
        return await _act(svc, lambda: target.scroll_into_view_if_needed(),
                          action=f"browser_scroll to {ref}", full=True)
    dx = {"left": -1, "right": 1}.get(direction or "down", 0) * amount * width
    dy = {"up": -1, "down": 1}.get(direction or "down", 0) * amount * height

    async def work() -> None:
        if locator is not None:
            await locator.evaluate("(e, [dx, dy]) => e.scrollBy(dx, dy)", [dx, dy])
        elif not await page.evaluate(_SCROLL, [dx, dy]):
            # the document does not scroll: wheel over the middle, as a person would
            await page.mouse.move(width / 2, height / 2)
            await page.mouse.wheel(dx, dy)
        await page.evaluate(_FRAMES_SETTLED)

    return await _act(svc, work, action=f"browser_scroll {direction or 'down'}", full=True)


#: Playwright refuses file payloads of this many bytes in all, or more.
PAYLOAD_LIMIT = 50 * 1024 * 1024


def _upload_refused(raw: str, why: str, reason: str) -> BrowserPolicyError:
    return BrowserPolicyError(f"{raw[:200]!r} {why}", code="BROWSER_UPLOAD_REFUSED",
                              details={"reason": reason})


def _upload_files(svc: BrowserDriver, paths: list[str]) -> list[FilePayload]:
    """The files to upload, as the bytes read from the very descriptors that were checked.

    A path is resolved and must lie in ``browser.upload_roots``; the file is then opened
    without following a final symlink and judged by its ``fstat`` (a regular file, its size,
    more than one hard link, one of the data directory's files; see
    :mod:`deepseek_eyes.store.identity`). Its bytes travel to Chromium as a payload, never as
    a path Playwright would open again after the check.
    """
    roots = [Path(r).expanduser().resolve() for r in svc.settings.upload_roots]
    if not roots:
        raise BrowserPolicyError("uploads are off: name directories in browser.upload_roots",
                                 code="BROWSER_UPLOAD_REFUSED", details={"reason": "off"})
    limit = min(svc.settings.max_upload_bytes, PAYLOAD_LIMIT - 1)
    data = DataFiles(svc.data_dir) if svc.data_dir is not None else None
    files: list[FilePayload] = []
    total = 0
    for raw in paths:
        try:
            path = Path(raw).expanduser().resolve(strict=True)
        except (OSError, RuntimeError):
            raise _upload_refused(raw, "does not exist", "missing") from None
        if not any(path.is_relative_to(root) for root in roots):
            raise _upload_refused(raw, "is outside browser.upload_roots", "outside_roots")
        content = _read_checked(svc, raw, path, data, limit - total)
        total += len(content)
        files.append({"name": path.name, "buffer": content,
                      "mimeType": mimetypes.guess_type(path.name)[0]
                      or "application/octet-stream"})
    return files


def _read_checked(svc: BrowserDriver, raw: str, path: Path, data: DataFiles | None,
                  room: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        raise _upload_refused(raw, "cannot be opened", "unreadable") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # before fdopen, which refuses a directory itself
        os.close(fd)
        raise _upload_refused(raw, "is not a file", "not_file")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > room:
            raise _upload_refused(raw, "is larger than browser.max_upload_bytes", "too_large")
        allow = svc.settings.upload_allow_hard_links
        reasons = {"data_directory": "is a file of the data directory, which is never "
                                     "uploaded",
                   "hard_link": f"has {info.st_nlink} hard links; a hard link can name any "
                                "file, so it is not uploaded (browser.upload_allow_hard_links)"}
        reason = refusal_reason(info, data, allow_hard_links=allow)
        content = b"" if reason else handle.read(room + 1)
        reason = reason or refusal_reason(info, data, allow_hard_links=allow, content=content)
    if reason is not None:
        raise _upload_refused(raw, reasons[reason], reason)
    if len(content) > room:
        raise _upload_refused(raw, "is larger than browser.max_upload_bytes", "too_large")
    return content


async def upload(svc: BrowserDriver, args: Args) -> ToolResult:
    files = await anyio.to_thread.run_sync(_upload_files, svc,
                                           args.strings("paths", required=True))
    locator, ref = await _target(svc, args)
    session = await svc.ensure_session()
    timeout = svc.settings.action_timeout * 1000
    is_input = bool(await locator.evaluate(_IS_FILE_INPUT))

    async def work() -> None:
        if is_input:
            await locator.set_input_files(files, timeout=timeout)
            return
        async with session.page.expect_file_chooser(timeout=timeout) as chooser:
            await locator.click(timeout=timeout)
        await (await chooser.value).set_files(files, timeout=timeout)

    return await _act(svc, work, action=f"browser_upload {ref} ({len(files)} file(s))")


async def dialog(svc: BrowserDriver, args: Args) -> ToolResult:
    state = svc.book.require(args.raw("state_id"))
    if not isinstance(args.raw("accept"), bool):
        raise BrowserError("argument 'accept' must be true or false",
                           code="BROWSER_ARGUMENT_INVALID", details={"argument": "accept"})
    accept = args.flag("accept")
    text = args.string("text", limit=MAX_TEXT)
    session = await svc.ensure_session()
    if session.dialog is not None:
        answered = await session.answer_dialog(accept, text)
        await session.settle()
        new, delta, events = await svc.observe()
        verb = "accepted" if accept else "dismissed"
        return svc.page_result(new, lead=(f"the {answered.kind} dialog was {verb}.",),
                               events=events, delta=delta)
    if state.modal and not accept:
        return await _act(svc, lambda: session.page.keyboard.press("Escape"),
                          action="browser_dialog (Escape)")
    raise BrowserError("no dialog is open", code="BROWSER_NO_DIALOG")


async def back(svc: BrowserDriver, args: Args) -> ToolResult:
    svc.book.require(args.raw("state_id"))
    session = await svc.ensure_session()
    page = session.page
    before = page.url
    timeout = svc.settings.navigation_timeout
    _, response = await session.guarded(
        lambda: page.go_back(wait_until="load", timeout=timeout * 1000),
        timeout=timeout + 5, what="going back")
    if response is None and page.url == before:
        raise BrowserError("there is no earlier page in this tab", code="BROWSER_ACTION_FAILED")
    await session.settle()
    state, delta, events = await svc.observe()
    result = svc.page_result(state, lead=("went back:",), events=events, delta=delta)
    return await svc.with_pixels(result, thin=state.view.thin)


async def screenshot(svc: BrowserDriver, args: Args) -> ToolResult:
    full_page = args.flag("full_page")
    include = args.raw("include_screenshot")
    if include is not None and not isinstance(include, bool):
        raise BrowserError("argument 'include_screenshot' must be true or false",
                           code="BROWSER_ARGUMENT_INVALID")
    locator: Locator | None = None
    ref = args.string("ref", limit=40)
    state_id = args.string("state_id", limit=40)
    if ref is not None:
        locator, ref = await _target(svc, args)
    elif state_id is not None:
        svc.book.require(state_id)
    elif svc.book.current is None:
        await svc.observe()
    current = svc.book.current
    shot = await svc.capture(locator=locator, full_page=full_page, ref=ref,
                             state_id=current.state_id if current else None)
    deliver = should_deliver(svc.settings.visual_mode, requested=include is True,
                             explicit=include is not False)
    how = "delivered" if deliver else (
        "stored, not shown (visual_mode=manual: pass include_screenshot=true)"
        if svc.settings.visual_mode == "manual" else "stored, not shown")
    text = "\n".join([*svc.header(),
                      f"screenshot sha256:{shot.sha256} pixels sha256:{shot.pixel_sha256} "
                      f"{shot.width}x{shot.height} PNG ({how})"])
    return ToolResult(text, {"state_id": current.state_id if current else None,
                             "screenshot": shot.to_dict()}, screenshot=shot, deliver=deliver)


async def _page_text(svc: BrowserDriver) -> str:
    session = await svc.ensure_session()
    parts: list[str] = []
    for frame in session.page.frames[:MAX_FRAMES]:
        try:
            parts.append(str(await frame.evaluate(
                "() => document.body ? document.body.innerText : ''")))
        except Exception:  # noqa: S112 - a detached or cross-process frame: skip it
            continue
    current = svc.book.current
    if current is not None:  # shadow DOM and accessible names, as the observation saw them
        parts.extend(current.view.texts)
        parts.extend(c.line for c in current.view.controls.values())
        parts.extend(current.view.notices)
    return "\n".join(parts)[:MAX_PAGE_TEXT]


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


async def _element_check(svc: BrowserDriver, args: Args) -> tuple[str, str, bool]:
    locator, ref = await _target(svc, args)
    want = args.string("state", choices=("visible", "hidden", "enabled", "disabled", "checked",
                                         "unchecked", "focused", "editable"))
    value = args.string("value", limit=MAX_TEXT)
    if want is None and value is None:
        raise BrowserError("an element assertion needs 'state' or 'value'",
                           code="BROWSER_ARGUMENT_INVALID")
    if value is not None:
        secret = await _is_secret(svc, locator)
        actual = await locator.input_value(timeout=2000)
        if secret:  # a report and a result never hold a password, even compared
            return f"{ref} value {_hidden(value)}", _hidden(actual), actual == value
        return f"{ref} value {value!r}", actual, actual == value
    checks: dict[str, Callable[[], Awaitable[bool]]] = {
        "visible": locator.is_visible, "hidden": locator.is_hidden,
        "enabled": lambda: locator.is_enabled(timeout=2000),
        "disabled": lambda: locator.is_disabled(timeout=2000),
        "checked": lambda: locator.is_checked(timeout=2000),
        "unchecked": lambda: _negate(locator.is_checked(timeout=2000)),
        "editable": lambda: locator.is_editable(timeout=2000),
        "focused": lambda: locator.evaluate("e => e === e.getRootNode().activeElement"),
    }
    ok = bool(await checks[str(want)]())
    return f"{ref} {want}", (want if ok else f"not {want}") or "", ok


async def _negate(value: Awaitable[bool]) -> bool:
    return not await value


async def assert_(svc: BrowserDriver, args: Args) -> ToolResult:
    kind = args.require("kind", choices=("text", "url", "title", "element", "visual"))
    session = await svc.ensure_session()
    question: str | None = None
    shot = None
    if kind == "text":
        needle = args.require("text", limit=1000)
        present = args.flag("present", default=True)
        found = _norm(needle) in _norm(await _page_text(svc))
        expected = f"text {needle!r} {'present' if present else 'absent'}"
        actual, passed = ("present" if found else "absent"), found == present
    elif kind in ("url", "title"):
        want = args.require("expected", limit=MAX_TEXT)
        match = args.string("match", choices=("contains", "equals"), default="contains")
        actual = session.page.url if kind == "url" else await session.page.title()
        passed = actual == want if match == "equals" else want in actual
        if kind == "url":  # compared in full, written redacted
            actual, want = redact_url(actual), redact_url_part(want)
        expected = f"{kind} {match} {want!r}"
    elif kind == "element":
        expected, actual, passed_bool = await _element_check(svc, args)
        passed = passed_bool
    else:
        question = args.require("question", limit=500)
        current = svc.book.current
        shot = await svc.capture(state_id=current.state_id if current else None)
        expected, actual, passed = f"visual: {question}", "see the visual evidence", None
    current = svc.book.current
    record = Assertion(kind, expected, actual, passed,
                       current.state_id if current else None, svc.report.next_index)
    svc.report.add_assertion(record)
    text = "\n".join([*svc.header(), f"assert {verdict(passed)}",
                      fence([f"expected {quote(expected, 300)}", f"got {quote(actual, 300)}"])])
    return ToolResult(text, {"state_id": current.state_id if current else None,
                             "assertion": record.to_dict()},
                      screenshot=shot, deliver=shot is not None, question=question)


async def report(svc: BrowserDriver, args: Args) -> ToolResult:
    fmt = args.string("format", choices=("text", "json"), default="text")
    data = svc.report.to_dict(svc.book.history)
    text = json.dumps(data, ensure_ascii=False) if fmt == "json" \
        else svc.report.to_text(svc.book.history)
    return ToolResult(text, {"report": data})


async def close(svc: BrowserDriver, args: Args) -> ToolResult:  # noqa: ARG001 - no arguments
    data = svc.report.to_dict(svc.book.history)
    stored: str | None = None
    if svc.blobs is not None:
        blob = json.dumps(data, ensure_ascii=False, sort_keys=True).encode()
        blobs = svc.blobs
        stored = (await anyio.to_thread.run_sync(lambda: blobs.put(blob))).sha256
        svc.stored_reports.append(stored)
    if svc.session is not None:
        await svc.session.close()
        svc.session = None
    text = "browser closed; nothing a site stored was kept.\n" + svc.report.to_text(
        svc.book.history)
    if stored:
        text += f"\nreport stored as sha256:{stored}"
    return ToolResult(text, {"closed": True, "report": data, "report_sha256": stored})


HANDLERS: dict[str, Handler] = {
    "browser_navigate": navigate,
    "browser_observe": observe,
    "browser_click": click,
    "browser_type": type_text,
    "browser_select": select,
    "browser_press": press,
    "browser_scroll": scroll,
    "browser_upload": upload,
    "browser_dialog": dialog,
    "browser_back": back,
    "browser_screenshot": screenshot,
    "browser_assert": assert_,
    "browser_report": report,
    "browser_close": close,
}
