"""A Starlette app served by uvicorn on 127.0.0.1 in a background thread, for tests.

Both loopback model servers (``vision/loopback.py``, ``runtime/upstream.py``) run this way.
Start and stop wait on events with a bound, never on fixed sleeps; stopping first sets the
app's ``shutdown`` event, so requests that hang on purpose are released and never block the
thread's exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol, Self

import uvicorn

__all__ = ["ServedApp", "ThreadedServer"]

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


class ServedApp(Protocol):
    """What the server needs from an app: the ASGI app, and slots for the loop it runs on
    and the event that releases hanging requests at shutdown."""

    starlette: Any
    loop: asyncio.AbstractEventLoop | None
    shutdown: asyncio.Event | None


class _Server(uvicorn.Server):
    """uvicorn that reports, through a thread-safe event, when it is listening."""

    def __init__(self, config: uvicorn.Config, app: ServedApp, ready: threading.Event) -> None:
        super().__init__(config)
        self._app = app
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._app.loop = asyncio.get_running_loop()
        self._app.shutdown = asyncio.Event()
        try:
            await super().startup(sockets=sockets)
        finally:
            self._ready.set()


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], object]) -> None:
    with contextlib.suppress(RuntimeError):  # the loop closed between the check and the call
        loop.call_soon_threadsafe(callback)


class ThreadedServer:
    """``with Subclass() as server: server.port``; subclasses set ``self._app``."""

    thread_name = "loopback"

    def __init__(self, app: ServedApp) -> None:
        self._app = app
        self._socket: socket.socket | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self.port = 0

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._socket = sock
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app.starlette,
            log_config=None,  # leave the process's logging alone; pytest captures records
            access_log=False,
            lifespan="off",
            http="h11",
            ws="none",
            timeout_graceful_shutdown=5,
        )
        ready = threading.Event()
        self._server = _Server(config, self._app, ready)
        self._thread = threading.Thread(
            target=self._run,
            args=(self._server, sock),
            name=f"{self.thread_name}-{self.port}",
            daemon=True,
        )
        self._thread.start()
        if not ready.wait(START_TIMEOUT_S) or not self._server.started:
            self.stop()
            raise RuntimeError(f"the {self.thread_name} server did not start: {self._failure!r}")

    def _run(self, server: _Server, sock: socket.socket) -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # reported by start(); a thread has nowhere to raise
            self._failure = exc

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is not None and thread is not None:
            loop, shutdown = self._app.loop, self._app.shutdown
            if loop is not None and shutdown is not None and not loop.is_closed():
                _call_soon(loop, shutdown.set)  # release hung requests first
            server.should_exit = True
            thread.join(STOP_TIMEOUT_S)
            if thread.is_alive():
                server.force_exit = True
                thread.join(STOP_TIMEOUT_S)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None
        if thread is not None and thread.is_alive():
            raise RuntimeError(f"the {self.thread_name} server thread did not stop")

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
