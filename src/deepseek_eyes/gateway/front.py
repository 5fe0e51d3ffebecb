"""What every wire-format front of the gateway shares with the gateway's own routes.

The OpenAI chat route lives in :mod:`.app`; the Anthropic Messages front
(:mod:`.anthropic`) and the OpenAI Responses front (:mod:`.responses`) are built from one
:class:`Front`, so each stands behind the same door: the security layer, the
concurrent-turn slots, the drain, the gateway key's scope, the idempotency store and the
image fetcher. Only the format differs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import DeepSeekEyesError, GatewayError
from deepseek_eyes.gateway import idempotency
from deepseek_eyes.gateway.body import RequestBody
from deepseek_eyes.gateway.drain import Drain
from deepseek_eyes.runtime.approval import Approver
from deepseek_eyes.runtime.messages import Fetch
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.turn import TurnRequest, TurnResult
from deepseek_eyes.runtime.turn.wire.anthropic_messages import ThinkingSigner
from deepseek_eyes.runtime.turn.wire.openai_responses import ReasoningSealer
from deepseek_eyes.settings import GatewaySettings
from deepseek_eyes.stages import hand_to, stage
from deepseek_eyes.store.idempotency import Claim, KeyRef

__all__ = ["EventStream", "Front", "OpenedStream", "open_stream"]

E = TypeVar("E")
E_co = TypeVar("E_co", covariant=True)


@dataclass
class Front:
    """What the fronts share with the gateway's own routes (see :mod:`.app`)."""

    runtime: Runtime
    settings: GatewaySettings
    drain: Drain
    scope: str  # the gateway key's
    signer: ThinkingSigner
    sealer: ReasoningSealer
    approver: Approver | None
    fetch: Fetch | None
    read_body: Callable[[Request, frozenset[str]], Awaitable[RequestBody]]
    slots: asyncio.Semaphore
    error_status: Callable[[DeepSeekEyesError], int]
    error_body: Callable[[DeepSeekEyesError], JsonObject]  # OpenAI's shape
    internal: Callable[[BaseException], GatewayError]
    session_header: str  # the gateway's own session header (lower case)
    key: str | None  # the gateway key (idempotency keys are kept per key)

    async def in_slot(
        self, request: Request,
        handle: Callable[[Request, Callable[[], None]], Awaitable[Response]],
        error: Callable[[DeepSeekEyesError, str | None], Response],
    ) -> Response:
        """Run ``handle`` inside a concurrent-turn slot and the drain's watch, as the OpenAI
        route does; ``handle`` gets the request and the one way to free the slot (a stream
        frees it when it ends). A failure frees it and is answered by ``error`` in the
        front's format, naming the session the turn was logged in."""
        held = [False]

        def release() -> None:
            if held[0]:
                held[0] = False
                self.slots.release()

        try:
            with stage("http"):  # a concurrent-turn slot: the HTTP layer's admission
                await self.slots.acquire()
            held[0] = True
            with self.drain.watch():
                response = await handle(request, release)
            hand_to("http")  # the framework sends it from here
            return response
        except DeepSeekEyesError as exc:
            release()
            return error(exc, getattr(request.state, "session_id", None))
        except Exception as exc:
            release()
            return error(self.internal(exc), getattr(request.state, "session_id", None))

    def claim(self, request: Request, fields: JsonObject,
              session_id: str | None) -> tuple[KeyRef | None, Claim | None]:
        """The request's Idempotency-Key (kept per gateway key) and, when an answer is
        stored under it, that claim to replay.

        Raises:
            GatewayError: the key is held by a running request, or reused for another one.
        """
        ref = idempotency.key_ref(request.headers.get(idempotency.HEADER), fields,
                                  session_id=session_id, gateway_key=self.key)
        if ref is None:
            return None, None
        claim = self.runtime.idempotency.claim(ref)
        if claim.state == "replay":
            return ref, claim
        refused = idempotency.refusal(claim)
        if refused is not None:
            raise refused
        return ref, None

    async def turn(self, body: JsonObject, *, session_id: str | None, ref: KeyRef | None,
                   continuing: bool = False, source: str = "gateway") -> TurnRequest:
        """The turn of an OpenAI body a front translated, in the gateway key's scope (its
        sessions, reasoning and cached evidence only), under its Idempotency-Key; a new
        session is stored with ``source``, the front it came through (the web console names
        its client by it: ``gateway:anthropic`` Claude Code, ``gateway:responses`` Codex)."""
        turn = await self.runtime.request_from_openai(
            body, session_id=session_id, continue_session=continuing, source=source,
            approver=self.approver, fetch=self.fetch,
            scope=None if continuing else self.scope)
        turn.idempotency = ref
        turn.scope = self.scope
        if self.settings.continue_by_history:
            turn.client_scope = self.scope
        return turn

    async def run(self, turn: TurnRequest, request: Request,
                  release: Callable[[], None]) -> TurnResult:
        """A whole answer: the turn run to its end, its session named on the request (for
        an error's answer), the slot freed however it ends."""
        try:
            return await self.runtime.run(
                turn, started=lambda s: setattr(request.state, "session_id", s))
        finally:
            release()


class EventStream(StreamingResponse):
    """A turn's SSE response that closes the turn however the response ends: the events'
    own ``finally`` never runs when the body never started (a client gone before it), so
    ``close`` runs here as well (it runs once). Every front answers a stream with it."""

    def __init__(self, events: AsyncIterator[bytes], close: Callable[[], Awaitable[None]],
                 headers: dict[str, str]) -> None:
        super().__init__(events, media_type="text/event-stream", headers=headers)
        self._events = events
        self._close = close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            with stage("http"):  # the response started (the clock stops there)
                await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                closing = getattr(self._events, "aclose", None)
                if closing is not None:
                    await closing()
                await self._close()


class _SessionEvents(Protocol[E_co]):
    """A format's stream of a turn: its events, and the session once the turn named it."""

    @property
    def session_id(self) -> str | None: ...

    def __aiter__(self) -> AsyncIterator[E_co]: ...


@dataclass
class OpenedStream(Generic[E]):
    """A turn's stream with its first event in hand: errors before it had a real status."""

    first: E
    rest: AsyncIterator[E]
    close: Callable[[], Awaitable[None]]  # closes the turn (shielded) and frees its slot, once
    headers: dict[str, str]


async def open_stream(stream: _SessionEvents[E], request: Request,
                      release: Callable[[], None]) -> OpenedStream[E]:
    """Start a format's stream of one turn: wait for its first event (an error before it
    is raised, with the session it named on ``request.state``, and the turn closed) and
    return it with the headers every front sends and the one ``close`` that ends the turn
    however the response ends.

    Raises:
        BaseException: whatever the turn raised before its first event.
    """
    iterator = aiter(stream)
    closed = [False]

    async def close() -> None:
        if closed[0]:
            return
        closed[0] = True
        try:
            with anyio.CancelScope(shield=True):
                await iterator.aclose()  # type: ignore[attr-defined]
        finally:
            release()

    try:
        # errors before this point get a real status; what the turn's own stages do not
        # claim on the way is this format's stream made (its head and envelopes)
        with stage("answer"):
            first = await anext(iterator)
    except BaseException:
        request.state.session_id = stream.session_id
        await close()
        raise
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    if stream.session_id is not None:
        headers["X-DeepSeekEyes-Session"] = stream.session_id
    return OpenedStream(first, iterator, close, headers)
