"""The vision bridge: settings and a data directory in, validated evidence out.

This is the one object the CLI (and later the runtime and the gateway) holds for vision. It
wires the router to the cache, the attempts log, route state, usage and audit, and it adds
the audit record for each acquisition's outcome. Tests build it with their own routes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import anyio

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import Settings
from deepseek_eyes.store.blobs import sha256_hex
from deepseek_eyes.vision.attempts import AttemptLog
from deepseek_eyes.vision.cache import EvidenceCache, ImageMeta
from deepseek_eyes.vision.guard import RouteEntry
from deepseek_eyes.vision.intake import ImageLimits
from deepseek_eyes.vision.registry import build_routes
from deepseek_eyes.vision.route_state import RouteStateStore
from deepseek_eyes.vision.router import Acquisition, VisionRouter
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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.home = home
        if routes is None:
            routes, auto_routes = build_routes(settings.vision, settings.llm)
        self.cache = EvidenceCache(home.db, clock=clock)
        self.attempts = AttemptLog(
            home.db, max_rows=settings.vision.attempts_max_rows, clock=clock
        )
        self.router = VisionRouter(
            routes,
            settings=settings.vision,
            auto_routes=auto_routes,
            cache=self.cache,
            attempts=self.attempts,
            states=RouteStateStore(home.db),
            usage=home.usage,
            blobs=home.blobs,
            limits=ImageLimits.from_settings(settings.image),
            clock=clock,
        )

    async def admit(self, data: bytes) -> ImageMeta:
        """Validate and store an image without asking any route about it (a known image
        costs one hash). Raises ImageError or StoreError like intake does."""
        sha = sha256_hex(data)
        meta = self.cache.image_meta(sha)
        if meta is not None:
            return meta
        decoded = await anyio.to_thread.run_sync(self.router.decode_and_store, data, sha)
        meta = ImageMeta.of(decoded)
        self.cache.remember_image(meta)
        return meta

    def image_bytes(self, sha256: str) -> bytes:
        """The original bytes of a stored image. Raises StoreError."""
        return self.home.blobs.get(sha256)

    async def see(self, data: bytes, *, route: str | None = None) -> Acquisition:
        """Base evidence (``deepseekeyes.evidence.v1``) for one image."""
        return await self._acquire(data, Variant.EVIDENCE, route=route)

    async def reread(
        self, data: bytes, question: str, *, base_route: str | None = None,
        route: str | None = None,
    ) -> Acquisition:
        """A targeted reread (``deepseekeyes.target.v1``) of the original pixels, trying the
        route that produced the base evidence first."""
        return await self._acquire(
            data, Variant.TARGET, question=question, route=route, base_route=base_route
        )

    async def _acquire(
        self,
        data: bytes,
        variant: Variant,
        *,
        question: str | None = None,
        route: str | None = None,
        base_route: str | None = None,
    ) -> Acquisition:
        try:
            result = await self.router.acquire(
                data, variant, question=question, route=route, base_route=base_route
            )
        except DeepSeekEyesError as exc:
            self.home.audit.append(
                "vision.acquire", exc.details.get("image_sha256"), outcome="failed",
                code=exc.code, variant=variant.value,
                operation_id=exc.details.get("operation_id"),
            )
            raise
        outcome = "joined" if result.joined else "cached" if result.cached else "ok"
        self.home.audit.append(
            "vision.acquire", result.image.sha256, outcome=outcome,
            route=result.route, variant=variant.value, record_sha256=result.record.record_sha256,
            operation_id=result.operation_id,
        )
        return result

    async def aclose(self) -> None:
        await self.router.aclose()
