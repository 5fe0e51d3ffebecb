"""The OpenAI-compatible gateway: any OpenAI client gains eyes by changing its base URL.

``GET /v1/models`` lists every final model with image input added (in Anthropic's shape for
an Anthropic client, in Codex's catalog shape for a request naming ``client_version``); ``POST
/v1/chat/completions`` runs the same turn code as ``deepseek-eyes ask``, streamed (SSE) or
not. Every failure, unknown paths and methods and unexpected exceptions included, uses
OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``, with our stable code
in ``code``: a client never gets a plain-text page or a bare 500.

Decisions a newcomer would otherwise undo:

* A streamed turn is prepared and its first chunk pulled *before* the response starts, so
  a bad image, a missing key or an upstream refusal still gets a real HTTP status. After
  the first byte a failure can only travel as an SSE ``error`` event, and every stream
  ends with ``data: [DONE]``, whatever ended it: the turn's own error (its code), a bug
  (``GATEWAY_INTERNAL_ERROR``, logged with its traceback) or the gateway's stop
  (``GATEWAY_SHUTTING_DOWN``). Only a client that went away gets nothing more (and nothing
  is logged). The turn's iterator is closed under a shield however the stream ends, even
  when the response never started its body.
* Every request passes :mod:`deepseek_eyes.serving.security` first, the layer every server
  of ours stands behind: ``Host`` must be a loopback name (or ``gateway.allowed_hosts``),
  so a DNS-rebinding page is refused; a request a browser sends with an ``Origin`` is
  refused unless ``gateway.allowed_origins`` names it (stock clients send none); a POST must
  be ``application/json`` (the one body a cross-site page cannot send without a CORS
  preflight); the key is compared in constant time (``Bearer`` in any case); calls are
  rate-limited per key; the body is bounded in size and time. The server refuses to listen
  beyond loopback without a key (:func:`check_bind`).
* Sessions are optional: the ``X-DeepSeekEyes-Session`` header names one; without it each
  request is its own session. Clients resend the whole history each turn, so images are
  found again by their hash and their evidence comes from the cache. Every answer, streamed
  or not, carries the session's id in that header, and a stream's last chunk carries the
  ``deepseekeyes`` object a whole answer has. So does every error answer of a turn once its
  request is logged (the error's ``details["session_id"]``, or the session the turn named
  when it started: a 500 at the end of a turn, the 503 of a turn cut at shutdown).
* Every request is counted by the drain (:mod:`deepseek_eyes.gateway.drain`), outside the
  security layer, and each wait on a turn runs under it, so a stop can end it in our shape.
* The body is read under a deadline (``gateway.body_timeout``) and checked whole
  (:mod:`deepseek_eyes.gateway.body`) before the turn starts, so a refused request leaves
  nothing in the session store and a slow trickle cannot hold a connection forever. It is
  parsed inside the concurrent-turn bound (``gateway.max_concurrent_turns``), bounded in
  text bytes and JSON values before anything is built, in a worker thread when large; the
  top-level fields the gateway does not read are skipped unbuilt and named in the answer's
  ``deepseekeyes.ignored``.
* ``/v1/models`` with the upstream down is the upstream's error (502 ``LLM_UNAVAILABLE``),
  not an empty list; models the settings declare are still listed, marked as such.
* A full disk is 507 ``STORE_FULL`` (Insufficient Storage), typed ``server_error``: the
  gateway's own storage, not the upstream, failed, and it recovers by itself once there is
  room.
* ``Idempotency-Key`` (:mod:`deepseek_eyes.gateway.idempotency`): the same request again
  under the same key is answered from the store, not the upstream.
* ``/healthz`` and ``/readyz`` are public (a balancer probes without credentials);
  ``/readyz``'s body is names, statuses and codes only
  (:mod:`deepseek_eyes.gateway.readiness`). ``/metrics`` needs the key
  (:mod:`deepseek_eyes.gateway.metrics`); its layer and the traces' server span
  (:mod:`deepseek_eyes.gateway.traces`, only when traces are on) sit outside the
  security layer, so its refusals are counted and traced too.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from deepseek_eyes import telemetry
from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import DeepSeekEyesError, GatewayError, LLMError, StoreError
from deepseek_eyes.gateway import idempotency
from deepseek_eyes.gateway.anthropic import (
    PUBLIC_PATHS,
    AnthropicErrors,
    anthropic_routes,
    wants_anthropic,
)
from deepseek_eyes.gateway.body import BodyLimits, RequestBody, check_fields, read_request
from deepseek_eyes.gateway.drain import Drain, shutting_down
from deepseek_eyes.gateway.fetch import fetch_image
from deepseek_eyes.gateway.front import EventStream, Front
from deepseek_eyes.gateway.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from deepseek_eyes.gateway.metrics import GatewayMetrics, RouteNames, SqliteCounts
from deepseek_eyes.gateway.readiness import gateway_readiness
from deepseek_eyes.gateway.resent import ResentBodies
from deepseek_eyes.gateway.responses import codex_catalog, responses_routes, wants_codex_catalog
from deepseek_eyes.gateway.timing import ServerTiming
from deepseek_eyes.gateway.traces import traced
from deepseek_eyes.runtime.approval import Approver
from deepseek_eyes.runtime.messages import Fetch
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.turn import TurnRequest, completion_json
from deepseek_eyes.runtime.turn.wire.anthropic_messages import (
    ThinkingKeyring,
    ThinkingSigner,
    thinking_directory,
)
from deepseek_eyes.runtime.turn.wire.openai_responses import ReasoningSealer
from deepseek_eyes.serving.readiness import Readiness
from deepseek_eyes.serving.security import (
    SECURITY_HEADERS,
    RefusalCodes,
    SecurityMiddleware,
    allowed_hosts_for,
)
from deepseek_eyes.settings import GatewaySettings, is_loopback_host
from deepseek_eyes.stages import hand_to, stage
from deepseek_eyes.store.events import SessionStore
from deepseek_eyes.store.idempotency import Claim, KeyRef

__all__ = ["GATEWAY_REFUSALS", "SESSION_HEADER", "check_bind", "create_app", "error_body",
           "error_status"]

#: The codes of the requests :mod:`deepseek_eyes.serving.security` refuses for the gateway.
GATEWAY_REFUSALS = RefusalCodes.prefixed("GATEWAY", realm="deepseek-eyes-gateway")

SESSION_HEADER = "x-deepseekeyes-session"
_SESSION_HEADER_OUT = "X-DeepSeekEyes-Session"
#: Reached without the key: liveness and readiness (names, statuses and codes only).
_PUBLIC_PREFIXES = ("/healthz", "/readyz")
_NO_STORE = {"Cache-Control": "no-store"}
_log = logging.getLogger(__name__)

#: Status for our codes; anything unlisted by family below. The security layer answers its
#: own refusals (GATEWAY_UNAUTHORIZED, _FORBIDDEN, _RATE_LIMITED, _UNSUPPORTED_MEDIA_TYPE,
#: _BODY_TOO_LARGE, _BODY_TIMEOUT) with their statuses before a handler runs.
_STATUS = {
    "GATEWAY_NOT_FOUND": 404,
    "GATEWAY_RESPONSE_NOT_FOUND": 404,
    "GATEWAY_METHOD_NOT_ALLOWED": 405,
    "GATEWAY_INTERNAL_ERROR": 500,
    "STORE_FULL": 507,
    "STORE_DATABASE_UNAVAILABLE": 503,
    "GATEWAY_SHUTTING_DOWN": 503,
    # The load balancer's own answers (gateway/balancer.py writes them for HAProxy).
    "GATEWAY_REPLICA_FAILED": 502,
    "GATEWAY_NO_REPLICA": 503,
    "GATEWAY_REPLICA_TIMEOUT": 504,
    "STORE_SESSION_INVALID": 400,
    "STORE_SESSION_NOT_FOUND": 404,
    "LLM_TIMEOUT": 504,
    "VISION_ROUTE_TIMEOUT": 504,
    "LLM_CREDENTIAL_MISSING": 500,
    "LLM_MODEL_UNKNOWN": 404,
    "CONFIG_ENV_MISSING": 500,
    "RUNTIME_IMAGE_URL_DISABLED": 400,
    "RUNTIME_IMAGE_FETCH_FAILED": 400,
    "RUNTIME_MODEL_CALL_LIMIT": 502,
    "LLM_REASONING_MISSING": 400,  # the client's history, refused before any upstream call
    "GATEWAY_IDEMPOTENCY_IN_PROGRESS": 409,
    "GATEWAY_IDEMPOTENCY_KEY_REUSED": 422,
    "STORE_SESSION_CONFLICT": 409,
    "STORE_SESSION_UNKEPT": 409,
    "GATEWAY_BODY_TEXT_TOO_LARGE": 413,
    "GATEWAY_JSON_TOO_MANY_NODES": 413,
    "STORE_SESSION_FOREIGN": 403,
    "RUNTIME_TOOL_NOT_CALLED": 502,  # the upstream did not do what the request forced
}
#: Bodies larger than this are parsed in a worker thread, off the event loop.
_THREAD_PARSE_BYTES = 256 * 1024
# Upstream statuses a client can act on pass through; an upstream 401/403 is the gateway's
# own credential problem, not the client's, so it becomes a 502 like other upstream faults.
_UPSTREAM_PASSED = {400, 402, 404, 409, 413, 422, 429}


def error_status(exc: DeepSeekEyesError) -> int:
    """The HTTP status a gateway client gets for one of our errors."""
    if exc.code in _STATUS:
        return _STATUS[exc.code]
    if exc.code == "LLM_HTTP_ERROR":
        status = exc.details.get("status")
        return status if isinstance(status, int) and status in _UPSTREAM_PASSED else 502
    family = exc.code.split("_", 1)[0]
    if family in ("IMAGE", "RUNTIME", "GATEWAY", "EVIDENCE", "STORE"):
        return 400 if family != "STORE" else 500
    return 502  # LLM_*, VISION_*: the upstream or a vision route failed


def error_body(exc: DeepSeekEyesError) -> JsonObject:
    """OpenAI's error shape with our code: what a gateway client gets for ``exc`` (the load
    balancer's own errors too, :mod:`deepseek_eyes.gateway.balancer`)."""
    status = error_status(exc)
    kind = (
        "authentication_error" if status == 401
        else "invalid_request_error" if status < 500
        else "server_error" if exc.code.startswith("STORE_")
        else "upstream_error"
    )
    message = exc.message
    provider = exc.details.get("provider_message")
    if isinstance(provider, str) and provider:
        message = f"{message} (upstream said: {provider})"
    param = exc.details.get("param")
    return {"error": {"message": message, "type": kind,
                      "param": param if isinstance(param, str) else None, "code": exc.code}}


