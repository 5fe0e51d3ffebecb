"""The browser as tools: one object per browser session, shared by the MCP server and the
runtime's ``browser`` source.

A call runs under one lock (a page takes one action at a time), in this order: check the
arguments; check the ``state_id`` against the newest state (an older one is refused with a
fresh observation and the page is never touched); resolve the ref against *that* state and
check that its document is still the one the state saw; act; let the page settle; observe
again (a new state) and answer with the delta, or with the new page's first observation when
the document was replaced. Every call is a step of the report, refused ones included.

The handlers (:mod:`~deepseek_eyes.browser.actions`) act through the
:class:`~deepseek_eyes.browser.driver.BrowserDriver` this service extends; this module is
only the call: dispatch, the turn of a failure into a result, visual evidence, the record.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from deepseek_eyes.browser.actions import HANDLERS
from deepseek_eyes.browser.calls import Args, ToolResult
from deepseek_eyes.browser.driver import BrowserDriver, Handler
from deepseek_eyes.browser.report import Step, redact_arguments
from deepseek_eyes.browser.tools import TOOL_NAMES
from deepseek_eyes.errors import BrowserError, BrowserStaleError, DeepSeekEyesError
from deepseek_eyes.toolkit.visual import Describe, add_evidence

__all__ = ["BrowserService", "Handler"]

#: Codes of a call refused before (or instead of) acting: the report's "refused" outcome.
_REFUSED = frozenset({"BROWSER_STATE_STALE", "BROWSER_REF_NOT_FOUND",
                      "BROWSER_NAVIGATION_BLOCKED", "BROWSER_DIALOG_OPEN",
                      "BROWSER_ARGUMENT_INVALID", "BROWSER_UPLOAD_REFUSED", "BROWSER_LIMIT"})


class BrowserService(BrowserDriver):
    # -- the call ------------------------------------------------------------------------
    async def call(self, name: str, arguments: Mapping[str, Any], *,
                   describe: Describe | None = None) -> ToolResult:
        """Run one tool; failures come back as error results (with their code), never as
        exceptions."""
        handler = HANDLERS.get(name)
        async with self._lock:
            started, clock = time.monotonic(), self.report.now()
            before = self.book.current.state_id if self.book.current else None
            self.typed_target_plain = False
            if handler is None or name not in TOOL_NAMES:
                result = self.failure(BrowserError(f"no browser tool {name[:60]!r}",
                                                   code="BROWSER_ARGUMENT_INVALID"))
            else:
                result = await self._run(handler, Args(dict(arguments)))
            if describe is not None and result.deliver and result.screenshot is not None:
                result = await self._describe(result, describe)
            self._record(name, arguments, result, before, started, clock)
            return result

    async def _run(self, handler: Handler, args: Args) -> ToolResult:
        try:
            return await handler(self, args)
        except BrowserStaleError as exc:
            return await self.refused(exc)
        except DeepSeekEyesError as exc:
            return self.failure(exc)
        except Exception as exc:  # a Playwright error we did not foresee: a result, not a crash
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            return self.failure(BrowserError(f"the browser failed: {first[:300]}",
                                             code="BROWSER_ACTION_FAILED"))

    async def _describe(self, result: ToolResult, describe: Describe) -> ToolResult:
        shot = result.screenshot
        if shot is None:
            return result
        try:
            text = await describe(shot.png, result.question)
        except DeepSeekEyesError as exc:
            text = f"[the screenshot sha256:{shot.sha256[:16]} could not be read ({exc.code})]"
        add_evidence(result, text)
        result.data["visual"] = {"sha256": shot.sha256, "delivered": True}
        return result

    def _record(self, name: str, arguments: Mapping[str, Any], result: ToolResult,
                before: str | None, started: float, clock: float) -> None:
        code = result.code
        outcome = "ok" if not result.is_error else (
            "refused" if code in _REFUSED else "error")
        delta = result.data.get("delta") or {}
        after = self.book.current.state_id if self.book.current else None
        self.report.add_step(Step(
            self.report.next_index, name,
            redact_arguments(name, arguments, typed_in_clear=self.typed_target_plain),
            before, after, outcome, code, self.book.current.url if self.book.current else None,
            clock, int((time.monotonic() - started) * 1000),
            {k: len(delta.get(k) or ()) for k in ("added", "removed", "changed")} if delta else {},
            result.screenshot.sha256 if result.screenshot else None))
        if self.audit is not None:
            # Names of the arguments, never their values (typed text, secrets); the URL
            # redacted (query values, fragment and user info as keyed hashes: a plain hash
            # of a URL with a six-digit code in it is undone by trying every code).
            self.audit.append(
                "browser.action", name, owner=self.owner, outcome=outcome, code=code,
                state_before=before, state_after=after,
                arguments=sorted(str(k)[:40] for k in arguments)[:20],
                url=self.book.current.url if self.book.current else None,
                ms=int((time.monotonic() - started) * 1000),
                screenshot_sha256=result.screenshot.sha256 if result.screenshot else None)
