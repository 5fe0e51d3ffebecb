"""The Anthropic Messages front of the gateway: Claude Code (or any Anthropic client) on
DeepSeek, with eyes, by pointing ``ANTHROPIC_BASE_URL`` here.

``POST /v1/messages`` (whole or streamed), ``POST /v1/messages/count_tokens`` (counted
here: DeepSeek has no such endpoint), ``GET /v1/models`` in Anthropic's shape for a request
that carries ``anthropic-version``, ``HEAD``/``GET /`` and ``/api/hello`` (Claude Code's
liveness probes: a 405 reads as "endpoint down"), and its telemetry posts swallowed. The
format itself (the request as an OpenAI body, the answer, the SSE events, signatures) is
:mod:`deepseek_eyes.runtime.turn.wire.anthropic_messages`; this module is the HTTP side.

Decisions a newcomer would otherwise undo:

* **The same door as the OpenAI route:** the security layer (key by ``x-api-key`` or
  bearer, Host/Origin, JSON bodies, rate and body limits), the concurrent-turn slots, the
  drain, the gateway key's scope for sessions, reasoning and evidence.
* **Errors in Anthropic's shape everywhere under these paths:** ``{"type": "error",
  "error": {"type", "message"}}`` with our stable code beside them, statuses as Anthropic
  uses them (an upstream that is busy, or a gateway stopping, is 529
  ``overloaded_error``); the security layer's and the router's refusals are rewritten by
  :class:`AnthropicErrors`, which sits outside everything.
* **A stream starts only once the turn has started** (its request logged), so a bad image
  or a refused history still gets a real status; after the first byte a failure is an
  ``event: error``, and while the model thinks a ``ping`` goes out every
  ``gateway.anthropic_ping_seconds`` (Claude Code, like Anthropic's SDKs, expects them).
* **Sessions:** ``x-claude-code-session-id`` names the session (the gateway's own
  ``X-DeepSeekEyes-Session`` wins when both are sent), held in the gateway key's scope as
  the OpenAI route's header is.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import DeepSeekEyesError, StoreError
from deepseek_eyes.gateway import idempotency
from deepseek_eyes.gateway.body import check_fields
from deepseek_eyes.gateway.front import EventStream, Front, open_stream
from deepseek_eyes.llm.known import known_model
from deepseek_eyes.runtime.turn.wire import anthropic_messages as wire
from deepseek_eyes.stages import stage
from deepseek_eyes.store.events import SessionStore
from deepseek_eyes.store.idempotency import Claim, KeyRef

__all__ = [
    "PUBLIC_PATHS", "AnthropicErrors", "AnthropicRoutes", "Front",
    "anthropic_routes", "wants_anthropic",
]

#: Claude Code's liveness probes, answered without a key (they say nothing but "up").
PUBLIC_PATHS = frozenset({"/", "/api/hello"})
CLAUDE_SESSION_HEADER = "x-claude-code-session-id"
_log = logging.getLogger(__name__)
_PATHS = ("/v1/messages", "/api/")
_BUSY_UPSTREAM = {503, 529}


def _status(front: Front, exc: DeepSeekEyesError) -> int:
    status = exc.details.get("status")
    if exc.code == "LLM_HTTP_ERROR" and status in _BUSY_UPSTREAM:
        return 529
    if exc.code == "GATEWAY_SHUTTING_DOWN":
        return 529
    return front.error_status(exc)


def _message(exc: DeepSeekEyesError) -> str:
    provider = exc.details.get("provider_message")
    if isinstance(provider, str) and provider:
        return f"{exc.message} (upstream said: {provider})"
    return exc.message


def _error(front: Front, exc: DeepSeekEyesError, session: str | None = None) -> JSONResponse:
    status = _status(front, exc)
    headers = {"X-DeepSeekEyes-Session": session} if session else None
    return JSONResponse(wire.error_json(status, _message(exc), exc.code), status_code=status,
                        headers=headers)


def _sse(event: str, data: JsonObject) -> bytes:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event}\ndata: {text}\n\n".encode()


_PING = _sse("ping", {"type": "ping"})


@dataclass(frozen=True)
class AnthropicRoutes:
    """The routes, and the models listing ``GET /v1/models`` hands an Anthropic client."""

    models: Callable[[Request], Awaitable[Response]]
    routes: list[Route]


def anthropic_routes(front: Front) -> AnthropicRoutes:
    runtime = front.runtime
    ping_seconds = front.settings.anthropic_ping_seconds

    async def probe(_request: Request) -> Response:
        return Response(status_code=200)

    async def swallow(_request: Request) -> Response:
        return JSONResponse({})  # telemetry: nothing of it is kept

    async def translated(request: Request) -> tuple[wire.Translated, JsonObject]:
        parsed = await front.read_body(request, wire.KNOWN_FIELDS)
        out = wire.openai_body(parsed.fields, claude_models=front.settings.claude_models,
                               signer=front.signer, scope=front.scope)
        check_fields(out.body)  # the OpenAI rules the one admission path expects
        return out, parsed.fields

    async def count(request: Request) -> Response:
        try:
            out, _ = await translated(request)
        except DeepSeekEyesError as exc:
            return _error(front, exc)
        return JSONResponse({"input_tokens": wire.count_tokens(out.body)})

    async def _messages_entry(request: Request) -> Response:
        return await front.in_slot(request, _messages,
                                   lambda exc, session: _error(front, exc, session))

    async def _messages(request: Request, free_slot: Callable[[], None]) -> Response:
        ref: KeyRef | None = None

        def release() -> None:  # a stored answer keeps its key; a failed request frees it
            free_slot()
            if ref is not None:
                runtime.idempotency.release(ref)

        with stage("parse"):  # the body read, translated and admitted
            out, fields = await translated(request)
            session_id = (request.headers.get(front.session_header)
                          or request.headers.get(CLAUDE_SESSION_HEADER) or None)
            if session_id is not None and not SessionStore.valid_id(session_id):
                raise StoreError("the session header is not a valid session id",
                                 code="STORE_SESSION_INVALID")
            ref, replay = front.claim(request, fields, session_id)
            if replay is not None:
                free_slot()
                return _replay(replay, out, bool(fields.get("stream")))
            try:
                turn = await front.turn(out.body, session_id=session_id, ref=ref,
                                        source="gateway:anthropic")
            except BaseException:
                release()
                raise
        if not fields.get("stream"):
            result = await front.run(turn, request, release)
            with stage("answer"):
                answer = wire.answer_json(result, out, signer=front.signer, scope=front.scope)
                return JSONResponse(answer,
                                    headers={"X-DeepSeekEyes-Session": result.session_id})
        with stage("answer"):  # the turn's events as this format's stream
            stream = wire.MessageStream(runtime.events(turn), out, signer=front.signer,
                                        scope=front.scope)
        opened = await open_stream(stream, request, release)
        with stage("answer"):
            return EventStream(_events(opened.first, opened.rest, opened.close),
                               opened.close, opened.headers)

    def _replay(claim: Claim, out: wire.Translated, stream: bool) -> Response:
        """A stored answer, again (see gateway/idempotency.py), in this format."""
        assert claim.response is not None
        message = wire.message_json(idempotency.replayed(claim.response),
                                    model=out.requested_model, signer=front.signer,
                                    scope=front.scope)
        headers = {idempotency.REPLAYED_HEADER: "true"}
        if claim.session_id is not None:
            headers["X-DeepSeekEyes-Session"] = claim.session_id
        if not stream:
            return JSONResponse(message, headers=headers)
        payload = b"".join(_sse(*event) for event in wire.message_events(message))
        return Response(payload, media_type="text/event-stream",
                        headers={**headers, "Cache-Control": "no-cache"})

    async def _events(first: wire.Event, iterator: AsyncIterator[wire.Event],
                      close: Callable[[], Awaitable[None]]) -> AsyncIterator[bytes]:
        try:
            ending: DeepSeekEyesError | None = None
            try:
                yield _sse(*first)
                yield _PING
                while True:
                    pulling = asyncio.ensure_future(front.drain.pull(iterator))
                    try:
                        while not pulling.done():
                            await asyncio.wait({pulling}, timeout=ping_seconds)
                            if not pulling.done():
                                yield _PING
                    finally:
                        if not pulling.done():
                            pulling.cancel()
                    item = pulling.result()
                    if item is None:
                        break
                    yield _sse(*item)
            except DeepSeekEyesError as exc:
                ending = exc
            except Exception as exc:
                ending = front.internal(exc)
            if ending is not None:
                status = _status(front, ending)
                yield _sse("error", wire.error_json(status, _message(ending), ending.code))
        finally:
            await close()

    async def models(_request: Request) -> Response:
        listing = await runtime.catalog.models()
        data = []
        for info in listing:
            known = known_model(info.id)
            entry: JsonObject = {"type": "model", "id": info.id, "display_name": info.id,
                                 "created_at": "1970-01-01T00:00:00Z"}
            if known is not None and known.context_tokens:
                entry["context_window"] = known.context_tokens
            data.append(entry)
        return JSONResponse({"data": data, "has_more": False,
                             "first_id": data[0]["id"] if data else None,
                             "last_id": data[-1]["id"] if data else None})

    return AnthropicRoutes(models, [
        Route("/", probe, methods=["GET", "HEAD"]),
        Route("/api/hello", probe, methods=["GET", "HEAD"]),
        Route("/api/event_logging/batch", swallow, methods=["POST"]),
        Route("/v1/messages", _messages_entry, methods=["POST"]),
        Route("/v1/messages/count_tokens", count, methods=["POST"]),
    ])


def wants_anthropic(request: Request) -> bool:
    """A request in Anthropic's dialect (its SDKs send ``anthropic-version`` always)."""
    return "anthropic-version" in request.headers