def _error(exc: DeepSeekEyesError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(exc), status_code=error_status(exc), headers=headers)


async def _http_exception(_request: Request, exc: Exception) -> Response:
    """Starlette's own 404 and 405 (unknown path, wrong method), in our shape."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    headers = dict(exc.headers or {}) if isinstance(exc, HTTPException) else {}
    if status == 404:
        error = GatewayError("no such endpoint", code="GATEWAY_NOT_FOUND")
    elif status == 405:
        error = GatewayError("this endpoint does not take that method",
                             code="GATEWAY_METHOD_NOT_ALLOWED")
    else:
        error = GatewayError(str(getattr(exc, "detail", "bad request"))[:200])
    return JSONResponse(error_body(error), status_code=status, headers=headers)


def _internal(exc: BaseException) -> GatewayError:
    """A bug, not a client's fault: logged with its traceback, reported in our shape."""
    _log.error("unexpected gateway failure: %s", type(exc).__name__, exc_info=exc)
    return GatewayError("the gateway failed unexpectedly", code="GATEWAY_INTERNAL_ERROR")


async def _unexpected(_request: Request, exc: Exception) -> Response:
    return _error(_internal(exc))


def _name_session(request: Request, session_id: str | None) -> None:
    """Remember the session a turn logged its request in, for an error answered later."""
    if session_id is not None:
        request.state.session_id = session_id


