"""Before the first model call: the path, thinking mode, the session log, the view.

The path is chosen once per turn:

* **text** — no image in the conversation: the messages go to the final model as sent.
  No router, probe or attempt record.
* **native** — the final model sees (:class:`~deepseek_eyes.runtime.sight.Sight`: the
  settings, a learned verdict, a pixel probe of the model, the priors) and
  ``vision.delivery`` is not ``"evidence"``: the current exchange's images go as pixels,
  fitted to the model's documented limits (earlier ones as references the model can
  ``look`` at again); with ``delivery = "both"`` each is followed by its validated
  evidence. A turn that sends pixels counts one ``native_visual_turns`` event (a
  continued turn that sends none counts nothing).
* **bridged** — every image is replaced by validated evidence (cache first) and the model
  gets the ``look`` tool. The final model never receives an image part or unvalidated
  evidence. An upstream that refuses the pixels of a model believed to see makes the turn
  go on here (:meth:`Preparer.rebridge`), and the model is known text-only for a while.

Decisions a newcomer would otherwise undo:

* **The session log is the history.** A request that extends its session is rendered from
  the stored log plus the new messages (which is how the runtime's internal exchanges come
  back); one that does not starts a fork (:meth:`Preparer._log_request`). A request that
  keeps nothing (``TurnRequest.keep`` false, ``store: false``) is the exception: it carries
  its whole history, is shown exactly that, and the session gets only the hashes of what
  it did not hold yet (:meth:`Preparer._log_unkept`).
* **Thinking mode.** DeepSeek refuses a tool-call assistant message without the
  ``reasoning_content`` it came with. Reasoning a client dropped is restored from the
  store before the request is logged; what cannot be restored is refused there, before
  any upstream call (:meth:`Preparer._thinking`).
* **A text turn's request is written with its first call.** Judged and rendered from one
  read, its append and lease wait (:class:`~deepseek_eyes.runtime.turn.state.Unlogged`)
  and are written in the transaction that writes the first call ahead (the loop encodes
  that call first, so its hash is known): one write transaction and one chain entry a
  turn fewer, and still nothing is sent before the request is committed. The session
  moved meanwhile (the append's compare-and-set failed): nothing was written or sent, and
  the turn is prepared again, written at once. A turn that fails before its first call
  writes its request then, with its record (:meth:`Preparer.settle`). The other paths
  write the request at once: they do work (the eyes, pixels) before their first call that
  a crash must not find unlogged.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import operator
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import DeepSeekEyesError, LLMError, StoreError, TurnError
from deepseek_eyes.llm.catalog import ModelCatalog
from deepseek_eyes.llm.known import renamed, renamed_note
from deepseek_eyes.llm.thinking import (
    ThinkingMode,
    lacks_reasoning,
    model_defaults,
    reasoning_gaps,
    thinking_mode,
)
from deepseek_eyes.runtime.budget import FitMemo
from deepseek_eyes.runtime.delivery import pixels_for
from deepseek_eyes.runtime.messages import image_refs
from deepseek_eyes.runtime.reasoning import restore_reasoning
from deepseek_eyes.runtime.sight import Sight, SightVerdict
from deepseek_eyes.runtime.tools import ToolHub, TurnContext
from deepseek_eyes.runtime.turn.history import (
    Chain,
    HistoryMemo,
    prefix_chain,
    shared_prefix,
    visible_digest,
)
from deepseek_eyes.runtime.turn.ledger import ABORTED
from deepseek_eyes.runtime.turn.request import EvidenceUse, ThinkingNote, TurnRequest
from deepseek_eyes.runtime.turn.state import TurnState, Unlogged
from deepseek_eyes.runtime.view import (
    EvidenceSlot,
    ViewMemo,
    attached_pixels,
    build_view,
    carries_images,
    image_ids,
    native_pixels,
)
from deepseek_eyes.runtime.walks import HistoryWalks
from deepseek_eyes.settings import LLMSettings, RuntimeSettings, VisionSettings
from deepseek_eyes.store.events import (
    Event,
    ForeignSession,
    Fork,
    Guard,
    SessionConflict,
    SessionStore,
    Snapshot,
    TurnMark,
    TurnRecord,
    body_digest,
    message_calls,
)
from deepseek_eyes.usage import UsageCategory, UsageTracker
from deepseek_eyes.vision.bridge import VisionBridge

__all__ = ["CAS_TRIES", "PASSTHROUGH", "Logged", "Preparer", "prefix_chain", "visible_digest"]

_log = logging.getLogger("deepseek_eyes.runtime")
#: How many times a request is judged again when its session changed while it was.
CAS_TRIES = 8


@dataclasses.dataclass(frozen=True)
class Logged:
    """Where a turn's request went: the session (a fork, when one was started), the
    conversation the model is shown, the sequence number that history ends at, and the
    turn this is a new attempt of."""

    session_id: str
    fork: Fork | None
    conversation: list[dict[str, Any]]
    base: int
    retry_of: str | None
    chain: Chain | None = None  # the request's history by hash (kept requests)
    # Not written yet (a deferred text turn): writes the append and the lease inside the
    # caller's transaction and returns ``base`` as written (``base`` above is the guess).
    write: Callable[[], int] | None = None

#: OpenAI request fields passed to the final model unchanged.
PASSTHROUGH = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "presence_penalty",
    "frequency_penalty", "response_format", "seed", "logprobs", "top_logprobs", "user",
    "thinking", "reasoning_effort", "parallel_tool_calls", "logit_bias",
})

#: Server instructions put into the system prompt: per server, and in all.
MAX_INSTRUCTIONS_PER_SERVER = 2000
MAX_INSTRUCTIONS_CHARS = 6000


def _instructions_prompt(instructions: Mapping[str, str]) -> str | None:
    """Server instructions as one bounded system message, marked as the servers' words."""
    pieces: list[str] = []
    total = 0
    for server, text in sorted(instructions.items()):
        text = text.strip()[:MAX_INSTRUCTIONS_PER_SERVER]
        if not text or total + len(text) > MAX_INSTRUCTIONS_CHARS:
            continue
        total += len(text)
        pieces.append(f"[{server}]\n{text}")
    if not pieces:
        return None
    return ("Instructions from the connected MCP servers about their own tools (the "
            "servers' words, not the user's):\n\n" + "\n\n".join(pieces))


