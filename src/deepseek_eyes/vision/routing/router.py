"""The ordered VisionRouter: from image bytes to validated, cached evidence.

Order of work for one acquisition, each step a row in the attempts log:

1. hash the bytes; if the image is known, look the evidence up for each candidate route
   (a hit makes no route call and no decode);
2. otherwise admit the image (safe decode, blob store) — identity failures stop here,
   whatever the routes;
3. walk the candidate routes in order — base route of a reread, explicit route,
   ``vision.route_priority``, the other configured routes, auto-detected models
   (:func:`~deepseek_eyes.vision.routing.order.route_order`) — skipping open circuits and
   routes that failed their probe while an alternative exists;
4. per route: metadata health check (cached for ``health_ttl``), pixel probe (cached for
   ``probe_ttl``; the local engine is exempt), the call (an incomplete SSE stream retries
   once on the same route), canonicalization, the strict gate;
5. at most ``1 + failover_attempts`` routes are tried. One failed route keeps its own
   error code; more raise ``VISION_FAILOVER_EXHAUSTED`` with the structured attempts.

Concurrent acquisitions of the same work (bytes, variant, question, candidate routes) run
these steps once and share the outcome (:mod:`deepseek_eyes.vision.routing.flight`).

Why operational failures open a circuit but gate failures do not: a timeout or a 500 says
the endpoint is sick and the next image will likely fail too; a schema miss says this one
answer was bad, and the route's next answer may well pass. Health, probe, circuit and the
guarded call itself live in :mod:`deepseek_eyes.vision.routing.guard`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio

from deepseek_eyes.errors import (
    DeepSeekEyesError,
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
from deepseek_eyes.vision.evidence.cache import (
    EvidenceCache,
    EvidenceKey,
    EvidenceRecord,
    ImageMeta,
)
from deepseek_eyes.vision.evidence.canonical import canonicalize
from deepseek_eyes.vision.evidence.gate import require_valid
from deepseek_eyes.vision.intake.decode import DecodedImage, ImageLimits, decode_image
from deepseek_eyes.vision.routes.prompts import evidence_prompts, prompt_fingerprint, target_prompts
from deepseek_eyes.vision.routing.attempts import Attempt, AttemptLog, OperationLog
from deepseek_eyes.vision.routing.flight import FlightOutcome, SingleFlight
from deepseek_eyes.vision.routing.guard import (
    ProbeReport,
    RouteEntry,
    RouteGuard,
    RouterPolicy,
    RouteStatus,
)
from deepseek_eyes.vision.routing.order import route_order
from deepseek_eyes.vision.routing.registry import AutoRoutes
from deepseek_eyes.vision.routing.state import RouteStateStore
from deepseek_eyes.vision.types import Variant, VisionRequest, VisionRoute

__all__ = ["Acquisition", "VisionRouter"]

#: Above this size the SHA-256 of an image runs in a worker thread, off the event loop.
HASH_IN_THREAD_BYTES = 1 << 20


#: What decides an acquisition's outcome: image bytes, variant, question digest, routes.
FlightKey = tuple[str, Variant, str | None, tuple[str, ...]]


@dataclass(frozen=True)
class Acquisition:
    """One acquisition's evidence. ``cached``: this acquisition called no route (a cache
    hit, or it joined one in flight); ``joined``: it waited on a concurrent acquisition of
    the same work, whose operation its one attempts row names."""

    record: EvidenceRecord
    image: ImageMeta
    cached: bool
    operation_id: str
    attempts: tuple[Attempt, ...]
    joined: bool = False

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
        auto_source: AutoRoutes | None = None,
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
        self._auto_source = auto_source
        self._cache = cache
        self._attempts = attempts
        self._usage = usage
        self._blobs = blobs
        self._limits = limits
        self.policy = policy or RouterPolicy.from_settings(settings)
        self._clock = clock
        self.guard = RouteGuard(
            self._routes, states=states, usage=usage, attempts=attempts,
            policy=self.policy, clock=clock,
        )
        self._flights: SingleFlight[FlightKey, Acquisition] = SingleFlight()
        self._fingerprints: dict[str, tuple[VisionRoute, str]] = {}

    # ordering ---------------------------------------------------------------
    @property
    def routes(self) -> Mapping[str, RouteEntry]:
        return self._routes

    def order(self, *, explicit: str | None = None, base_route: str | None = None) -> list[str]:
        """Candidate route names, best first, as :func:`route_order` ranks them: base route,
        explicit route, ``vision.route``, priority, the other configured routes,
        auto-detected ones. A base route that no longer exists is skipped.

        Raises:
            VisionError: ``VISION_ROUTE_UNKNOWN`` for an unknown explicit route.
        """
        return route_order(
            known=self._routes,
            configured=[r.name for r in self._settings.routes],
            priority=self._settings.route_priority,
            selected=self._settings.route,
            auto=self._auto,
            explicit=explicit,
            base_route=base_route,
        )

    async def refresh_routes(self) -> None:
        """Bring the auto-detected routes up to date with the model catalog (``/models``,
        cached by the catalog); nothing without auto-detection. Acquisitions do this
        themselves; call it before :meth:`status` or :meth:`probe_all` to see them."""
        if self._auto_source is not None:
            self._auto = await self._auto_source.refresh(self._routes)

    def cache_fingerprint(self, name: str) -> str:
        """What evidence from ``name`` is cached under: the route's answer fingerprint
        (endpoint, model, options; engine identity) with the prompt and schema version.

        Kept per route object: a route's identity is fixed when it is built (new settings
        build new routes), and every cache lookup asks for it."""
        route = self._routes[name].route
        known = self._fingerprints.get(name)
        if known is not None and known[0] is route:
            return known[1]
        identity = f"{route.answer_fingerprint}\n{prompt_fingerprint()}"
        value = hashlib.sha256(identity.encode()).hexdigest()
        self._fingerprints[name] = (route, value)
        return value

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

        Concurrent calls for the same bytes, variant, question and candidate routes share
        one acquisition: the caller that finds it in flight gets the same record with
        ``cached`` and ``joined`` set, or a copy of the same failure (its ``operation_id``
        its own, ``joined_operation_id`` and the attempts those of the shared operation).

        Raises:
            ImageError: the image was refused at intake (no route was called).
            StoreError: the image could not be stored.
            VisionError: ``VISION_ROUTE_UNKNOWN``, or a single route's own failure code, or
                ``VISION_FAILOVER_EXHAUSTED`` with ``details['attempts']``.
        """
        await self.refresh_routes()
        if len(data) > HASH_IN_THREAD_BYTES:
            sha = await anyio.to_thread.run_sync(sha256_hex, data)
        else:
            sha = sha256_hex(data)
        return await self._flight(
            sha, data, variant, question=question, route=route, base_route=base_route
        )

    async def acquire_stored(
        self,
        sha256: str,
        variant: Variant = Variant.EVIDENCE,
        *,
        question: str | None = None,
        route: str | None = None,
        base_route: str | None = None,
    ) -> Acquisition:
        """Like :meth:`acquire`, for an image already admitted to the blob store.

        The image is known by its hash, so nothing is read or hashed for a cache hit; a
        miss reads the blob in a worker thread (checked against its address).

        Raises:
            StoreError: ``STORE_BLOB_MISSING`` / ``STORE_BLOB_CORRUPT`` on a miss whose
                blob is gone or altered; otherwise as :meth:`acquire`.
        """
        await self.refresh_routes()
        return await self._flight(
            sha256, None, variant, question=question, route=route, base_route=base_route
        )

    async def _flight(
        self,
        sha: str,
        data: bytes | None,
        variant: Variant,
        *,
        question: str | None,
        route: str | None,
        base_route: str | None,
    ) -> Acquisition:
        """One acquisition per image, variant, question and candidate routes at a time.

        A known image whose evidence is cached is answered here, before the single-flight:
        a hit needs no coordination, and it is the path repeated most (one memory or index
        lookup, one attempt row)."""
        if variant is Variant.TARGET and not (question and question.strip()):
            raise ValueError("a targeted reread needs a question")
        if variant is Variant.EVIDENCE:
            question = None
        order = self.order(explicit=route, base_route=base_route)
        qsha = _question_digest(question)
        op = self._attempts.operation("reread" if variant is Variant.TARGET else "see")
        meta = self._cache.image_meta(sha)
        if meta is not None:
            hit = self._lookup(op, meta, order, variant, qsha, record_miss=False)
            if hit is not None:
                return hit
        outcome = await self._flights.run(
            (sha, variant, qsha, tuple(order)),
            lambda: self._acquire_once(op, sha, data, variant, order, question, qsha),
        )
        return self._joined(op, outcome) if outcome.joined else outcome.result()

    def _joined(self, op: OperationLog, outcome: FlightOutcome[Acquisition]) -> Acquisition:
        """A caller's view of an acquisition it joined: an operation of its own, whose last
        row names the operation it waited on."""
        try:
            shared = outcome.result()
        except DeepSeekEyesError as exc:
            joined_id = exc.details.get("operation_id")
            op.record(
                "flight", "joined", code=exc.code, joined_operation_id=joined_id,
                latency_ms=outcome.waited_ms,
            )
            exc.details["operation_id"] = op.operation_id
            exc.details["joined_operation_id"] = joined_id
            raise
        op.record(
            "flight", "joined", route=shared.route, joined_operation_id=shared.operation_id,
            image_sha256=shared.image.sha256, record_sha256=shared.record.record_sha256,
            latency_ms=outcome.waited_ms,
        )
        self._record_avoided(shared.record, source=f"vision-flight:{shared.route}")
        return replace(
            shared, cached=True, joined=True, operation_id=op.operation_id,
            attempts=tuple(op.entries),
        )

    async def _acquire_once(
        self,
        op: OperationLog,
        sha: str,
        data: bytes | None,
        variant: Variant,
        order: Sequence[str],
        question: str | None,
        qsha: str | None,
    ) -> Acquisition:
        meta = self._cache.image_meta(sha)
        if meta is not None:
            hit = self._lookup(op, meta, order, variant, qsha)
            if hit is not None:
                return hit
        if data is None:
            try:
                data = await anyio.to_thread.run_sync(self._blobs.get, sha)
            except StoreError as exc:
                op.record("intake", "refused", code=exc.code, image_sha256=sha)
                _with_attempts(exc, op)
                raise
        decoded = await self._admit(op, data, sha)
        if meta is None:
            meta = ImageMeta.of(decoded)
            self._cache.remember_image(meta)
            # The same pixels may be known under another encoding.
            hit = self._lookup(op, meta, order, variant, qsha)
            if hit is not None:
                return hit
        return await self._acquire_from_routes(op, decoded, meta, order, variant, question, qsha)

    def _lookup(
        self,
        op: OperationLog,
        meta: ImageMeta,
        order: Sequence[str],
        variant: Variant,
        qsha: str | None,
        *,
        record_miss: bool = True,
    ) -> Acquisition | None:
        """The cached evidence of the first route in ``order`` that has it; a miss is
        recorded unless the caller goes on to look again (``record_miss=False``)."""
        for name in order:
            key = EvidenceKey(meta.pixel_sha256, name, variant, qsha, self.cache_fingerprint(name))
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
                self._record_avoided(record, source=f"vision-cache:{name}")
                return Acquisition(record, meta, True, op.operation_id, tuple(op.entries))
        if record_miss:
            op.record("cache", "miss", image_sha256=meta.sha256, routes=len(order))
        return None

    def _record_avoided(self, record: EvidenceRecord, *, source: str) -> None:
        """Avoided replay counts the provider tokens the call that made ``record`` cost,
        which a repeat would have sent again. Local OCR sends none, so its reuse counts
        nothing here: what it saved was local time, not tokens."""
        tokens = record.usage.get("prompt_tokens", 0) + record.usage.get("completion_tokens", 0)
        if tokens > 0:
            self._usage.record_estimate(
                UsageCategory.AVOIDED_REPLAY, tokens, source=source, calls=1
            )

    def decode_and_store(self, data: bytes, sha: str) -> DecodedImage:
        """Intake of one image (blocking): safe decode, then the blob store.

        Raises:
            ImageError: the image was refused; nothing was stored.
            StoreError: the bytes could not be stored.
        """
        decoded = decode_image(data, self._limits, sha256=sha)
        self._blobs.put(data, sha256=sha)
        return decoded

    async def _admit(self, op: OperationLog, data: bytes, sha: str) -> DecodedImage:
        started = time.perf_counter()
        try:
            decoded = await anyio.to_thread.run_sync(self.decode_and_store, data, sha)
        except (ImageError, StoreError) as exc:
            op.record(
                "intake", "refused", code=exc.code, image_sha256=sha, size=len(data),
                latency_ms=(time.perf_counter() - started) * 1000,
            )
            exc.details.setdefault("image_sha256", sha)
            _with_attempts(exc, op)
            raise
        op.record(
            "intake", "ok", image_sha256=sha, size=len(data), width=decoded.width,
            height=decoded.height, media_type=decoded.media_type,
            latency_ms=(time.perf_counter() - started) * 1000,
        )
        return decoded

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
        screening = self.guard.screen(op, order)
        eligible = screening.eligible
        failures: list[VisionError | EvidenceError] = list(screening.probe_failed)
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
        route = self._routes[name].route
        await self.guard.admit(op, name)
        answer = await self.guard.call(op, name, self._request(decoded, variant, question))

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
            EvidenceKey(meta.pixel_sha256, name, variant, qsha, self.cache_fingerprint(name)),
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
        self.guard.succeeded(name)
        return Acquisition(stored, meta, False, op.operation_id, tuple(op.entries))

    # status -----------------------------------------------------------------
    def status(self) -> list[RouteStatus]:
        """Each known route with its order, health, circuit and probe state."""
        return self.guard.status(self.order())

    async def probe_all(self) -> list[ProbeReport]:
        """Health-check and probe every route now, ignoring cached results."""
        return await self.guard.probe_all()

    async def aclose(self) -> None:
        for entry in self._routes.values():
            await entry.route.aclose()
        if self._auto_source is not None:
            await self._auto_source.aclose()


def _with_attempts(exc: DeepSeekEyesError, op: OperationLog) -> None:
    """A refusal carries the attempts rows written for it, as a route failure does."""
    exc.details["attempts"] = list(op.entries)
    exc.details["operation_id"] = op.operation_id
