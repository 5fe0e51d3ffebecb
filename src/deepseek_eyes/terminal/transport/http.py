"""The HTTP server: Streamable HTTP MCP at ``/mcp``, the console API with per-session SSE,
and the console's static files, all behind :class:`SecurityMiddleware`.

The console API exists for people: it lists pending plans with their argv shown exactly
(invisible characters made visible), approves or denies them (recorded as approvals ``via``
the console, ``by`` the console login that gave them), streams live output over SSE, and
shows receipts. It calls the same :class:`TerminalService` as the MCP tools, as the
console: it may act on every session, whichever MCP connection owns it. Request bodies are
checked strictly (a JSON object with known fields of the right types; ``NaN`` and
``Infinity`` are not JSON), else 400 ``TERMINAL_ARGUMENT_INVALID``.

Two credentials, two doors: ``/mcp`` takes the bearer token, ``/api/`` takes only the
console's login (:mod:`.console_login`: a one-time code the server prints, then a cookie).
An MCP client holding the token therefore cannot approve through the console API; only
``POST /api/login`` is open, and it needs the printed code.
"""

from __future__ import annotations

import asyncio
import json
import sys
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
from deepseek_eyes.serving.security import HttpOptions, unknown_route_handlers
from deepseek_eyes.terminal.arguments import invalid, known_keys
from deepseek_eyes.terminal.service import TerminalService
from deepseek_eyes.terminal.transport.console_login import (
    LOGIN_PATH,
    LOGOUT_PATH,
    ConsoleLogins,
)
from deepseek_eyes.terminal.transport.security import TERMINAL_REFUSALS
from deepseek_eyes.terminal.transport.server import Advisor, build_mcp_server, policy_summary

__all__ = ["CONSOLE_DIR", "ConsoleLogins", "HttpOptions", "build_console_app",
           "build_http_app"]

CONSOLE_DIR = Path(__file__).with_name("console")
_STATUS = {
    "TERMINAL_SESSION_NOT_FOUND": 404, "TERMINAL_PLAN_NOT_FOUND": 404,
    "TERMINAL_RECEIPT_NOT_FOUND": 404, "TERMINAL_POLICY_BLOCKED": 403,
    "TERMINAL_APPROVAL_REQUIRED": 409, "TERMINAL_PLAN_STATE": 409,
    "TERMINAL_SESSION_BUSY": 409, "TERMINAL_NO_ACTIVE_PROCESS": 409,
    "TERMINAL_PLAN_CHANGED": 409, "TERMINAL_SESSION_LIMIT": 429,
    "TERMINAL_PLAN_LIMIT": 429, "TERMINAL_ARGUMENT_INVALID": 400,
    "TERMINAL_CONSOLE_LOGIN_INVALID": 401, "TERMINAL_SELF_APPROVAL_REFUSED": 403,
    "TERMINAL_NOT_FOUND": 404,
}
PLAN_FIELDS = ("argv", "command", "cwd", "timeout_s")
_UNKNOWN = unknown_route_handlers("TERMINAL_NOT_FOUND")


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


def _api_routes(service: TerminalService, logins: ConsoleLogins) -> list[Route]:
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

    def person(request: Request) -> str:
        """The console login this request holds (the security layer let only those in)."""
        return logins.holder(request.headers.get("cookie")) or "console"

    async def login(request: Request) -> Response:
        async def spend(r: Request) -> Response:
            body = await _body(r)
            known_keys(body, ("code",), "login")
            secret, credential = logins.login(body.get("code"))
            return JSONResponse({"credential": credential, "expires_in_s": int(logins.ttl)},
                                headers={"set-cookie": logins.set_cookie(secret)})
        return await call(lambda: spend(request))

    async def logout(request: Request) -> Response:
        ended = logins.logout(request.headers.get("cookie"))
        return JSONResponse({"logged_out": ended},
                            headers={"set-cookie": logins.clear_cookie()})

    async def whoami(request: Request) -> Response:
        return JSONResponse({"credential": person(request)})

    async def approve(request: Request) -> Response:
        return await call(lambda: service.approve(
            p(request, "sid"), p(request, "pid"), via="console", by=person(request)))

    async def deny(request: Request) -> Response:
        return await call(lambda: service.deny(
            p(request, "sid"), p(request, "pid"), via="console", by=person(request)))

    async def execute(request: Request) -> Response:
        return await call(lambda: service.execute(p(request, "sid"), p(request, "pid"),
                                                             wait=False))

    async def control(request: Request) -> Response:
        action = p(request, "action")
        if action == "pause":
            return await call(lambda: service.pause(p(request, "sid")))
        if action == "resume":
            return await call(lambda: service.resume(p(request, "sid")))
        if action == "cancel":
            return await call(lambda: service.cancel(p(request, "sid")))
        return _error(TerminalError(
            f"a session takes pause, resume or cancel, not {action[:40]!r}; nothing was done",
            code="TERMINAL_NOT_FOUND", details={"action": action[:40]}))

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
        Route(LOGIN_PATH, login, methods=["POST"]),
        Route(LOGOUT_PATH, logout, methods=["POST"]),
        Route("/api/whoami", whoami, methods=["GET"]),
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


def _default_logins() -> ConsoleLogins:
    """Logins whose codes go to standard error, the first one at once (for a server whose
    owner did not say where its codes go)."""
    def show(code: str) -> None:
        print(f"terminal console: one-time login code {code}", file=sys.stderr, flush=True)

    logins = ConsoleLogins(show)
    logins.issue()
    return logins


def _console_routes(service: TerminalService, logins: ConsoleLogins) -> list[Any]:
    async def console_redirect(_: Request) -> Response:
        return Response(status_code=307, headers={"location": "/console/"})

    return [
        *_api_routes(service, logins),
        Route("/", console_redirect, methods=["GET"]),
        Mount("/console", StaticFiles(directory=CONSOLE_DIR, html=True), name="console"),
    ]


def build_http_app(
    service: TerminalService, options: HttpOptions, advisor: Advisor | None = None,
    *, logins: ConsoleLogins | None = None,
) -> ASGIApp:
    """The whole HTTP server as one ASGI app (lifespan included). ``logins`` is the
    console's credential; its owner issues the first code once it can say where the
    console is (default: codes printed on standard error, the first one now)."""
    logins = logins or _default_logins()
    mcp = build_mcp_server(service, advisor, reaper=False)
    sdk_routes, lifespan = streamable_mcp(
        mcp, options, background=service.run_reaper, close=service.aclose,
    )
    app = Starlette(routes=[*_console_routes(service, logins), *sdk_routes],
                    lifespan=lifespan, exception_handlers=_UNKNOWN)
    return options.guard(app, codes=TERMINAL_REFUSALS, public_prefixes=("/console",),
                         session=logins)


def build_console_app(service: TerminalService, options: HttpOptions, *,
                      logins: ConsoleLogins | None = None) -> ASGIApp:
    """The approval console and its API alone, for a service another process part owns
    (the gateway's in-process terminal): no MCP endpoint, no lifespan; the owner runs the
    reaper and closes the service. Same security as :func:`build_http_app`."""
    logins = logins or _default_logins()
    app = Starlette(routes=_console_routes(service, logins), exception_handlers=_UNKNOWN)
    return options.guard(app, codes=TERMINAL_REFUSALS, public_prefixes=("/console",),
                         session=logins)