def _session_headers(request: Request, exc: DeepSeekEyesError) -> dict[str, str] | None:
    session = exc.details.get("session_id")
    if not isinstance(session, str):
        session = getattr(request.state, "session_id", None)
    return {_SESSION_HEADER_OUT: session} if isinstance(session, str) else None


def check_bind(host: str, key: str | None) -> None:
    """Raises GatewayError ``GATEWAY_UNSAFE_BIND`` for a non-loopback bind without a key."""
    if key is None and not is_loopback_host(host):
        raise GatewayError(
            f"refusing to listen on {host} without a gateway key; set "
            "DEEPSEEK_EYES_GATEWAY_KEY (or gateway.api_key) or bind to 127.0.0.1",
            code="GATEWAY_UNSAFE_BIND",
            details={"host": host},
        )


def _note_ignored(answer: JsonObject, ignored: tuple[str, ...]) -> JsonObject:
    """``answer`` (a completion or a chunk) naming the request's ignored fields in its
    ``deepseekeyes`` object, when it has one and anything was ignored."""
    ours = answer.get("deepseekeyes")
    if ignored and isinstance(ours, dict):
        return {**answer, "deepseekeyes": {**ours, "ignored": list(ignored)}}
    return answer


class _Slot:
    """One of the concurrent-turn slots, released once however the request ends."""

    def __init__(self, slots: asyncio.Semaphore) -> None:
        self._slots = slots
        self._held = False

    async def take(self) -> None:
        await self._slots.acquire()
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._slots.release()


