"""Per-route trust: health checks, circuits and pixel probes, and the guarded route call.

The router decides *which* route to try; the guard decides whether a route may be tried
and runs the call. Its state (health, probe verdict, circuit) lives in
:class:`~deepseek_eyes.vision.routing.state.RouteStateStore`, so it survives the process and is
shared with other processes on the same data directory.

Two rules a newcomer would otherwise bend:

* Only operational failures (timeouts, connection errors, HTTP errors, cut streams) open a
  circuit. A probe *verdict* is different: a route that names the wrong colours is
  ineligible, while a probe that merely failed to arrive is an operational failure like
  any other.
* A verdict's lifetime depends on its outcome. A pass is trusted for ``probe_ttl`` (a day:
  probing costs a call, and a route that read pixels yesterday still does). A failure
  stands only for ``failure_cooldown``, then the route is probed afresh: one bad answer (a
  model that misnamed a colour once, a proxy fixed since) must not lock a route out for a
  day.
* An SSE stream cut before its finish reason is retried once on the same route, for probes
  and evidence alike; both tries stay visible in the attempts.
* A probe runs once across replicas. Its verdict is a row of the store every replica
  reads, and the probe itself runs under a single-flight lease
  (:mod:`~deepseek_eyes.vision.routing.shared_flight`, on the shared state): the replica
  that gets the lease probes, the others wait for its verdict to appear and use it
  (``probe shared`` in their attempts) instead of paying for a probe of their own. Without
  shared state (one process, or Redis down) a process probes on its own, serialized per
  route.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from deepseek_eyes import telemetry
from deepseek_eyes.errors import ERROR_CODES, DeepSeekEyesError, ProbeFailedError, RouteError
from deepseek_eyes.settings import VisionSettings
from deepseek_eyes.store.state.leases import LocalLeases, lease_key
from deepseek_eyes.telemetry.conventions import (
    REQUEST_MODEL,
    USAGE_INPUT_TOKENS,
    USAGE_OUTPUT_TOKENS,
)
from deepseek_eyes.telemetry.latency import observe as observe_latency
from deepseek_eyes.usage import UsageCategory, UsageTracker
from deepseek_eyes.vision.routing.attempts import Attempt, AttemptLog, OperationLog
from deepseek_eyes.vision.routing.shared_flight import SharedFlight
from deepseek_eyes.vision.routing.state import RouteState, RouteStateStore
from deepseek_eyes.vision.types import RouteAnswer, VisionRequest, VisionRoute

__all__ = ["ProbeReport", "RouteEntry", "RouteGuard", "RouteStatus", "RouterPolicy", "Screening"]


class RouteStatus(TypedDict):
    """One route as ``deepseek-eyes routes`` shows it."""

    name: str
    order: int | None
    kind: str
    model: str | None
    health: str
    health_code: str | None
    circuit: str
    circuit_open_for_s: float
    last_code: str | None
    probe: str


class ProbeReport(TypedDict):
    """One route's forced health check and probe (``routes --probe``)."""

    name: str
    ok: bool
    code: str | None
    attempts: list[Attempt]
    correct: NotRequired[int]  # probe cells named right (9 = pass)


@dataclass(frozen=True)
class RouterPolicy:
    """How long health and probe verdicts stand, and how far a request fails over."""

    health_ttl: float = 300.0
    failure_cooldown: float = 60.0
    failover_attempts: int = 2
    probe: bool = True
    probe_ttl: float = 86400.0

    def verdict_ttl(self, *, ok: bool) -> float:
        """How long a probe verdict stands: a pass for ``probe_ttl``, a failure only for
        ``failure_cooldown`` (then the route is probed again)."""
        return self.probe_ttl if ok else self.failure_cooldown

    @classmethod
    def from_settings(cls, settings: VisionSettings) -> RouterPolicy:
        return cls(
            health_ttl=settings.health_ttl,
            failure_cooldown=settings.failure_cooldown,
            failover_attempts=settings.failover_attempts,
            probe=settings.probe,
            probe_ttl=settings.probe_ttl,
        )


@dataclass(frozen=True)
class RouteEntry:
    """A route as the router holds it, with its probe override."""

    route: VisionRoute
    probe: bool | None = None  # per-route override of RouterPolicy.probe

    def probe_mode(self, policy: RouterPolicy) -> str:
        if self.route.probe_exempt:
            return "exempt"
        wanted = policy.probe if self.probe is None else self.probe
        return "required" if wanted else "disabled"


@dataclass(frozen=True)
class Screening:
    """Which candidate routes may be tried now, in order, and which were set aside."""

    eligible: tuple[str, ...]
    probe_failed: tuple[ProbeFailedError, ...]