def _prior_calls(messages: Sequence[Mapping[str, Any]]) -> int:
    """Model calls already made for the latest user message (its assistant messages)."""
    count = 0
    for message in reversed(messages):
        role = message.get("role")
        if role == "user":
            break
        if role == "assistant":
            count += 1
    return count


class Preparer:
    def __init__(
        self,
        *,
        settings: RuntimeSettings,
        llm: LLMSettings,
        bridge: VisionBridge,
        catalog: ModelCatalog,
        tools: ToolHub,
        sessions: SessionStore,
        usage: UsageTracker,
        sight: Sight,
        vision: VisionSettings | None = None,
    ) -> None:
        self._settings = settings
        self._llm = llm
        self._vision = vision or VisionSettings()
        self._sight = sight
        self._warned: set[str] = set()  # renamed models already warned about
        self._bridge = bridge
        self._catalog = catalog
        self._tools = tools
        self._sessions = sessions
        self._usage = usage
        self.memo = HistoryMemo()
        self.walks = HistoryWalks()  # what each walk of a history found, per session
        self.fits = FitMemo()  # where each session's last fitting to the budget stood
        self.views = ViewMemo()  # plain renderings of the session logs' messages

    async def prepare(self, request: TurnRequest, *, defer: bool = False,
                      turn_id: str | None = None) -> TurnState:
        """The turn, ready for its first model call; its request is logged, or with
        ``defer`` (and a text turn that keeps its history) ready to be logged with that
        call (``turn.unlogged``; the module docstring).

        Raises:
            DeepSeekEyesError: the request is refused (nothing written), or the turn failed
                before its first call (its request and its failure are written).
        """
        started = time.time()
        model = request.model or await self._catalog.default_model()
        # A client's resent history is walked once: the messages after it, each turn.
        images = image_refs(self.walks.select(_client_key(request), request.messages,
                                              "image parts", _has_image_part))
        if len(images) > self._settings.max_images_per_turn:
            raise TurnError(
                f"the conversation holds {len(images)} images; at most "
                f"{self._settings.max_images_per_turn} are allowed",
                code="RUNTIME_TOO_MANY_IMAGES",
                details={"images": len(images), "limit": self._settings.max_images_per_turn},
            )
        sight: SightVerdict | None = None
        if not images:
            path = "text"
        else:
            sight = await self._sight.verdict(model)
            seeing = sight.sees and self._vision.delivery != "evidence"
            path = "native" if seeing else "bridged"
        request, thinking, note = self._thinking(request, model)
        turn_id = turn_id or f"turn-{uuid.uuid4().hex[:20]}"
        defer = defer and path == "text" and request.keep
        logged = self._log_request(request, turn_id=turn_id, started=started, model=model,
                                   path=path, defer=defer)
        booked: list[Callable[[], None]] | None = [] if logged.write is not None else None
        try:
            turn = await self._build(request, logged.conversation, model, path,
                                     logged.session_id, started, thinking, turn_id=turn_id,
                                     booked=booked)
        except BaseException as exc:
            if logged.write is not None:
                # Not written yet: the request goes in now, then its failure. If even that
                # fails, nothing of the turn is stored and its own error is what counts.
                try:
                    logged = self._write_log(request, logged, turn_id=turn_id,
                                             started=started, model=model, path=path)
                except DeepSeekEyesError:
                    raise exc from None
            # The request is logged; its failure to reach the model is recorded with it
            # (which ends its lease), and the caller learns which session holds it.
            details: dict[str, Any] = {"stage": "prepare", "base": logged.base}
            if logged.retry_of is not None:
                details["retry_of"] = logged.retry_of
            outcome, code = "aborted", ABORTED
            if isinstance(exc, DeepSeekEyesError):
                exc.details.setdefault("session_id", logged.session_id)
                outcome, code = "failed", exc.code
            else:
                details["reason"] = type(exc).__name__
            record = TurnRecord(
                id=turn_id, session_id=logged.session_id, started_at=started,
                ended_at=time.time(), model=model, path=path, outcome=outcome, code=code,
                details=details,
            )
            try:
                self._sessions.record_turn(record)
            except StoreError as unstored:
                if unstored.code == "STORE_FULL":  # written by the next write that succeeds
                    self._sessions.queue_turn(record)
            raise
        turn.fork = logged.fork
        turn.sight = sight
        turn.renamed = self._renamed(model)
        turn.thinking_note = note
        turn.base_seq = turn.head = logged.base
        turn.retry_of = logged.retry_of
        turn.prefix = logged.conversation
        turn.chain = logged.chain
        if logged.write is not None:
            turn.unlogged = Unlogged(logged.write, booked or [])
        return turn

    def settle(self, turn: TurnState) -> None:
        """Write a deferred turn's request now, alone: the turn ends before its first call
        (an error, the client gone) and its record must follow its request. Judged again
        when the session moved meanwhile (the turn may then be in another session: a
        fork). Nothing to do for a turn whose request is written.

        Raises:
            DeepSeekEyesError: the request could not be written; then nothing of the turn
                is (``turn.recorded`` is set: no record would have a request to follow).
        """
        unlogged, turn.unlogged = turn.unlogged, None
        if unlogged is None:
            return
        logged = Logged(turn.session_id, turn.fork, turn.prefix, turn.base_seq, turn.retry_of,
                        turn.chain, unlogged.write)
        try:
            logged = self._write_log(turn.request, logged, turn_id=turn.turn_id,
                                     started=turn.started, model=turn.model, path=turn.path)
        except DeepSeekEyesError:
            turn.recorded = True
            raise
        turn.session_id, turn.fork, turn.retry_of = (logged.session_id, logged.fork,
                                                     logged.retry_of)
        turn.prefix, turn.chain = logged.conversation, logged.chain
        turn.base_seq = turn.head = logged.base
        for book in unlogged.booked:
            book()

    def _write_log(self, request: TurnRequest, logged: Logged, *, turn_id: str,
                   started: float, model: str, path: str) -> Logged:
        """A deferred log written in a transaction of its own, as judged; judged and
        written again (:meth:`_log_request`) when the session moved since."""
        assert logged.write is not None
        try:
            with self._sessions.batch():
                base = logged.write()
        except SessionConflict:
            return self._log_request(request, turn_id=turn_id, started=started, model=model,
                                     path=path)
        return dataclasses.replace(logged, base=base, write=None)

    def _thinking(
        self, request: TurnRequest, model: str
    ) -> tuple[TurnRequest, ThinkingMode, ThinkingNote | None]:
        """DeepSeek's thinking mode for this request, before anything is logged: reasoning
        a client dropped is restored from the session store; a tool-call message whose
        reasoning cannot be restored is refused (``LLM_REASONING_MISSING``, no upstream
        call) or, with ``llm.thinking_fallback = "disable"``, sent with thinking off.

        Raises:
            LLMError: ``LLM_REASONING_MISSING`` (details: message_index, tool_call_ids,
                model, param).
        """
        mode = thinking_mode(model, request.params, self._llm)
        # One walk of a long history, not three, and of a resent one only what is new.
        gaps = self.walks.where(_client_key(request), request.messages, "reasoning gaps",
                                lacks_reasoning)
        if gaps:
            messages, restored = restore_reasoning(request.messages, self._sessions,
                                                   scope=request.scope)
            gaps = reasoning_gaps(messages) if mode == "enabled" else []
        else:  # nothing to restore: what restore_reasoning gives back then
            messages, restored = list(request.messages), 0
        request = dataclasses.replace(request, messages=messages)
        note: ThinkingNote = {"mode": mode, "reasoning_restored": restored}
        if gaps:
            first = gaps[0]
            ids = [str(c.get("id")) for c in message_calls(messages[first])][:8]
            if self._llm.thinking_fallback == "refuse":
                raise LLMError(
                    f"messages[{first}] is an assistant message with tool calls and no "
                    f"reasoning_content, which {model} requires in thinking mode, and this "
                    "gateway did not issue those calls, so it cannot restore it. Send each "
                    "assistant message back with the reasoning_content it came with, or "
                    'send thinking = {"type": "disabled"} (or set llm.thinking_fallback = '
                    '"disable")',
                    code="LLM_REASONING_MISSING",
                    details={"message_index": first, "messages": len(gaps),
                             "tool_call_ids": ids, "model": model,
                             "param": f"messages[{first}].reasoning_content"},
                )
            mode = "disabled"
            params = {**request.params, "thinking": {"type": "disabled"}}
            request = dataclasses.replace(request, params=params)
            note = {"mode": mode, "reasoning_restored": restored,
                    "fallback": "disabled", "reason": "LLM_REASONING_MISSING",
                    "message_index": first}
        return request, mode, note if mode is not None or restored else None

    async def _build(
        self,
        request: TurnRequest,
        conversation: list[dict[str, Any]],
        model: str,
        path: str,
        session_id: str,
        started: float,
        thinking: ThinkingMode = None,
        *,
        turn_id: str,
        booked: list[Callable[[], None]] | None = None,
    ) -> TurnState:
        """The turn's view, tools and upstream request base. ``booked``: usage the view
        adds is put there instead of counted (a deferred turn counts it once its request
        is written)."""
        def book(count: Callable[[], None]) -> None:
            if booked is None:
                count()
            else:
                booked.append(count)

        context = TurnContext(
            session_id=session_id,
            images={},
            max_tool_calls=self._settings.max_tool_calls_per_turn,
            max_rereads=self._settings.max_rereads_per_turn,
            notify=request.notify,
            approver=request.approver,
            scope=request.scope,
        )
        context.delivery = self._delivery(path)
        if path == "text":
            context.resolve_delivery = functools.partial(self._tool_delivery, model)
        evidence: list[EvidenceUse] = []
        slots: dict[str, EvidenceSlot] = {}
        originals: dict[str, bytes] = {}
        # One walk (few messages hold any), of a continued session only what is new.
        carrying = self.walks.select(f"session {session_id}", conversation, "images",
                                     carries_images)
        ids = image_ids(carrying)
        pictures = _conversation_images(carrying)
        if path == "bridged" or context.delivery == "both":
            for image in pictures:
                image_id = ids.get(image["sha256"]) or str(image.get("id"))
                # The turn record names this acquisition (evidence below): a cache hit
                # writes no attempts row besides it.
                result = await self._bridge.see_stored(image["sha256"], scope=request.scope,
                                                       recorded=True)
                slots[image["sha256"]] = EvidenceSlot(
                    image_id, image, result.route, result.record.record_sha256,
                    result.record.evidence,
                )
                context.images[image_id] = {**_part(image), "route": result.route}
                evidence.append({
                    "image": image_id, "sha256": image["sha256"], "route": result.route,
                    "record_sha256": result.record.record_sha256, "cached": result.cached,
                    "operation_id": result.operation_id,
                })
        else:
            for image in pictures:  # look works on the native path too
                image_id = ids.get(image["sha256"]) or str(image.get("id"))
                context.images.setdefault(image_id, _part(image))
        # Images earlier tool results brought keep their ids (their evidence is in the text).
        for message in self.walks.select(f"session {session_id}", conversation,
                                         "tool images", _brought_images):
            for image in message["images"]:
                context.images.setdefault(str(image["id"]), {
                    k: v for k, v in image.items() if k != "id"})
        if path == "native":
            where = native_pixels(conversation, self._settings.native_history_images)
            by_sha = {i["sha256"]: i for i in pictures}
            originals = await pixels_for(self._bridge, [by_sha[sha] for sha in where],
                                         model=model, carried=len(where))
        # Unfitted: the loop fits every request, the turn's own tool rounds included.
        view = build_view(
            conversation,
            path=path,
            slots=slots,
            image_bytes=originals,
            history_evidence=self._settings.history_evidence,
            native_history_images=self._settings.native_history_images,
            thinking=thinking,
            both=context.delivery == "both",
            memo=self.views,
        )
        if originals:  # the bytes of the images this view sends as pixels
            self._usage.count(UsageCategory.NATIVE_VISUAL_TURNS, source=model)
        if path == "bridged" or view.evidence_tokens:
            book(functools.partial(
                self._usage.record_estimate, UsageCategory.BRIDGE_INPUT, view.evidence_tokens,
                source=model, calls=1))
            if view.avoided_tokens:
                # Pointers instead of earlier images' full evidence, by the same estimate
                # as the evidence sent; nothing in history_evidence = "full".
                book(functools.partial(
                    self._usage.record_estimate, UsageCategory.AVOIDED_REPLAY,
                    view.avoided_tokens, source="pointers", calls=1))
        client_names = frozenset(
            str(t.get("function", {}).get("name")) for t in request.client_tools
            if isinstance(t, Mapping)
        )
        offer = self._tools.offer(context, exclude=client_names)
        history = list(view.messages)
        mcp = self._tools.source("mcp")
        instructions = getattr(mcp, "instructions", None)
        if offer.schema_tokens("mcp") and instructions is not None:
            # Only servers with an allowed tool, resource or prompt in *this* offer speak.
            prompt = _instructions_prompt(instructions(
                [name for name, source in offer.routes.items() if source is mcp]))
            if prompt is not None:
                at = 1 if path == "bridged" else 0
                history.insert(at, {"role": "system", "content": prompt})
        base: JsonObject = {"model": model}
        base.update({k: v for k, v in request.params.items() if k in PASSTHROUGH})
        for key, value in model_defaults(model, self._llm).items():  # the model's settings
            if base.get(key) is None:
                base[key] = value
        return TurnState(
            request=request, turn_id=turn_id, session_id=session_id,
            model=model, path=path, view=view, context=context, offer=offer,
            base=base, history=history, started=started, evidence=evidence,
            prior_calls=_prior_calls(conversation), client_names=client_names,
            thinking=thinking, pixels_counted=bool(originals),
        )

    def _renamed(self, model: str) -> JsonObject | None:
        """What a turn says of a model name DeepSeek made an alias or retired (logged once
        per process, said in every answer)."""
        name, note = renamed(model), renamed_note(model)
        if name is None or note is None:
            return None
        if model not in self._warned:
            self._warned.add(model)
            # Once per process, in the `warning CODE: sentence` form config check uses:
            # ask, chat and serve all show it on standard error.
            _log.warning("warning CONFIG_MODEL_RENAMED: %s", note)
        return {"model": model, "successor": name.successor, "kind": name.kind,
                "message": note}

    def _delivery(self, path: str) -> str:
        """How images reach the model in a turn on ``path``: ``pixels``, ``both`` or
        ``evidence``; a text turn decides when a tool first brings one."""
        if path == "native":
            return "both" if self._vision.delivery == "both" else "pixels"
        return "evidence"

    async def _tool_delivery(self, model: str) -> str:
        """A text turn's delivery, once a tool result brings its first image."""
        if self._vision.delivery == "evidence":
            return "evidence"
        verdict = await self._sight.verdict(model)
        return self._delivery("native" if verdict.sees else "bridged")

    async def rebridge(self, turn: TurnState) -> None:
        """The upstream refused the pixels of a model believed to see: it is text-only for
        the sight TTL, and the turn goes on with evidence. Its history so far (the logged
        request and what the turn appended since, pixel tool results included) is shown
        again bridged; the turn's counters and records stay."""
        turn.sight = self._sight.refused(turn.model)
        conversation = [*turn.prefix, *turn.outputs]
        fresh = await self._build(turn.request, conversation, turn.model, "bridged",
                                  turn.session_id, turn.started, turn.thinking,
                                  turn_id=turn.turn_id)
        turn.path = "bridged"
        turn.view = fresh.view
        turn.history = fresh.history
        turn.tail = []
        turn.evidence = [*turn.evidence, *fresh.evidence]
        fresh.context.calls = turn.context.calls
        fresh.context.rereads = turn.context.rereads
        fresh.context.tool_calls = turn.context.tool_calls
        fresh.context.state = turn.context.state
        turn.context = fresh.context
        turn.offer = fresh.offer

    def _log_request(self, request: TurnRequest, *, turn_id: str, started: float, model: str,
                     path: str, defer: bool = False, hold: bool = True) -> Logged:
        """Append the messages the session has not seen yet, and lease the turn, in one
        transaction; with ``defer``, judge only, and return that transaction unwritten
        (``Logged.write``; the module docstring).

        Clients resend the whole history each turn. One that extends the stored history
        continues the session. One that repeats exactly the history the session's latest
        turn started from is a new attempt of that turn (a retry, "regenerate"): nothing
        is appended, and the turn is shown that history. One that does neither (an edited
        message, a trimmed or different history under the same id) would otherwise be
        appended as if it continued; it starts a new session instead, forked from the
        named one at the last shared message, and the answer says so
        (``deepseekeyes.fork``).

        The append is compare-and-set (:class:`~deepseek_eyes.store.events.Guard`): when
        another turn (in this process or another one) appended meanwhile, the session is
        read again and the request judged against what is there now.

        A named session must be the request's scope's (``request.scope``): another
        scope's is refused, never appended to, forked or retried (a fork would copy its
        history into the request's scope).

        Raises:
            StoreError: ``STORE_SESSION_CONFLICT`` when the session kept changing
                (:data:`CAS_TRIES` reads), ``STORE_SESSION_FOREIGN`` for another scope's
                session, or the store's write error; nothing was sent.
        """
        if not request.keep:
            return self._log_unkept(request, turn_id=turn_id, started=started, model=model,
                                    path=path)
        original, hold = request, defer and hold
        # Each message hashed once: the memo's digests for what the client sent before.
        chain = self.memo.chain(request.messages, session_id=request.session_id,
                                scope=request.client_scope)
        snap: Snapshot | None = None
        if request.session_id is None and request.client_scope is not None \
                and any(_answered(m) for m in request.messages):
            # A stock client sends no session id: its history, by hash, finds the session
            # it continues (the longest one noted after an answer in this client's scope).
            # Every noted history ends with the answer noted after: a history without one
            # (a conversation's first request) continues nothing, and is looked up never.
            found, snap = self._find(request.client_scope, chain, hold=hold,
                                     owner=request.scope)
            if found is None:
                # Noted before histories were canonical (format 1): found by that chain.
                older = prefix_chain(request.messages, legacy=True)
                if older != chain.hashes:
                    found = self._sessions.find_prefix(request.client_scope, older)
            if found is not None:
                request = dataclasses.replace(request, session_id=found)
        if request.session_id is None:  # a session of its own: one transaction, no lookups
            session_id = self._sessions.new_id()
            return self._append(request, request.messages, session_id=session_id,
                                conversation=list(request.messages), turn_id=turn_id,
                                started=started, model=model, path=path, create=True,
                                minted=True, chain=chain, defer=defer)
        for _ in range(CAS_TRIES):
            try:
                return self._log_into(request, request.session_id, chain, turn_id=turn_id,
                                      started=started, model=model, path=path, defer=defer,
                                      snap=snap, hold=hold)
            except _Unsure:  # a held snapshot made it a fork: judged from a read instead
                return self._log_request(original, turn_id=turn_id, started=started,
                                         model=model, path=path, defer=defer, hold=False)
            except SessionConflict:
                snap = None  # read again
                continue
        raise SessionConflict(request.session_id, -1)

    def _find(self, scope: str, chain: Chain, *, hold: bool = False,
              owner: str | None = None) -> tuple[str | None, Snapshot | None]:
        """The session whose noted history is the longest prefix of ``chain``. Where the
        memo knows a noted prefix of it (``chain.noted``), none shorter can be the
        longest, so only the hashes from there on are looked up (a continuation looks up
        its new messages, not its history), and the session the memo noted it for is read
        with them (its snapshot, when it is the one found); nothing found there, all of
        them are. ``hold`` (a deferred write, which checks what it was judged from): that
        session, when this process's answer is the last thing it knows of it, is not read
        or looked up at all: it is judged from what the store holds, and the lookup
        checked with the write (:meth:`~deepseek_eyes.store.events.SessionStore.held`;
        ``owner``, whose request it is, must be whose the session is)."""
        if chain.noted:
            hashes = chain.hashes[chain.noted - 1:]
            if chain.session is not None and hold and owner is not None:
                snap = self._sessions.held(chain.session, scope=owner, lookup=(scope, hashes))
                if snap is not None:
                    return chain.session, snap
            if chain.session is not None:
                found, snap = self._sessions.find_with_snapshot(scope, hashes, chain.session)
            else:
                found, snap = self._sessions.find_prefix(scope, hashes), None
            if found is not None:
                return found, snap
        return self._sessions.find_prefix(scope, chain.hashes), None

    def _log_unkept(self, request: TurnRequest, *, turn_id: str, started: float,
                    model: str, path: str) -> Logged:
        """A request that keeps nothing (``request.keep`` false): the session (named, else
        new) gets the hashes of the messages it does not hold yet (matched by hash, as the
        client resends its history), never their content, and the turn is shown the
        request's own history: no stored log, no retry or fork judgement (there is nothing
        to render them from). The named session must still be the request's scope's."""
        session_id = request.session_id or self._sessions.new_id()
        for _ in range(CAS_TRIES):
            hashes, head, owner = self._sessions.body_hashes(session_id)
            if owner is not None and owner != request.scope:
                raise ForeignSession(session_id)
            common = 0
            for message in request.messages:
                if common == len(hashes) or hashes[common] != body_digest(message):
                    break
                common += 1
            try:
                with self._sessions.batch() as conn:
                    seqs = self._sessions.append(
                        session_id, request.messages[common:],
                        create=request.source if owner is None else None,
                        guard=Guard(head), scope=request.scope, unkept=True)
                    base = seqs[-1] if seqs else head
                    self._sessions.leases.open(conn, turn_id=turn_id, session_id=session_id,
                                               base=base, started_at=started, model=model,
                                               path=path, retry_of=None)
            except SessionConflict:
                continue
            return Logged(session_id, None, list(request.messages), base, None)
        raise SessionConflict(session_id, -1)

    def _log_into(self, request: TurnRequest, session_id: str, chain: Chain, *,
                  turn_id: str, started: float, model: str, path: str,
                  defer: bool = False, snap: Snapshot | None = None,
                  hold: bool = False) -> Logged:
        """Judge the request against its session (``snap``: read with the prefix lookup,
        else held with ``hold`` when the store can, else read now) and append it (see
        :meth:`_log_request`).

        Raises:
            _Unsure: a held snapshot made the request a fork (judged again from a read:
                which session it forks from is the lookup's, which the fork's write does
                not check).
        """
        if snap is None and hold:
            snap = self._sessions.held(session_id, scope=request.scope)
        if snap is None:
            snap = self._sessions.snapshot(session_id)
        if snap.scope is not None and snap.scope != request.scope:
            raise ForeignSession(session_id)
        log = list(map(_MESSAGE, snap.events))
        # The store keeps the events it read: a continued session's are the same objects.
        visible = self.walks.select(f"session {session_id}", snap.events, "visible events",
                                    _shown_event)
        stored = self.memo.stored_digests(session_id, visible)
        # The runtime's internal exchanges are skipped on both sides (``ask --session``
        # resends the stored history, internal messages included); ``chain`` holds the
        # request's visible messages' digests in order.
        matched = common = 0
        if len(chain.digests) == len(request.messages):  # nothing internal: compared in C
            matched = common = shared_prefix(stored, chain.digests)
        else:
            for message in request.messages:
                if message.get("internal"):
                    common += 1
                    continue
                if matched == len(stored) or stored[matched] != chain.digests[matched]:
                    break
                matched += 1
                common += 1
        new = [m for m in request.messages[common:] if not m.get("internal")]
        retried = _retried(snap, visible, matched) if not new else None
        if retried is not None and retried.base is not None:
            base = retried.base
            return self._append(
                request, [], session_id=session_id,
                conversation=[e.message for e in snap.events if e.seq <= base],
                guard=Guard(snap.head, base, snap.held), base=base, retry_of=retried.id,
                turn_id=turn_id, started=started, model=model, path=path, chain=chain,
                defer=defer)
        if matched < len(stored):
            if snap.held is not None:
                raise _Unsure
            fork = Fork(session_id, matched)
            return self._append(request, request.messages, session_id=self._sessions.new_id(),
                                conversation=list(request.messages), create=True, fork=fork,
                                minted=True, turn_id=turn_id, started=started, model=model,
                                path=path, chain=chain, defer=defer)
        return self._append(request, new, session_id=session_id, conversation=[*log, *new],
                            guard=Guard(snap.head, held=snap.held), create=not log,
                            head=snap.head,
                            turn_id=turn_id, started=started, model=model, path=path,
                            chain=chain, defer=defer)

    def _append(
        self, request: TurnRequest, messages: Sequence[JsonObject], *, session_id: str,
        conversation: list[dict[str, Any]], turn_id: str, started: float, model: str,
        path: str, create: bool = False, fork: Fork | None = None, guard: Guard | None = None,
        head: int = -1, base: int | None = None, retry_of: str | None = None,
        chain: Chain | None = None, minted: bool = False, defer: bool = False,
    ) -> Logged:
        def write() -> int:
            with self._sessions.batch() as conn:
                # A deferred write is judged again on a conflict (Ledger.pending,
                # _write_log): its guard is checked with its writes (no read first).
                seqs = self._sessions.append(
                    session_id, messages, create=request.source if create else None,
                    fork=fork, guard=guard, scope=request.scope, minted=minted,
                    expect=defer)
                written = base if base is not None else seqs[-1] if seqs else head
                self._sessions.leases.open(conn, turn_id=turn_id, session_id=session_id,
                                           base=written, started_at=started, model=model,
                                           path=path, retry_of=retry_of)
            return written

        if defer:  # the base the guard makes it, if the write succeeds
            guess = base if base is not None else head + len(messages) if messages else head
            return Logged(session_id, fork, conversation, guess, retry_of, chain, write)
        return Logged(session_id, fork, conversation, write(), retry_of, chain)


