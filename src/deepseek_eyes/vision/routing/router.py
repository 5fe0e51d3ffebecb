"""The ordered VisionRouter: from image bytes to validated, cached evidence.

The router orders the candidate routes, guards them and sequences one acquisition's
stages (:mod:`deepseek_eyes.vision.routing.pipeline`); each stage does its own job and
writes its own rows of the attempts log. On a miss they run in this order:

1. **lookup**: a known image (its bytes' hash is in the image index) is looked up in the
   evidence cache for each candidate route; a hit makes no route call and no decode;
2. **intake**: safe decode and blob store of an image the cache could not answer (a new
   one is looked up right after, by its pixels) — identity failures stop here, whatever
   the routes;
3. **routes**: the candidates in order — base route of a reread, explicit route,
   ``vision.route_priority``, the other configured routes, auto-detected models
   (:func:`~deepseek_eyes.vision.routing.order.route_order`) — under the guard (health,
   circuit, pixel probe, the call), at most ``1 + failover_attempts`` of them;
4. **gate**: each answer canonicalized and held to the strict schema; a refused answer
   fails over to the next route;
5. **store**: the evidence that passed becomes an immutable cache record.

The image's SHA-256 is taken once, here, for bytes (a stored image comes with it); the
hash, the candidate routes and the operation travel in one
:class:`~deepseek_eyes.vision.routing.pipeline.job.Job` from stage to stage.

Concurrent acquisitions of the same work (bytes, variant, question, candidate routes) run
stages 2-5 once and share the outcome (:mod:`deepseek_eyes.vision.routing.flight`); a
cache hit is answered before that, with no coordination. With shared state on Redis, one
lease per work decides which replica runs it, and the others answer from the evidence it
stores (:mod:`deepseek_eyes.vision.routing.shared_flight`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import anyio

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.settings import VisionSettings
from deepseek_eyes.store.blobs import BlobStore, sha256_hex
from deepseek_eyes.store.fences import lease_lost
from deepseek_eyes.store.state.leases import FlightLeases, Lease, LocalLeases, lease_key
from deepseek_eyes.usage import UsageTracker
from deepseek_eyes.vision.evidence.cache import EvidenceCache
from deepseek_eyes.vision.intake.decode import ImageLimits
from deepseek_eyes.vision.routes.prompts import prompt_fingerprint
from deepseek_eyes.vision.routing.attempts import AttemptLog
from deepseek_eyes.vision.routing.flight import FlightOutcome, SingleFlight
from deepseek_eyes.vision.routing.guard import (
    ProbeReport,
    RouteEntry,
    RouteGuard,
    RouterPolicy,
    RouteStatus,
)
from deepseek_eyes.vision.routing.order import route_order
from deepseek_eyes.vision.routing.pipeline.gate import EvidenceGate
from deepseek_eyes.vision.routing.pipeline.intake import ImageIntake
from deepseek_eyes.vision.routing.pipeline.job import (
    Acquisition,
    FlightKey,
    Job,
    question_digest,
)
from deepseek_eyes.vision.routing.pipeline.lookup import EvidenceLookup, record_avoided
from deepseek_eyes.vision.routing.pipeline.routes import RouteWalk
from deepseek_eyes.vision.routing.pipeline.store import EvidenceStore
from deepseek_eyes.vision.routing.registry import AutoRoutes
from deepseek_eyes.vision.routing.shared_flight import SharedFlight
from deepseek_eyes.vision.routing.state import RouteStateStore
from deepseek_eyes.vision.types import Variant, VisionRoute

__all__ = ["HASH_IN_THREAD_BYTES", "Acquisition", "VisionRouter"]

#: Above this size the SHA-256 of an image runs in a worker thread, off the event loop.
HASH_IN_THREAD_BYTES = 1 << 20


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
        leases: FlightLeases | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``leases`` decide which process acquires an image that several replicas are
        asked for at once (default: this process alone, :class:`LocalLeases`)."""
        self._routes = dict(routes)
        self._settings = settings
        self._auto = tuple(auto_routes)
        self._auto_source = auto_source
        self._attempts = attempts
        self._usage = usage
        self.policy = policy or RouterPolicy.from_settings(settings)
        self._shared = SharedFlight(leases or LocalLeases())
        self.guard = RouteGuard(  # its probes run once across replicas too
            self._routes, states=states, usage=usage, attempts=attempts,
            policy=self.policy, flight=self._shared, clock=clock,
        )
        self._flights: SingleFlight[FlightKey, Acquisition] = SingleFlight()
        self._fingerprints: dict[str, tuple[VisionRoute, str]] = {}
        # The stages, in the order a miss runs them; each sees the same route table
        # (auto-detection adds rows to it) and the router's cache fingerprints.
        self._cache = cache
        self._lookup = EvidenceLookup(cache, usage, self.cache_fingerprint)
        self._intake = ImageIntake(cache, blobs, limits)
        self._walk = RouteWalk(self.guard)
        self._gate = EvidenceGate(self._routes)
        self._store = EvidenceStore(cache, self.cache_fingerprint, clock)

    # ordering ---------------------------------------------------------------
    def reorder(self, *, route: str | None, priority: tuple[str, ...]) -> None:
        """Take a new ``vision.route`` and ``vision.route_priority`` (the web console's
        reordering, validated by the settings file's loader before): the next acquisition
        tries the routes in the new order; nothing else changes."""
        self._settings = self._settings.model_copy(
            update={"route": route, "route_priority": tuple(priority)})

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
        job = self._job(sha, data, variant, question=question, route=route,
                        base_route=base_route)
        return await self._acquire(job)

    async def acquire_stored(
        self,
        sha256: str,
        variant: Variant = Variant.EVIDENCE,
        *,
        question: str | None = None,
        route: str | None = None,
        base_route: str | None = None,
        recorded: bool = False,
    ) -> Acquisition:
        """Like :meth:`acquire`, for an image already admitted to the blob store.

        The image is known by its hash, so nothing is read or hashed for a cache hit; a
        miss reads the blob in a worker thread (checked against its address). ``recorded``:
        the caller's own chained record names the acquisition, so a cache hit writes no
        attempts row (:attr:`~deepseek_eyes.vision.routing.pipeline.job.Job.recorded`).

        Raises:
            StoreError: ``STORE_BLOB_MISSING`` / ``STORE_BLOB_CORRUPT`` on a miss whose
                blob is gone or altered; otherwise as :meth:`acquire`.
        """
        await self.refresh_routes()
        job = self._job(sha256, None, variant, question=question, route=route,
                        base_route=base_route)
        job.recorded = recorded
        return await self._acquire(job)

    def _job(
        self,
        sha256: str,
        data: bytes | None,
        variant: Variant,
        *,
        question: str | None,
        route: str | None,
        base_route: str | None,
    ) -> Job:
        """One acquisition's job: its candidate routes ranked, its operation opened."""
        if variant is Variant.TARGET and not (question and question.strip()):
            raise ValueError("a targeted reread needs a question")
        if variant is Variant.EVIDENCE:
            question = None
        candidates = tuple(self.order(explicit=route, base_route=base_route))
        return Job(
            sha256=sha256,
            variant=variant,
            question=question,
            question_sha256=question_digest(question),
            candidates=candidates,
            op=self._attempts.operation("reread" if variant is Variant.TARGET else "see"),
            data=data,
        )

    async def _acquire(self, job: Job) -> Acquisition:
        """The lookup, then one flight per :attr:`Job.flight_key` for the rest.

        A known image whose evidence is cached is answered here, before the single-flight:
        a hit needs no coordination, and it is the path repeated most (one memory or index
        lookup, one attempt row)."""
        self._lookup.identify(job)
        if job.image is not None:
            hit = self._lookup.find(job)
            if hit is not None:
                return hit
        outcome = await self._flights.run(job.flight_key, lambda: self._acquire_shared(job))
        return self._joined(job, outcome) if outcome.joined else outcome.result()

    async def _acquire_shared(self, job: Job) -> Acquisition:
        """The in-process flight's work: under the replicas' lease on the job's key when
        the state is shared (the holder acquires; a waiter answers from the evidence the
        holder stored), else at once."""
        if not self._shared.shared:
            return await self._acquire_missing(job)

        async def work(lease: Lease | None) -> Acquisition:
            job.fence = None
            if lease is not None:
                job.op.record("flight", "leased", fence=lease.fence)
                # The database checks this token when the evidence is stored
                # (store/fences.py); a newer holder's claim makes that write refuse.
                if not self._cache.fences.claim(lease.key, lease.fence):
                    raise lease_lost(lease.fence, "a newer holder claimed the work")
                job.fence = (lease.key, lease.fence)
                hit = self._found(job)  # published by the previous holder just now
                if hit is not None:
                    return hit
            return await self._acquire_missing(job)

        def lost(exc: DeepSeekEyesError) -> None:
            job.fence = None
            job.op.record("flight", "lease_lost", code=exc.code,
                          fence=exc.details.get("fence"), reason=exc.details.get("reason"))

        key = lease_key(job.sha256, job.variant.value, job.question_sha256, job.candidates)
        try:
            outcome = await self._shared.run(key, work, lambda: self._found(job), lost=lost)
        except DeepSeekEyesError as exc:
            if exc.details.get("flight") == "remote":
                job.op.record("flight", "remote_failed", code=exc.code)
                job.carry(exc)
            raise
        return outcome.value

    def _found(self, job: Job) -> Acquisition | None:
        """The evidence another replica stored for this job, if it is there now (a
        waiter's poll: the image index, then the evidence cache)."""
        if job.image is None:
            self._lookup.identify(job)
            if job.image is None:
                return None
        return self._lookup.find(job)

    async def _acquire_missing(self, job: Job) -> Acquisition:
        """The flight's work, for an image the lookup could not answer: intake, the walk
        over the routes with the gate judging each answer, the store."""
        if job.image is not None:  # known, and looked up before the flight
            self._lookup.missed(job)
            await self._intake.admit(job)
        else:  # new bytes: their pixels may be known under another encoding
            await self._intake.admit(job)
            hit = self._lookup.find(job)
            if hit is not None:
                return hit
            self._lookup.missed(job)
        gated = await self._walk.first_accepted(job, self._gate.check)
        return self._store.keep(job, gated)

    def _joined(self, job: Job, outcome: FlightOutcome[Acquisition]) -> Acquisition:
        """A caller's view of an acquisition it joined: an operation of its own, whose last
        row names the operation it waited on."""
        op = job.op
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
        record_avoided(self._usage, shared.record, source=f"vision-flight:{shared.route}")
        return replace(
            shared, cached=True, joined=True, operation_id=op.operation_id,
            attempts=tuple(op.entries),
        )

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

