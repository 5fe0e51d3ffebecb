"""The gateway app served for real (uvicorn on loopback, in a thread) in this process, so a
test can reach its runtime and session store while it drives it over HTTP. Shared by the
e2e hostile-client tests and the security tests of the gateway's doors."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import httpx

from deepseek_eyes.gateway.app import create_app
from deepseek_eyes.home import DataHome
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.settings import Settings
from threaded_server import ThreadedServer

__all__ = ["InProcessGateway", "serve_in_process"]


class _Served:
    """What :class:`ThreadedServer` needs: the ASGI app and slots for its loop."""

    def __init__(self, app: Any) -> None:
        self.starlette = app
        self.loop: asyncio.AbstractEventLoop | None = None
        self.shutdown: asyncio.Event | None = None


class InProcessGateway:
    def __init__(self, runtime: Runtime, server: ThreadedServer) -> None:
        self.runtime = runtime
        self.server = server
        self.port = server.port
        self.url = f"http://127.0.0.1:{server.port}"
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def sessions(self) -> list[dict[str, Any]]:
        return self.runtime.sessions.sessions(limit=1000)


@contextlib.contextmanager
def serve_in_process(llm: dict[str, Any], *, gateway: dict[str, Any] | None = None,
                     key: str | None = None,
                     more: dict[str, Any] | None = None) -> Iterator[InProcessGateway]:
    """The gateway app with ``[llm]`` and ``[gateway]`` settings (and the other tables in
    ``more``) and bearer ``key`` (None: an open loopback gateway); its data lives in the
    test's own home, so two of them in one test share one data directory."""
    settings = Settings.model_validate({
        **(more or {}),
        "llm": {"api_key": False, "timeout": 10.0, **llm},
        "gateway": gateway or {},
    })
    data = DataHome.open(settings)
    runtime = Runtime(settings, data)
    served = _Served(create_app(runtime, settings.gateway, key=key))
    server = ThreadedServer(served)
    server.start()
    door = InProcessGateway(runtime, server)
    try:
        yield door
    finally:
        door.http.close()
        if served.loop is not None:  # the runtime's connections belong to the server's loop
            asyncio.run_coroutine_threadsafe(runtime.aclose(), served.loop).result(timeout=10)
        server.stop()
        data.close()