def _sse(value: JsonObject) -> bytes:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return b"data: " + text.encode() + b"\n\n"


_DONE = b"data: [DONE]\n\n"


async def _events(first: JsonObject, iterator: AsyncIterator[JsonObject], drain: Drain,
                  close: Callable[[], Awaitable[None]],
                  ignored: tuple[str, ...] = ()) -> AsyncIterator[bytes]:
    """A streamed turn as SSE: its chunks, then ``[DONE]``; after a failure, the error event
    first. A client that went away (a cancellation, or the close at a ``yield``) gets
    nothing more. ``close`` closes the turn and frees its slot."""
    try:
        ending: DeepSeekEyesError | None = None
        try:
            yield _sse(_note_ignored(first, ignored))
            while (chunk := await drain.pull(iterator)) is not None:
                yield _sse(_note_ignored(chunk, ignored))
        except DeepSeekEyesError as exc:  # the turn's own error, or the stop's cut
            ending = exc
        except Exception as exc:
            ending = _internal(exc)
        if ending is not None:
            yield _sse(error_body(ending))
        yield _DONE
    finally:
        await close()


def create_app(
    runtime: Runtime, settings: GatewaySettings, *, key: str | None,
    approver: Approver | None = None, bind_host: str | None = None,
    drain: Drain | None = None, readiness: Readiness | None = None,
) -> ASGIApp:
    """The ASGI app behind the shared security layer, inside ``drain`` (default: one of
    its own that nothing stops). ``key`` is the resolved bearer key, or None for an open
    loopback gateway; ``approver`` decides plans that need a person (None: nobody can);
    ``bind_host`` (default ``gateway.host``) decides the Host names accepted;
    ``readiness`` (default: :func:`~deepseek_eyes.gateway.readiness.gateway_readiness`)
    is what ``/readyz`` checks."""
    drain = drain or Drain(settings.drain_timeout)

    def default_readiness() -> Readiness:
        return readiness or gateway_readiness(
            runtime.home, runtime.client, settings, credential_error=runtime.credential_error,
            state=runtime.bridge.state)

    # The store is reached at the first probe or scrape, not here: an app is built before
    # (and, in tests, without) anything it would check.
    metrics = GatewayMetrics(lambda: SqliteCounts(runtime.home.db)) if settings.metrics \
        else None
    app = _routes(runtime, settings, approver, drain, key, default_readiness, metrics)
    state = runtime.bridge.state
    secured: ASGIApp = SecurityMiddleware(
        app,
        token=key,
        allowed_hosts=allowed_hosts_for(bind_host or settings.host, settings.allowed_hosts),
        allowed_origins=list(settings.allowed_origins),
        # Per key and per address, in this process or in buckets every replica shares
        # ([store] state_url): the limit is the gateway's, however many replicas serve it.
        limiter=state.rate_limiter(settings.rate_limit_per_minute, namespace="gateway-key"),
        anonymous_limiter=state.rate_limiter(settings.rate_limit_per_minute,
                                             namespace="gateway-address"),
        max_body_bytes=settings.max_body_bytes,
        public_prefixes=_PUBLIC_PREFIXES,
        codes=GATEWAY_REFUSALS,
        json_bodies=True,
        body_timeout=settings.body_timeout,
        cross_site_navigation=False,  # the gateway has no pages
        api_key_header=True,  # Anthropic's clients send the key as x-api-key
        public_paths=PUBLIC_PATHS,
        loopback_paths=frozenset({"/metrics"}) if settings.metrics_open_on_loopback
        else frozenset(),
    )
    route_of = RouteNames(app.routes)
    if metrics is not None:  # outside the security layer: its refusals are counted too
        metrics.http.route_of = route_of
        secured = metrics.http.middleware(secured)
    if telemetry.active():  # nothing of it runs without traces
        secured = traced(secured, route_of)
    headers = {name.decode(): value.decode() for name, value in SECURITY_HEADERS}
    outer = AnthropicErrors(drain.middleware(secured, lambda: _error(shutting_down(), headers)))
    return ServerTiming(outer) if settings.server_timing else outer


