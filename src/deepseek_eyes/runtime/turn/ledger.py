"""A turn's books: usage by category, audited upstream requests, the turn record.

Audit and sealing are handed in (an :class:`~deepseek_eyes.audit.log.AuditLog` and a
``seal`` callable), so the loop never reaches into the data directory.

* **Usage.** Each model call is exact usage in one category: ``mcp_continuation`` when it
  reads results of MCP calls, ``computer_use`` when it reads results of browser or desktop
  calls, ``final`` otherwise. The MCP tool definitions a call carries are estimated as
  ``mcp_schema``; every block of validated evidence the model receives (the view's, a
  ``look`` reread, a screenshot's, an MCP image's) as ``bridge_input``, once, when it
  first reaches the model.
* **Retries.** The client retries a busy upstream; each attempt it reports becomes an
  ``llm.request`` audit row, and only the answered one carries usage. The answered one
  leaves out what its pending row already says (:func:`stored_completion`).
* **Billed calls are written ahead.** Before each attempt is sent, a pending
  ``llm.request`` row (``outcome: "pending"``: turn, session, call, attempt, model, request
  hash) is committed (:meth:`Ledger.pending`; a text turn's first call with the request
  itself, runtime/turn/prepare.py); if that write fails (a full disk), the attempt is not
  sent and nothing is billed. The row that completes it (usage, or the
  failure) is written with the turn's other rows. A pending row with no completion is a
  call whose outcome is unknown (the process died, or the disk filled after the call):
  ``usage`` and ``audit show`` say so.
* **The turn record counts what was sent.** ``model_calls`` and ``requests`` (request
  hashes, in call order) cover every call written ahead, answered or not: a turn cut while
  its call streamed (the gateway shut down, the client went away) names that call, and
  ``unanswered`` lists the hashes of the calls whose answer never completed.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from deepseek_eyes.audit.log import AuditLog
from deepseek_eyes.audit.records import Seal as AuditSeal
from deepseek_eyes.errors import DeepSeekEyesError, LLMError, StoreError
from deepseek_eyes.llm.client import ChatResult
from deepseek_eyes.llm.known import seeing_facts
from deepseek_eyes.llm.retry import attempts_json
from deepseek_eyes.runtime.tools import ToolOutcome
from deepseek_eyes.runtime.turn.request import RequestRecord, UsageJson, add_usage
from deepseek_eyes.runtime.turn.state import TurnState
from deepseek_eyes.store.events import SessionStore, TurnRecord, body_digest, stored_usage
from deepseek_eyes.usage import ProviderUsage, UsageCategory, UsageTracker

__all__ = ["ABORTED", "CATEGORY_OF_SOURCE", "Ledger", "Seal", "stored_completion", "usage_json"]

#: The code of a turn closed before its answer or an error (details say why).
ABORTED = "RUNTIME_TURN_ABORTED"

#: The category of a model call that reads results of a source's tools.
CATEGORY_OF_SOURCE = {
    "mcp": UsageCategory.MCP_CONTINUATION,
    "code": UsageCategory.MCP_CONTINUATION,  # Code Mode: a program's MCP calls
    "browser": UsageCategory.COMPUTER_USE,
    "desktop": UsageCategory.COMPUTER_USE,
}

Seal = Callable[[], AuditSeal | None]

_log = logging.getLogger(__name__)


def usage_json(usage: ProviderUsage) -> UsageJson:
    """Usage in the OpenAI shape, with DeepSeek's cache fields beside it: OpenAI clients
    (openai, langchain-openai, pydantic-ai) read cache hits only from
    ``prompt_tokens_details.cached_tokens``."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_cache_hit_tokens": usage.cache_hit_tokens,
        "prompt_cache_miss_tokens": usage.cache_miss_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_hit_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def stored_completion(request: RequestRecord, pending_sha256: str | None,
                      pending_model: str) -> dict[str, Any]:
    """An answered call's ``llm.request`` row as stored: without the request hash and model
    when its pending row (written ahead, same turn and call) already says them, and with its
    usage stored short (:func:`~deepseek_eyes.store.events.stored_usage`). Readers put them
    back from the pending row (:func:`deepseek_eyes.audit.show.whole_requests`)."""
    out: dict[str, Any] = {**request, "usage": stored_usage(request["usage"])}
    if pending_sha256 is not None and pending_sha256 == request["request_sha256"] \
            and pending_model == request["model"]:
        del out["request_sha256"], out["model"]
    return out


def category_after(sources: Sequence[str]) -> UsageCategory:
    """The category of the model call that reads results of calls to ``sources``: MCP
    first (its results are what the seed keeps apart longest), then computer use."""
    categories = {CATEGORY_OF_SOURCE.get(s, UsageCategory.FINAL) for s in sources}
    for category in (UsageCategory.MCP_CONTINUATION, UsageCategory.COMPUTER_USE):
        if category in categories:
            return category
    return UsageCategory.FINAL


