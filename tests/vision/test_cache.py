from __future__ import annotations

from pathlib import Path

import pytest

from deepseek_eyes.errors import EvidenceIntegrityError
from deepseek_eyes.store.db import Database
from deepseek_eyes.vision.evidence.cache import (
    EvidenceCache,
    EvidenceKey,
    EvidenceRecord,
    ImageMeta,
)
from deepseek_eyes.vision.types import Variant

EVIDENCE = {"schema": "deepseekeyes.evidence.v1", "summary": "s"}


def record(pixel: str, created: float = 1.0, summary: str = "s") -> EvidenceRecord:
    return EvidenceRecord.build(
        EvidenceKey(pixel, "local", Variant.EVIDENCE),
        image_sha256="b" * 64,
        model="m",
        evidence={**EVIDENCE, "summary": summary},
        created_at=created,
    )


def test_record_hash_covers_its_body() -> None:
    one = record("a" * 64)
    assert one.verify()
    assert one.evidence["summary"] == "s"
    forged = EvidenceRecord(
        one.key, one.image_sha256, one.model, one.evidence_json.replace('"s"', '"t"'),
        one.repairs, one.usage, one.created_at, one.record_sha256,
    )
    assert not forged.verify()


def test_records_are_immutable_first_write_wins(tmp_path: Path) -> None:
    cache = EvidenceCache(Database(tmp_path / "eyes.db"))
    first = cache.put(record("a" * 64, summary="first"))
    second = cache.put(record("a" * 64, summary="second"))
    assert second == first
    cache.forget_memory()
    stored = cache.get(first.key)
    assert stored is not None
    assert stored.evidence["summary"] == "first"


def test_memory_tier_is_bounded_and_database_still_answers(tmp_path: Path) -> None:
    cache = EvidenceCache(Database(tmp_path / "eyes.db"), memory_items=3)
    records = [cache.put(record(f"{i:064x}")) for i in range(10)]
    assert len(cache._records) == 3  # only the newest stay in memory
    assert cache.get(records[0].key) == records[0]  # older ones come back from SQLite
    for i in range(10):
        cache.remember_image(ImageMeta(f"{i:064x}", "p", 1, 1, "image/png", 1))
    assert len(cache._images) == 3
    assert cache.image_meta(f"{0:064x}") is not None


def test_a_key_mismatch_counts_as_tampering(tmp_path: Path) -> None:
    db = Database(tmp_path / "eyes.db")
    cache = EvidenceCache(db)
    good = cache.put(record("a" * 64))
    # Copy a valid record under another key: its body still names the old key.
    other_key = EvidenceKey("c" * 64, "local", Variant.EVIDENCE)
    row = db.query_one("SELECT * FROM evidence")
    assert row is not None
    db.execute(
        "INSERT INTO evidence VALUES (?,?,?,?,?,?,?,?)",
        (other_key.text, "c" * 64, "local", Variant.EVIDENCE.value, None,
         row["record_sha256"], row["record"], 0),
    )
    with pytest.raises(EvidenceIntegrityError) as info:
        cache.get(other_key)
    assert info.value.code == "EVIDENCE_CACHE_TAMPERED"
    assert cache.get(other_key) is None  # quarantined
    assert cache.get(good.key) == good
