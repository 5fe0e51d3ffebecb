"""What a desktop tool acts through: the backend, the state book, observation and results.

:class:`DesktopDriver` owns one desktop session — the backend (and, with
``desktop.headless``, a private Xvfb + D-Bus + AT-SPI), the launched apps, the states — and
everything a handler (:mod:`~deepseek_eyes.desktop.actions`) needs: observe the desktop or a
window into a new state, find windows, observe again after a mutation and answer with the
delta. The call pipeline that runs a handler under the lock and records it is
:class:`~deepseek_eyes.desktop.service.DesktopService`, a driver with a ``call``; keeping
the two apart is what lets the handlers import this module and the service import the
handlers, with no cycle.

The backend starts on the first call that needs it and stops at ``desktop_close``; state
ids keep counting across restarts, so an id from before is stale, never mistaken for a new
one.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from deepseek_eyes.audit import AuditLog
from deepseek_eyes.desktop.backend import DesktopBackend
from deepseek_eyes.desktop.calls import Args, ToolResult
from deepseek_eyes.desktop.headless import HeadlessDesktop
from deepseek_eyes.desktop.launcher import AppLauncher
from deepseek_eyes.desktop.model import Box, Window, WindowList
from deepseek_eyes.desktop.native import LinuxBackend, helper_environment
from deepseek_eyes.desktop.present import delta_text, observation_text, state_data
from deepseek_eyes.desktop.report import ReportRecorder
from deepseek_eyes.desktop.screenshots import encode_capture
from deepseek_eyes.desktop.state import DesktopState, StateBook, StateDelta
from deepseek_eyes.desktop.visual import THIN_ELEMENTS
from deepseek_eyes.errors import DeepSeekEyesError, DesktopError
from deepseek_eyes.settings import DesktopSettings
from deepseek_eyes.store.blobs import BlobStore
from deepseek_eyes.toolkit.visual import should_deliver

__all__ = ["BackendFactory", "DesktopDriver", "Handler"]

#: One tool: checks its arguments, acts through the driver, answers (or raises a coded error).
Handler = Callable[["DesktopDriver", Args], Awaitable[ToolResult]]
BackendFactory = Callable[[DesktopSettings, Mapping[str, str]], DesktopBackend]


def _linux(settings: DesktopSettings, env: Mapping[str, str]) -> DesktopBackend:
    return LinuxBackend(settings.python, env, timeout=settings.helper_timeout,
                        settle=settings.settle)


def _clip(box: Box, screen: tuple[int, int]) -> Box:
    x, y, w, h = box
    x0, y0 = max(0, x), max(0, y)
    x1, y1 = min(screen[0], x + w), min(screen[1], y + h)
    return (x0, y0, max(0, x1 - x0), max(0, y1 - y0))


class DesktopDriver:
    def __init__(self, settings: DesktopSettings, *, blobs: BlobStore | None = None,
                 backend_factory: BackendFactory = _linux,
                 environment: Mapping[str, str] | None = None,
                 audit: AuditLog | None = None, owner: str | None = None) -> None:
        self.settings = settings
        self.blobs = blobs
        self.audit = audit  # one privacy-reduced row per call, on the audit chain
        self.owner = owner
        self.book = StateBook()
        self.report = ReportRecorder()
        self.launcher = AppLauncher(settings.apps, max_processes=settings.max_processes)
        self.backend: DesktopBackend | None = None
        self.headless: HeadlessDesktop | None = None
        self.env: dict[str, str] = {}
        self._given_env = dict(environment) if environment is not None else None
        self._factory = backend_factory
        self._lock = asyncio.Lock()
        self._last_delta = StateDelta(None, "", None)

    # -- results -------------------------------------------------------------------------
    def failure(self, exc: DeepSeekEyesError) -> ToolResult:
        return ToolResult(f"{exc.code}: {exc.message}", {"error": exc.to_dict()},
                          is_error=True)

    async def refused(self, exc: DeepSeekEyesError) -> ToolResult:
        """A stale call: nothing was done; answer with a fresh observation to plan on."""
        result = self.failure(exc)
        current = self.book.current
        if self.backend is None or current is None:
            return result
        try:
            window = current.window.ref if current.window else None
            state = await self.observe(current.scope, window)
        except DeepSeekEyesError as again:
            result.text += f"\n(the desktop could not be re-observed: {again.code})"
            return result
        result.text += "\nnothing was done; the current state:\n" + observation_text(state)
        result.data.update(state_data(state))
        result.data["error"] = exc.to_dict()
        return result

    # -- the desktop ---------------------------------------------------------------------
    async def ensure(self) -> DesktopBackend:
        """The backend, started (with a private headless desktop when configured).
        Raises DesktopError DESKTOP_UNAVAILABLE."""
        if self.backend is not None:
            return self.backend
        extra: dict[str, str] = dict(self._given_env or {})
        if self.settings.headless and self.headless is None:
            width, height = self.settings.screen
            headless = HeadlessDesktop(width, height)
            await anyio.to_thread.run_sync(headless.start)
            self.headless = headless
            extra.update(headless.environment)
        display = extra.get("DISPLAY") or self.settings.display or os.environ.get("DISPLAY")
        if not display:
            raise DesktopError("no X display: set DISPLAY, desktop.display, or "
                               "desktop.headless = true", code="DESKTOP_UNAVAILABLE")
        self.env = helper_environment(display, extra)
        backend = self._factory(self.settings, self.env)
        await backend.start()
        self.backend = backend
        return backend

    async def live_windows(self) -> WindowList:
        return await (await self.ensure()).windows()

    def find_window(self, live: WindowList, wanted: str) -> Window:
        """A window by ref, else by exact title, else by a title containing ``wanted``."""
        by_ref = live.get(wanted)
        if by_ref is not None:
            return by_ref
        if wanted.startswith("w") and len(wanted) == 11 and all(
                c in "0123456789abcdef" for c in wanted[1:]):
            raise DesktopError(f"window {wanted} is gone", code="DESKTOP_TARGET_GONE",
                               details={"window": wanted})
        exact = [w for w in live.windows if w.title == wanted]
        if len(exact) == 1:
            return exact[0]
        partial = [w for w in live.windows if wanted.lower() in w.title.lower()]
        if len(partial) == 1:
            return partial[0]
        what = "several windows match" if exact or len(partial) > 1 else "no window matches"
        raise DesktopError(f"{what} {wanted[:60]!r}", code="DESKTOP_TARGET_GONE",
                           details={"window": wanted[:60]})

    async def observe(self, scope: str, window: str | None = None, *,
                      live: WindowList | None = None) -> DesktopState:
        """A new state of the desktop or of one window (which must exist: a window that is
        gone fails DESKTOP_TARGET_GONE and never widens to the desktop)."""
        backend = await self.ensure()
        live = live or await backend.windows()
        target: Window | None = None
        elements = {}
        semantic = None
        if scope == "window":
            if window is None:
                current = self.book.current
                if current is not None and current.window is not None:
                    window = current.window.ref
                elif live.focus is not None:
                    window = live.focus
                else:
                    raise DesktopError("scope window needs a window (ref or title)",
                                       code="DESKTOP_ARGUMENT_INVALID")
            target = self.find_window(live, window)
            tree = await backend.tree(target, max_elements=self.settings.max_elements,
                                      time_cap=self.settings.semantic_time_cap)
            elements = {e.ref: e for e in tree.elements}
            semantic = tree.status
            box = _clip(target.bounds, live.screen)
        else:
            box = (0, 0, *live.screen)
        if box[2] <= 0 or box[3] <= 0:
            raise DesktopError("the target has no visible area on the screen",
                               code="DESKTOP_TARGET_GONE")
        capture = await backend.capture(box)
        shot = await anyio.to_thread.run_sync(encode_capture, capture,
                                              self.settings.screenshot_max_side)
        state = DesktopState(self.book.next_id(), scope, live, target, elements, semantic, shot)
        self._last_delta = self.book.commit(state)
        return state

    @property
    def last_delta(self) -> StateDelta:
        return self._last_delta

    def thin(self, state: DesktopState) -> bool:
        if state.window is None:
            return False
        if state.semantic is not None and state.semantic.truncated and \
                state.semantic.reason == "time":
            return True
        actionable = sum(1 for e in state.elements.values() if e.actions or e.editable)
        return actionable < THIN_ELEMENTS

    def observation(self, state: DesktopState, *, requested: bool = False,
                    explicit: bool = False, question: str | None = None,
                    note: str | None = None) -> ToolResult:
        text = observation_text(state)
        if note:
            text = note + "\n" + text
        data = state_data(state)
        data["delta"] = self.last_delta.to_dict()
        deliver = should_deliver(self.settings.visual_mode, requested=requested,
                                 explicit=explicit, thin=self.thin(state))
        return ToolResult(text, data, screenshot=state.screenshot, deliver=deliver,
                          question=question)

    async def after(self, before: DesktopState, action: str, *,
                    requested: bool = False) -> ToolResult:
        """Observe the same target after a mutation and answer with the delta."""
        if self.settings.settle:
            await asyncio.sleep(self.settings.settle)  # the application reacts; bounded
        live = await self.live_windows()
        note = None
        if before.window is not None and live.get(before.window.ref) is not None:
            state = await self.observe("window", before.window.ref, live=live)
        else:
            if before.window is not None:
                note = (f"window {before.window.ref} closed after the action; the desktop "
                        "is shown instead")
            state = await self.observe("desktop", live=live)
        delta = self.last_delta
        text = delta_text(state, delta, action)
        if note:
            text = note + "\n" + text + "\n" + observation_text(state)
        data = state_data(state)
        data["delta"] = delta.to_dict()
        if note:
            data["target_closed"] = before.window.ref if before.window else None
        deliver = should_deliver(self.settings.visual_mode, requested=requested,
                                 thin=self.thin(state))
        return ToolResult(text, data, screenshot=state.screenshot, deliver=deliver)

    def report_data(self) -> dict[str, Any]:
        return self.report.to_dict(self.book.history)

    async def aclose(self) -> None:
        """Kill launched apps, stop the helper and a private headless desktop."""
        await anyio.to_thread.run_sync(self.launcher.close)
        backend, self.backend = self.backend, None
        if backend is not None:
            await backend.aclose()
        headless, self.headless = self.headless, None
        if headless is not None:
            await anyio.to_thread.run_sync(headless.stop)
        self.book.current = None