class Ledger:
    def __init__(self, *, usage: UsageTracker, audit: AuditLog, sessions: SessionStore,
                 seal: Seal) -> None:
        self._usage = usage
        self._audit = audit
        self._sessions = sessions
        self.seal = seal

    def schema(self, tokens: int) -> None:
        """The MCP tool definitions one model call carries (estimated)."""
        if tokens:
            self._usage.record_estimate(UsageCategory.MCP_SCHEMA, tokens, source="mcp", calls=1)

    def evidence(self, turn: TurnState, outcomes: Sequence[ToolOutcome]) -> None:
        """Evidence that tool results hand the model (rereads, screenshots, MCP images)."""
        tokens = sum(o.evidence_tokens for o in outcomes)
        if tokens:
            self._usage.record_estimate(UsageCategory.BRIDGE_INPUT, tokens, source=turn.model,
                                        calls=1)

    def call(self, turn: TurnState, result: ChatResult, payload: Mapping[str, Any]) -> str:
        """Book one answered model call; returns its request hash."""
        turn.model_calls += 1
        turn.usage = add_usage(turn.usage, result.usage)
        model = result.model or turn.model
        self._usage.record_exact(turn.category, result.usage, source=turn.path, model=model)
        self.image_input(turn, result)
        # The request as sent, by hash, with the usage it was billed: the audit row is on
        # the chain, so an answer's provenance reaches the exact upstream request.
        self.retries(turn, attempts_json(result.retries), call=turn.model_calls)
        request: RequestRecord = {
            "request_sha256": result.request_sha256 or body_digest(dict(payload)),
            "call": turn.model_calls, "model": model, "category": str(turn.category),
            "usage": usage_json(result.usage),
        }
        if result.retries:
            request["attempt"] = len(result.retries) + 1
        turn.requests.append(request)
        self._audit.append("llm.request", turn.turn_id,
                           **stored_completion(request, turn.sent_requests.get(turn.model_calls),
                                               turn.model))
        return request["request_sha256"]

    def image_input(self, turn: TurnState, result: ChatResult) -> None:
        """The images one model call carried as pixels, as their own category: the
        upstream's count when it reports one, else the known-models table's estimate."""
        sent = [*turn.view.pixels, *turn.tail_pixels]
        if not sent:
            return
        tokens = result.usage.image_tokens
        source = "upstream"
        if not tokens:
            facts = seeing_facts(turn.model)
            cost = facts.image_cost if facts is not None else None
            if cost is None:
                return
            tokens = sum(cost.tokens(i.width, i.height, i.detail) for i in sent)
            source = "table"
        self._usage.record_estimate(UsageCategory.NATIVE_IMAGE_INPUT, tokens, source=source,
                                    calls=len(sent))

    def refused(self, turn: TurnState, exc: DeepSeekEyesError) -> None:
        """A call the upstream refused for its image parts; the turn goes on with evidence.
        Its pending row is completed as failed, and it counts as a model call."""
        call = turn.model_calls + 1
        turn.model_calls = call
        self._audit.append(
            "llm.request", turn.turn_id, call=call, attempt=turn.sent.get(call, 1),
            model=turn.model, outcome="failed", code=exc.code,
            status=exc.details.get("status"), reason="image_refused")

    def pending(self, turn: TurnState, request_sha256: str, attempt: int) -> None:
        """Write one attempt ahead, committed, before it is sent (see the module docstring).
        A turn whose request is not written yet (``turn.unlogged``) writes it in the same
        transaction; an attempt already written ahead (the loop wrote the first call's with
        the request, the client then tells it again) is not written twice.

        Raises:
            StoreError: the write failed (``STORE_FULL``); the attempt must not be sent.
            SessionConflict: the request's session moved since the turn read it; nothing
                was written.
        """
        call = turn.model_calls + 1
        if turn.sent.get(call) == attempt and turn.sent_requests.get(call) == request_sha256:
            return
        unlogged = turn.unlogged
        with self._sessions.batch():
            if unlogged is not None:
                turn.base_seq = turn.head = unlogged.write()
            self._audit.write("llm.request", turn.turn_id, call=call, attempt=attempt,
                              model=turn.model, session_id=turn.session_id,
                              request_sha256=request_sha256, outcome="pending")
        if unlogged is not None:
            turn.unlogged = None
            for count in unlogged.booked:
                count()
        turn.sent[call] = attempt
        turn.sent_requests[call] = request_sha256

    def retries(self, turn: TurnState, attempts: Sequence[Any], *, call: int) -> None:
        """One audited ``llm.request`` row per attempt that was sent and failed (nothing is
        billed for them, so no usage is recorded)."""
        for number, attempt in enumerate(attempts, start=1):
            if isinstance(attempt, Mapping):
                self._audit.append(
                    "llm.request", turn.turn_id, call=call, attempt=number,
                    model=turn.model, outcome="failed",
                    **{k: attempt.get(k) for k in ("request_sha256", "code", "status",
                                                   "waited_s")})

    def failed(self, turn: TurnState, exc: DeepSeekEyesError) -> None:
        """A turn that ended in an error: its failed attempts and its record.

        When the record cannot be written (the store's own failure, a full disk), it is
        queued instead and written by the next write that succeeds; the error still
        reaches the caller, with its session."""
        exc.details.setdefault("session_id", turn.session_id)
        if turn.recorded:  # its answer was stored before the failure reached the loop
            return
        turn.recorded = True
        call = turn.model_calls + 1
        attempts = exc.details.get("attempts")
        # Queued rows stay queued when the store cannot write now; the turn's own error,
        # not the store's, is what the caller learns.
        with contextlib.suppress(StoreError):
            if isinstance(attempts, list):
                self.retries(turn, attempts, call=call)
            elif isinstance(exc, LLMError) and call in turn.sent:
                # The call's one attempt was sent and failed: its pending row is completed.
                self._audit.append(
                    "llm.request", turn.turn_id, call=call, attempt=turn.sent[call],
                    model=turn.model, outcome="failed", code=exc.code,
                    status=exc.details.get("status"))
                turn.failed_calls.add(call)
        self.close(self.record(turn, "failed", exc.code))

    def aborted(self, turn: TurnState, reason: str) -> None:
        """A turn closed before its answer (its stream's reader went away, the gateway shut
        down, a bug): its record says so, with a ``turn.aborted`` audit row. Attempts sent
        and not answered stay pending: what they were billed is unknown."""
        if turn.recorded:  # closed after its answer was stored, before it was handed on
            return
        turn.recorded = True
        record = self.record(turn, "aborted", ABORTED)
        record.details["reason"] = reason
        self.close(record, {"session_id": turn.session_id, "reason": reason,
                            "model_calls": record.details["model_calls"]})

    def close(self, record: TurnRecord, aborted: dict[str, Any] | None = None) -> None:
        """Write a turn's record (and, for an aborted one, its ``turn.aborted`` row), or
        queue them when the store cannot write now: a turn never ends unrecorded."""
        try:
            with self._sessions.batch():
                if aborted is not None:
                    self._audit.write("turn.aborted", record.id, **aborted)
                self._sessions.record_turn(record)
        except StoreError as unstored:
            if unstored.code != "STORE_FULL":  # refused for what it is: queued, it would
                _log.warning("turn %s: its record was refused (%s): %s",  # refuse the rest
                             record.id, unstored.code, unstored.message)
                return
            # A full disk: queued, and written by the next write that succeeds (a failed
            # flush now leaves them queued).
            _log.warning("turn %s: its record could not be stored now (%s); queued",
                         record.id, unstored.code)
            self._sessions.queue_turn(record)
            if aborted is not None:
                with contextlib.suppress(StoreError):
                    self._audit.append("turn.aborted", record.id, **aborted)

    def record(self, turn: TurnState, outcome: str, code: str | None = None) -> TurnRecord:
        """The turn's record: its calls are every call sent (see the module docstring)."""
        extra: dict[str, Any] = {"retry_of": turn.retry_of} if turn.retry_of else {}
        # Every call sent, in call order: an answered one by the hash it was booked with, one
        # written ahead and never booked (refused, failed, or cut) by the hash sent. Calls
        # past the last one counted whose failure was not booked either were cut mid-way.
        booked = {int(r["call"]): r["request_sha256"] for r in turn.requests}
        calls = sorted(booked.keys() | turn.sent_requests.keys())
        requests = [booked.get(call) or turn.sent_requests[call] for call in calls]
        unanswered = [turn.sent_requests[call] for call in calls
                      if call > turn.model_calls and call not in turn.failed_calls]
        if unanswered:
            extra["unanswered"] = unanswered
        return TurnRecord(
            id=turn.turn_id, session_id=turn.session_id, started_at=turn.started,
            ended_at=time.time(), model=turn.model, path=turn.path, outcome=outcome, code=code,
            details={
                "model_calls": max([turn.model_calls, *calls]),
                "rereads": turn.context.rereads,
                "tool_calls": turn.context.calls, "evidence": turn.evidence,
                "omitted_messages": turn.omitted,
                "usage": usage_json(turn.usage),
                "forced_final": turn.forced_final,
                "requests": requests,
                "base": turn.base_seq,
                **extra,
            },
        )
