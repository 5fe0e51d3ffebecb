"""The HTTP server: Streamable HTTP MCP at ``/mcp``, the console API with per-session SSE,
and the console's static files, all behind :class:`SecurityMiddleware`.

The console API exists for people: it lists pending plans with their argv shown exactly
(invisible characters made visible), approves or denies them (recorded as approvals ``via``
the console), streams live output over SSE, and shows receipts. It calls the same
:class:`TerminalService` as the MCP tools, as the console: it may act on every session,
whichever MCP connection owns it. Request bodies are checked strictly (a JSON object with
known fields of the right types; ``NaN`` and ``Infinity`` are not JSON), else 400
``TERMINAL_ARGUMENT_INVALID``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from deepseek_eyes.errors import DeepSeekEyesError, TerminalError
from deepseek_eyes.serving.mcp_http import streamable_mcp
from deepseek_eyes.serving.security import HttpOptions
from deepseek_eyes.terminal.arguments import invalid, known_keys
from deepseek_eyes.terminal.service import TerminalService
from deepseek_eyes.terminal.transport.security import TERMINAL_REFUSALS
from deepseek_eyes.terminal.transport.server import Advisor, build_mcp_server, policy_summary

__all__ = ["CONSOLE_DIR", "HttpOptions", "build_console_app", "build_http_app"]

CONSOLE_DIR = Path(__file__).with_name("console")
_STATUS = {
    "TERMINAL_SESSION_NOT_FOUND": 404, "TERMINAL_PLAN_NOT_FOUND": 404,
    "TERMINAL_RECEIPT_NOT_FOUND": 404, "TERMINAL_POLICY_BLOCKED": 403,
    "TERMINAL_APPROVAL_REQUIRED": 409, "TERMINAL_PLAN_STATE": 409,
    "TERMINAL_SESSION_BUSY": 409, "TERMINAL_NO_ACTIVE_PROCESS": 409,
    "TERMINAL_PLAN_CHANGED": 409, "TERMINAL_SESSION_LIMIT": 429,
    "TERMINAL_PLAN_LIMIT": 429, "TERMINAL_ARGUMENT_INVALID": 400,
}
PLAN_FIELDS = ("argv", "command", "cwd", "timeout_s")


def _error(exc: DeepSeekEyesError) -> JSONResponse:
    return JSONResponse({"error": exc.to_dict()}, status_code=_STATUS.get(exc.code, 400))


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


async def _body(request: Request) -> dict[str, Any]:
    """The request body as a JSON object.

    Raises:
        TerminalError: ``TERMINAL_ARGUMENT_INVALID``.
    """
    try:
        data = json.loads(await request.body() or b"{}", parse_constant=_not_json)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        raise invalid("body", "must be a JSON object")
    return data


def _api_routes(service: TerminalService) -> list[Route]:
    async def call(fn: Any) -> Response:
        try:
            result = fn()
            if asyncio.iscoroutine(result):
                result = await result
        except DeepSeekEyesError as exc:
            return _error(exc)
        if isinstance(result, Response):
            return result
        return JSONResponse(result)

    def p(request: Request, name: str) -> str:
        return str(request.path_params[name])

    async def info(_: Request) -> Response:
        return await call(lambda: policy_summary(service))

    async def sessions(request: Request) -> Response:
        if request.method == "POST":
            return await call(lambda: service.open_session())
        return await call(lambda: {"sessions": service.list_sessions()})

    async def close(request: Request) -> Response:
        return await call(lambda: service.close_session(p(request, "sid")))

    async def plan(request: Request) -> Response:
        async def make(r: Request) -> dict[str, Any]:
            body = await _body(r)
            known_keys(body, PLAN_FIELDS, "plan")
            return service.plan(  # the service checks each field's type and range
                session_id=p(request, "sid"),
                argv=body.get("argv"),
                command=body.get("command"),
                cwd=body.get("cwd"),
                timeout=body.get("timeout_s"),
            )
        return await call(lambda: make(request))

    async def approve(request: Request) -> Response:
        return await call(lambda: service.approve(
            p(request, "sid"), p(request, "pid"), via="console", approver="console"))

    async def deny(request: Request) -> Response:
        return await call(lambda: service.deny(p(request, "sid"), p(request, "pid"),
                                                          via="console"))

    async def execute(request: Request) -> Response:
        return await call(lambda: service.execute(p(request, "sid"), p(request, "pid"),
                                                             wait=False))

    async def control(request: Request) -> Response:
        action = p(request, "action")
        if action == "pause":
            return await call(lambda: service.pause(p(request, "sid")))
        if action == "resume":
            return await call(lambda: service.resume(p(request, "sid")))
        return await call(lambda: service.cancel(p(request, "sid")))

    async def receipts(_: Request) -> Response:
        return await call(lambda: {"receipts": service.receipts.recent(50)})

    async def receipt(request: Request) -> Response:
        return await call(lambda: service.receipt(p(request, "rid")))

    async def share(request: Request) -> Response:
        return await call(lambda: service.share(p(request, "rid")))

    async def events(request: Request) -> Response:
        try:
            service.session(p(request, "sid"))
        except DeepSeekEyesError as exc:
            return _error(exc)
        bus = service.bus.get(p(request, "sid"))
        sub = bus.subscribe() if bus is not None else None
        if bus is None or sub is None:
            return _error(TerminalError("the session accepts no more subscribers",
                                        code="TERMINAL_SESSION_LIMIT"))

        async def stream() -> AsyncIterator[bytes]:
            try:
                yield b"retry: 2000\n\n"
                async for event in sub.events():
                    data = json.dumps(event, ensure_ascii=False)
                    frame = f"id: {event.get('id', '')}\nevent: {event['type']}\ndata: {data}\n\n"
                    yield frame.encode()
            finally:
                bus.unsubscribe(sub)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"x-accel-buffering": "no"})

    return [
        Route("/api/info", info, methods=["GET"]),
        Route("/api/sessions", sessions, methods=["GET", "POST"]),
        Route("/api/sessions/{sid}", close, methods=["DELETE"]),
        Route("/api/sessions/{sid}/plans", plan, methods=["POST"]),
        Route("/api/sessions/{sid}/plans/{pid}/approve", approve, methods=["POST"]),
        Route("/api/sessions/{sid}/plans/{pid}/deny", deny, methods=["POST"]),
        Route("/api/sessions/{sid}/plans/{pid}/execute", execute, methods=["POST"]),
        Route("/api/sessions/{sid}/{action:str}", control, methods=["POST"]),
        Route("/api/sessions/{sid}/events", events, methods=["GET"]),
        Route("/api/receipts", receipts, methods=["GET"]),
        Route("/api/receipts/{rid}", receipt, methods=["GET"]),
        Route("/api/receipts/{rid}/share", share, methods=["GET"]),
    ]


def build_http_app(
    service: TerminalService, options: HttpOptions, advisor: Advisor | None = None
) -> ASGIApp:
    """The whole HTTP server as one ASGI app (lifespan included)."""
    mcp = build_mcp_server(service, advisor, reaper=False)
    sdk_routes, lifespan = streamable_mcp(
        mcp, options, background=service.run_reaper, close=service.aclose,
    )

    async def console_redirect(_: Request) -> Response:
        return Response(status_code=307, headers={"location": "/console/"})

    routes: list[Any] = [
        *_api_routes(service),
        Route("/", console_redirect, methods=["GET"]),
        Mount("/console", StaticFiles(directory=CONSOLE_DIR, html=True), name="console"),
        *sdk_routes,
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    return options.guard(app, codes=TERMINAL_REFUSALS, public_prefixes=("/console",))


def build_console_app(service: TerminalService, options: HttpOptions) -> ASGIApp:
    """The approval console and its API alone, for a service another process part owns
    (the gateway's in-process terminal): no MCP endpoint, no lifespan; the owner runs the
    reaper and closes the service. Same security as :func:`build_http_app`."""

    async def console_redirect(_: Request) -> Response:
        return Response(status_code=307, headers={"location": "/console/"})

    app = Starlette(routes=[
        *_api_routes(service),
        Route("/", console_redirect, methods=["GET"]),
        Mount("/console", StaticFiles(directory=CONSOLE_DIR, html=True), name="console"),
    ])
    return options.guard(app, codes=TERMINAL_REFUSALS, public_prefixes=("/console",))
