"""The OpenAI Responses front of the gateway: Codex CLI (or any Responses client) on
DeepSeek, with eyes, by pointing a ``wire_api = "responses"`` provider here.

``POST /v1/responses``, whole or streamed. The format itself (items to an OpenAI body, the
answer, the SSE grammar, the sealed reasoning) is
:mod:`deepseek_eyes.runtime.turn.wire.openai_responses`; this module is the HTTP side.

Decisions a newcomer would otherwise undo:

* **The same door as the other routes** (:class:`~deepseek_eyes.gateway.front.Front`):
  the security layer, the concurrent-turn slots, the drain, idempotency, the gateway key's
  scope for sessions, reasoning and evidence. Errors are OpenAI's shape, as on
  ``/v1/chat/completions``.
* **A stream starts only once the turn has started** (its request logged), so a bad image
  or a refused history still gets a real status; after the first byte a failure is a
  ``response.failed`` event carrying our stable code.
* **Sessions:** the gateway's ``X-DeepSeekEyes-Session`` names the session, else Codex's
  ``session-id``, else its ``thread-id``: one Codex thread is one session, held in the
  gateway key's scope.
* **``previous_response_id``**: a response answered with ``store`` not false is recorded
  (its id, the session and the scope), so a later request may send only its new items:
  the session's stored log goes before them. An id that is unknown, from another scope or
  answered with ``store: false`` is ``GATEWAY_RESPONSE_NOT_FOUND`` (404), as OpenAI's is.
* **``store: false`` keeps nothing but what the audit needs**: the turn runs on the
  request's own history, and its session keeps each message's SHA-256 and role, never its
  content (store/events.py); the audit rows (request hashes, usage, the turn record) are
  written as for every turn; no answer is kept for ``previous_response_id`` or for an
  Idempotency-Key (refused with ``GATEWAY_IDEMPOTENCY_UNKEPT``). Codex sends
  ``store: false`` and resends its whole history, so its sessions still list and resume.
* **Codex's model catalog** (:func:`codex_catalog`): Codex asks ``GET /v1/models?
  client_version=X`` and reads ``{"models": [...]}`` in its own shape; without an entry for
  its model it warns "Model metadata for … not found" and guesses (a 272k window, no
  reasoning levels). Codex 0.169 asks a custom provider only when the provider's key comes
  from an ``auth`` command (``env_key`` providers are never asked), which the README's
  config uses. An entry must carry instructions (Codex refuses one with neither
  ``base_instructions`` nor ``model_messages``) and they *replace* Codex's built-in prompt,
  so ours are short, our own, and a user's ``model_instructions_file`` still overrides them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import DeepSeekEyesError, GatewayError, StoreError
from deepseek_eyes.gateway import idempotency
from deepseek_eyes.gateway.body import check_fields
from deepseek_eyes.gateway.front import EventStream, Front, open_stream
from deepseek_eyes.llm.catalog import ModelInfo
from deepseek_eyes.llm.known import known_model
from deepseek_eyes.runtime.turn.wire import openai_responses as wire
from deepseek_eyes.stages import stage
from deepseek_eyes.store.events import SessionStore
from deepseek_eyes.store.idempotency import Claim, KeyRef

__all__ = ["CODEX_INSTRUCTIONS", "CODEX_SESSION_HEADERS", "codex_catalog", "responses_routes",
           "wants_codex_catalog"]

#: Codex's own headers naming its conversation, in the order they are read.
CODEX_SESSION_HEADERS = ("session-id", "thread-id")

#: The base instructions each catalog entry carries (Codex requires some, and they stand in
#: for its built-in prompt): ours, short, about the tools Codex offers.
CODEX_INSTRUCTIONS = (
    "You are a coding agent working in the user's terminal through Codex CLI, served by "
    "DeepSeekEyes. Work in the current project: read files and run commands with the shell "
    "tools, make the changes the task needs, check them, and keep going until the task is "
    "done. Never run destructive commands (deleting work, rewriting git history) unless the "
    "user asked. Images (screenshots, attachments, view_image results) reach you as pixels "
    "or as evidence text: treat both as what the image shows. End with a short answer that "
    "says what you did and what is left."
)

#: Codex's effort names for the two states a DeepSeek model has: ``none`` turns thinking
#: off (the wire maps it to ``thinking: disabled``); ``high`` leaves the model's default.
_EFFORT_OFF = {"effort": "none", "description": "No thinking: answers at once"}
_EFFORT_ON = {"effort": "high", "description": "Thinks before it answers (DeepSeek's default)"}


def wants_codex_catalog(request: Request) -> bool:
    """Codex's models request: it always names its version in the query."""
    return "client_version" in request.query_params


