"""The desktop as tools: one object per desktop session, shared by the MCP server and the
runtime's ``desktop`` source.

A call runs under one lock, in this order: check the arguments; check the ``state_id``
against the newest state (an older one is refused, the desktop is re-observed and the
action never runs); resolve refs and coordinates against *that* state
(:mod:`~deepseek_eyes.desktop.guards`); read the live window list and check it (target
still there, no modal over it, no unseen window holding the focus); act; let the
application settle (``desktop.settle``); observe the same target again and answer with the
delta. Every call is a step of the report, refused ones included.

The handlers (:mod:`~deepseek_eyes.desktop.actions`) act through the
:class:`~deepseek_eyes.desktop.driver.DesktopDriver` this service extends; this module is
only the call: dispatch, visual evidence (or the pixels-not-decoded marker), the record.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from deepseek_eyes.desktop.actions import HANDLERS
from deepseek_eyes.desktop.calls import Args, ToolResult
from deepseek_eyes.desktop.driver import BackendFactory, DesktopDriver, Handler
from deepseek_eyes.desktop.report import Step, redact_arguments
from deepseek_eyes.desktop.tools import TOOL_NAMES
from deepseek_eyes.desktop.visual import PIXELS_NOT_DECODED
from deepseek_eyes.errors import DeepSeekEyesError, DesktopError, DesktopStaleError
from deepseek_eyes.toolkit.visual import Describe, add_evidence

__all__ = ["BackendFactory", "DesktopService", "Handler"]

#: Codes of a call refused before (or instead of) acting: the report's "refused" outcome.
_REFUSED = frozenset({"DESKTOP_STATE_STALE", "DESKTOP_REF_NOT_FOUND", "DESKTOP_FOCUS_LOST",
                      "DESKTOP_MODAL_BLOCKING", "DESKTOP_COORDINATES_INVALID",
                      "DESKTOP_TARGET_MISMATCH", "DESKTOP_WINDOW_REQUIRED",
                      "DESKTOP_LAUNCH_REFUSED", "DESKTOP_ARGUMENT_INVALID",
                      "DESKTOP_TARGET_GONE"})


class DesktopService(DesktopDriver):
    # -- the call ------------------------------------------------------------------------
    async def call(self, name: str, arguments: Mapping[str, Any], *,
                   describe: Describe | None = None) -> ToolResult:
        """Run one tool; failures come back as error results (with their code)."""
        handler = HANDLERS.get(name)
        async with self._lock:
            started = time.monotonic()
            before = self.book.current.state_id if self.book.current else None
            if handler is None or name not in TOOL_NAMES:
                result = self.failure(DesktopError(f"no desktop tool {name[:60]!r}",
                                                   code="DESKTOP_ARGUMENT_INVALID"))
            else:
                result = await self._run(handler, Args(dict(arguments)))
            if describe is not None and result.deliver and result.screenshot is not None:
                await self._describe(result, describe)
            code = result.code
            outcome = "ok" if not result.is_error else (
                "refused" if code in _REFUSED else "error")
            after = self.book.current.state_id if self.book.current else None
            shot = result.screenshot
            took = int((time.monotonic() - started) * 1000)
            self.report.add_step(Step(len(self.report.steps) + 1, name,
                                      redact_arguments(arguments), before, after, outcome, code,
                                      took, shot.sha256 if shot else None))
            if self.audit is not None:
                window = self.book.current.window if self.book.current else None
                # Names of the arguments, never their values (typed text); the window by its
                # ref (a hash of its X id), never its title.
                self.audit.append(
                    "desktop.action", name, owner=self.owner, outcome=outcome, code=code,
                    state_before=before, state_after=after, arguments=sorted(arguments),
                    window=window.ref if window else None, ms=took,
                    screenshot_sha256=shot.sha256 if shot else None)
            return result

    async def _run(self, handler: Handler, args: Args) -> ToolResult:
        try:
            return await handler(self, args)
        except DesktopStaleError as exc:
            return await self.refused(exc)
        except DeepSeekEyesError as exc:
            return self.failure(exc)

    async def _describe(self, result: ToolResult, describe: Describe) -> None:
        shot = result.screenshot
        assert shot is not None
        try:
            text = await describe(shot.png, result.question)
            result.data["visual"] = {"sha256": shot.sha256, "delivered": True,
                                     "pixels_decoded": True}
        except DeepSeekEyesError as exc:
            # Vision routes exhausted: forward only the validated semantic state above,
            # marked, never the undecoded pixels.
            text = (f"{PIXELS_NOT_DECODED} ({exc.code}): the screenshot sha256:"
                    f"{shot.sha256[:16]} was kept but not read; only the semantic state "
                    "above is validated]")
            result.data["visual"] = {"sha256": shot.sha256, "delivered": False,
                                     "pixels_decoded": False, "code": exc.code}
        add_evidence(result, text)