class AnthropicErrors:
    """Error answers under the Anthropic paths (and any request that carries
    ``anthropic-version``) rewritten into Anthropic's shape: the security layer's refusals,
    unknown paths and methods, the drain's 503 (529 here). Successful answers and streams
    pass untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        headers = dict(scope.get("headers") or [])
        if scope["type"] != "http" or not (
                path.startswith(_PATHS) or b"anthropic-version" in headers):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def rewriting(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                if int(message["status"]) < 400:
                    await send(message)
                    return
                start = message
                return
            if start is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            status, body = _rewritten(int(start["status"]), b"".join(chunks))
            kept = [(k, v) for k, v in start.get("headers", [])
                    if k.lower() not in (b"content-length", b"content-type")]
            await send({**start, "status": status, "headers": [
                *kept, (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, rewriting)


def _rewritten(status: int, body: bytes) -> tuple[int, bytes]:
    try:
        value: Any = json.loads(body)
    except ValueError:
        value = None
    if isinstance(value, dict) and value.get("type") == "error":
        return status, body  # already Anthropic's
    error = value.get("error") if isinstance(value, dict) else None
    message = str(error.get("message")) if isinstance(error, dict) else "request failed"
    code = error.get("code") if isinstance(error, dict) else None
    if code == "GATEWAY_SHUTTING_DOWN":
        status = 529
    out = wire.error_json(status, message, code if isinstance(code, str) else None)
    return status, json.dumps(out, separators=(",", ":")).encode()