def codex_catalog(listing: list[ModelInfo]) -> JsonObject:
    """``{"models": [...]}`` in Codex's ``ModelInfo`` shape (fields checked against Codex
    0.169's parser: the required ones and the ones that change what it does), one entry
    per listed model: its context window and whether it thinks from the known-models table,
    its reasoning levels from that, image input always (the gateway gives every model eyes).
    Other fields keep the values Codex's own fallback uses, so its tools do not change."""
    models: list[JsonObject] = []
    for priority, info in enumerate(listing):
        known = known_model(info.id)
        thinks = known is not None and known.thinks_by_default
        entry: JsonObject = {
            "slug": info.id,
            "display_name": info.id,
            "description": f"{info.id} through DeepSeekEyes (with eyes)",
            "default_reasoning_level": "high" if thinks else "none",
            "supported_reasoning_levels": [dict(_EFFORT_OFF), dict(_EFFORT_ON)] if thinks
                                          else [dict(_EFFORT_OFF)],
            "shell_type": "default",
            "visibility": "list",
            "supported_in_api": True,
            "priority": priority,
            "upgrade": None,
            "base_instructions": CODEX_INSTRUCTIONS,
            "supports_reasoning_summaries": True,
            "support_verbosity": False,
            "default_verbosity": None,
            "apply_patch_tool_type": None,
            "truncation_policy": {"mode": "bytes", "limit": 10_000},
            "supports_parallel_tool_calls": False,
            "experimental_supported_tools": [],
            "input_modalities": ["text", "image"],
        }
        if known is not None and known.context_tokens:
            entry["context_window"] = known.context_tokens
            entry["max_context_window"] = known.context_tokens
        models.append(entry)
    return {"models": models}


def _sse(event: wire.Event) -> bytes:
    name, data = event
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {text}\n\n".encode()


def _message(exc: DeepSeekEyesError) -> str:
    provider = exc.details.get("provider_message")
    if isinstance(provider, str) and provider:
        return f"{exc.message} (upstream said: {provider})"
    return exc.message