def _routes(runtime: Runtime, settings: GatewaySettings, approver: Approver | None,
            drain: Drain, key: str | None, make_readiness: Callable[[], Readiness],
            metrics: GatewayMetrics | None) -> Starlette:
    scope = idempotency.client_scope(key)
    fetch: Fetch | None = None
    if settings.allow_image_urls:

        async def fetch_url(url: str) -> bytes:
            return await fetch_image(
                url, max_bytes=runtime.settings.image.max_bytes,
                timeout=settings.image_url_timeout,
                allow_private=settings.allow_private_image_urls,
            )

        fetch = fetch_url

    def guarded(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            # The handler's waits run under the drain: a stop's cut answers 503.
            try:
                with drain.watch():
                    response = await handler(request)
                hand_to("http")  # the framework sends it from here
            except DeepSeekEyesError as exc:
                # A turn that failed after its request was logged names its session too.
                return _error(exc, _session_headers(request, exc))
            except Exception as exc:
                internal = _internal(exc)
                return _error(internal, _session_headers(request, internal))
            return response

        return endpoint

    async def models(request: Request) -> Response:
        if wants_anthropic(request):
            return await anthropic.models(request)
        listing = await runtime.catalog.models()
        failure = runtime.catalog.last_failure
        if failure is not None and not listing:
            raise LLMError(
                f"the model endpoint's list could not be read: {failure.message}",
                code=failure.code, details=failure.details,
            )
        if wants_codex_catalog(request):  # Codex's own catalog shape
            return JSONResponse(codex_catalog(listing))
        data = [_model_entry(info.id, info.owned_by) for info in listing]
        body: JsonObject = {"object": "list", "data": data}
        if failure is not None:  # the settings' models (or the last good listing) only
            body["deepseekeyes"] = {
                "complete": False,
                "upstream_error": failure.code,
                "sources": sorted({info.source for info in listing}),
            }
        return JSONResponse(body)

    async def model(request: Request) -> Response:
        wanted = request.path_params["model_id"]
        info = await runtime.catalog.get(wanted)
        if info is None:
            raise GatewayError(f"no model named {wanted[:80]!r}", code="GATEWAY_NOT_FOUND")
        return JSONResponse(_model_entry(info.id, info.owned_by))

    limits = BodyLimits(max_text_bytes=settings.max_text_bytes,
                        max_nodes=settings.max_body_nodes)
    resent = ResentBodies()

    async def read_body(request: Request,
                        known: frozenset[str] | None = None) -> RequestBody:
        """The body, bounded and parsed; ``known`` (another wire format's fields) leaves
        the OpenAI field checks to that format."""
        # The security layer has read the whole body, bounded in size and time.
        try:
            raw = await request.body()
        except ClientDisconnect:  # nobody reads the answer; not a gateway failure to log
            raise GatewayError("the client went away before its body arrived") from None
        # The history a client resends is parsed once: its next body reuses what this one
        # parsed of it, byte for byte (gateway/resent.py; the key's scope only).
        read = functools.partial(
            read_request, raw, limits, known, memo=resent, scope=scope,
            front="openai" if known is None else f"known:{hash(known)}",
            history="input" if known is not None and "messages" not in known else "messages")
        if len(raw) > _THREAD_PARSE_BYTES:  # a large body is parsed off the event loop
            parsed = await anyio.to_thread.run_sync(read)
        else:
            parsed = read()
        if known is None:
            check_fields(parsed.fields, parsed)
        parsed.remember(resent)
        return parsed

    # Turns beyond the limit wait for a slot, and so does parsing their bodies (a stream
    # holds its slot until it ends).
    slots = asyncio.Semaphore(settings.max_concurrent_turns)

    async def chat(request: Request) -> Response:
        slot = _Slot(slots)
        try:
            await slot.take()
            return await _chat(request, slot)
        except BaseException:
            slot.release()
            raise

    async def _chat(request: Request, slot: _Slot) -> Response:
        """A turn, its slot taken: released here for a whole answer, by the stream's close
        for a stream."""
        with stage("parse"):
            parsed = await read_body(request)
            body = parsed.fields
            ref = idempotency.key_ref(
                request.headers.get(idempotency.HEADER), body,
                session_id=request.headers.get(SESSION_HEADER) or None, gateway_key=key)
            if ref is not None:
                claim = runtime.idempotency.claim(ref)
                if claim.state == "replay":
                    slot.release()
                    return _replay(claim, body, parsed.ignored)
                refused = idempotency.refusal(claim)
                if refused is not None:
                    raise refused
            try:
                turn = await _turn_request(request, body)
            except BaseException:
                _release(ref)
                raise
            turn.idempotency = ref
            turn.scope = scope  # the key's: its sessions, reasoning and cached evidence only
            if settings.continue_by_history:
                turn.client_scope = scope
        if not body.get("stream"):
            try:
                result = await runtime.run(
                    turn, started=lambda session: _name_session(request, session))
            finally:  # a stored answer keeps its key; a failed request frees it
                _release(ref)
                slot.release()
            with stage("answer"):
                return JSONResponse(_note_ignored(completion_json(result), parsed.ignored),
                                    headers={_SESSION_HEADER_OUT: result.session_id})
        iterator: AsyncIterator[JsonObject] | None = None
        closed = False

        async def close() -> None:
            # A client that goes away mid-stream must not leave the upstream stream open,
            # and a turn cut at shutdown is closed before the process goes on.
            nonlocal closed
            if closed:
                return
            closed = True
            try:
                aclose = getattr(iterator, "aclose", None)
                if aclose is not None:
                    with anyio.CancelScope(shield=True):
                        await aclose()
            finally:
                slot.release()
                _release(ref)

        try:
            stream = runtime.stream(turn)
            iterator = aiter(stream)
            try:
                first = await anext(iterator)  # errors before this point get a real status
            finally:
                _name_session(request, stream.session_id)
        except BaseException:
            await close()
            raise
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        if stream.session_id is not None:
            headers[_SESSION_HEADER_OUT] = stream.session_id
        return EventStream(_events(first, iterator, drain, close, parsed.ignored), close,
                            headers)

    def _release(ref: KeyRef | None) -> None:
        if ref is not None:
            runtime.idempotency.release(ref)

    def _replay(claim: Claim, body: JsonObject, ignored: tuple[str, ...]) -> Response:
        """A stored answer, again, as the request asks for it (see gateway/idempotency.py)."""
        assert claim.response is not None
        headers = {idempotency.REPLAYED_HEADER: "true"}
        if claim.session_id is not None:
            headers[_SESSION_HEADER_OUT] = claim.session_id
        if not body.get("stream"):
            return JSONResponse(_note_ignored(idempotency.replayed(claim.response), ignored),
                                headers=headers)
        options = body.get("stream_options")
        include = isinstance(options, dict) and bool(options.get("include_usage"))
        chunks = idempotency.replay_chunks(claim.response, include_usage=include)
        payload = b"".join(_sse(_note_ignored(c, ignored)) for c in chunks) + b"data: [DONE]\n\n"
        return Response(payload, media_type="text/event-stream",
                        headers={**headers, "Cache-Control": "no-cache"})

    async def _turn_request(request: Request, body: JsonObject) -> TurnRequest:
        # Types were checked by check_fields; the rest is the runtime's one admission path.
        session_id = request.headers.get(SESSION_HEADER) or None
        if session_id is not None and not SessionStore.valid_id(session_id):
            raise StoreError(
                f"the {SESSION_HEADER} header is not a valid session id",
                code="STORE_SESSION_INVALID",
            )
        return await runtime.request_from_openai(
            body, session_id=session_id, source="gateway", approver=approver, fetch=fetch,
            scope=scope)

    async def health(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    readiness: list[Readiness] = []  # made at the first probe

    async def ready(_request: Request) -> Response:
        if not readiness:
            readiness.append(make_readiness())
        report = await readiness[0].report()
        return JSONResponse(report, status_code=200 if report["status"] == "ready" else 503,
                            headers=_NO_STORE)

    async def scrape(_request: Request) -> Response:
        assert metrics is not None
        terminal, host = runtime.terminal, runtime.mcp_host
        # What waits is read here, on the event loop; the store in a thread.
        metrics.store.waiting = {
            **({"terminal": terminal.waiting_count()} if terminal is not None else {}),
            **({"mcp": host.asks.waiting_count()} if host is not None else {})}
        body = await anyio.to_thread.run_sync(metrics.exposition)
        return Response(body, media_type=METRICS_CONTENT_TYPE, headers=_NO_STORE)

    def thinking_keyring() -> ThinkingKeyring:
        return ThinkingKeyring.load_or_create(thinking_directory(runtime.home.root))

    front = Front(
        runtime=runtime, settings=settings, drain=drain, scope=scope,
        signer=ThinkingSigner(thinking_keyring), sealer=ReasoningSealer(thinking_keyring),
        approver=approver, fetch=fetch, read_body=read_body, slots=slots,
        error_status=error_status, error_body=error_body, internal=_internal,
        session_header=SESSION_HEADER, key=key)
    anthropic = anthropic_routes(front)

    return Starlette(
        exception_handlers={HTTPException: _http_exception, Exception: _unexpected},
        routes=_turns_first([
            Route("/healthz", health, methods=["GET"]),
            Route("/readyz", ready, methods=["GET"]),
            *([Route("/metrics", guarded(scrape), methods=["GET"])] if metrics else []),
            Route("/v1/models", guarded(models), methods=["GET"]),
            Route("/v1/models/{model_id:path}", guarded(model), methods=["GET"]),
            Route("/v1/chat/completions", guarded(chat), methods=["POST"]),
            *anthropic.routes,
            *responses_routes(front),
        ]),
    )


#: The paths of a turn, which nearly every request asks for.
_TURN_PATHS = frozenset({"/v1/chat/completions", "/v1/messages", "/v1/responses"})


def _turns_first(routes: list[Route]) -> list[Route]:
    """``routes`` with the turns' first, the others in their order: Starlette tries routes
    one by one, each a regex match (about 1.6 µs here), and no other route matches a
    turn's path, so the order changes nothing but the time."""
    return sorted(routes, key=lambda route: route.path not in _TURN_PATHS)


def _model_entry(model_id: str, owned_by: str | None) -> JsonObject:
    return {
        "id": model_id,
        "object": "model",
        "created": 0,
        "owned_by": owned_by or "deepseek-eyes",
        "input_modalities": ["text", "image"],
    }

