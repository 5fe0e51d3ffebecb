"""The running gateway's control API: ``deepseek-eyes mcp …`` steering its MCP servers.

``serve`` starts it beside the gateway on a loopback port of its own (never the gateway's:
the gateway may be open or bound beyond loopback, the control API never is), behind the same
:class:`~deepseek_eyes.serving.SecurityMiddleware` as every server of ours, with a token made
at start. Its port and token go into ``<home>/control.json`` (mode 0600, written before the
first request can come, removed at exit), which is how a command finds the gateway that runs
for its settings file: only a process of this user can read it, and the token is never
logged nor put in an error. The control API takes no browser: no Origin is allowed (a
request that carries one is refused), nor another site's page, and bodies must be JSON.

Routes (all answer JSON; a refusal of ours is ``{"error": {"code", "message", "details"}}``):

* ``GET /control/status``: the settings file, its last reload (the version last looked at
  and its ``state``: ``applied``, ``applying``, ``pending`` until it settles, or
  ``refused`` with its ``error``; the version being applied, ``applying``, and the one in
  force, ``applied_sha256``) and every server's view;
* ``GET /control/watch``: line-delimited JSON, every server's view then its changes
  (:mod:`deepseek_eyes.mcp_host.events`), until the client goes;
* ``POST /control/restart/{id}`` and ``POST /control/probe/{id}``: the manager's own;
* ``POST /control/reload``: look at the settings file now (:mod:`.settings_watch`), which is
  what an edit command asks after writing it: 200 once applied (its servers settled), 422
  refused, 202 when the version is not settled yet (a hand edit seen once) or a later one
  replaced it meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from deepseek_eyes.errors import DeepSeekEyesError, McpError
from deepseek_eyes.gateway.settings_watch import SettingsWatch
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.serving import (
    RateLimiter,
    RefusalCodes,
    SecurityMiddleware,
    loopback_hosts,
    unknown_route_handlers,
)

__all__ = ["CONTROL_CODES", "CONTROL_FILENAME", "ControlFile", "control_app"]

CONTROL_FILENAME = "control.json"
CONTROL_CODES = RefusalCodes.prefixed("CONTROL", "deepseek-eyes-control")
_STATUS = {"MCP_SERVER_UNKNOWN": 404, "MCP_SERVER_DISABLED": 409, "MCP_CLOSE_PENDING": 409}


class ControlFile:
    """``<home>/control.json``: where the control API listens and its token, for this user."""

    def __init__(self, home: Path) -> None:
        self.path = home / CONTROL_FILENAME
        self.token = secrets.token_urlsafe(32)

    def write(self, host: str, port: int, settings_path: Path | None) -> None:
        data = json.dumps({"host": host, "port": port, "token": self.token, "pid": os.getpid(),
                           "settings": None if settings_path is None
                           else str(settings_path.resolve())})
        tmp = self.path.with_name(f".{CONTROL_FILENAME}.{os.getpid()}")
        # Made 0600 from the start: the token is never readable by others, even briefly.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(data)
        tmp.replace(self.path)

    def remove(self) -> None:
        """Remove the file if it is still ours (a later gateway may have replaced it)."""
        with contextlib.suppress(OSError, ValueError):
            if json.loads(self.path.read_text(encoding="utf-8")).get("token") == self.token:
                self.path.unlink()


def _refused(exc: DeepSeekEyesError) -> JSONResponse:
    return JSONResponse({"error": exc.to_dict()}, status_code=_STATUS.get(exc.code, 400))


def _not_running() -> McpError:
    return McpError("this gateway runs no MCP host (mcp is not among runtime.tool_sources, "
                    "or it was started without a settings file to follow); restart it to "
                    "add servers", code="CONTROL_MCP_NOT_RUNNING")


def control_app(manager: McpManager | None, watch: SettingsWatch | None,
                token: str) -> ASGIApp:
    """The control routes behind the security layer (loopback Host only, no Origin)."""

    def need() -> McpManager:
        if manager is None:
            raise _not_running()
        return manager

    async def status(_: Request) -> Response:
        return JSONResponse({
            "gateway": True, "pid": os.getpid(),
            "settings": None if watch is None else str(watch.path),
            "reload": None if watch is None else watch.last.view(),
            "running": manager is not None,
            "servers": [] if manager is None else manager.status(),
        })

    async def restart(request: Request) -> Response:
        server_id = request.path_params["server_id"]
        try:
            mgr = need()
            before = mgr.require(server_id).view()
            await mgr.restart(server_id, wait=mgr.require(server_id).settings.connect_timeout + 1)
            state = mgr.require(server_id)
        except DeepSeekEyesError as exc:
            return _refused(exc)
        return JSONResponse({"server": server_id, "before": before, "after": state.view(),
                             "failed": state.failed})

    async def probe(request: Request) -> Response:
        try:
            report = await need().probe(request.path_params["server_id"])
        except DeepSeekEyesError as exc:
            return _refused(exc)
        return JSONResponse(report)

    async def reload(_: Request) -> Response:
        if watch is None:
            return _refused(_not_running())
        last = await watch.check()
        status = {"applied": 200, "refused": 422}.get(last.state, 202)
        return JSONResponse(last.view(), status_code=status)

    async def events(_: Request) -> Response:
        try:
            mgr = need()
        except DeepSeekEyesError as exc:
            return _refused(exc)

        async def lines() -> AsyncIterator[bytes]:
            async with mgr.events.subscribe() as sub:
                async for event in sub:
                    yield json.dumps(event).encode() + b"\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    app = Starlette(routes=[
        Route("/control/status", status, methods=["GET"]),
        Route("/control/watch", events, methods=["GET"]),
        Route("/control/restart/{server_id}", restart, methods=["POST"]),
        Route("/control/probe/{server_id}", probe, methods=["POST"]),
        Route("/control/reload", reload, methods=["POST"]),
    ], exception_handlers=unknown_route_handlers("CONTROL_NOT_FOUND"))
    return SecurityMiddleware(
        app, token=token, allowed_hosts=loopback_hosts(), allowed_origins=[],
        limiter=RateLimiter(600), max_body_bytes=64 * 1024, public_prefixes=(),
        codes=CONTROL_CODES, json_bodies=True, body_timeout=10.0,
        cross_site_navigation=False,
    )


def read_control(home: Path) -> dict[str, Any] | None:
    """The control file's content, or None when there is none (or it is unreadable)."""
    try:
        value = json.loads((home / CONTROL_FILENAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
