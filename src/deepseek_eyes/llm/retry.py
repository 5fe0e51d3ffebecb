"""When a failed model call is tried again, and how long to wait first.

DeepSeek answers 429 and 500/503 ("Server is busy") at peak load, and a stock ``openai``
client retries those twice before its caller hears of them. A runtime that fails at once
is worse than the client it replaces, so :class:`~deepseek_eyes.llm.client.ChatClient`
retries, under this policy:

* **What.** Statuses that say "not now" (429, 500, 502, 503, 504) and a connection that
  failed or was reset before an answer (``LLM_UNAVAILABLE``), plus a stream cut before its
  first chunk. Never a timeout (the caller's deadline is spent; the upstream may still be
  working and bill it), never a 4xx that would fail the same way again, and never after a
  byte of the answer reached the caller: a stream retries only before its first chunk.
* **How long.** Exponential backoff with jitter (0.5 s, 1 s, 2 s, … up to 8 s, each up to a
  quarter shorter, so that many clients do not come back in step), unless the server said
  ``Retry-After``: that is honoured exactly, up to :attr:`RetryPolicy.max_retry_after`.
  A server that asks for longer is not retried at all; its error, with ``retry_after_s``,
  goes to the caller, who can decide better than a loop that would block for minutes.
* **Bounded.** ``max_retries`` extra attempts (``llm.max_retries``, default 2), each under
  the client's own deadline. Every attempt, failed or not, is reported (:class:`Attempt`),
  so that the runtime writes one audited ``llm.request`` row per request actually sent.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TypedDict

from deepseek_eyes.errors import LLMError

__all__ = ["RETRYABLE_STATUS", "Attempt", "RetryPolicy", "attempts_json"]

#: HTTP statuses a busy or briefly failing upstream answers; anything else is final.
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


class AttemptView(TypedDict):
    """``Attempt.json``: one failed attempt as error details and audit rows hold it."""

    request_sha256: str | None
    code: str
    status: int | None
    waited_s: float


@dataclass(frozen=True)
class Attempt:
    """One request that was sent and failed in a way worth retrying."""

    request_sha256: str | None  # of the exact body bytes sent
    code: str
    status: int | None  # the HTTP status, when the upstream answered one
    waited_s: float  # the pause before the next attempt

    def json(self) -> AttemptView:
        return {"request_sha256": self.request_sha256, "code": self.code,
                "status": self.status, "waited_s": round(self.waited_s, 3)}


def attempts_json(attempts: tuple[Attempt, ...] | list[Attempt]) -> list[AttemptView]:
    return [attempt.json() for attempt in attempts]


@dataclass(frozen=True)
class RetryPolicy:
    """``max_retries`` extra attempts for the failures the module docstring lists."""

    max_retries: int = 0
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0

    def retryable(self, error: LLMError) -> bool:
        if error.code == "LLM_UNAVAILABLE":
            return True
        if error.code == "LLM_HTTP_ERROR":
            return error.details.get("status") in RETRYABLE_STATUS
        # A stream cut (or ended) before its first chunk reached anyone: nothing was used.
        return error.code == "LLM_STREAM_INCOMPLETE" and error.details.get("chunks") == 0

    def delay(self, retry: int, error: LLMError, rng: random.Random | None = None) -> float | None:
        """Seconds to wait before retry number ``retry`` (1 for the first), or None when
        ``error`` is final: not retryable, the bound is reached, or the server asked for a
        longer pause than :attr:`max_retry_after`."""
        if retry > self.max_retries or not self.retryable(error):
            return None
        asked = error.details.get("retry_after_s")
        if isinstance(asked, int | float) and not isinstance(asked, bool) and asked >= 0:
            return float(asked) if asked <= self.max_retry_after else None
        backoff = min(self.max_delay, self.base_delay * 2.0 ** (retry - 1))
        # Spreading retries out is not cryptography: the module's generator will do.
        jitter: float = (rng or random).random()
        return backoff * (1 - 0.25 * jitter)
