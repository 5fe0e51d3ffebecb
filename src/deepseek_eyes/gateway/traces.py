"""The gateway's server span: one per HTTP request, the parent of what the request does
(its turn's chat calls, vision attempts, MCP calls, terminal executions).

Installed only when traces are on (:func:`deepseek_eyes.telemetry.active` at app build), so
a gateway without traces runs no code of it at all. The span is named ``{method} {route
template}`` and carries the route template, never the raw path (a model id, a response id);
a request whose ``traceparent`` header is valid continues the caller's trace (so a client
that traces itself sees the gateway's work under its own call).
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deepseek_eyes import telemetry

__all__ = ["traced"]

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def traced(app: ASGIApp, route_of: Callable[[Scope], str]) -> ASGIApp:
    """``app`` with a server span around each HTTP request."""

    async def spanned(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        method = scope.get("method")
        method = method if method in _METHODS else "_OTHER"
        route = route_of(scope)
        headers = {key.decode("latin-1"): value.decode("latin-1")
                   for key, value in scope.get("headers", ())
                   if key in (b"traceparent", b"tracestate")}
        with telemetry.server_span(f"{method} {route}", {
                "http.request.method": method, "http.route": route}, headers) as span:
            status = 0

            async def send_status(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                await send(message)

            await app(scope, receive, send_status)
            if span is not None and status:
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    telemetry.fail(span, str(status))

    return spanned
