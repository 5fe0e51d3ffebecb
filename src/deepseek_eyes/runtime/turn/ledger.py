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
  ``llm.request`` audit row, and only the answered one carries usage.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from deepseek_eyes.audit.log import AuditLog
from deepseek_eyes.audit.records import Seal as AuditSeal
from deepseek_eyes.errors import DeepSeekEyesError, StoreError
from deepseek_eyes.llm.client import ChatResult
from deepseek_eyes.llm.retry import attempts_json
from deepseek_eyes.runtime.tools import ToolOutcome
from deepseek_eyes.runtime.turn.request import RequestRecord, UsageJson, add_usage
from deepseek_eyes.runtime.turn.state import TurnState
from deepseek_eyes.store.events import SessionStore, TurnRecord, body_digest
from deepseek_eyes.usage import ProviderUsage, UsageCategory, UsageTracker

__all__ = ["CATEGORY_OF_SOURCE", "Ledger", "Seal", "usage_json"]

#: The category of a model call that reads results of a source's tools.
CATEGORY_OF_SOURCE = {
    "mcp": UsageCategory.MCP_CONTINUATION,
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
        self._audit.append("llm.request", turn.turn_id, **request)
        return request["request_sha256"]

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

        Booking them never replaces ``exc``: when the store cannot take them (a full disk,
        often ``exc`` itself), they stay queued for the next write that succeeds and the
        failure is logged; the caller raises ``exc``, which names the session.
        """
        exc.details.setdefault("session_id", turn.session_id)
        attempts = exc.details.get("attempts")
        try:
            if isinstance(attempts, list):
                self.retries(turn, attempts, call=turn.model_calls + 1)
        except StoreError as queued:  # queued; a due flush failed
            _log.warning("turn %s: its failed attempts wait to be stored: %s", turn.turn_id,
                         queued)
        unstored = self._sessions.record_failed_turn(self.record(turn, "failed", exc.code))
        if unstored is not None:
            _log.warning("turn %s: its record could not be stored now: %s", turn.turn_id,
                         unstored)

    def record(self, turn: TurnState, outcome: str, code: str | None = None) -> TurnRecord:
        return TurnRecord(
            id=turn.turn_id, session_id=turn.session_id, started_at=turn.started,
            ended_at=time.time(), model=turn.model, path=turn.path, outcome=outcome, code=code,
            details={
                "model_calls": turn.model_calls, "rereads": turn.context.rereads,
                "tool_calls": turn.context.calls, "evidence": turn.evidence,
                "omitted_messages": turn.omitted,
                "usage": usage_json(turn.usage),
                "forced_final": turn.forced_final,
                "requests": [r["request_sha256"] for r in turn.requests],
            },
        )
