"""The work behind ``see``, ``look`` and the evidence resources, free of MCP.

Every image goes through the same :class:`~deepseek_eyes.vision.bridge.VisionBridge` path
as ``deepseek-eyes see``: bytes are seen with :meth:`VisionBridge.see` (hashed, admitted,
cached, attempts logged, audited), a stored image with :meth:`VisionBridge.see_stored`, so
a second ``see`` of the same image is a cache hit whichever way it was named.

The evidence shelf reads the ``evidence`` table directly (read-only): the cache answers by
key, and a resource is named by its record's hash. Every record read is checked against its
hash before it is served.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from deepseek_eyes import canonical_json
from deepseek_eyes.errors import EvidenceIntegrityError, VisionError
from deepseek_eyes.store import scopes
from deepseek_eyes.vision.bridge import VisionBridge
from deepseek_eyes.vision.evidence.cache import EvidenceRecord, ImageMeta
from deepseek_eyes.vision.intake.fit import Region, check_region, crop_png
from deepseek_eyes.vision.routing.router import Acquisition
from deepseek_eyes.vision.types import Variant
from deepseek_eyes.vision_server.images import parse_image_ref
from deepseek_eyes.vision_server.roots import NO_ROOTS, ServedRoots

__all__ = ["MAX_QUESTION", "PAGE_SIZE", "EvidenceEntry", "EvidencePage", "VisionService"]

MAX_QUESTION = 500
PAGE_SIZE = 100
INLINE_READ_BYTES = 1024 * 1024


@dataclass(frozen=True)
class EvidenceEntry:
    record_sha256: str
    variant: str
    route: str
    pixel_sha256: str
    created_at: float


@dataclass(frozen=True)
class EvidencePage:
    entries: tuple[EvidenceEntry, ...]
    next_cursor: str | None


class VisionService:
    """``see`` and ``look`` over a bridge, with the roots given at start-up."""

    def __init__(self, bridge: VisionBridge, roots: ServedRoots, *,
                 max_listed: int = 1000, scope: str = scopes.CLI) -> None:
        self.bridge = bridge
        # Whose the clients are (the token's id; the local user's on stdio): what
        # ``cached`` may tell them (vision/evidence/scopes.py).
        self.scope = scope
        # The data directory: never, by path or by identity (hard links, bind mounts).
        self.roots = roots.guarding(
            bridge.home.root, allow_hard_links=bridge.settings.vision.serve.allow_hard_links)
        self.max_listed = max_listed
        self._max_bytes = bridge.settings.image.max_bytes

    async def _bytes_or_stored(self, image: str, client_roots: ServedRoots) -> bytes | str:
        """The image's bytes, or the sha256 of a stored image.

        Raises:
            VisionError: the reference is malformed, names an unknown image, or a path
                the roots refuse (``VisionPathError``).
            ImageError: ``IMAGE_TOO_LARGE``.
        """
        if len(image) > INLINE_READ_BYTES:  # a big data URL: decode it off the event loop
            ref = await anyio.to_thread.run_sync(parse_image_ref, image, self._max_bytes)
        else:
            ref = parse_image_ref(image, self._max_bytes)
        if ref.sha256 is not None:
            if self.bridge.cache.image_meta(ref.sha256) is None:
                raise VisionError(f"no stored image has sha256 {ref.sha256}",
                                  code="VISION_IMAGE_NOT_FOUND",
                                  details={"image_sha256": ref.sha256})
            return ref.sha256
        if ref.data is not None:
            return ref.data
        assert ref.path is not None
        served = self.roots + client_roots
        if served.size_hint(ref.path) <= INLINE_READ_BYTES:
            # A thread hop costs more than reading a small local file (a FIFO cannot block:
            # it is opened non-blocking and refused).
            return served.read(ref.path, self._max_bytes)
        return await anyio.to_thread.run_sync(served.read, ref.path, self._max_bytes)

    async def see(self, image: str, *, route: str | None = None,
                  client_roots: ServedRoots = NO_ROOTS) -> Acquisition:
        """Base evidence for one image (see the module docstring for the path taken).

        Raises:
            DeepSeekEyesError: the image is refused (VISION_*, IMAGE_*) or no route could
                describe it (VISION_*).
        """
        found = await self._bytes_or_stored(image, client_roots)
        if isinstance(found, str):
            return await self.bridge.see_stored(found, route=route, scope=self.scope)
        return await self.bridge.see(found, route=route, scope=self.scope)

    async def look(self, image: str, question: str, *,
                   client_roots: ServedRoots = NO_ROOTS,
                   region: Sequence[float] | None = None) -> Acquisition:
        """A targeted reread, trying first the route that gave the image's newest evidence.
        With ``region`` (``[x, y, w, h]``, fractions of the image from its top-left) the
        region is cut from the original at full resolution, stored by its SHA-256, and the
        reread is of that crop: its boxes are relative to the crop.

        Raises:
            VisionError: ``VISION_QUESTION_INVALID``, ``VISION_REGION_INVALID``; otherwise
                as :meth:`see`.
        """
        question = question.strip()
        if not question or len(question) > MAX_QUESTION:
            raise VisionError(
                f"look needs one question of 1 to {MAX_QUESTION} characters",
                code="VISION_QUESTION_INVALID",
            )
        box: Region | None = None
        if region is not None:
            try:
                box = check_region(list(region))
            except ValueError as exc:
                raise VisionError(str(exc), code="VISION_REGION_INVALID",
                                  details={"region": list(region)[:4]}) from None
        found = await self._bytes_or_stored(image, client_roots)
        meta: ImageMeta
        if isinstance(found, str):
            meta_or_none = self.bridge.cache.image_meta(found)
            assert meta_or_none is not None  # checked by _bytes_or_stored
            meta = meta_or_none
        else:
            meta = await self.bridge.admit(found)
        base_route = self._base_route(meta.pixel_sha256)
        if box is not None:
            data = await self.bridge.read_image(meta.sha256)
            crop = await anyio.to_thread.run_sync(functools.partial(crop_png, data, box))
            meta = await self.bridge.admit(crop)
        return await self.bridge.reread(meta.sha256, question, base_route=base_route,
                                        scope=self.scope)

    def _base_route(self, pixel_sha256: str) -> str | None:
        row = self.bridge.home.db.query_one(
            "SELECT route FROM evidence WHERE pixel_sha256 = ? AND variant = ?"
            " ORDER BY created_at DESC LIMIT 1",
            (pixel_sha256, Variant.EVIDENCE.value),
        )
        return None if row is None else str(row["route"])

    # evidence resources -----------------------------------------------------------
    def page(self, cursor: str | None) -> EvidencePage:
        """One page of stored evidence, newest first, at most ``max_listed`` in all.

        Raises:
            VisionError: ``VISION_EVIDENCE_NOT_FOUND`` for a malformed cursor.
        """
        before, listed = _parse_cursor(cursor)
        limit = min(PAGE_SIZE, self.max_listed - listed)
        if limit <= 0:
            return EvidencePage((), None)
        rows = self.bridge.home.db.query(
            "SELECT rowid, record_sha256, variant, route, pixel_sha256, created_at"
            " FROM evidence WHERE rowid < ? ORDER BY rowid DESC LIMIT ?",
            (before, limit),
        )
        entries = tuple(EvidenceEntry(r["record_sha256"], r["variant"], r["route"],
                                      r["pixel_sha256"], r["created_at"]) for r in rows)
        more = len(rows) == limit and listed + len(rows) < self.max_listed
        next_cursor = f"{rows[-1]['rowid']}:{listed + len(rows)}" if more and rows else None
        return EvidencePage(entries, next_cursor)

    def record(self, record_sha256: str) -> dict[str, Any]:
        """The stored record named by its hash, as JSON-ready data.

        Raises:
            VisionError: ``VISION_EVIDENCE_NOT_FOUND``.
            EvidenceIntegrityError: ``EVIDENCE_CACHE_TAMPERED`` when the row no longer
                matches its hash.
        """
        row = self.bridge.home.db.query_one(
            "SELECT record, record_sha256 FROM evidence WHERE record_sha256 = ?",
            (record_sha256.lower(),),
        )
        if row is None:
            raise VisionError(f"no stored evidence record has sha256 {record_sha256}",
                              code="VISION_EVIDENCE_NOT_FOUND",
                              details={"record_sha256": record_sha256})
        record = EvidenceRecord.from_row(row["record"], row["record_sha256"])
        if not record.verify():
            raise EvidenceIntegrityError("the stored evidence record no longer matches its hash",
                                         details={"record_sha256": record_sha256})
        return {"record_sha256": record.record_sha256, **record.body()}


def _parse_cursor(cursor: str | None) -> tuple[int, int]:
    if not cursor:
        return 2**63 - 1, 0
    parts: Sequence[str] = cursor.split(":")
    if len(parts) != 2 or not all(p.isdigit() and len(p) < 20 for p in parts):
        raise VisionError("the resources cursor is malformed", code="VISION_EVIDENCE_NOT_FOUND")
    return int(parts[0]), int(parts[1])


def record_json(record: Mapping[str, Any]) -> str:
    """An evidence record as a resource's text: the same bytes its digest was taken over."""
    return canonical_json.LENIENT.dumps(record)
