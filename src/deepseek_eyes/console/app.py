"""The web console's HTTP app: static pages at ``/console/``, its JSON API at
``/console/api/``, both behind :class:`~deepseek_eyes.serving.SecurityMiddleware`.

Security, because the console can change what tools a model gets and approve commands:

* its own credential (:class:`WebConsoleLogins`): a one-time link printed on standard
  error, then an ``HttpOnly``, ``SameSite=Strict`` cookie scoped to ``/console/api/``; the
  gateway key and MCP tokens open nothing here, and the cookie opens nothing of theirs;
* every state-changing request needs the login's CSRF token in ``X-CSRF-Token`` *and* an
  ``Origin`` that is this server's own (the middleware refuses another origin; here a
  missing one is refused too), and a JSON body (a cross-origin page cannot send one without
  a preflight that is never granted);
* a strict Content-Security-Policy (the shared security headers: scripts, styles, images
  and connections from this origin only, no inline script or style, no frames); the page
  renders every string with ``textContent``;
* loopback Host names only (the gateway mounts it only when it binds loopback).

The page's files ship in the package (``static/``): HTML, ES modules and CSS, no CDN, no
build step.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from deepseek_eyes.console import views
from deepseek_eyes.console.approvals import approvals, decide, decide_ask
from deepseek_eyes.console.control import (
    ConsoleParts,
    edit_list,
    import_pasted,
    lifecycle,
    mcp_view,
    order_routes,
    probe_routes,
    probe_sight,
    register,
    remove,
    switch,
    unavailable,
    vision_view,
)
from deepseek_eyes.console.login import API, WebConsoleLogins, gateway_key_login
from deepseek_eyes.console.reports import stored_reports
from deepseek_eyes.console.signin import signin_state, start_signin
from deepseek_eyes.console.streams import (
    MAX_STREAMS,
    exported_chain,
    status_stream,
    verify_lines,
)
from deepseek_eyes.errors import ConsoleError, DeepSeekEyesError
from deepseek_eyes.serving.security import (
    RateLimiter,
    RefusalCodes,
    SecurityMiddleware,
    loopback_hosts,
    loopback_origins,
    unknown_route_handlers,
)

__all__ = ["CONSOLE_CODES", "CONSOLE_PATH", "STATIC_DIR", "WebConsoleLogins", "beside",
           "console_app", "gateway_key_login"]

CONSOLE_PATH = "/console"
STATIC_DIR = Path(__file__).with_name("static")
CONSOLE_CODES = RefusalCodes.prefixed("CONSOLE", "deepseek-eyes-console")
CSRF_HEADER = "x-csrf-token"
_STATUS = {"CONSOLE_NOT_FOUND": 404, "CONSOLE_LOGIN_INVALID": 401,
           "CONSOLE_CSRF_INVALID": 403, "CONSOLE_UNAVAILABLE": 409,
           "TERMINAL_SESSION_NOT_FOUND": 404, "TERMINAL_PLAN_NOT_FOUND": 404,
           "TERMINAL_PLAN_STATE": 409, "TERMINAL_SELF_APPROVAL_REFUSED": 403,
           "MCP_SERVER_UNKNOWN": 404, "AUDIT_NOT_FOUND": 404,
           "MCP_SERVER_DISABLED": 409, "CONSOLE_PROBE_FAILED": 502,
           "MCP_APPROVAL_NOT_FOUND": 404, "AUDIT_KEY_MISSING": 409,
           "MCP_LOGIN_UNSUPPORTED": 409, "MCP_LOGIN_FAILED": 502, "MCP_TIMEOUT": 504,
           "CONSOLE_SIGNIN_PENDING": 202, "CONSOLE_RATE_LIMITED": 429,
           "CONSOLE_SCOPE_DENIED": 403}
_BODY_LIMIT = 64 * 1024
#: Conversations on one page of the list (the server pages it; the page asks for more).
PAGE = 50


def _error(exc: DeepSeekEyesError) -> JSONResponse:
    return JSONResponse({"error": exc.to_dict()}, status_code=_STATUS.get(exc.code, 400))


async def _body(request: Request) -> dict[str, Any]:
    """The request body as a JSON object.

    Raises:
        ConsoleError: ``CONSOLE_ARGUMENT_INVALID``.
    """
    try:
        data = json.loads(await request.body() or b"{}")
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        raise ConsoleError("the body must be a JSON object", code="CONSOLE_ARGUMENT_INVALID")
    return data


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str):
        raise ConsoleError(f"{name} must be a string", code="CONSOLE_ARGUMENT_INVALID",
                           details={"field": name})
    return value


def _count(request: Request, name: str, default: int) -> int:
    """A query parameter that is a count (absent: ``default``).

    Raises:
        ConsoleError: ``CONSOLE_ARGUMENT_INVALID`` for anything but digits.
    """
    value = request.query_params.get(name)
    if value is None:
        return default
    if not value.isdigit() or len(value) > 9:
        raise ConsoleError(f"{name} must be a whole number", code="CONSOLE_ARGUMENT_INVALID",
                           details={"field": name})
    return int(value)


def _number(request: Request, name: str) -> float | None:
    """An optional query parameter that is a number (a time in epoch seconds).

    Raises:
        ConsoleError: ``CONSOLE_ARGUMENT_INVALID``.
    """
    value = request.query_params.get(name)
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if number != number or number in (float("inf"), float("-inf")):
        raise ConsoleError(f"{name} must be a number", code="CONSOLE_ARGUMENT_INVALID",
                           details={"field": name})
    return number


def _search(db: Any, request: Request, *, before: int | None = None) -> dict[str, Any]:
    q = request.query_params
    return views.audit_search(
        db, q.get("kind", "mcp"), server=q.get("server") or None, tool=q.get("tool") or None,
        route=q.get("route") or None, outcome=q.get("outcome") or None,
        since=_number(request, "since"), until=_number(request, "until"),
        before=before if before is not None else (
            _count(request, "before", 0) or None))


#: Rows an export holds at most (pages of the search, newest first).
EXPORT_ROWS = 20_000


def _routes(parts: ConsoleParts, logins: WebConsoleLogins) -> list[Any]:
    db = parts.home.db

    def cookie(request: Request) -> str | None:
        return request.headers.get("cookie")

    def person(request: Request) -> str:
        return logins.holder(cookie(request)) or "console"

    def scope(request: Request) -> str | None:
        """The client scope the login is bound to (None: the person's own login)."""
        return logins.scope_of(cookie(request))

    def operator(request: Request) -> None:
        """Only the person's own login reaches this view or action.

        Raises:
            ConsoleError: ``CONSOLE_SCOPE_DENIED`` for a login made with a gateway key.
        """
        if scope(request) is not None:
            raise ConsoleError("a login made with the gateway key sees that client's own "
                               "conversations only; this view takes the person's login (the "
                               "one-time link the server printed)",
                               code="CONSOLE_SCOPE_DENIED")

    def changing(request: Request) -> None:
        """A state-changing request's CSRF token and Origin.

        Raises:
            ConsoleError: ``CONSOLE_CSRF_INVALID``.
        """
        origin = request.headers.get("origin")
        host = request.headers.get("host", "")
        if origin not in (f"http://{host}", f"https://{host}") or not logins.csrf_ok(
                cookie(request), request.headers.get(CSRF_HEADER)):
            raise ConsoleError("a console action needs this console's page: its CSRF token "
                               "and its own Origin; nothing was done",
                               code="CONSOLE_CSRF_INVALID")

    async def run(request: Request, fn: Any, *, change: bool = False,
                  scoped: bool = False) -> Response:
        """``fn``'s answer as JSON; ``change``: a state-changing request (its CSRF token and
        Origin checked first); ``scoped``: a view a gateway-key login may see too (``fn``
        filters by the login's scope), else the person's login only."""
        try:
            if not scoped:
                operator(request)
            if change:
                changing(request)
            result = fn()
            if asyncio.iscoroutine(result):
                result = await result
        except DeepSeekEyesError as exc:
            return _error(exc)
        return result if isinstance(result, Response) else JSONResponse(result)

    async def login(request: Request) -> Response:
        async def spend() -> Response:
            body = await _body(request)
            if "key" in body:
                origin = request.headers.get("origin")
                host = request.headers.get("host", "")
                if origin not in (f"http://{host}", f"https://{host}"):
                    raise ConsoleError("a login with the gateway key comes from this "
                                       "console's own page", code="CONSOLE_CSRF_INVALID")
                key = body.get("key")
                bound = (logins.key_scope(key) if isinstance(key, str) and key
                         and logins.key_scope is not None else None)
                if bound is None:
                    raise ConsoleError("that is not this gateway's key (a gateway without "
                                       "a key takes the one-time link only)",
                                       code="CONSOLE_LOGIN_INVALID")
                secret, credential, csrf = logins.login_scoped(bound)
            else:
                secret, credential, csrf = logins.login_with_csrf(body.get("code"))
            return JSONResponse({"credential": credential, "csrf": csrf,
                                 "expires_in_s": int(logins.ttl)},
                                headers={"set-cookie": logins.set_cookie(secret)})
        return await run(request, spend, scoped=True)

    async def logout(request: Request) -> Response:
        async def end() -> Response:
            ended = logins.logout(cookie(request))
            return JSONResponse({"logged_out": ended},
                                headers={"set-cookie": logins.clear_cookie()})
        return await run(request, end, change=True, scoped=True)

    async def whoami(request: Request) -> Response:
        # A reloaded page's CSRF token: only a same-origin script can read this answer.
        bound = scope(request)
        return JSONResponse({"credential": person(request),
                             "csrf": logins.rotate_csrf(cookie(request)),
                             "scope": bound, "operator": bound is None,
                             "gateway": parts.terminal is not None
                             or parts.mcp_manager is not None})

    async def conversation_list(request: Request) -> Response:
        q = request.query_params.get("q")
        return await run(request, lambda: asyncio.to_thread(
            views.conversations, db, search=q, limit=_count(request, "limit", PAGE),
            offset=_count(request, "offset", 0), scope=scope(request)), scoped=True)

    async def conversation(request: Request) -> Response:
        sid = str(request.path_params["sid"])
        return await run(request, lambda: asyncio.to_thread(
            views.conversation, db, sid, scope=scope(request)), scoped=True)

    def in_scope(request: Request, then: Callable[[], Any]) -> Callable[[], Any]:
        sid, bound = str(request.path_params["sid"]), scope(request)

        def checked() -> Any:
            views.require_scope(db, sid, bound)
            return then()
        return lambda: asyncio.to_thread(checked)

    async def conversation_screens(request: Request) -> Response:
        sid = str(request.path_params["sid"])
        return await run(request, in_scope(request, lambda: {
            **views.screens(db, sid),
            "reports": stored_reports(db, parts.home.blobs, sid)}), scoped=True)

    async def image_provenance(request: Request) -> Response:
        sid, sha = str(request.path_params["sid"]), str(request.path_params["sha"])
        return await run(request, in_scope(request, lambda: views.provenance(db, sid, sha)),
                         scoped=True)

    async def blob(request: Request) -> Response:
        sha = str(request.path_params["sha"])
        meta = views.image_meta(db, [sha]).get(sha) if len(sha) == 64 else None
        bound = scope(request)
        if meta is not None and bound is not None and not await asyncio.to_thread(
                views.image_in_scope, db, sha, bound):
            meta = None  # another client's image: as if it were not stored
        if meta is None:
            return _error(ConsoleError("no stored image has that hash",
                                       code="CONSOLE_NOT_FOUND"))
        data = await asyncio.to_thread(parts.home.blobs.get, sha)
        return Response(data, media_type=str(meta["media_type"]),
                        headers={"x-content-type-options": "nosniff"})

    async def approval_list(request: Request) -> Response:
        return await run(request, lambda: approvals(parts))

    async def approval(request: Request) -> Response:
        verdict = str(request.path_params["verdict"])
        if verdict not in ("approve", "deny"):
            return _error(ConsoleError("a plan takes approve or deny",
                                       code="CONSOLE_NOT_FOUND"))
        return await run(request, lambda: decide(
            parts, str(request.path_params["sid"]), str(request.path_params["pid"]),
            "approve" if verdict == "approve" else "deny", person(request)), change=True)

    async def ask_decision(request: Request) -> Response:
        verdict = str(request.path_params["verdict"])
        if verdict not in ("approve", "deny"):
            return _error(ConsoleError("an ask-first call takes approve or deny",
                                       code="CONSOLE_NOT_FOUND"))
        return await run(request, lambda: decide_ask(
            parts, str(request.path_params["aid"]),
            "approve" if verdict == "approve" else "deny", person(request)), change=True)

    async def mcp(request: Request) -> Response:
        return await run(request, lambda: mcp_view(parts))

    async def mcp_edit(request: Request) -> Response:
        async def edit() -> dict[str, Any]:
            body = await _body(request)
            return await edit_list(parts, str(request.path_params["server"]),
                                   _text(body, "list"), _text(body, "op"),
                                   _text(body, "selector"))
        return await run(request, edit, change=True)

    async def mcp_switch(request: Request) -> Response:
        async def change() -> dict[str, Any]:
            body = await _body(request)
            enabled = body.get("enabled")
            if not isinstance(enabled, bool):
                raise ConsoleError("enabled must be true or false",
                                   code="CONSOLE_ARGUMENT_INVALID", details={"field": "enabled"})
            return await switch(parts, str(request.path_params["server"]), enabled)
        return await run(request, change, change=True)

    async def mcp_lifecycle(request: Request) -> Response:
        async def act() -> dict[str, Any]:
            await _body(request)
            return await lifecycle(parts, str(request.path_params["server"]),
                                   str(request.path_params["action"]))
        return await run(request, act, change=True)

    streams = [0]

    async def mcp_events(request: Request) -> Response:
        """The servers' live status as server-sent events (the manager's watch stream)."""
        try:
            operator(request)
            if parts.mcp_manager is None:
                raise unavailable("the live status")
            if streams[0] >= MAX_STREAMS:
                raise ConsoleError(f"{MAX_STREAMS} live status views are open already; "
                                   "close one", code="CONSOLE_RATE_LIMITED")
        except DeepSeekEyesError as exc:
            return _error(exc)

        async def counted() -> AsyncIterator[bytes]:
            streams[0] += 1
            try:
                async for chunk in status_stream(parts):
                    yield chunk
            finally:
                streams[0] -= 1

        return StreamingResponse(counted(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store",
                                          "x-accel-buffering": "no"})

    async def mcp_remove(request: Request) -> Response:
        async def drop() -> dict[str, Any]:
            body = await _body(request)
            # The page asks the person first; the request must say it was confirmed.
            if body.get("confirm") != str(request.path_params["server"]):
                raise ConsoleError("removing a server takes confirm: its id",
                                   code="CONSOLE_ARGUMENT_INVALID",
                                   details={"field": "confirm"})
            return await remove(parts, str(request.path_params["server"]))
        return await run(request, drop, change=True)

    async def mcp_signin(request: Request) -> Response:
        async def begin() -> dict[str, Any]:
            await _body(request)
            return await start_signin(parts, str(request.path_params["server"]))
        return await run(request, begin, change=True)

    async def mcp_signin_state(request: Request) -> Response:
        return await run(request, lambda: signin_state(parts,
                                                       str(request.path_params["server"])))

    async def mcp_register(request: Request) -> Response:
        async def add() -> dict[str, Any]:
            return await register(parts, await _body(request))
        return await run(request, add, change=True)

    async def mcp_import(request: Request) -> Response:
        async def bring() -> dict[str, Any]:
            body = await _body(request)
            return await import_pasted(parts, _text(body, "text"),
                                       replace=body.get("replace") is True)
        return await run(request, bring, change=True)

    async def vision(request: Request) -> Response:
        return await run(request, lambda: vision_view(parts))

    async def vision_probe(request: Request) -> Response:
        async def probe() -> dict[str, Any]:
            body = await _body(request)
            if "model" in body:
                return await probe_sight(parts, _text(body, "model"))
            return await probe_routes(parts)
        return await run(request, probe, change=True)

    async def vision_order(request: Request) -> Response:
        async def order() -> dict[str, Any]:
            body = await _body(request)
            names = body.get("order")
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise ConsoleError("order is a list of route names",
                                   code="CONSOLE_ARGUMENT_INVALID", details={"field": "order"})
            return await order_routes(parts, names)
        return await run(request, order, change=True)

    async def audit(request: Request) -> Response:
        return await run(request, lambda: asyncio.to_thread(views.audit_head, db))

    async def verify(request: Request) -> Response:
        """The chain walked as the CLI's ``audit verify`` walks it, answered as JSON lines:
        ``{"done", "total"}`` each time the verifier reports a batch checked, then
        ``{"report"}`` (the page's progress bar shows the verifier's own count)."""
        try:
            operator(request)
            changing(request)
        except DeepSeekEyesError as exc:
            return _error(exc)
        return StreamingResponse(verify_lines(parts), media_type="application/x-ndjson",
                                 headers={"cache-control": "no-store"})

    async def chain_export(request: Request) -> Response:
        """The whole chain as ``audit export`` writes it (a signed header, then one line an
        entry), downloaded; ``audit verify --file`` checks it alone."""
        async def build() -> Response:
            data = await asyncio.to_thread(exported_chain, parts)
            return Response(data, media_type="application/x-ndjson", headers={
                "content-disposition": 'attachment; filename="deepseek-eyes-audit.jsonl"',
                "cache-control": "no-store"})
        return await run(request, build)

    async def audit_search(request: Request) -> Response:
        return await run(request, lambda: asyncio.to_thread(_search, db, request))

    async def audit_record(request: Request) -> Response:
        ident = str(request.path_params["ident"])
        return await run(request, lambda: asyncio.to_thread(views.audit_record, db, ident))

    async def audit_export(request: Request) -> Response:
        def collect() -> Response:
            lines: list[str] = []
            before: int | None = None
            while len(lines) < EXPORT_ROWS:
                page = _search(db, request, before=before)
                lines += [json.dumps(row, sort_keys=True) for row in page["rows"]]
                before = page["next_before"]
                if before is None:
                    break
            kind = "mcp-calls" if request.query_params.get("kind", "mcp") == "mcp" else (
                "vision-attempts")
            return Response("".join(line + "\n" for line in lines),
                            media_type="application/x-ndjson", headers={
                                "content-disposition":
                                    f'attachment; filename="deepseek-eyes-{kind}.jsonl"'})
        return await run(request, lambda: asyncio.to_thread(collect))

    async def usage(request: Request) -> Response:
        return await run(request, lambda: asyncio.to_thread(views.usage_view, db))

    async def index_redirect(_: Request) -> Response:
        return Response(status_code=307, headers={"location": CONSOLE_PATH + "/"})

    return [
        Route(API + "/login", login, methods=["POST"]),
        Route(API + "/logout", logout, methods=["POST"]),
        Route(API + "/whoami", whoami, methods=["GET"]),
        Route(API + "/conversations", conversation_list, methods=["GET"]),
        Route(API + "/conversations/{sid}", conversation, methods=["GET"]),
        Route(API + "/conversations/{sid}/screens", conversation_screens, methods=["GET"]),
        Route(API + "/conversations/{sid}/images/{sha}/provenance", image_provenance,
              methods=["GET"]),
        Route(API + "/images/{sha}", blob, methods=["GET"]),
        Route(API + "/approvals", approval_list, methods=["GET"]),
        Route(API + "/approvals/{sid}/{pid}/{verdict}", approval, methods=["POST"]),
        Route(API + "/asks/{aid}/{verdict}", ask_decision, methods=["POST"]),
        Route(API + "/mcp", mcp, methods=["GET"]),
        Route(API + "/mcp/events", mcp_events, methods=["GET"]),
        Route(API + "/mcp/servers", mcp_register, methods=["POST"]),
        Route(API + "/mcp/import", mcp_import, methods=["POST"]),
        Route(API + "/mcp/{server}/tools", mcp_edit, methods=["POST"]),
        Route(API + "/mcp/{server}/enabled", mcp_switch, methods=["POST"]),
        Route(API + "/mcp/{server}/remove", mcp_remove, methods=["POST"]),
        Route(API + "/mcp/{server}/signin", mcp_signin, methods=["POST"]),
        Route(API + "/mcp/{server}/signin", mcp_signin_state, methods=["GET"]),
        Route(API + "/mcp/{server}/{action:str}", mcp_lifecycle, methods=["POST"]),
        Route(API + "/vision", vision, methods=["GET"]),
        Route(API + "/vision/probe", vision_probe, methods=["POST"]),
        Route(API + "/vision/order", vision_order, methods=["POST"]),
        Route(API + "/audit", audit, methods=["GET"]),
        Route(API + "/audit/verify", verify, methods=["POST"]),
        Route(API + "/audit/search", audit_search, methods=["GET"]),
        Route(API + "/audit/export", audit_export, methods=["GET"]),
        Route(API + "/audit/chain-export", chain_export, methods=["GET"]),
        Route(API + "/audit/records/{ident}", audit_record, methods=["GET"]),
        Route(API + "/usage", usage, methods=["GET"]),
        Route(CONSOLE_PATH, index_redirect, methods=["GET"]),
        Mount(CONSOLE_PATH, StaticFiles(directory=STATIC_DIR, html=True), name="console"),
    ]


def console_app(parts: ConsoleParts, logins: WebConsoleLogins, *,
                rate_limit_per_minute: int = 1200) -> ASGIApp:
    """The console behind the security layer: loopback Host and Origin only, the static
    files open (they hold no data), the API only to a console login."""
    app = Starlette(routes=_routes(parts, logins),
                    exception_handlers=unknown_route_handlers("CONSOLE_NOT_FOUND"))
    return SecurityMiddleware(
        app, token=None, allowed_hosts=loopback_hosts(), allowed_origins=loopback_origins(),
        limiter=RateLimiter(rate_limit_per_minute),
        max_body_bytes=_BODY_LIMIT, public_prefixes=(CONSOLE_PATH,), codes=CONSOLE_CODES,
        json_bodies=True, body_timeout=10.0, session=logins,
    )


def beside(console: ASGIApp, other: ASGIApp) -> ASGIApp:
    """One ASGI app: ``/console`` and below to ``console``, everything else to ``other``
    (the gateway, whose key and rules the console's paths never meet)."""
    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", "")) if scope["type"] == "http" else ""
        if path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/"):
            await console(scope, receive, send)
        else:
            await other(scope, receive, send)

    return route
