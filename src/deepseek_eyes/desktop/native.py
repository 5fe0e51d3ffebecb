"""The Linux backend: the native helper (:mod:`deepseek_eyes.desktop.linux_native`) as a
child process, spoken to in line JSON.

The helper runs under ``[desktop] python`` (Debian's ``/usr/bin/python3``, which has
``gi`` (Gio, the Atspi typelib) and ``python-xlib``; the project's venv cannot import
them). Each request has a deadline (``desktop.helper_timeout``): a helper that misses it is
killed and the call fails with ``DESKTOP_TIMEOUT``; the next call starts a fresh one. A
helper's answer is parsed into :mod:`~deepseek_eyes.desktop.model` objects here, and only
here, so the rest of the package never sees AT-SPI's vocabulary beyond role and state
names.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deepseek_eyes.desktop.model import (
    Box,
    Capture,
    Element,
    SemanticStatus,
    Tree,
    Window,
    WindowList,
    ref_for,
)
from deepseek_eyes.errors import (
    FIX_DESKTOP,
    DesktopError,
    DesktopGuardError,
    DesktopStaleError,
    DesktopTimeoutError,
)

__all__ = ["HELPER", "LinuxBackend", "NativeHelper"]

HELPER = Path(__file__).with_name("linux_native.py")
_LINE_LIMIT = 256 * 1024 * 1024  # a full-screen capture is one (base64) line
_GUARD_CODES = frozenset({"DESKTOP_FOCUS_LOST", "DESKTOP_MODAL_BLOCKING"})
_MAX_STDERR = 4000


def _error(code: str, message: str) -> DesktopError:
    if code in _GUARD_CODES:
        return DesktopGuardError(message, code=code)
    if code in ("DESKTOP_STATE_STALE", "DESKTOP_REF_NOT_FOUND"):
        return DesktopStaleError(message, code=code)
    known = code if code.startswith("DESKTOP_") else "DESKTOP_ACTION_FAILED"
    try:
        return DesktopError(message, code=known)
    except ValueError:  # a code the helper made up: report it as a failure, keep the text
        return DesktopError(f"{code}: {message}", code="DESKTOP_ACTION_FAILED")


class NativeHelper:
    """One helper process; requests one at a time, each with a deadline."""

    def __init__(self, python: Path, env: Mapping[str, str], *, timeout: float,
                 script: Path = HELPER) -> None:
        self.python = python
        self.env = dict(env)
        self.timeout = timeout
        self.script = script
        self._proc: asyncio.subprocess.Process | None = None
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            return
        try:
            # -I: isolated, so the script's directory (this package, whose http.py would
            # shadow the standard library's) and PYTHON* variables stay out of its path.
            self._proc = await asyncio.create_subprocess_exec(
                str(self.python), "-I", "-W", "ignore", str(self.script),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=self.env, limit=_LINE_LIMIT)
        except OSError as exc:
            raise DesktopError(f"the native helper cannot start under {self.python}: {exc}",
                               code="DESKTOP_UNAVAILABLE") from exc
        try:
            hello = await self._read(self.timeout)
        except DesktopError as exc:
            stderr = await self._stop_and_stderr()
            raise DesktopError(f"the native helper did not start: {stderr or exc.message}",
                               code="DESKTOP_UNAVAILABLE") from exc
        if not hello.get("ok"):
            await self._stop_and_stderr()
            error = hello.get("error") or {}
            raise DesktopError(f"the native helper cannot reach the desktop: "
                               f"{str(error.get('message'))[:500]} (it needs the system's "
                               f"accessibility packages: {FIX_DESKTOP})",
                               code="DESKTOP_UNAVAILABLE", details={"fix": FIX_DESKTOP})

    async def _read(self, timeout: float) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdout is None:
            raise DesktopError("the native helper is not running", code="DESKTOP_UNAVAILABLE")
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout)
        except TimeoutError as exc:
            await self._stop_and_stderr()
            raise DesktopTimeoutError(f"the native helper gave no answer in {timeout:g} s",
                                      code="DESKTOP_TIMEOUT") from exc
        if not line:
            stderr = await self._stop_and_stderr()
            raise DesktopError(f"the native helper exited: {stderr[-500:]}",
                               code="DESKTOP_UNAVAILABLE")
        reply = json.loads(line)
        if not isinstance(reply, dict):
            raise DesktopError("the native helper answered garbage", code="DESKTOP_ACTION_FAILED")
        return reply

    async def request(self, op: str, *, timeout: float | None = None,
                      **fields: Any) -> dict[str, Any]:
        """One request; its result, or the helper's failure as a DesktopError."""
        async with self._lock:
            await self.start()
            proc = self._proc
            assert proc is not None
            assert proc.stdin is not None
            ident = next(self._ids)
            proc.stdin.write((json.dumps({"id": ident, "op": op, **fields}) + "\n").encode())
            await proc.stdin.drain()
            reply = await self._read(timeout or self.timeout)
            if reply.get("id") != ident:
                await self._stop_and_stderr()
                raise DesktopError("the native helper answered out of order",
                                   code="DESKTOP_ACTION_FAILED")
        if reply.get("ok"):
            result = reply.get("result")
            return result if isinstance(result, dict) else {}
        error = reply.get("error") or {}
        raise _error(str(error.get("code", "")), str(error.get("message", ""))[:1000])

    async def _stop_and_stderr(self) -> str:
        proc, self._proc = self._proc, None
        if proc is None:
            return ""
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        stderr = b""
        with contextlib.suppress(TimeoutError):
            if proc.stderr is not None:
                stderr = await asyncio.wait_for(proc.stderr.read(_MAX_STDERR * 4), 2)
            await asyncio.wait_for(proc.wait(), 2)
        return stderr.decode("utf-8", "replace").strip()[-_MAX_STDERR:]

    async def aclose(self) -> None:
        proc = self._proc
        if proc is not None and proc.stdin is not None and proc.returncode is None:
            proc.stdin.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 2)
        await self._stop_and_stderr()


