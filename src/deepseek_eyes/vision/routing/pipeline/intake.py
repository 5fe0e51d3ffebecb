"""The intake stage: a missed image's bytes, safely decoded and stored.

Only an acquisition that goes on to the routes comes here: a cache hit never decodes. The
bytes are the caller's, or, for an image admitted earlier and known by its hash, read back
from the blob store in a worker thread (checked against their address). Decoding runs in a
worker thread under the image limits
(:func:`~deepseek_eyes.vision.intake.decode.decode_image`); bytes the caller gave are
stored only once they decoded, so a refused image leaves nothing behind, and a refusal
stops the acquisition whatever the routes (no route is called for an image that is not
one). A new image's identity goes to the image index, so its next acquisition is a lookup
that needs no decode.

Every outcome is one attempts row (phase ``intake``: ``ok`` with size, dimensions and
media type, or ``refused`` with the code); a refusal carries the attempts like a route
failure does.
"""

from __future__ import annotations

import time

import anyio

from deepseek_eyes.errors import ImageError, StoreError
from deepseek_eyes.store.blobs import BlobStore
from deepseek_eyes.vision.evidence.cache import EvidenceCache, ImageMeta
from deepseek_eyes.vision.intake.decode import DecodedImage, ImageLimits, decode_image
from deepseek_eyes.vision.routing.pipeline.job import Job

__all__ = ["ImageIntake"]


class ImageIntake:
    def __init__(self, cache: EvidenceCache, blobs: BlobStore, limits: ImageLimits) -> None:
        self._cache = cache
        self._blobs = blobs
        self._limits = limits

    async def admit(self, job: Job) -> None:
        """Fill in ``job``'s decoded image and, for a new image, its identity.

        Raises:
            ImageError: the image was refused; nothing was stored.
            StoreError: a stored image's blob is gone or altered (``STORE_BLOB_MISSING``,
                ``STORE_BLOB_CORRUPT``), or the bytes could not be stored.
        """
        data = job.data
        if data is None:
            try:
                data = await anyio.to_thread.run_sync(self._blobs.get, job.sha256)
            except StoreError as exc:
                job.op.record("intake", "refused", code=exc.code, image_sha256=job.sha256)
                job.carry(exc)
                raise
        started = time.perf_counter()
        try:
            decoded = await anyio.to_thread.run_sync(
                self._decode_and_store, data, job.sha256, job.data is not None
            )
        except (ImageError, StoreError) as exc:
            job.op.record(
                "intake", "refused", code=exc.code, image_sha256=job.sha256, size=len(data),
                latency_ms=(time.perf_counter() - started) * 1000,
            )
            exc.details.setdefault("image_sha256", job.sha256)
            job.carry(exc)
            raise
        job.op.record(
            "intake", "ok", image_sha256=job.sha256, size=len(data), width=decoded.width,
            height=decoded.height, media_type=decoded.media_type,
            latency_ms=(time.perf_counter() - started) * 1000,
        )
        if job.image is None:
            job.image = ImageMeta.of(decoded)
            self._cache.remember_image(job.image)
        job.decoded = decoded

    def _decode_and_store(self, data: bytes, sha256: str, store: bool) -> DecodedImage:
        """Safe decode, then (for bytes not read from the store) the blob store; blocking."""
        decoded = decode_image(data, self._limits, sha256=sha256)
        if store:
            self._blobs.put(data, sha256=sha256)
        return decoded
