"""Immutable evidence records, keyed by what the evidence is about, in memory and SQLite.

A record is keyed by the decoded pixels' hash, the route, the route's answer fingerprint,
the schema variant and, for a targeted reread, the question's hash. The fingerprint (see
:attr:`~deepseek_eyes.vision.types.VisionRoute.answer_fingerprint`, combined with the
prompt and schema version by the router) is what makes a key mean "what *this* endpoint
and model, asked *this* way, said": a route pointed at another endpoint or model, given
other options, or asked with another prompt or schema, misses instead of serving the old
answer.

Records written before the fingerprint existed keep their old key text and body, so they
still verify and read (nothing is migrated or rewritten: rows are immutable), but no new
lookup asks for them: nobody knows which endpoint made them.

Keying by pixels (not encoded bytes) lets a PNG and a BMP of the same screenshot share
evidence; the encoded bytes' hash maps to the pixel hash through the ``images`` table, so a
repeat of known bytes costs one SHA-256 and two lookups and never a decode.

Each record carries the SHA-256 of its own canonical body. The database forbids UPDATE on
evidence rows; a row whose body no longer matches its hash (edited by hand, disk damage) is
moved to ``evidence_quarantine`` and refused with ``EVIDENCE_CACHE_TAMPERED``, so evidence a
model sees is exactly what passed the gate.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from deepseek_eyes import canonical_json as _formats
from deepseek_eyes.audit.checkpoints import record_cut
from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import AuditError, EvidenceIntegrityError
from deepseek_eyes.store import chain
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.fences import FlightFences
from deepseek_eyes.vision.intake.decode import DecodedImage
from deepseek_eyes.vision.types import Variant

log = logging.getLogger(__name__)

__all__ = ["EvidenceCache", "EvidenceKey", "EvidenceRecord", "ImageMeta", "canonical_json"]

_V = TypeVar("_V")


def canonical_json(value: Any) -> str:
    """The :data:`~deepseek_eyes.canonical_json.LENIENT` text evidence digests and cache
    keys are taken over (an evidence body can carry a model's NaN)."""
    return _formats.LENIENT.dumps(value)


@dataclass(frozen=True)
class ImageMeta:
    """What the cache keeps of an image: both hashes, its size and media type."""

    sha256: str
    pixel_sha256: str
    width: int
    height: int
    media_type: str
    size: int

    @classmethod
    def of(cls, decoded: DecodedImage) -> ImageMeta:
        return cls(
            decoded.sha256, decoded.pixel_sha256, decoded.width, decoded.height,
            decoded.media_type, decoded.size,
        )


@dataclass(frozen=True)
class EvidenceKey:
    """What one evidence record answers: which pixels, by which route, in which variant
    (and for a target, which question)."""

    pixel_sha256: str
    route: str
    variant: Variant
    question_sha256: str | None = None
    #: The route's answer fingerprint; None only for records made before it existed.
    fingerprint: str | None = None

    @property
    def text(self) -> str:
        text = f"{self.pixel_sha256}|{self.route}|{self.variant.value}|{self.question_sha256 or ''}"
        return text if self.fingerprint is None else f"{text}|{self.fingerprint}"

    def as_body(self) -> dict[str, Any]:
        body = {**asdict(self), "variant": self.variant.value}
        if self.fingerprint is None:
            del body["fingerprint"]  # a legacy record's hashed body never had the field
        return body


@dataclass(frozen=True)
class EvidenceRecord:
    """Validated evidence plus where it came from. ``evidence_json`` is canonical JSON, so
    a caller cannot mutate the cached value through a shared dict."""

    key: EvidenceKey
    image_sha256: str
    model: str | None
    evidence_json: str
    repairs: tuple[dict[str, str], ...]
    usage: dict[str, int]
    created_at: float
    record_sha256: str

    @property
    def evidence(self) -> JsonObject:
        value: JsonObject = json.loads(self.evidence_json)
        return value

    @property
    def route(self) -> str:
        return self.key.route

    @staticmethod
    def _body(
        key: EvidenceKey,
        image_sha256: str,
        model: str | None,
        evidence_json: str,
        repairs: tuple[dict[str, str], ...],
        usage: dict[str, int],
        created_at: float,
    ) -> dict[str, Any]:
        return {
            "key": key.as_body(),
            "image_sha256": image_sha256,
            "model": model,
            "evidence": json.loads(evidence_json),
            "repairs": list(repairs),
            "usage": usage,
            "created_at": created_at,
        }

    @classmethod
    def build(
        cls,
        key: EvidenceKey,
        *,
        image_sha256: str,
        model: str | None,
        evidence: JsonObject,
        repairs: tuple[dict[str, str], ...] = (),
        usage: dict[str, int] | None = None,
        created_at: float,
    ) -> EvidenceRecord:
        evidence_json = canonical_json(evidence)
        usage = dict(usage or {})
        body = cls._body(key, image_sha256, model, evidence_json, repairs, usage, created_at)
        digest = hashlib.sha256(canonical_json(body).encode()).hexdigest()
        return cls(key, image_sha256, model, evidence_json, repairs, usage, created_at, digest)

    def body(self) -> dict[str, Any]:
        return self._body(
            self.key, self.image_sha256, self.model, self.evidence_json, self.repairs,
            self.usage, self.created_at,
        )

    def verify(self) -> bool:
        digest = hashlib.sha256(canonical_json(self.body()).encode()).hexdigest()
        return digest == self.record_sha256

    @classmethod
    def from_row(cls, record_text: str, record_sha256: str) -> EvidenceRecord:
        body = json.loads(record_text)
        k = body["key"]
        key = EvidenceKey(
            k["pixel_sha256"], k["route"], Variant(k["variant"]), k["question_sha256"],
            k.get("fingerprint"),
        )
        return cls(
            key=key,
            image_sha256=body["image_sha256"],
            model=body["model"],
            evidence_json=canonical_json(body["evidence"]),
            repairs=tuple(body["repairs"]),
            usage=dict(body["usage"]),
            created_at=body["created_at"],
            record_sha256=record_sha256,
        )


class EvidenceCache:
    """Two tiers: a bounded process-local LRU in front of the ``evidence`` table."""

    def __init__(
        self,
        db: Database,
        *,
        clock: Callable[[], float] = time.time,
        memory_items: int = 4096,
    ) -> None:
        self._db = db
        #: The single-flight fencing tokens a fenced :meth:`put` checks.
        self.fences = FlightFences(db)
        self._clock = clock
        self._memory_items = memory_items
        self._records: OrderedDict[str, EvidenceRecord] = OrderedDict()
        self._images: OrderedDict[str, ImageMeta] = OrderedDict()
        self._lock = threading.Lock()

    def _remember(self, table: OrderedDict[str, _V], key: str, value: _V) -> _V:
        """Insert or refresh ``key`` in an LRU tier; the first value stored wins."""
        with self._lock:
            current = table.setdefault(key, value)
            table.move_to_end(key)
            while len(table) > self._memory_items:
                table.popitem(last=False)
            return current

    # images ---------------------------------------------------------------
    def image_meta(self, sha256: str) -> ImageMeta | None:
        meta = self._images.get(sha256)
        if meta is not None:
            return meta
        row = self._db.query_one("SELECT * FROM images WHERE sha256 = ?", (sha256,))
        if row is None:
            return None
        meta = ImageMeta(
            row["sha256"], row["pixel_sha256"], row["width"], row["height"],
            row["media_type"], row["size"],
        )
        return self._remember(self._images, sha256, meta)

    def remember_image(self, meta: ImageMeta) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO images (sha256, pixel_sha256, width, height, media_type,"
            " size, created_at) VALUES (?,?,?,?,?,?,?)",
            (
                meta.sha256, meta.pixel_sha256, meta.width, meta.height, meta.media_type,
                meta.size, self._clock(),
            ),
            chain="vision.image",
        )
        self._remember(self._images, meta.sha256, meta)

    # evidence -------------------------------------------------------------
    def get(self, key: EvidenceKey) -> EvidenceRecord | None:
        """The record for ``key``, or None.

        Raises:
            EvidenceIntegrityError: ``EVIDENCE_CACHE_TAMPERED`` when the stored record no
                longer matches its hash; the row is quarantined first, so the next call
                misses and a fresh acquisition can take its place.
        """
        text = key.text
        with self._lock:
            record = self._records.get(text)
            if record is not None:
                self._records.move_to_end(text)
                return record
        row = self._db.query_one(
            "SELECT record, record_sha256 FROM evidence WHERE key = ?", (text,)
        )
        if row is None:
            return None
        try:
            record = EvidenceRecord.from_row(row["record"], row["record_sha256"])
        except (ValueError, KeyError, TypeError):
            record = None
        if record is None or not record.verify() or record.key != key:
            self._quarantine(text, row["record"], row["record_sha256"])
            raise EvidenceIntegrityError(
                "a cached evidence record no longer matches its hash and was refused",
                details={"key_sha256": hashlib.sha256(text.encode()).hexdigest()},
            )
        return self._remember(self._records, text, record)

    def put(self, record: EvidenceRecord, *,
            fence: tuple[str, int] | None = None) -> EvidenceRecord:
        """Store a new record; an existing record for the key wins (records are immutable).

        ``fence`` (a single-flight lease's key and token): the record commits only while
        that token still holds the work in ``flight_fences``
        (:meth:`~deepseek_eyes.store.fences.FlightFences.publish`, same transaction).

        Raises:
            VisionError: ``VISION_FLIGHT_LEASE_LOST``: the lease passed on; nothing written.
            StoreError: the store's write codes.
        """
        text = record.key.text
        insert = (
            "INSERT OR IGNORE INTO evidence (key, pixel_sha256, route, variant,"
            " question_sha256, record_sha256, record, created_at) VALUES (?,?,?,?,?,?,?,?)")
        params = (
            text, record.key.pixel_sha256, record.key.route, record.key.variant.value,
            record.key.question_sha256, record.record_sha256,
            canonical_json(record.body()), record.created_at,
        )
        if fence is None:
            self._db.execute(insert, params, chain="vision.evidence")
        else:
            with self._db.transaction() as conn:
                self.fences.publish(conn, *fence)
                self._db.execute(insert, params, chain="vision.evidence")
        return self._remember(self._records, text, record)

    def forget_memory(self) -> None:
        """Drop the process-local tier (tests, and after external database edits)."""
        with self._lock:
            self._records.clear()
            self._images.clear()

    def _quarantine(self, key_text: str, record_text: str, record_sha256: str) -> None:
        now = self._clock()
        with self._db.transaction() as conn:
            chain.insert(
                conn, "vision.quarantine",
                "INSERT INTO evidence_quarantine (key, record_sha256, record, reason,"
                " quarantined_at) VALUES (?,?,?,?,?)",
                (key_text, record_sha256, record_text, "hash_mismatch", now), now,
            )
            # The removal is itself audited: the chain keeps the record's original digest,
            # and the cut is signed. Without the key the record still leaves (it must never
            # be served again) under an unsigned cut, which verify reports as missing.
            rowids = [int(r[0]) for r in conn.execute(
                "SELECT rowid FROM evidence WHERE key = ?", (key_text,))]
            body = {"table": "evidence", "rowids": rowids, "reason": "quarantined"}
            try:
                record_cut(self._db, conn, body, now)
            except AuditError as exc:
                log.warning("an evidence quarantine is not signed: %s (%s)", exc.message,
                            exc.code)
                chain.ChainWriter.of(conn).add_body("retention", body, now)
            conn.execute("DELETE FROM evidence WHERE key = ?", (key_text,))
        with self._lock:
            self._records.pop(key_text, None)
