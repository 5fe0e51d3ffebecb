"""The ordered VisionRouter: from image bytes to validated, cached evidence.

Order of work for one acquisition, each step a row in the attempts log:

1. hash the bytes; if the image is known, look the evidence up for each candidate route
   (a hit makes no route call and no decode);
2. otherwise admit the image (safe decode, blob store) — identity failures stop here,
   whatever the routes;
3. walk the candidate routes in order — base route of a reread, explicit route,
   ``vision.route_priority``, auto-detected models — skipping open circuits and routes that
   failed their probe while an alternative exists;
4. per route: metadata health check (cached for ``health_ttl``), pixel probe (cached for
   ``probe_ttl``; the local engine is exempt), the call (an incomplete SSE stream retries
   once on the same route), canonicalization, the strict gate;
5. at most ``1 + failover_attempts`` routes are tried. One failed route keeps its own
   error code; more raise ``VISION_FAILOVER_EXHAUSTED`` with the structured attempts.

Why operational failures open a circuit but gate failures do not: a timeout or a 500 says
the endpoint is sick and the next image will likely fail too; a schema miss says this one
answer was bad, and the route's next answer may well pass.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from deepseek_eyes.errors import (
    EvidenceError,
    EvidenceIntegrityError,
    FailoverExhaustedError,
    ImageError,
    ProbeFailedError,
    RouteError,
    StoreError,
    VisionError,
)
from deepseek_eyes.settings import VisionSettings
from deepseek_eyes.store.blobs import BlobStore, sha256_hex
from deepseek_eyes.usage import UsageCategory, UsageTracker
from deepseek_eyes.vision.attempts import AttemptLog, OperationLog
from deepseek_eyes.vision.cache import EvidenceCache, EvidenceKey, EvidenceRecord, ImageMeta
from deepseek_eyes.vision.canonical import canonicalize
from deepseek_eyes.vision.evidence import require_valid
from deepseek_eyes.vision.intake import DecodedImage, ImageLimits, decode_image
from deepseek_eyes.vision.probe import GRID, judge_probe, make_challenge, probe_prompts
from deepseek_eyes.vision.prompts import evidence_prompts, target_prompts
from deepseek_eyes.vision.route_state import RouteState, RouteStateStore
from deepseek_eyes.vision.types import RouteAnswer, Variant, VisionRequest, VisionRoute

__all__ = ["Acquisition", "RouteEntry", "RouterPolicy", "VisionRouter"]

#: Above this size the SHA-256 of an image runs in a worker thread, off the event loop.
HASH_IN_THREAD_BYTES = 1 << 20


@dataclass(frozen=True)
class RouterPolicy:
    health_ttl: float = 300.0
    failure_cooldown: float = 60.0
    failover_attempts: int = 2
    probe: bool = True
    probe_ttl: float = 86400.0

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
    route: VisionRoute
    probe: bool | None = None  # per-route override of RouterPolicy.probe

    def probe_mode(self, policy: RouterPolicy) -> str:
        if self.route.probe_exempt:
            return "exempt"
        wanted = policy.probe if self.probe is None else self.probe
        return "required" if wanted else "disabled"


@dataclass(frozen=True)
class Acquisition:
    record: EvidenceRecord
    image: ImageMeta
    cached: bool
    operation_id: str
    attempts: tuple[dict[str, Any], ...]

    @property
    def route(self) -> str:
        return self.record.route


def _question_digest(question: str | None) -> str | None:
    if question is None:
        return None
    return hashlib.sha256(question.strip().encode("utf-8")).hexdigest()


class VisionRouter:
    def __init__(
        self,
        routes: Mapping[str, RouteEntry],
        *,
        settings: VisionSettings,
        auto_routes: Sequence[str] = (),
        cache: EvidenceCache,
        attempts: AttemptLog,
        states: RouteStateStore,
        usage: UsageTracker,
        blobs: BlobStore,
        limits: ImageLimits,
        policy: RouterPolicy | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._routes = dict(routes)
        self._settings = settings
        self._auto = tuple(auto_routes)
        self._cache = cache
        self._attempts = attempts
        self._states = states
        self._usage = usage
        self._blobs = blobs
        self._limits = limits
        self.policy = policy or RouterPolicy.from_settings(settings)
        self._clock = clock
        self._locks: dict[str, asyncio.Lock] = {}

    # ordering ---------------------------------------------------------------
    @property
    def routes(self) -> Mapping[str, RouteEntry]:
        return self._routes

    def order(self, *, explicit: str | None = None, base_route: str | None = None) -> list[str]:
        """Candidate route names, best first.

        Raises:
            VisionError: ``VISION_ROUTE_UNKNOWN`` for an unknown explicit or base route.
        """
        for name in (base_route, explicit):
            if name is not None and name not in self._routes:
                raise VisionError(
                    f"no route is named {name!r}",
                    code="VISION_ROUTE_UNKNOWN",
                    details={"route": name, "known": sorted(self._routes)},
                )
        chosen = explicit or self._settings.route
        names: list[str | None] = [base_route, chosen, *self._settings.route_priority]
        names.extend(self._auto)
        if not any(names):
            # Nothing selected: the configured routes in file order, else the local engine.
            names.extend(r.name for r in self._settings.routes)
            if not any(names):
                names.append("local")
        ordered: list[str] = []
        for name in names:
            if name and name in self._routes and name not in ordered:
                ordered.append(name)
        return ordered

    # acquisition ------------------------------------------------------------
    async def acquire(
        self,
        data: bytes,
        variant: Variant = Variant.EVIDENCE,
        *,
        question: str | None = None,
        route: str | None = None,
        base_route: str | None = None,
    ) -> Acquisition:
        """Evidence for one image: cached if known, else from the first route that passes.

        Raises:
            ImageError: the image was refused at intake (no route was called).
            StoreError: the image could not be stored.
            VisionError: ``VISION_ROUTE_UNKNOWN``, or a single route's own failure code, or
                ``VISION_FAILOVER_EXHAUSTED`` with ``details['attempts']``.
        """
        if variant is Variant.TARGET and not (question and question.strip()):
            raise ValueError("a targeted reread needs a question")
        if variant is Variant.EVIDENCE:
            question = None
        order = self.order(explicit=route, base_route=base_route)
        op = self._attempts.operation("reread" if variant is Variant.TARGET else "see")
        if len(data) > HASH_IN_THREAD_BYTES:
            sha = await anyio.to_thread.run_sync(sha256_hex, data)
        else:
            sha = sha256_hex(data)
        qsha = _question_digest(question)

        meta = self._cache.image_meta(sha)
        if meta is not None:
            hit = self._lookup(op, meta, order, variant, qsha)
            if hit is not None:
                return hit
        decoded = await self._admit(op, data, sha)
        if meta is None:
            meta = self._meta(decoded)
            self._cache.remember_image(meta)
            # The same pixels may be known under another encoding.
            hit = self._lookup(op, meta, order, variant, qsha)
            if hit is not None:
                return hit
        return await self._acquire_from_routes(op, decoded, meta, order, variant, question, qsha)

    @staticmethod
    def _meta(decoded: DecodedImage) -> ImageMeta:
        return ImageMeta(
            decoded.sha256, decoded.pixel_sha256, decoded.width, decoded.height,
            decoded.media_type, decoded.size,
        )

    def _lookup(
        self,
        op: OperationLog,
        meta: ImageMeta,
        order: Sequence[str],
        variant: Variant,
        qsha: str | None,
    ) -> Acquisition | None:
        for name in order:
            key = EvidenceKey(meta.pixel_sha256, name, variant, qsha)
            try:
                record = self._cache.get(key)
            except EvidenceIntegrityError as exc:
                op.record("cache", "tampered", route=name, code=exc.code)
                continue
            if record is not None:
                op.record(
                    "cache", "hit", route=name, image_sha256=meta.sha256,
                    record_sha256=record.record_sha256,
                )
                self._usage.record_estimate(
                    UsageCategory.AVOIDED_REPLAY,
                    record.usage.get("prompt_tokens", 0) + record.usage.get("completion_tokens", 0),
                    source=f"vision-cache:{name}",
                    calls=1,
                )
                return Acquisition(record, meta, True, op.operation_id, tuple(op.entries))
        op.record("cache", "miss", image_sha256=meta.sha256, routes=len(order))
        return None

    async def _admit(self, op: OperationLog, data: bytes, sha: str) -> DecodedImage:
        def admit() -> DecodedImage:
            decoded = decode_image(data, self._limits, sha256=sha)
            self._blobs.put(data, sha256=sha)
            return decoded

        started = time.perf_counter()
        try:
            decoded = await anyio.to_thread.run_sync(admit)
        except (ImageError, StoreError) as exc:
            op.record(
                "intake", "refused", code=exc.code, image_sha256=sha, size=len(data),
                latency_ms=(time.perf_counter() - started) * 1000,
            )
            exc.details.setdefault("image_sha256", sha)
            raise
        op.record(
            "intake", "ok", image_sha256=sha, size=len(data), width=decoded.width,
            height=decoded.height, media_type=decoded.media_type,
            latency_ms=(time.perf_counter() - started) * 1000,
        )
        return decoded

    def _state(self, name: str) -> RouteState:
        return self._states.get(name, self._routes[name].route.fingerprint)

    def _update_state(self, name: str, **changes: Any) -> RouteState:
        return self._states.update(name, self._routes[name].route.fingerprint, **changes)

    def _lock(self, name: str) -> asyncio.Lock:
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = asyncio.Lock()
        return lock

    async def _acquire_from_routes(
        self,
        op: OperationLog,
        decoded: DecodedImage,
        meta: ImageMeta,
        order: Sequence[str],
        variant: Variant,
        question: str | None,
        qsha: str | None,
    ) -> Acquisition:
        now = self._clock()
        eligible: list[str] = []
        open_circuits: list[str] = []
        failures: list[VisionError | EvidenceError] = []
        for name in order:
            state = self._state(name)
            mode = self._routes[name].probe_mode(self.policy)
            if (
                mode == "required"
                and state.probe_fresh(now, self.policy.probe_ttl)
                and state.probe_ok is False
            ):
                op.record("probe", "ineligible", route=name, code="VISION_PROBE_FAILED")
                failures.append(
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
            # No alternative is left: an open circuit is tried rather than failing blind.
            for name in open_circuits:
                op.record("circuit", "half_open", route=name)
            eligible = open_circuits

        budget = 1 + self.policy.failover_attempts
        for name in eligible[:budget]:
            try:
                return await self._try_route(op, name, decoded, meta, variant, question, qsha)
            except (RouteError, ProbeFailedError, EvidenceError) as exc:
                failures.append(exc)
        if len(eligible) > budget:
            op.record(
                "failover", "budget_exhausted", tried=budget, untried=len(eligible) - budget
            )
        raise self._failure(op, failures)

    def _failure(
        self, op: OperationLog, failures: Sequence[VisionError | EvidenceError]
    ) -> VisionError | EvidenceError:
        attempts = list(op.entries)
        if len(failures) == 1:
            only = failures[0]
            only.details["attempts"] = attempts
            only.details["operation_id"] = op.operation_id
            return only
        if not failures:
            return VisionError("no vision route is configured or eligible", details={
                "attempts": attempts, "operation_id": op.operation_id,
            })
        summary = [
            {"route": f.details.get("route"), "code": f.code} for f in failures
        ]
        return FailoverExhaustedError(
            f"all {len(failures)} vision routes failed",
            details={"failures": summary, "attempts": attempts, "operation_id": op.operation_id},
        )

    def _request(
        self, decoded: DecodedImage, variant: Variant, question: str | None
    ) -> VisionRequest:
        payload, media_type = decoded.route_payload()
        if variant is Variant.TARGET and question is not None:
            system, user = target_prompts(decoded.width, decoded.height, question)
        else:
            system, user = evidence_prompts(decoded.width, decoded.height)
        return VisionRequest(
            purpose="target" if variant is Variant.TARGET else "evidence",
            image_bytes=payload,
            media_type=media_type,
            width=decoded.width,
            height=decoded.height,
            system_prompt=system,
            user_prompt=user,
            variant=variant,
            question=question,
            pixels=decoded.pixels,
        )

    def _route_failed(self, name: str, exc: RouteError) -> None:
        changes: dict[str, Any] = {"last_code": exc.code}
        if exc.operational:
            changes["circuit_open_until"] = self._clock() + self.policy.failure_cooldown
        self._update_state(name, **changes)

    async def _try_route(
        self,
        op: OperationLog,
        name: str,
        decoded: DecodedImage,
        meta: ImageMeta,
        variant: Variant,
        question: str | None,
        qsha: str | None,
    ) -> Acquisition:
        entry = self._routes[name]
        route = entry.route
        async with self._lock(name):
            await self._ensure_health(op, name, route)
            await self._ensure_probe(op, name, entry)
        request = self._request(decoded, variant, question)
        answer = await self._call(op, name, route, request)

        raw: str | dict[str, Any] | None = answer.value if answer.value is not None else answer.text
        started = time.perf_counter()
        try:
            if raw is None:
                raise EvidenceError(
                    "the route returned no content", code="EVIDENCE_NOT_FOUND",
                    details={"route": name},
                )
            canonical = canonicalize(
                raw, variant, image_size=(decoded.width, decoded.height),
                box_convention=route.box_convention,
            )
            evidence = require_valid(canonical.value, variant)
        except EvidenceError as exc:
            exc.details.setdefault("route", name)
            errors = exc.details.get("errors") or []
            op.record(
                "gate", "fail", route=name, code=exc.code,
                pointers=[{"pointer": e["pointer"], "keyword": e["keyword"]} for e in errors[:20]],
                latency_ms=(time.perf_counter() - started) * 1000,
            )
            raise
        repairs = tuple({"kind": r.kind, "pointer": r.pointer} for r in canonical.repairs)
        op.record(
            "gate", "ok", route=name, repairs=list(repairs),
            latency_ms=(time.perf_counter() - started) * 1000,
        )
        record = EvidenceRecord.build(
            EvidenceKey(meta.pixel_sha256, name, variant, qsha),
            image_sha256=meta.sha256,
            model=answer.model or route.model,
            evidence=evidence,
            repairs=repairs,
            usage={
                "prompt_tokens": answer.usage.prompt_tokens,
                "completion_tokens": answer.usage.completion_tokens,
            },
            created_at=self._clock(),
        )
        stored = self._cache.put(record)
        if self._state(name).circuit_open_until is not None:
            self._update_state(name, circuit_open_until=None, last_code=None)
        return Acquisition(stored, meta, False, op.operation_id, tuple(op.entries))

    async def _ensure_health(self, op: OperationLog, name: str, route: VisionRoute) -> None:
        now = self._clock()
        if self._state(name).health_fresh(now, self.policy.health_ttl):
            op.record("health", "cached", route=name)
            return
        started = time.perf_counter()
        try:
            await route.check_health()
        except RouteError as exc:
            exc.details.setdefault("route", name)
            op.record(
                "health", "fail", route=name, code=exc.code,
                latency_ms=(time.perf_counter() - started) * 1000,
            )
            self._update_state(name, health_ok=False, health_at=now, health_code=exc.code)
            self._route_failed(name, exc)
            raise
        op.record("health", "ok", route=name, latency_ms=(time.perf_counter() - started) * 1000)
        self._update_state(name, health_ok=True, health_at=now, health_code=None)

    async def _ensure_probe(self, op: OperationLog, name: str, entry: RouteEntry) -> None:
        mode = entry.probe_mode(self.policy)
        if mode != "required":
            op.record("probe", mode, route=name)
            return
        state = self._state(name)
        if state.probe_fresh(self._clock(), self.policy.probe_ttl) and state.probe_ok:
            op.record("probe", "cached", route=name)
            return
        await self.probe(name, op=op)

    async def probe(self, name: str, *, op: OperationLog | None = None) -> int:
        """Run a fresh pixel probe on ``name``; returns the cells named right (9 = pass).

        Raises:
            ProbeFailedError: fewer than nine cells were right; the route is ineligible
                until ``probe_ttl`` passes or a later probe passes.
            RouteError: the probe call itself failed (an operational failure).
        """
        op = op or self._attempts.operation("probe")
        route = self._routes[name].route
        challenge = make_challenge()
        system, user = probe_prompts()
        request = VisionRequest(
            purpose="probe", image_bytes=challenge.png, media_type="image/png",
            width=challenge.width, height=challenge.height,
            system_prompt=system, user_prompt=user,
        )
        started = time.perf_counter()
        answer = await self._call(op, name, route, request, phase="probe")
        latency = (time.perf_counter() - started) * 1000
        correct = judge_probe(answer.text or "", challenge)
        now = self._clock()
        if correct < GRID * GRID:
            op.record(
                "probe", "fail", route=name, code="VISION_PROBE_FAILED", correct=correct,
                latency_ms=latency,
            )
            self._update_state(
                name, probe_ok=False, probe_at=now, probe_code="VISION_PROBE_FAILED",
                last_code="VISION_PROBE_FAILED",
            )
            raise ProbeFailedError(
                f"route {name} named {correct} of 9 probe cells; it does not read pixels",
                details={"route": name, "correct": correct},
            )
        op.record("probe", "pass", route=name, correct=correct, latency_ms=latency)
        self._update_state(name, probe_ok=True, probe_at=now, probe_code=None)
        return correct

    async def _call(
        self,
        op: OperationLog,
        name: str,
        route: VisionRoute,
        request: VisionRequest,
        *,
        phase: str = "call",
    ) -> RouteAnswer:
        """One route call (``phase`` "call" or "probe"); an incomplete SSE stream is retried
        once on the same route, and both tries stay visible in the attempts."""
        category = UsageCategory.PROBE if phase == "probe" else UsageCategory.VISION
        for attempt in (1, 2):
            started = time.perf_counter()
            try:
                answer = await route.call(request)
            except RouteError as exc:
                exc.details.setdefault("route", name)
                op.record(
                    phase, "error" if phase == "probe" else "fail", route=name, code=exc.code,
                    try_number=attempt, latency_ms=(time.perf_counter() - started) * 1000,
                )
                if exc.code == "VISION_ROUTE_STREAM_INCOMPLETE" and attempt == 1:
                    op.record("retry", "same_route", route=name, code=exc.code)
                    continue
                self._route_failed(name, exc)
                raise
            self._usage.record_exact(
                category, answer.usage, source=name, model=answer.model or route.model
            )
            if phase == "probe":
                return answer
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
        raise AssertionError("unreachable")  # pragma: no cover

    # status -----------------------------------------------------------------
    def status(self) -> list[dict[str, Any]]:
        """Each known route with its order, health, circuit and probe state."""
        now = self._clock()
        order = self.order()
        names = order + [n for n in self._routes if n not in order]
        out: list[dict[str, Any]] = []
        for name in names:
            entry = self._routes[name]
            state = self._state(name)
            mode = entry.probe_mode(self.policy)
            out.append({
                "name": name,
                "order": order.index(name) + 1 if name in order else None,
                "kind": entry.route.kind,
                "model": entry.route.model,
                "health": _health_word(state, now, self.policy.health_ttl),
                "health_code": state.health_code,
                "circuit": "open" if state.circuit_open(now) else "closed",
                "circuit_open_for_s": (
                    round((state.circuit_open_until or now) - now, 1)
                    if state.circuit_open(now) else 0
                ),
                "last_code": state.last_code,
                "probe": mode if mode != "required" else _probe_word(
                    state, now, self.policy.probe_ttl
                ),
            })
        return out

    async def probe_all(self) -> list[dict[str, Any]]:
        """Health-check and probe every route now, ignoring cached results."""
        results: list[dict[str, Any]] = []
        for name, entry in self._routes.items():
            op = self._attempts.operation("probe")
            outcome: dict[str, Any] = {"name": name, "ok": True, "code": None}
            try:
                await self._ensure_health_fresh(op, name, entry.route)
                if entry.probe_mode(self.policy) == "exempt":
                    op.record("probe", "exempt", route=name)
                else:
                    outcome["correct"] = await self.probe(name, op=op)
            except (RouteError, ProbeFailedError) as exc:
                outcome.update(ok=False, code=exc.code)
            outcome["attempts"] = list(op.entries)
            results.append(outcome)
        return results

    async def _ensure_health_fresh(self, op: OperationLog, name: str, route: VisionRoute) -> None:
        self._update_state(name, health_at=None)
        await self._ensure_health(op, name, route)

    async def aclose(self) -> None:
        for entry in self._routes.values():
            await entry.route.aclose()


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