class RouteGuard:
    def __init__(
        self,
        routes: Mapping[str, RouteEntry],
        *,
        states: RouteStateStore,
        usage: UsageTracker,
        attempts: AttemptLog,
        policy: RouterPolicy,
        flight: SharedFlight | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``flight`` runs each probe once across the replicas sharing its leases
        (default: this process alone)."""
        self._routes = routes
        self._flight = flight or SharedFlight(LocalLeases())
        self._states = states
        self._usage = usage
        self._attempts = attempts
        self.policy = policy
        self._clock = clock
        self._locks: dict[str, asyncio.Lock] = {}

    # state ------------------------------------------------------------------
    def state(self, name: str) -> RouteState:
        return self._states.get(name, self._routes[name].route.fingerprint)

    def _update(self, name: str, **changes: Any) -> RouteState:
        return self._states.update(name, self._routes[name].route.fingerprint, **changes)

    def failed(self, name: str, exc: RouteError) -> None:
        """Remember a failure; an operational one opens the circuit for the cooldown."""
        changes: dict[str, Any] = {"last_code": exc.code}
        if exc.operational:
            changes["circuit_open_until"] = self._clock() + self.policy.failure_cooldown
        self._update(name, **changes)

    def succeeded(self, name: str) -> None:
        """A validated answer closes the route's circuit."""
        if self.state(name).circuit_open_until is not None:
            self._update(name, circuit_open_until=None, last_code=None)

    def screen(self, op: OperationLog, order: Sequence[str]) -> Screening:
        """Set aside routes whose probe failed and routes whose circuit is open; when only
        open circuits are left, they are tried rather than failing blind."""
        now = self._clock()
        eligible: list[str] = []
        open_circuits: list[str] = []
        probe_failed: list[ProbeFailedError] = []
        for name in order:
            state = self.state(name)
            mode = self._routes[name].probe_mode(self.policy)
            if (
                mode == "required"
                and state.probe_ok is False
                and state.probe_fresh(now, self.policy.verdict_ttl(ok=False))
            ):
                op.record("probe", "ineligible", route=name, code="VISION_PROBE_FAILED")
                probe_failed.append(
                    ProbeFailedError(
                        f"route {name} failed its pixel probe and is not trusted",
                        details={"route": name},
                    )
                )
                continue
            if state.circuit_open(now):
                remaining = (state.circuit_open_until or now) - now
                op.record(
                    "circuit", "skip", route=name, code=state.last_code,
                    open_for_ms=round(remaining * 1000),
                )
                open_circuits.append(name)
                continue
            eligible.append(name)
        if not eligible and open_circuits:
            for name in open_circuits:
                op.record("circuit", "half_open", route=name)
            eligible = open_circuits
        return Screening(tuple(eligible), tuple(probe_failed))

    # trust ------------------------------------------------------------------
    def _lock(self, name: str) -> asyncio.Lock:
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = asyncio.Lock()
        return lock

    async def admit(self, op: OperationLog, name: str) -> None:
        """Health check (cached for ``health_ttl``) and probe (cached for ``probe_ttl``),
        serialized per route so concurrent images do not probe twice.

        Raises:
            RouteError: the health check or the probe call failed.
            ProbeFailedError: the route named the wrong colours.
        """
        async with self._lock(name):
            await self._ensure_health(op, name)
            await self._ensure_probe(op, name)

    async def _ensure_health(self, op: OperationLog, name: str, *, force: bool = False) -> None:
        now = self._clock()
        if not force and self.state(name).health_fresh(now, self.policy.health_ttl):
            op.record("health", "cached", route=name)
            return
        started = time.perf_counter()
        try:
            await self._routes[name].route.check_health()
        except RouteError as exc:
            exc.details.setdefault("route", name)
            op.record(
                "health", "fail", route=name, code=exc.code,
                latency_ms=(time.perf_counter() - started) * 1000,
            )
            self._update(name, health_ok=False, health_at=now, health_code=exc.code)
            self.failed(name, exc)
            raise
        op.record("health", "ok", route=name, latency_ms=(time.perf_counter() - started) * 1000)
        self._update(name, health_ok=True, health_at=now, health_code=None)

    async def _ensure_probe(self, op: OperationLog, name: str) -> None:
        mode = self._routes[name].probe_mode(self.policy)
        if mode != "required":
            op.record("probe", mode, route=name)
            return
        state = self.state(name)
        if state.probe_ok and state.probe_fresh(self._clock(), self.policy.verdict_ttl(ok=True)):
            op.record("probe", "cached", route=name)
            return
        await self._probe_once(op, name)

    def _fresh_verdict(self, name: str) -> RouteState | None:
        """The route's probe verdict while it stands (a pass for ``probe_ttl``, a failure
        for ``failure_cooldown``), else None."""
        state = self.state(name)
        if state.probe_ok is None:
            return None
        fresh = state.probe_fresh(self._clock(), self.policy.verdict_ttl(ok=state.probe_ok))
        return state if fresh else None

    async def _probe_once(self, op: OperationLog, name: str) -> None:
        """:meth:`probe` here under the route's probe lease, or the verdict another replica
        stores meanwhile (see the module docstring).

        Raises:
            ProbeFailedError: this probe, or another replica's, failed the route.
            RouteError: the probe call failed, here or on the replica that held the lease
                (its code, ``details["flight"] = "remote"``).
        """
        here: list[bool] = []

        async def probe_here(_lease: object) -> RouteState:
            here.append(True)
            await self.probe(name, op=op)
            return self.state(name)

        key = lease_key("probe", name, self._routes[name].route.fingerprint)
        try:
            outcome = await self._flight.run(key, probe_here,
                                             lambda: self._fresh_verdict(name))
        except DeepSeekEyesError as exc:
            if exc.details.get("flight") != "remote":
                raise
            op.record("probe", "shared", route=name, code=exc.code)
            raise _remote_probe_failure(name, exc.code) from exc
        if here:
            return  # probed here (its own attempts say how)
        verdict = outcome.value
        op.record("probe", "shared", route=name, waited_ms=round(outcome.waited_ms, 1),
                  code=verdict.probe_code)
        if not verdict.probe_ok:
            raise ProbeFailedError(f"route {name} failed its pixel probe on another replica "
                                   "and is not trusted",
                                   details={"route": name, "flight": "remote"})

    async def probe(self, name: str, *, op: OperationLog | None = None) -> int:
        """Run a fresh pixel probe on ``name``; returns the cells named right (9 = pass).

        Raises:
            ProbeFailedError: fewer than nine cells were right; the route is ineligible
                until ``failure_cooldown`` passes (then it is probed again) or a later
                probe passes.
            RouteError: the probe call itself failed (an operational failure).
        """
        # Imported here: only a probe draws and judges the challenge.
        from deepseek_eyes.vision.routing.probe import (
            GRID,
            judge_probe,
            make_challenge,
            probe_prompts,
        )

        op = op or self._attempts.operation("probe")
        challenge = make_challenge()
        system, user = probe_prompts()
        request = VisionRequest(
            purpose="probe", image_bytes=challenge.png, media_type="image/png",
            width=challenge.width, height=challenge.height,
            system_prompt=system, user_prompt=user,
        )
        started = time.perf_counter()
        answer = await self.call(op, name, request, phase="probe")
        latency = (time.perf_counter() - started) * 1000
        correct = judge_probe(answer.text or "", challenge)
        now = self._clock()
        if correct < GRID * GRID:
            op.record(
                "probe", "fail", route=name, code="VISION_PROBE_FAILED", correct=correct,
                latency_ms=latency,
            )
            self._update(
                name, probe_ok=False, probe_at=now, probe_code="VISION_PROBE_FAILED",
                last_code="VISION_PROBE_FAILED",
            )
            raise ProbeFailedError(
                f"route {name} named {correct} of 9 probe cells; it does not read pixels",
                details={"route": name, "correct": correct},
            )
        op.record("probe", "pass", route=name, correct=correct, latency_ms=latency)
        self._update(name, probe_ok=True, probe_at=now, probe_code=None)
        return correct

    # the call ---------------------------------------------------------------
    async def call(
        self, op: OperationLog, name: str, request: VisionRequest, *, phase: str = "call"
    ) -> RouteAnswer:
        """One route call (``phase`` "call" or "probe"), retried once on an incomplete
        stream; exact provider usage is recorded under vision or probe, and a call to the
        embedded local engine (no provider, no tokens) is counted under local_ocr.

        Raises:
            RouteError: the route's own code; operational failures open the circuit.
        """
        route = self._routes[name].route
        category = UsageCategory.PROBE if phase == "probe" else UsageCategory.VISION
        for attempt in (1, 2):
            started = time.perf_counter()
            try:
                with telemetry.span(f"vision.{phase} {name}", {
                        "deepseek_eyes.vision.route": name,
                        "deepseek_eyes.vision.route_kind": route.kind,
                        "deepseek_eyes.vision.try": attempt,
                        REQUEST_MODEL: route.model}) as span:
                    answer = await route.call(request)
                    if span is not None:
                        span.set_attributes({
                            USAGE_INPUT_TOKENS: answer.usage.prompt_tokens,
                            USAGE_OUTPUT_TOKENS: answer.usage.completion_tokens})
            except RouteError as exc:
                exc.details.setdefault("route", name)
                took = time.perf_counter() - started
                observe_latency("vision", name, "probe_error" if phase == "probe" else "fail",
                                took)
                op.record(
                    phase, "error" if phase == "probe" else "fail", route=name, code=exc.code,
                    try_number=attempt, latency_ms=took * 1000,
                )
                if exc.code == "VISION_ROUTE_STREAM_INCOMPLETE" and attempt == 1:
                    op.record("retry", "same_route", route=name, code=exc.code)
                    continue
                self.failed(name, exc)
                raise
            if route.kind == "local":
                self._usage.count(UsageCategory.LOCAL_OCR, source=name)
            else:
                self._usage.record_exact(
                    category, answer.usage, source=name, model=answer.model or route.model
                )
            observe_latency("vision", name, "probe_ok" if phase == "probe" else "ok",
                            time.perf_counter() - started)
            if phase == "call":
                text = answer.text or ""
                op.record(
                    "call", "ok", route=name, try_number=attempt, model=answer.model,
                    streamed=answer.streamed, response_bytes=len(text.encode()),
                    response_sha256=hashlib.sha256(text.encode()).hexdigest() if text else None,
                    prompt_tokens=answer.usage.prompt_tokens,
                    completion_tokens=answer.usage.completion_tokens,
                    latency_ms=(time.perf_counter() - started) * 1000,
                )
            return answer
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    # reporting --------------------------------------------------------------
    def status(self, order: Sequence[str]) -> list[RouteStatus]:
        """Each route, ordered ones first, with health, circuit and probe state."""
        now = self._clock()
        names = list(order) + [n for n in self._routes if n not in order]
        out: list[RouteStatus] = []
        for name in names:
            entry = self._routes[name]
            state = self.state(name)
            mode = entry.probe_mode(self.policy)
            is_open = state.circuit_open(now)
            out.append({
                "name": name,
                "order": order.index(name) + 1 if name in order else None,
                "kind": entry.route.kind,
                "model": entry.route.model,
                "health": _health_word(state, now, self.policy.health_ttl),
                "health_code": state.health_code,
                "circuit": "open" if is_open else "closed",
                "circuit_open_for_s": (
                    round((state.circuit_open_until or now) - now, 1) if is_open else 0
                ),
                "last_code": state.last_code,
                "probe": mode if mode != "required" else _probe_word(
                    state, now, self.policy.verdict_ttl(ok=bool(state.probe_ok))
                ),
            })
        return out

    async def probe_all(self) -> list[ProbeReport]:
        """Health-check and probe every route now, ignoring cached results."""
        results: list[ProbeReport] = []
        for name, entry in self._routes.items():
            op = self._attempts.operation("probe")
            outcome: ProbeReport = {"name": name, "ok": True, "code": None, "attempts": []}
            try:
                await self._ensure_health(op, name, force=True)
                if entry.probe_mode(self.policy) == "exempt":
                    op.record("probe", "exempt", route=name)
                else:
                    outcome["correct"] = await self.probe(name, op=op)
            except (RouteError, ProbeFailedError) as exc:
                outcome["ok"], outcome["code"] = False, exc.code
            outcome["attempts"] = list(op.entries)
            results.append(outcome)
        return results


def _remote_probe_failure(name: str, code: str) -> DeepSeekEyesError:
    """What a waiter raises for the code the probe on the replica that held the lease
    failed with: the route's own failure, as if it had probed (the walk fails over)."""
    details = {"route": name, "flight": "remote"}
    if code == "VISION_PROBE_FAILED":
        return ProbeFailedError(f"route {name} failed its pixel probe on another replica "
                                "and is not trusted", details=details)
    return RouteError(f"route {name}'s probe on another replica failed ({code})",
                      code=code if code.startswith("VISION_ROUTE_") and code in ERROR_CODES
                      else "VISION_ROUTE_UNAVAILABLE", details=details)


def _health_word(state: RouteState, now: float, ttl: float) -> str:
    if state.health_ok is None or state.health_at is None:
        return "unknown"
    if not state.health_ok:
        return "failed"
    return "ok" if now - state.health_at < ttl else "stale"


def _probe_word(state: RouteState, now: float, ttl: float) -> str:
    if state.probe_ok is None or state.probe_at is None:
        return "untested"
    if now - state.probe_at >= ttl:
        return "expired"
    return "passed" if state.probe_ok else "failed"