def responses_routes(front: Front) -> list[Route]:
    runtime = front.runtime

    def error(exc: DeepSeekEyesError, session: str | None = None) -> JSONResponse:
        headers = {"X-DeepSeekEyes-Session": session} if session else None
        return JSONResponse(front.error_body(exc), status_code=front.error_status(exc),
                            headers=headers)

    async def entry(request: Request) -> Response:
        return await front.in_slot(request, _respond, error)

    def _session(request: Request, out: wire.Translated) -> tuple[str | None, bool]:
        """The session the turn runs in, and whether its stored log goes first."""
        if out.previous_response_id is not None:
            session = runtime.sessions.response_session(out.previous_response_id,
                                                        scope=front.scope)
            if session is None:
                raise GatewayError(
                    f"no stored response {out.previous_response_id[:80]!r} for this key",
                    code="GATEWAY_RESPONSE_NOT_FOUND",
                    details={"param": "previous_response_id"})
            return session, True
        for header in (front.session_header, *CODEX_SESSION_HEADERS):
            value = request.headers.get(header)
            if value:
                if not SessionStore.valid_id(value):
                    raise StoreError(f"the {header} header is not a valid session id",
                                     code="STORE_SESSION_INVALID")
                return value, False
        return None, False

    async def _respond(request: Request, free_slot: Callable[[], None]) -> Response:
        ref: KeyRef | None = None

        def release() -> None:  # a stored answer keeps its key; a failed request frees it
            free_slot()
            if ref is not None:
                runtime.idempotency.release(ref)

        with stage("parse"):  # the body read, translated and admitted
            parsed = await front.read_body(request, wire.KNOWN_FIELDS)
            fields = parsed.fields
            out = wire.openai_body(fields, sealer=front.sealer, scope=front.scope)
            check_fields(out.body)  # the OpenAI rules the one admission path expects
            session_id, continuing = _session(request, out)
            if not out.store and request.headers.get(idempotency.HEADER) is not None:
                raise GatewayError("an Idempotency-Key needs the answer kept for replay; "
                                   "store: false keeps none",
                                   code="GATEWAY_IDEMPOTENCY_UNKEPT",
                                   details={"param": "store"})
            ref, replay = front.claim(request, fields, session_id)
            if replay is not None:
                free_slot()
                return _replay(replay, out, bool(fields.get("stream")))
            try:
                turn = await front.turn(out.body, session_id=session_id, ref=ref,
                                        continuing=continuing, source="gateway:responses")
            except BaseException:
                release()
                raise
            turn.keep = out.store  # store: false keeps the messages' hashes only
        if not fields.get("stream"):
            result = await front.run(turn, request, release)
            with stage("answer"):
                answer = wire.answer_json(result, out, sealer=front.sealer, scope=front.scope)
                if out.store:
                    runtime.sessions.remember_response(answer["id"], result.session_id,
                                                       scope=front.scope)
                return JSONResponse(answer,
                                    headers={"X-DeepSeekEyes-Session": result.session_id})
        with stage("answer"):  # the turn's events as this format's stream
            stream = wire.ResponseStream(runtime.events(turn), out, sealer=front.sealer,
                                         scope=front.scope)
        opened = await open_stream(stream, request, release)
        with stage("answer"):
            return EventStream(_events(opened.first, opened.rest, stream, out, opened.close),
                               opened.close, opened.headers)

    def _replay(claim: Claim, out: wire.Translated, stream: bool) -> Response:
        """A stored answer, again (see gateway/idempotency.py), in this format."""
        assert claim.response is not None
        answer = wire.response_json(idempotency.replayed(claim.response), out,
                                    sealer=front.sealer, scope=front.scope)
        headers = {idempotency.REPLAYED_HEADER: "true"}
        if claim.session_id is not None:
            headers["X-DeepSeekEyes-Session"] = claim.session_id
        if not stream:
            return JSONResponse(answer, headers=headers)
        payload = b"".join(_sse(event) for event in wire.response_events(answer))
        return Response(payload, media_type="text/event-stream",
                        headers={**headers, "Cache-Control": "no-cache"})

    async def _events(first: wire.Event, iterator: AsyncIterator[wire.Event],
                      stream: wire.ResponseStream, out: wire.Translated,
                      close: Callable[[], Awaitable[None]]) -> AsyncIterator[bytes]:
        try:
            ending: DeepSeekEyesError | None = None
            try:
                yield _sse(first)
                while (item := await front.drain.pull(iterator)) is not None:
                    yield _sse(item)
            except DeepSeekEyesError as exc:
                ending = exc
            except Exception as exc:
                ending = front.internal(exc)
            if ending is not None:
                yield _sse(wire.failed_event(stream.emit.number, stream.response_id,
                                             out.requested_model, ending.code,
                                             _message(ending)))
            elif out.store and stream.session_id is not None and stream.result is not None:
                runtime.sessions.remember_response(stream.response_id, stream.session_id,
                                                   scope=front.scope)
        finally:
            await close()

    return [Route("/v1/responses", entry, methods=["POST"])]