class _Unsure(Exception):
    """A request judged from a held snapshot that its write would not check (a fork)."""


def _answered(message: Mapping[str, Any]) -> bool:
    """Whether a message could end a noted history: an answer (every history noted is
    noted after its turn's answer, the last message a client sees of it)."""
    return message.get("role") == "assistant" and not message.get("internal")


def _conversation_images(conversation: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every image of a conversation by first appearance: content parts of user and tool
    messages, and the images tool results delivered as pixels."""
    seen: dict[str, dict[str, Any]] = {}
    for message in conversation:
        if not carries_images(message):
            continue
        for image in image_refs([message]):
            seen.setdefault(image["sha256"], image)
        for attached in attached_pixels(message):
            seen.setdefault(str(attached["sha256"]), dict(attached))
    return list(seen.values())


def _client_key(request: TurnRequest) -> str | None:
    """Whose resent history a request's is, for :class:`HistoryWalks` (None: nobody's)."""
    if request.session_id is not None:
        return f"session {request.session_id}"
    scope = request.client_scope or request.scope
    return f"client {scope}" if scope is not None else None


_MESSAGE = operator.attrgetter("message")


def _shown_event(event: Event) -> bool:
    return not event.message.get("internal")


def _has_image_part(message: Mapping[str, Any]) -> bool:
    """Whether a runtime message's content holds an image part (what ``image_refs``
    collects)."""
    content = message.get("content")
    return isinstance(content, list) and any(p.get("type") == "image" for p in content)


def _brought_images(message: Mapping[str, Any]) -> bool:
    """Whether a message is a tool result that brought images (their ids stay known)."""
    return message.get("role") == "tool" and bool(message.get("images"))


def _part(image: Mapping[str, Any]) -> dict[str, Any]:
    """An image as the turn's tools know it: its identity, without the tool-result id."""
    return {k: v for k, v in image.items() if k not in ("id", "pixels", "type")} | {
        "type": "image"}


def _retried(snap: Snapshot, visible: Sequence[Event], matched: int) -> TurnMark | None:
    """The turn a request retries: the session's latest turn, when the request's history
    is exactly what that turn started from and nothing but turns' output came after it."""
    latest = snap.latest
    if latest is None or latest.base is None:  # None: a record from before bases were kept
        return None
    base = latest.base
    if matched != sum(1 for e in visible if e.seq <= base):
        return None
    if any(e.turn_id is None for e in snap.events if e.seq > base):
        return None
    return latest
