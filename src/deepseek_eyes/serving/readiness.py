"""Readiness: a small registry of named checks, each bounded in time and cached, and the
answer ``/readyz`` gives from them.

A server is *alive* (``/healthz``) while its process answers at all; it is *ready* while it
can serve a request end to end: its database takes reads and writes, its upstream answers,
the state it shares with other replicas is reachable. A load balancer sends work only to
ready replicas, so a readiness check must be cheap, must answer in bounded time, and must
not multiply into work behind it when many probes arrive: every check here runs at most
once at a time (a probe that arrives while one runs waits for that one's verdict) and its
verdict is reused for ``ttl`` seconds.

Decisions a newcomer would otherwise undo:

* **A check is a protocol, not a class tree.** Today's checks are the SQLite data
  directory, the upstream and the process-local shared state; a PostgreSQL database or a
  Redis state store later registers a check of its own under the same names (``database``,
  ``shared_state``) without this module changing.
* **The answer names checks and codes only.** ``/readyz`` is public (a balancer probes it
  without the key), so its body carries each check's name, its status, our stable code and
  how old the verdict is: never a message, a path, a URL or a host name, which would tell
  an unauthenticated caller how the machine is laid out. The operator reads the reason in
  the logs (:func:`Readiness.report` logs a failed check's message once per change).
* **A check that does not finish in time fails** with ``GATEWAY_CHECK_TIMEOUT``; the work
  it started may go on (a thread cannot be cancelled) and its late verdict is kept.
* **A check may be advisory** (``required=False``): its failure is shown, with its code,
  but leaves the server ready. The shared state is one when its setting says to count
  per replica while it is down: taking every replica out of the balancer for an outage
  they all work through would turn a degraded service into none.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypedDict

from deepseek_eyes.errors import DeepSeekEyesError

__all__ = [
    "CachedCheck",
    "Check",
    "CheckEntry",
    "Readiness",
    "ReadinessReport",
    "Verdict",
]

_log = logging.getLogger(__name__)

#: The code a check that did not answer within its timeout fails with.
CHECK_TIMEOUT = "GATEWAY_CHECK_TIMEOUT"


class Check(Protocol):
    """One readiness check: returns when ready, raises one of our errors when not."""

    name: str

    async def __call__(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a check found, and when (``time.monotonic()``)."""

    ok: bool
    code: str | None
    at: float
    detail: str | None = None  # a fact the body may show (a backend's kind), never a secret


class CheckEntry(TypedDict, total=False):
    """One check in ``/readyz``'s body."""

    name: str
    status: Literal["ok", "failed"]
    code: str
    age_s: float
    backend: str


class ReadinessReport(TypedDict, total=False):
    """``/readyz``'s body: ``ready`` and every check, or ``not_ready`` and the first failing
    check's code."""

    status: Literal["ready", "not_ready"]
    code: str
    checks: list[CheckEntry]


class CachedCheck:
    """``check`` bounded by ``timeout`` seconds, its verdict kept for ``ttl`` seconds (a
    failed one for ``min(ttl, failed_ttl)``: recovery is seen soon), one run at a time.

    Args:
        detail: a fact the body may show beside the check (``backend: "sqlite"``).
        required: False for an advisory check, whose failure leaves the server ready.
    """

    def __init__(self, check: Check, *, ttl: float, timeout: float,
                 failed_ttl: float = 2.0, detail: str | None = None,
                 required: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = check.name
        self.required = required
        self._check = check
        self._ttl = ttl
        self._failed_ttl = min(ttl, failed_ttl)
        self._timeout = timeout
        self._detail = detail
        self._clock = clock
        self._verdict: Verdict | None = None
        self._running: asyncio.Task[Verdict] | None = None

    def _fresh(self, now: float) -> Verdict | None:
        verdict = self._verdict
        if verdict is None:
            return None
        ttl = self._ttl if verdict.ok else self._failed_ttl
        return verdict if now - verdict.at < ttl else None

    async def verdict(self) -> Verdict:
        """The cached verdict while fresh; else the one of a run (the running one, if any)."""
        fresh = self._fresh(self._clock())
        if fresh is not None:
            return fresh
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._run())
            # A run whose every waiter timed out may still fail: its error is read here,
            # not reported as "never retrieved" when the task is collected.
            self._running.add_done_callback(_retrieve)
        try:
            # shield: a caller that times out does not cancel the run others may wait on
            return await asyncio.wait_for(asyncio.shield(self._running), self._timeout)
        except TimeoutError:
            return Verdict(False, CHECK_TIMEOUT, self._clock(), self._detail)

    async def _run(self) -> Verdict:
        try:
            await self._check()
        except DeepSeekEyesError as exc:
            verdict = Verdict(False, exc.code, self._clock(), self._detail)
            previous = self._verdict
            if previous is None or previous.code != exc.code:
                _log.warning("readiness check %s failed: %s %s", self.name, exc.code,
                             exc.message)
        else:
            verdict = Verdict(True, None, self._clock(), self._detail)
        self._verdict = verdict
        return verdict


def _retrieve(task: asyncio.Task[Verdict]) -> None:
    if not task.cancelled():
        task.exception()


class Readiness:
    """The checks ``/readyz`` runs, in the order they are shown."""

    def __init__(self, checks: Sequence[CachedCheck] = (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._checks = list(checks)
        self._clock = clock

    @property
    def names(self) -> list[str]:
        return [check.name for check in self._checks]

    def add(self, check: CachedCheck) -> None:
        """Register ``check`` (a name already registered is replaced: a backend that takes
        over ``database`` replaces the SQLite check).

        Raises:
            ValueError: a check without a name.
        """
        if not check.name:
            raise ValueError("a readiness check needs a name")
        self._checks = [c for c in self._checks if c.name != check.name] + [check]

    async def report(self) -> ReadinessReport:
        """Every check, run concurrently; ``not_ready`` when any required one failed."""
        waits: list[Awaitable[Verdict]] = [check.verdict() for check in self._checks]
        verdicts = await asyncio.gather(*waits)
        now = self._clock()
        entries: list[CheckEntry] = []
        failed: str | None = None
        for check, verdict in zip(self._checks, verdicts, strict=True):
            entry: CheckEntry = {"name": check.name, "status": "ok" if verdict.ok else "failed",
                                 "age_s": round(max(0.0, now - verdict.at), 3)}
            if verdict.code is not None:
                entry["code"] = verdict.code
                if check.required:
                    failed = failed or verdict.code
            if verdict.detail is not None:
                entry["backend"] = verdict.detail
            entries.append(entry)
        if failed is None:
            return {"status": "ready", "checks": entries}
        return {"status": "not_ready", "code": failed, "checks": entries}
