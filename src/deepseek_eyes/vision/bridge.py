"""The vision bridge: settings and a data directory in, validated evidence out.

This is the one object the CLI (and later the runtime and the gateway) holds for vision. It
wires the router to the cache, the attempts log, route state, usage and audit, and it adds
the audit record for each acquisition's outcome. Tests build it with their own routes.

With ``vision.auto_detect`` on (and the routes built from settings), the bridge also owns
the auto-detection that reads the ``[llm]`` endpoint's ``/models``
(:class:`~deepseek_eyes.vision.routing.registry.AutoRoutes`); :meth:`VisionBridge.aclose`
closes its client.

The bridge opens the process's shared state (:mod:`deepseek_eyes.store.state`, from
``[store]``) unless it is handed one: its single-flight leases let replicas on Redis make
one acquisition of an image between them, and the runtime's gateway counts its rate
limits in the same state (``VisionBridge.state``).

Every acquisition may name the scope it is for (:mod:`deepseek_eyes.store.scopes`): its
``cached`` is then what that scope may learn (:mod:`~deepseek_eyes.vision.evidence.scopes`:
true only for a record this scope was shown before; a first hit on another scope's record
reads ``false`` and is answered no sooner than its acquisition took). Without a scope,
the shared cache's own answer (the ``see`` command's, tests').
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping, Sequence

import anyio

from deepseek_eyes.errors import DeepSeekEyesError, ImageError
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import Settings
from deepseek_eyes.stages import stage
from deepseek_eyes.store.blobs import sha256_hex
from deepseek_eyes.store.state import SharedState, open_shared_state
from deepseek_eyes.vision.evidence.cache import EvidenceCache, ImageMeta
from deepseek_eyes.vision.evidence.scopes import EvidenceScopes
from deepseek_eyes.vision.intake.decode import ImageLimits, decode_image
from deepseek_eyes.vision.routing.attempts import AttemptLog
from deepseek_eyes.vision.routing.detect import RouteDetector
from deepseek_eyes.vision.routing.guard import RouteEntry
from deepseek_eyes.vision.routing.registry import AutoRoutes, build_routes
from deepseek_eyes.vision.routing.router import HASH_IN_THREAD_BYTES, Acquisition, VisionRouter
from deepseek_eyes.vision.routing.state import RouteStateStore
from deepseek_eyes.vision.types import Variant

__all__ = ["VisionBridge"]


class VisionBridge:
    def __init__(
        self,
        settings: Settings,
        home: DataHome,
        *,
        routes: Mapping[str, RouteEntry] | None = None,
        auto_routes: Sequence[str] = (),
        state: SharedState | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Raises:
            ConfigError: ``CONFIG_STATE_URL_INVALID``, ``CONFIG_ENV_MISSING`` (the shared
                state's settings).
            StoreError: ``STORE_STATE_BACKEND_MISSING``."""
        self.settings = settings
        self.home = home
        self.state = state or open_shared_state(settings.store)
        auto_source: AutoRoutes | None = None
        if routes is None:
            routes, auto_routes = build_routes(settings.vision, settings.llm)
            if settings.vision.auto_detect:
                auto_source = AutoRoutes(
                    settings.llm, RouteDetector(settings.llm), initial=auto_routes
                )
        self.cache = EvidenceCache(home.db, clock=clock)
        self.scopes = EvidenceScopes(home.db, clock=clock)
        self._limits = ImageLimits.from_settings(settings.image)
        self.attempts = AttemptLog(
            home.db, max_rows=settings.vision.attempts_max_rows, clock=clock
        )
        self.router = VisionRouter(
            routes,
            settings=settings.vision,
            auto_routes=auto_routes,
            auto_source=auto_source,
            cache=self.cache,
            attempts=self.attempts,
            states=RouteStateStore(home.db),
            usage=home.usage,
            blobs=home.blobs,
            limits=self._limits,
            leases=self.state.leases,
            clock=clock,
        )

    async def admit(self, data: bytes) -> ImageMeta:
        """Validate and store one image without asking any route about it (a known image
        costs one hash). Raises ImageError or StoreError like intake does."""
        return (await self.admit_all([data]))[0]

    async def admit_all(self, images: Sequence[bytes], *,
                        sha256s: Sequence[str | None] | None = None) -> list[ImageMeta]:
        """Validate every image, then store them: all or nothing.

        A known image costs one hash. Unknown ones are decoded in a worker thread, one at a
        time (pixels are dropped as soon as their hash is taken, so memory holds one
        image's pixels, not a turn's), and only when every image has passed are their bytes
        written and their identities remembered: a request refused for its fifth image
        leaves none of the first four behind. The result follows ``images`` (repeats
        included). ``sha256s`` are the images' hashes where the caller took them already
        (a request's data URLs are told apart by them), so none is hashed twice.

        Raises:
            ImageError: the first image refused (``details['index']`` says which); nothing
                was stored.
            StoreError: the bytes could not be stored.
        """
        with stage("admission"):
            return await self._admit_all(images, sha256s or [None] * len(images))

    async def _admit_all(self, images: Sequence[bytes],
                         sha256s: Sequence[str | None]) -> list[ImageMeta]:
        metas: dict[str, ImageMeta] = {}
        pending: list[tuple[bytes, ImageMeta]] = []
        order: list[str] = []
        for index, (data, given) in enumerate(zip(images, sha256s, strict=True)):
            if given is not None:
                sha = given
            elif len(data) > HASH_IN_THREAD_BYTES:
                sha = await anyio.to_thread.run_sync(sha256_hex, data)
            else:
                sha = sha256_hex(data)
            order.append(sha)
            if sha in metas:
                continue
            known = self.cache.image_meta(sha)
            if known is not None:
                metas[sha] = known
                continue
            try:
                decoded = await anyio.to_thread.run_sync(
                    functools.partial(decode_image, data, self._limits, sha256=sha)
                )
            except ImageError as exc:
                exc.details.setdefault("index", index)
                exc.details.setdefault("image_sha256", sha)
                raise
            meta = metas[sha] = ImageMeta.of(decoded)
            del decoded
            pending.append((data, meta))
        if pending:
            await anyio.to_thread.run_sync(self._store, pending)
        return [metas[sha] for sha in order]

    def _store(self, pending: Sequence[tuple[bytes, ImageMeta]]) -> None:
        for data, meta in pending:
            self.home.blobs.put(data, sha256=meta.sha256)
        for _data, meta in pending:
            self.cache.remember_image(meta)

    def image_bytes(self, sha256: str) -> bytes:
        """The original bytes of a stored image (blocking; see :meth:`read_image`).
        Raises StoreError."""
        return self.home.blobs.get(sha256)

    async def read_image(self, sha256: str) -> bytes:
        """The original bytes of a stored image, read in a worker thread. Raises
        StoreError."""
        return await anyio.to_thread.run_sync(self.home.blobs.get, sha256)

    async def see(self, data: bytes, *, route: str | None = None,
                  scope: str | None = None) -> Acquisition:
        """Base evidence (``deepseekeyes.evidence.v1``) for one image; ``cached`` as
        ``scope`` may learn it (see the module docstring)."""
        return await self._acquire(data, Variant.EVIDENCE, route=route, scope=scope)

    async def see_stored(self, sha256: str, *, route: str | None = None,
                         scope: str | None = None, recorded: bool = False) -> Acquisition:
        """:meth:`see` for an admitted image, known by its hash: a cache hit reads no
        bytes (the identity admission took is reused). ``recorded``: the caller's own
        chained record names the acquisition (a turn's evidence list), so a cache hit
        writes no attempts row."""
        return await self._acquire(sha256, Variant.EVIDENCE, route=route, scope=scope,
                                   recorded=recorded)

    async def reread(
        self, image: bytes | str, question: str, *, base_route: str | None = None,
        route: str | None = None, scope: str | None = None,
    ) -> Acquisition:
        """A targeted reread (``deepseekeyes.target.v1``) of the original pixels, trying the
        route that produced the base evidence first. ``image`` is the bytes, or the
        sha256 of an admitted image."""
        return await self._acquire(
            image, Variant.TARGET, question=question, route=route, base_route=base_route,
            scope=scope,
        )

    async def _acquire(
        self,
        image: bytes | str,
        variant: Variant,
        *,
        question: str | None = None,
        route: str | None = None,
        base_route: str | None = None,
        scope: str | None = None,
        recorded: bool = False,
    ) -> Acquisition:
        with stage("vision"):
            began = time.monotonic()
            result = await self._acquire_staged(image, variant, question=question,
                                                route=route, base_route=base_route,
                                                recorded=recorded)
            if scope is None:
                return result
            return await self._as_seen_by(scope, result, began)

    async def _as_seen_by(self, scope: str, result: Acquisition, began: float) -> Acquisition:
        """``result`` as ``scope`` may learn it: ``cached`` only for a record it was shown
        before; a first showing of another scope's record answered no sooner than that
        record's acquisition took."""
        took_ms = (time.monotonic() - began) * 1000
        record = result.record.record_sha256
        if not result.cached:
            self.scopes.note(scope, record, acquired_ms=took_ms)
            return result
        shown = self.scopes.note(scope, record, acquired_ms=None)
        if shown.before:
            return result
        wait_s = (shown.acquired_ms - took_ms) / 1000
        if wait_s > 0:
            await anyio.sleep(wait_s)
        return dataclasses.replace(result, cached=False)

    async def _acquire_staged(
        self,
        image: bytes | str,
        variant: Variant,
        *,
        question: str | None,
        route: str | None,
        base_route: str | None,
        recorded: bool = False,
    ) -> Acquisition:
        try:
            if isinstance(image, str):
                result = await self.router.acquire_stored(
                    image, variant, question=question, route=route, base_route=base_route,
                    recorded=recorded,
                )
            else:
                result = await self.router.acquire(
                    image, variant, question=question, route=route, base_route=base_route
                )
        except DeepSeekEyesError as exc:
            self.home.audit.append(
                "vision.acquire", exc.details.get("image_sha256"), outcome="failed",
                code=exc.code, variant=variant.value,
                operation_id=exc.details.get("operation_id"),
            )
            raise
        if result.cached and not result.joined:
            # A cache hit's one row is its attempt (phase "cache", outcome "hit": the image,
            # route, record and operation): the path repeated most writes nothing twice.
            return result
        outcome = "joined" if result.joined else "ok"
        self.home.audit.append(
            "vision.acquire", result.image.sha256, outcome=outcome,
            route=result.route, variant=variant.value, record_sha256=result.record.record_sha256,
            operation_id=result.operation_id,
        )
        return result

    async def aclose(self) -> None:
        await self.router.aclose()
        await self.state.aclose()
