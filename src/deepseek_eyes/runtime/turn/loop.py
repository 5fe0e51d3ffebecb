"""The one turn loop: a conversation in, the final model's answer out, every step recorded.

:meth:`TurnRunner.events` is the only copy of the loop: model call, the runtime's own tool
calls, model call, … until an answer, as a stream of typed events
(:mod:`~deepseek_eyes.runtime.turn.events`). :meth:`TurnRunner.run` drains it for the
answer; :meth:`TurnRunner.stream` maps it to OpenAI chunks
(:class:`~deepseek_eyes.runtime.turn.wire.openai_chat.TurnStream`). The two differ only in
how a model
call is made (whole, or streamed with the client's deltas relayed), so the same
conversation makes the same upstream requests either way.

On every path the model is offered the runtime's tools (:class:`ToolHub`: ``look``, MCP,
the terminal, the browser, the desktop, as ``[runtime] tool_sources`` lists them).
Decisions a newcomer would otherwise undo:

* **Exactly N calls per user instruction.** ``max_model_calls_per_turn`` counts every
  model call since the latest user message, across HTTP requests (a client returning its
  own tool results continues the same instruction). The N-th call is made *without tools*,
  so a loop ends in an answer, not an error, after exactly N upstream calls. A request that
  arrives with the bound already spent still gets one call (without tools): the client
  drove those calls, and an answer is owed.
* **Every request is fitted to the history budget** (:func:`~deepseek_eyes.runtime.budget.
  fit`), on every path and after every tool round: the turn's own exchanges are dropped
  oldest first, atomically, the newest user task and the newest exchange kept.
* **Nothing is dropped silently.** One model response may call the runtime's tools and the
  client's own: the runtime's run here, the client's go back to the client. The runtime's
  exchange is logged (marked ``internal``) and, when the client continues the session, put
  back where it was, so the model sees every result it asked for.
* **Thinking mode.** The log stores every answer's exact reasoning; a turn's own tool
  rounds render their assistant message with it (:func:`~deepseek_eyes.runtime.view.
  render_assistant`), so the next request shares the prefix, and DeepSeek (which refuses a
  tool-call message without its reasoning) accepts it.
* **Pixels wherever an image is.** A tool result that brought images for a seeing model
  (an MCP image, a screenshot, a ``look`` crop: ``pixels`` on the image) goes upstream
  with their pixels inside the tool message. An upstream 400 that refuses image parts
  marks the model text-only (:meth:`~deepseek_eyes.runtime.sight.Sight.refused`) and the
  same turn goes on with evidence (:meth:`Preparer.rebridge`), never a failed turn.
* **An offer is judged as offered.** A call runs only when its name was in the offer of
  the model call that produced it, and an MCP tool carries the catalog generation it was
  offered under (``MCP_GENERATION_STALE`` when that catalog is gone).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from deepseek_eyes.audit.log import AuditLog
from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import DeepSeekEyesError, LLMError
from deepseek_eyes.llm.catalog import ModelCatalog
from deepseek_eyes.llm.client import ChatClient, ChatResult, ToolCall
from deepseek_eyes.runtime.budget import fit
from deepseek_eyes.runtime.delivery import pixels_for
from deepseek_eyes.runtime.messages import StoredCall
from deepseek_eyes.runtime.sight import Sight, refuses_images
from deepseek_eyes.runtime.tools import ProgressEvent, ToolHub, ToolOutcome
from deepseek_eyes.runtime.turn.events import (
    Answer,
    Delta,
    ModelCalled,
    Progress,
    Started,
    TurnEvent,
)
from deepseek_eyes.runtime.turn.history import Chain
from deepseek_eyes.runtime.turn.ledger import Ledger, Seal, category_after
from deepseek_eyes.runtime.turn.prepare import Preparer
from deepseek_eyes.runtime.turn.relay import ToolRelay
from deepseek_eyes.runtime.turn.request import TurnRequest, TurnResult
from deepseek_eyes.runtime.turn.state import TurnState
from deepseek_eyes.runtime.turn.wire.openai_chat import TurnStream, completion_json
from deepseek_eyes.runtime.view import SentImage, image_url, render_assistant, sends_reasoning
from deepseek_eyes.settings import LLMSettings, RuntimeSettings, VisionSettings
from deepseek_eyes.stages import stage
from deepseek_eyes.store.events import Fork, Guard, SessionConflict, SessionMoved, SessionStore
from deepseek_eyes.store.idempotency import IdempotencyStore
from deepseek_eyes.usage import UsageCategory, UsageTracker
from deepseek_eyes.vision.bridge import VisionBridge

__all__ = ["TurnRunner"]

_log = logging.getLogger("deepseek_eyes.runtime")
T = TypeVar("T")
Done = list[tuple[ToolCall, ToolOutcome]]


def _stored_calls(calls: Sequence[ToolCall]) -> list[StoredCall]:
    return [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]


class TurnRunner:
    def __init__(
        self,
        *,
        settings: RuntimeSettings,
        llm: LLMSettings,
        bridge: VisionBridge,
        client: ChatClient,
        catalog: ModelCatalog,
        tools: ToolHub,
        sessions: SessionStore,
        usage: UsageTracker,
        audit: AuditLog,
        seal: Seal,
        sight: Sight,
        vision: VisionSettings | None = None,
        idempotency: IdempotencyStore | None = None,
    ) -> None:
        self._settings = settings
        self._idempotency = idempotency
        self._client = client
        self._tools = tools
        self._sessions = sessions
        self._bridge = bridge
        self._usage = usage
        self._preparer = Preparer(settings=settings, llm=llm, bridge=bridge, catalog=catalog,
                                  tools=tools, sessions=sessions, usage=usage, sight=sight,
                                  vision=vision)
        self._ledger = Ledger(usage=usage, audit=audit, sessions=sessions, seal=seal)

    # the loop ------------------------------------------------------------------
    async def events(
        self, request: TurnRequest, *, stream: bool
    ) -> AsyncGenerator[TurnEvent, None]:
        """The turn as events, ending with :class:`Answer` (or the turn's error).

        ``stream``: model calls are streamed and their visible pieces yielded as
        :class:`Delta` events as they arrive; otherwise each call is made whole.

        Raises:
            DeepSeekEyesError: TurnError, ImageError, VisionError or LLMError with its code.
        """
        queue: asyncio.Queue[ProgressEvent] = asyncio.Queue()
        given = request.notify

        def notify(event: ProgressEvent) -> None:
            queue.put_nowait(event)
            if given is not None:
                given(event)

        asked = dataclasses.replace(request, notify=notify)
        with stage("prepare"):
            turn = await self._preparer.prepare(asked, defer=True)
        answered = announced = False
        try:
            while True:
                payload = self._payload(turn)
                encoded = None
                if turn.unlogged is not None:
                    # The request is written with its first call, that call encoded first
                    # so its hash is known (runtime/turn/prepare.py).
                    try:
                        with stage("prepare"):
                            encoded = self._client.encode(payload, stream=stream)
                            self._ledger.pending(turn, encoded.sha256, 1)
                    except SessionConflict:
                        # The session moved since it was read: nothing was written or
                        # sent; the turn is prepared again (written at once this time).
                        turn.unlogged, turn.recorded = None, True
                        with stage("prepare"):
                            turn = await self._preparer.prepare(asked, turn_id=turn.turn_id)
                        continue
                if not announced:
                    announced = True
                    yield Started(turn.session_id, turn.model, int(turn.started))
                while not queue.empty():
                    yield Progress(queue.get_nowait())
                relay = ToolRelay(turn.internal, forward=stream and not turn.forced_final)
                # Each attempt is written ahead (a pending llm.request row, committed)
                # before it is sent: a crash or a full disk mid-call leaves it visible as
                # "called, outcome unknown"; if that write fails, nothing is sent.
                ahead = functools.partial(self._ledger.pending, turn)
                try:
                    if stream:
                        async with self._client.stream(payload, before_send=ahead,
                                                       encoded=encoded) as chunks:
                            async for chunk in chunks:
                                delta = _visible(chunk, relay)
                                if delta:
                                    yield Delta(delta)
                            result = chunks.result
                    else:
                        result = await self._client.complete(payload, stream=False,
                                                             before_send=ahead,
                                                             encoded=encoded)
                except LLMError as exc:
                    carried = turn.view.pixels or turn.tail_pixels
                    if turn.rebridged or not carried or not refuses_images(exc):
                        raise
                    # The model does not see after all: learned, and the turn goes on
                    # with evidence instead of failing.
                    self._ledger.refused(turn, exc)
                    await self._preparer.rebridge(turn)
                    turn.rebridged = True
                    turn.tail_pixels = []
                    continue
                category = str(turn.category)
                with stage("store"):  # the call booked: its usage and audit rows queued
                    sent = self._ledger.call(turn, result, payload)
                yield ModelCalled(turn.model_calls, sent, category, turn.forced_final)
                internal, external = self._split(turn, result.tool_calls)
                if internal and not external:
                    async for event in _while(self._run_tools(turn, result, internal), queue, []):
                        yield Progress(event)
                    continue
                done: list[TurnResult] = []
                with stage("answer"):
                    if internal:  # tools run first: their progress is relayed meanwhile
                        async for event in _while(
                                self._finish(turn, result, internal, external), queue, done):
                            yield Progress(event)
                    else:  # nothing in it waits: no task and queue watch beside it
                        done.append(await self._finish(turn, result, internal, external))
                        while not queue.empty():
                            yield Progress(queue.get_nowait())
                answered = True
                yield Answer(done[0], relay.unsent(external) if stream else [], relay.forwarded)
                return
        except DeepSeekEyesError as exc:
            if not answered and self._settled(turn):
                self._ledger.failed(turn, exc)
            raise
        except BaseException as exc:
            # Closed before its answer (the client went away, the gateway shut down) or a
            # bug: the turn is closed as aborted, so no turn is left half-written.
            if not answered and self._settled(turn):
                self._ledger.aborted(turn, _abort_reason(exc))
            raise

    def _settled(self, turn: TurnState) -> bool:
        """A turn ending before its first call has its request written first, so its
        record follows it; False when that failed (nothing of the turn is stored)."""
        try:
            self._preparer.settle(turn)
        except DeepSeekEyesError as unstored:
            _log.warning("turn %s: its request could not be stored (%s): %s",
                         turn.turn_id, unstored.code, unstored.message)
            return False
        return True

    async def run(
        self, request: TurnRequest, *, started: Callable[[str], None] | None = None
    ) -> TurnResult:
        """Run a turn to its answer (no streaming); ``started`` is told the session id once
        the request is logged, before the first model call.

        Raises:
            DeepSeekEyesError: TurnError, ImageError, VisionError or LLMError with its code.
        """
        async for event in self.events(request, stream=False):
            if isinstance(event, Started) and started is not None:
                started(event.session_id)
            elif isinstance(event, Answer):
                return event.result
        raise RuntimeError("the turn loop ended without an answer")  # pragma: no cover

    def stream(self, request: TurnRequest) -> TurnStream:
        """Run a turn, yielding OpenAI ``chat.completion.chunk`` objects as they come."""
        return TurnStream(self.events(request, stream=True), include_usage=request.include_usage)

    # one model call ------------------------------------------------------------
    def _payload(self, turn: TurnState) -> JsonObject:
        """The next model call's request: the history and the turn's tool rounds fitted
        to the budget, with the current offer's tools; the N-th call of an instruction
        goes without tools."""
        with stage("prepare"):  # the tools offered and their schemas' tokens too
            return self._build_payload(turn)

    def _build_payload(self, turn: TurnState) -> JsonObject:
        messages, turn.omitted = fit([*turn.history, *turn.tail],
                                     self._settings.history_budget_tokens,
                                     self._preparer.views.costs,
                                     memo=self._preparer.fits,
                                     key=f"session {turn.session_id}")
        payload: JsonObject = {**turn.base, "messages": messages}
        if turn.calls_so_far + 1 < self._settings.max_model_calls_per_turn:
            tools = list(turn.request.client_tools) + turn.offer.openai()
            if tools:
                payload["tools"] = tools
                if turn.request.tool_choice is not None:
                    payload["tool_choice"] = turn.request.tool_choice
            # What is really sent: MCP functions, Code Mode's tools, or both.
            self._ledger.schema(turn.offer.schema_tokens("mcp")
                                + turn.offer.schema_tokens("code"))
            return payload
        turn.forced_final = True
        turn.context.emit({"type": "turn.final_call", "model_calls": turn.calls_so_far})
        # Without tools the model can only answer. No note is appended: a message after
        # the tool results would break providers that expect the results last.
        return payload

    def _split(
        self, turn: TurnState, calls: Sequence[ToolCall]
    ) -> tuple[list[ToolCall], list[ToolCall]]:
        if turn.forced_final:  # no tools were offered: whatever it called is not run
            return [], []
        internal = [c for c in calls if c.name in turn.internal]
        external = [c for c in calls if c.name not in turn.internal]
        return internal, external

    # the runtime's tools -------------------------------------------------------
    async def _call_tools(self, turn: TurnState, calls: Sequence[ToolCall]) -> Done:
        done: Done = []
        for call in calls:
            outcome = await self._tools.call(turn.offer, call.name, call.arguments, turn.context)
            done.append((call, outcome))
        self._ledger.evidence(turn, [o for _, o in done])
        turn.category = category_after(
            [turn.offer.routes[c.name].name for c in calls if c.name in turn.offer.routes])
        return done

    @staticmethod
    def _tool_messages(done: Done) -> tuple[list[JsonObject], list[JsonObject]]:
        """Tool results for the upstream (text; pixels are added by :meth:`_with_pixels`),
        and as logged (named, marked internal, with the images they brought)."""
        upstream: list[JsonObject] = [
            {"role": "tool", "tool_call_id": c.id, "content": o.content} for c, o in done]
        logged = [{**m, "name": c.name, "internal": True}
                  for m, (c, _) in zip(upstream, done, strict=True)]
        for entry, (_, outcome) in zip(logged, done, strict=True):
            if outcome.images:
                entry["images"] = [{"id": i, **part} for i, part in outcome.images]
        return upstream, logged

    async def _with_pixels(self, turn: TurnState, upstream: list[JsonObject],
                           done: Done) -> None:
        """Put the pixels of the images a result delivered as pixels inside its tool
        message (fitted to the model's limits), and book them."""
        for message, (_, outcome) in zip(upstream, done, strict=True):
            pictures = [p for _, p in outcome.images if p.get("pixels")]
            if not pictures:
                continue
            parts: list[JsonObject] = [{"type": "text", "text": outcome.content}]
            # Every image the request carries shares its byte and side limits.
            carried = len(turn.view.pixels) + len(turn.tail_pixels) + len(pictures)
            sent = await pixels_for(self._bridge, pictures, model=turn.model, carried=carried)
            for part in pictures:
                detail = str(part.get("detail") or "auto")
                parts.append(image_url(sent[str(part["sha256"])], str(part["media_type"]),
                                       detail))
                turn.tail_pixels.append(SentImage(str(part["sha256"]), int(part["width"]),
                                                  int(part["height"]), detail))
            message["content"] = parts
            if not turn.pixels_counted:
                turn.pixels_counted = True
                self._usage.count(UsageCategory.NATIVE_VISUAL_TURNS, source=turn.model)

    async def _run_tools(self, turn: TurnState, result: ChatResult,
                         calls: list[ToolCall]) -> None:
        """One round of the runtime's own calls; the loop goes on."""
        done = await self._call_tools(turn, calls)
        # The runtime's own tool exchange is logged but marked internal: the client never
        # sees it, so its next request is compared without it. It goes upstream as later
        # turns render it from the log, reasoning included (thinking mode refuses a
        # tool-call message without it), so their requests share this prefix.
        stored = {"role": "assistant", "content": result.content, "reasoning": result.reasoning,
                  "tool_calls": _stored_calls(calls), "internal": True}
        assistant = render_assistant(stored, reasoning=sends_reasoning(stored, turn.thinking))
        upstream, logged = self._tool_messages(done)
        await self._with_pixels(turn, upstream, done)
        turn.tail.extend([assistant, *upstream])
        self._reoffer(turn)
        self._append(turn, [stored, *logged])

    def _reoffer(self, turn: TurnState) -> None:
        """After tool results, what is offered may have changed (``look`` once a tool
        brought an image; an MCP catalog's new generation); the offer only changes when a
        definition did, to keep the request prefix."""
        offer = self._tools.offer(turn.context, exclude=turn.client_names)
        if offer.specs != turn.offer.specs:
            turn.offer = offer

    async def _finish(self, turn: TurnState, result: ChatResult, internal: list[ToolCall],
                      external: list[ToolCall]) -> TurnResult:
        """The turn's answer. Runtime calls that came with client calls run first; their
        exchange is logged after the answer so a continuing client gets it back."""
        done = await self._call_tools(turn, internal) if internal else []
        # The exact reasoning received, even empty: a later request may have to send it back.
        message: dict[str, Any] = {"role": "assistant", "content": result.content,
                                   "reasoning": result.reasoning}
        if external:
            message["tool_calls"] = _stored_calls(external)
        if done:
            message["internal_calls"] = _stored_calls([c for c, _ in done])
        finish = result.finish_reason or "stop"
        if finish == "tool_calls" and not external:
            finish = "stop"
        # The answer, its turn record, the rows booked since the last commit (requests,
        # usage) and the checkpoint that signs them: one commit. Its session is not read
        # first: the guess that it still ends where the turn left it is checked with the
        # writes, and when another turn appended meanwhile the commit fails and is made
        # again, reading the session this time (so the turn can go on in a fork).
        logged = [message, *self._tool_messages(done)[1]]
        try:
            outcome, chain = self._commit_answer(turn, logged, result, finish, external,
                                                 expect=True)
        except SessionMoved:
            outcome, chain = self._commit_answer(turn, logged, result, finish, external,
                                                 expect=False)
        if chain is not None:
            self._preparer.memo.note(turn.session_id, turn.request.client_scope, chain)
        turn.recorded = True  # committed: a close from now on is not an abort
        return outcome

    def _commit_answer(self, turn: TurnState, logged: list[JsonObject], result: ChatResult,
                       finish: str, external: list[ToolCall], *, expect: bool,
                       ) -> tuple[TurnResult, Chain | None]:
        """The answer's one commit (see :meth:`_finish`); the history a stock client will
        send next, for the memo, when one was noted. When the commit fails, the turn is as
        it was before (where it stands in which session, its outputs and chain), so it can
        be made again."""
        where = (turn.session_id, turn.fork, turn.retry_of, turn.base_seq, turn.head)
        outputs, chain = len(turn.outputs), turn.chain
        kept = chain.mark() if chain is not None else None
        try:
            with self._sessions.batch():
                self._append(turn, logged, final=True, expect=expect)
                outcome = TurnResult(
                    turn_id=turn.turn_id, session_id=turn.session_id, model=turn.model,
                    path=turn.path, content=result.content, reasoning=result.reasoning,
                    finish_reason=finish, tool_calls=external, usage=turn.usage,
                    evidence=turn.evidence, rereads=turn.context.rereads,
                    model_calls=turn.model_calls, created=int(turn.started), fork=turn.fork,
                    tools=list(turn.context.calls), requests=list(turn.requests),
                    thinking=turn.thinking_note, retry_of=turn.retry_of,
                    sight=_sight_json(turn), model_renamed=turn.renamed,
                )
                outcome.audit = self._ledger.seal()
                noted: Chain | None = None
                scope = turn.request.client_scope
                if scope is not None and turn.request.keep:  # nothing kept: nothing to find
                    # Where this conversation stands now, for a client that sends no
                    # session id. The request's history is hashed already: only the turn's
                    # output is. The request's chain is this turn's own (the memo made it
                    # new): grown in place, not copied (and cut back if the commit fails).
                    grown = (chain.extend(turn.outputs) if chain is not None
                             else Chain().extend([*turn.prefix, *turn.outputs]))
                    if grown.hashes:
                        self._sessions.remember_prefix(scope, grown.hashes[-1],
                                                       turn.session_id, len(grown.hashes))
                        grown.noted = len(grown.hashes)
                        noted = grown
                key = turn.request.idempotency
                if key is not None and self._idempotency is not None:
                    # Kept with the answer, in its commit: a stored answer can be replayed.
                    self._idempotency.complete(key, turn_id=turn.turn_id,
                                               session_id=turn.session_id,
                                               response=completion_json(outcome))
        except BaseException:
            turn.session_id, turn.fork, turn.retry_of, turn.base_seq, turn.head = where
            del turn.outputs[outputs:]
            if chain is not None and kept is not None:
                chain.cut(kept)
            raise
        return outcome, noted

    # the session log -----------------------------------------------------------
    def _append(self, turn: TurnState, messages: list[JsonObject], *,
                final: bool = False, expect: bool = False) -> None:
        """Append the turn's own messages (with its record when ``final``), compare-and-set
        against what the turn last saw. When another turn appended to the session meanwhile
        (a different continuation, in this process or another), the turn goes on in a
        fork of it holding its history and its messages so far, and says so. ``expect``:
        the guard is checked with the writes (see :meth:`SessionStore.append`); its
        failure, :class:`SessionMoved`, fails the caller's whole transaction, which the
        caller does again without it."""
        for _ in range(2):
            try:
                seqs = self._sessions.append(
                    turn.session_id, messages, turn_id=turn.turn_id,
                    turn=self._ledger.record(turn, "ok") if final else None,
                    guard=Guard(turn.head, turn.base_seq), unkept=not turn.request.keep,
                    expect=expect)
                break
            except SessionMoved:
                raise  # the transaction failed: no fork inside it (the caller's to redo)
            except SessionConflict:
                self._relocate(turn)
        else:  # pragma: no cover - a fork is this turn's alone: its guard cannot fail
            raise RuntimeError("a turn's own fork changed under it")
        if seqs:
            turn.head = seqs[-1]
        turn.outputs.extend(messages)

    def _relocate(self, turn: TurnState) -> None:
        parent = turn.session_id
        fork = Fork(parent, sum(1 for m in turn.prefix if not m.get("internal")))
        forked = self._sessions.new_id()
        with self._sessions.batch() as conn:
            unkept = not turn.request.keep
            seqs = self._sessions.append(forked, turn.prefix, create=turn.request.source,
                                         fork=fork, scope=turn.request.scope, unkept=unkept,
                                         minted=True)
            base = seqs[-1] if seqs else -1
            mine = self._sessions.append(forked, turn.outputs, turn_id=turn.turn_id,
                                         unkept=unkept)
            self._sessions.leases.move(conn, turn.turn_id, forked, base)
        turn.context.emit({"type": "session.forked", "forked_from": parent,
                           "session_id": forked})
        turn.session_id, turn.fork, turn.retry_of = forked, fork, None
        turn.base_seq = base
        turn.head = mine[-1] if mine else base


def _sight_json(turn: TurnState) -> JsonObject | None:
    if turn.sight is None:
        return None
    out = turn.sight.json()
    if turn.rebridged:
        out["rebridged"] = True
    return out


def _abort_reason(exc: BaseException) -> str:
    if isinstance(exc, GeneratorExit):
        return "closed"  # the stream's reader stopped before the answer
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return f"error: {type(exc).__name__}"


def _visible(chunk: JsonObject, relay: ToolRelay) -> JsonObject:
    """What of one upstream chunk the client may see: reasoning, content, its own calls."""
    choices = chunk.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return {}
    delta = choices[0].get("delta") or {}
    if not isinstance(delta, dict):
        return {}
    forward: JsonObject = {}
    if delta.get("reasoning_content"):
        forward["reasoning_content"] = delta["reasoning_content"]
    if delta.get("content"):
        forward["content"] = delta["content"]
    calls = relay.take(delta.get("tool_calls"))
    if calls:
        forward["tool_calls"] = calls
    return forward


async def _while(work: Awaitable[T], queue: asyncio.Queue[ProgressEvent],
                 out: list[T]) -> AsyncIterator[ProgressEvent]:
    """Run ``work``, yielding the events it queues as they come; its result goes to
    ``out`` (its exception is raised after the events queued before it)."""
    task = asyncio.ensure_future(work)
    getter: asyncio.Future[ProgressEvent] | None = None
    try:
        while not task.done():
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()
        while not queue.empty():
            yield queue.get_nowait()
        out.append(task.result())
    finally:
        if not task.done():
            task.cancel()
        # Closed mid-wait (a client gone): a getter left waiting on the queue would be
        # collected with it, still pending ("Task was destroyed but it is pending!").
        if getter is not None and not getter.done():
            getter.cancel()