def _box(value: Any) -> Box:
    if isinstance(value, list) and len(value) == 4:
        x, y, w, h = (int(v) for v in value)
        return (x, y, w, h)
    return (-1, -1, -1, -1)


def _element_native(node: Mapping[str, Any]) -> str:
    return f"atspi:{node.get('bus', '')}{node.get('path', '')}"


class LinuxBackend:
    """AT-SPI + XTest + XGetImage through :class:`NativeHelper`."""

    platform = "linux"

    def __init__(self, python: Path, env: Mapping[str, str], *, timeout: float,
                 settle: float = 0.15) -> None:
        self.helper = NativeHelper(python, env, timeout=timeout)
        self.settle = settle
        self._windows: dict[str, Window] = {}

    async def start(self) -> None:
        await self.helper.start()

    # -- reading ----------------------------------------------------------------------------
    def _window(self, item: Mapping[str, Any]) -> Window:
        xid = item.get("xid")
        # The ref names the AT-SPI object every window is listed from, never its X id: the
        # X id is matched to it by pid, title and bounds, and is unknown until the window
        # is mapped, so a ref made from it changed between two listings of a starting app
        # (its window "gone" just after it was listed).
        native = _element_native(item)
        return Window(ref=ref_for("w", native), native=native, title=str(item.get("name", "")),
                      app=str(item.get("app", "")),
                      pid=item.get("pid") if isinstance(item.get("pid"), int) else None,
                      role=str(item.get("role", "")),
                      states=frozenset(str(s) for s in item.get("states", ())),
                      bounds=_box(item.get("bounds")),
                      handle={"bus": item.get("bus"), "path": item.get("path"), "xid": xid})

    async def windows(self) -> WindowList:
        result = await self.helper.request("windows")
        windows = [self._window(item) for item in result.get("windows", ())]
        # A window with no showing state and no size is an application's hidden toplevel.
        windows = [w for w in windows if "showing" in w.states or "visible" in w.states]
        focus_xid = result.get("focus_xid")
        focus = next((w.ref for w in windows if w.handle.get("xid") == focus_xid), None) \
            if focus_xid is not None else None
        self._windows = {w.ref: w for w in windows}
        sw, sh = result.get("screen") or (0, 0)
        return WindowList(tuple(windows), focus, (int(sw), int(sh)))

    def _element(self, node: Mapping[str, Any], parent: str | None) -> Element:
        native = _element_native(node)
        text = node.get("text")
        return Element(ref=ref_for("e", native), native=native, role=str(node.get("role", "")),
                       name=str(node.get("name", "")),
                       states=frozenset(str(s) for s in node.get("states", ())),
                       bounds=_box(node.get("bounds")),
                       actions=tuple(str(a) for a in node.get("actions", ())),
                       text=str(text) if isinstance(text, str) else None,
                       editable=bool(node.get("editable_text")),
                       depth=int(node.get("depth", 0)), parent=parent,
                       handle={"bus": node.get("bus"), "path": node.get("path")})

    async def tree(self, window: Window, *, max_elements: int, time_cap: float) -> Tree:
        result = await self.helper.request(
            "tree", bus=window.handle.get("bus"), path=window.handle.get("path"),
            max_elements=max_elements, time_cap=time_cap,
            timeout=max(self.helper.timeout, time_cap + 5))
        nodes = result.get("nodes", [])
        elements: list[Element] = []
        for node in nodes:
            index = int(node.get("parent", -1))
            parent = elements[index].ref if 0 <= index < len(elements) else None
            elements.append(self._element(node, parent))
        status = SemanticStatus(len(elements), bool(result.get("truncated")),
                                result.get("reason"), float(result.get("elapsed_ms", 0.0)))
        return Tree(tuple(elements), status)

    async def element(self, element: Element) -> Element | None:
        result = await self.helper.request("element", **_target(element))
        if result.get("gone"):
            return None
        return self._element(result["node"], element.parent)

    async def capture(self, box: Box) -> Capture:
        x, y, w, h = box
        result = await self.helper.request("capture", x=x, y=y, w=w, h=h)
        raw = base64.b64decode(result["data"])
        width, height = int(result["w"]), int(result["h"])
        # BGRX → RGB without a decode library: Pillow's raw decoder does it in C.
        from PIL import Image

        image = Image.frombuffer("RGB", (width, height), raw, "raw", "BGRX", 0, 1)
        return Capture((x, y), width, height, image.tobytes())

    # -- acting -----------------------------------------------------------------------------
    async def focus(self, window: Window, element: Element | None = None) -> str | None:
        xid = window.handle.get("xid")
        if xid is None:
            raise DesktopError(f"window {window.ref} has no X window to focus",
                               code="DESKTOP_ACTION_FAILED")
        fields: dict[str, Any] = {"xid": xid}
        if element is not None:
            fields.update(_target(element))
        result = await self.helper.request("focus", **fields)
        focused = result.get("focus_xid")
        return next((ref for ref, w in self._windows.items()
                     if w.handle.get("xid") == focused), None) if focused is not None else None

    async def act(self, element: Element, action: str | None = None) -> str:
        result = await self.helper.request("act", action=action, **_target(element))
        return str(result.get("action", ""))

    async def click(self, x: int, y: int, *, button: str = "left", count: int = 1) -> None:
        await self.helper.request("click", x=x, y=y, button=button, count=count)

    async def scroll(self, x: int, y: int, direction: str, amount: int) -> None:
        await self.helper.request("scroll", x=x, y=y, direction=direction, amount=amount)

    async def press(self, key: str) -> None:
        await self.helper.request("press", key=key)

    async def type_text(self, window: Window, text: str, *, element: Element | None = None,
                        point: tuple[int, int] | None = None) -> dict[str, Any]:
        xid = window.handle.get("xid")
        if xid is None:
            raise DesktopGuardError(f"window {window.ref} has no X window to focus",
                                    code="DESKTOP_FOCUS_LOST")
        fields: dict[str, Any] = {"xid": xid, "text": text}
        if element is not None:
            fields.update(_target(element))
        if point is not None:
            fields["point"] = list(point)
        return await self.helper.request("type", **fields)

    async def aclose(self) -> None:
        await self.helper.aclose()


def _target(element: Element) -> dict[str, Any]:
    return {"bus": element.handle.get("bus"), "path": element.handle.get("path")}


def helper_environment(display: str | None, extra: Mapping[str, str] | None = None
                       ) -> dict[str, str]:
    """The helper's environment: this process's, with the display (and a headless
    session's D-Bus address) put in."""
    env = dict(os.environ)
    if extra:
        env.update(extra)
    if display:
        env["DISPLAY"] = display
    env.setdefault("GTK_A11Y", "atspi")
    env.pop("NO_AT_BRIDGE", None)
    return env
