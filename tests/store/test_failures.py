"""A full disk is ``STORE_FULL`` wherever the data directory is written, and nothing queued
is lost: SQLite's ``SQLITE_FULL`` (a database at its ``max_page_count``, a real full disk at
``COMMIT``, the WAL index that cannot grow), ``ENOSPC`` for blobs and keyrings on a real
tmpfs; queued rows outlive the failure and are written once there is room."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from deepseek_eyes.audit.keys import AuditKeyring
from deepseek_eyes.errors import StoreError
from deepseek_eyes.store import chain
from deepseek_eyes.store.blobs import BlobStore
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.failures import store_error
from helpers import SmallDisk

_BIG = "x" * 200_000  # more pages than a capped database has left


def _audit_rows(db: Database) -> int:
    return int(db.query("SELECT COUNT(*) FROM audit")[0][0])


def _capped(path: Path) -> Database:
    """A database that can grow by no page (``PRAGMA max_page_count``: SQLITE_FULL)."""
    db = Database(path)
    pages = db.query("PRAGMA page_count")[0][0]
    db.query(f"PRAGMA max_page_count = {pages}")
    return db


def _uncap(db: Database) -> None:
    # On its connection (the limit is one connection's), and not through query(), which
    # would flush the queued rows first and fail on the limit being lifted.
    db._conn.execute("PRAGMA max_page_count = 1073741823")


@pytest.mark.sqlite_only
def test_a_full_database_is_store_full_from_every_method(tmp_path: Path) -> None:
    db = _capped(tmp_path / "eyes.db")
    with pytest.raises(StoreError) as failed:
        db.execute("INSERT INTO audit (ts, kind, details) VALUES (1, 'big', ?)", (_BIG,),
                   chain="audit")
    assert failed.value.code == "STORE_FULL"
    assert "free space there" in failed.value.message
    assert failed.value.details["sqlite_error"] == "SQLITE_FULL"
    assert isinstance(failed.value.__cause__, sqlite3.OperationalError)
    # A transaction's own statement: no raw sqlite3 error leaves the block.
    with pytest.raises(StoreError) as in_block, db.transaction() as conn:
        conn.execute("INSERT INTO audit (ts, kind, details) VALUES (2, 'big', ?)", (_BIG,))
    assert in_block.value.code == "STORE_FULL"
    assert _audit_rows(db) == 0
    db.close()


@pytest.mark.sqlite_only
def test_queued_rows_outlive_a_full_database_and_are_written_after(tmp_path: Path) -> None:
    db = _capped(tmp_path / "eyes.db")
    for i in range(3):
        db.append("INSERT INTO audit (ts, kind, details) VALUES (?, 'queued', ?)",
                  (i, _BIG), chain="audit")
    with pytest.raises(StoreError) as flushed:
        db.flush()
    assert flushed.value.code == "STORE_FULL"
    # A transaction writes the queued rows first: they fail with it, and stay queued.
    with pytest.raises(StoreError) as written, db.transaction() as conn:
        conn.execute("INSERT INTO audit (ts, kind, details) VALUES (9, 'mine', '{}')")
    assert written.value.code == "STORE_FULL"
    _uncap(db)  # space is back: the next write takes them, chained, in order
    db.execute("INSERT INTO audit (ts, kind, details) VALUES (10, 'next', '{}')", chain="audit")
    kinds = [r[0] for r in db.query("SELECT kind FROM audit ORDER BY id")]
    assert kinds == ["queued", "queued", "queued", "next"]
    with db.reading() as conn:  # each row named by an entry (the batch of its transaction)
        chained = [chain.entry_of(conn, "audit", int(r[0]))
                   for r in conn.execute("SELECT id FROM audit").fetchall()]
    assert len(chained) == 4
    assert all(entry is not None for entry in chained)
    db.close()


@pytest.mark.sqlite_only
def test_a_nested_failure_caught_in_between_still_rolls_the_outer_back(
    tmp_path: Path,
) -> None:
    db = _capped(tmp_path / "eyes.db")
    caught: list[str] = []

    def small_then_big_caught() -> None:
        with db.transaction() as conn:
            conn.execute("INSERT INTO audit (ts, kind, details) VALUES (1, 'small', '{}')")
            try:
                with db.transaction() as inner:
                    inner.execute(
                        "INSERT INTO audit (ts, kind, details) VALUES (2, 'big', ?)", (_BIG,))
            except StoreError as exc:  # as a seal that could not be signed is
                caught.append(exc.code)

    with pytest.raises(StoreError) as failed:
        small_then_big_caught()
    assert caught == ["STORE_FULL"]
    assert failed.value.code == "STORE_FULL"
    _uncap(db)
    assert _audit_rows(db) == 0  # the outer block committed nothing
    db.close()


def test_a_row_that_can_never_be_stored_is_dropped_not_retried(tmp_path: Path) -> None:
    db = Database(tmp_path / "eyes.db")
    db.append("INSERT INTO audit (ts, kind, details) VALUES (1, NULL, '{}')")  # NOT NULL
    with pytest.raises(StoreError) as failed:
        db.flush()
    assert failed.value.code == "STORE_WRITE_FAILED"
    db.execute("INSERT INTO audit (ts, kind, details) VALUES (2, 'fine', '{}')")
    assert _audit_rows(db) == 1
    db.close()


def test_the_classification(tmp_path: Path) -> None:
    for number in (errno.ENOSPC, errno.EDQUOT):
        full = store_error(OSError(number, "no room"), "cannot write x", tmp_path / "x")
        assert full.code == "STORE_FULL"
        assert str(tmp_path) in full.message
    assert store_error(OSError(errno.EROFS, "read-only file system"), "cannot write x",
                       tmp_path / "x").code == "STORE_READ_ONLY"
    assert store_error(OSError(errno.EIO, "I/O"), "cannot write x",
                       tmp_path / "x").code == "STORE_WRITE_FAILED"
    assert store_error(OSError(errno.EIO, "I/O"), "cannot read x", tmp_path / "x",
                       reading=True).code == "STORE_READ_FAILED"
    already = StoreError("kept", code="STORE_BLOB_MISSING")
    assert store_error(already, "again", tmp_path) is already


# -- a real full disk ---------------------------------------------------------------------


@pytest.mark.sqlite_only
def test_a_full_disk_fails_commit_then_everything_queued_is_written(
    small_disk: SmallDisk,
) -> None:
    db = Database(small_disk.root / "eyes.db")
    db.execute("INSERT INTO audit (ts, kind, details) VALUES (0, 'before', '{}')",
               chain="audit")
    for i in range(3):
        db.append("INSERT INTO audit (ts, kind, details) VALUES (?, 'queued', ?)",
                  (i, "y" * 100_000), chain="audit")
    small_disk.fill()
    with pytest.raises(StoreError) as failed:
        db.flush()
    assert failed.value.code == "STORE_FULL"
    assert str(small_disk.root) in failed.value.message
    with pytest.raises(StoreError) as again:
        db.query("SELECT 1")  # a read flushes first: the same failure, the rows kept
    assert again.value.code == "STORE_FULL"
    small_disk.free()
    assert [r[0] for r in db.query("SELECT kind FROM audit ORDER BY id")] == [
        "before", "queued", "queued", "queued"]
    db.close()


@pytest.mark.sqlite_only
def test_a_wal_index_that_cannot_grow_is_store_full(small_disk: SmallDisk) -> None:
    path = small_disk.root / "eyes.db"
    Database(path).close()  # the WAL and its index are removed at close
    small_disk.fill()
    with pytest.raises(StoreError) as opening:
        Database(path)
    assert opening.value.code == "STORE_FULL"  # SQLITE_IOERR_SHMSIZE on a full disk
    assert opening.value.details["sqlite_error"] in ("SQLITE_IOERR_SHMSIZE", "SQLITE_FULL")
    with pytest.raises(StoreError) as fresh:
        Database(small_disk.root / "new.db")
    assert fresh.value.code == "STORE_FULL"
    small_disk.free()
    Database(path).close()


def test_blobs_and_keyrings_on_a_full_disk_are_store_full(small_disk: SmallDisk) -> None:
    blobs = BlobStore(small_disk.root / "blobs")
    with pytest.raises(StoreError) as too_big:
        blobs.put(b"z" * (32 << 20))  # twice the disk
    assert too_big.value.code == "STORE_FULL"
    assert too_big.value.details["sha256"]
    assert "free space there" in too_big.value.message
    leftovers = [p for p in (small_disk.root / "blobs").rglob("*") if p.is_file()]
    assert leftovers == []  # the temporary file went with the failure
    small_disk.fill()
    with pytest.raises(StoreError) as ring:
        AuditKeyring.load_or_create(small_disk.root / "audit")
    assert ring.value.code == "STORE_FULL"
    assert not (small_disk.root / "audit" / "keyring.json").exists()
    small_disk.free()
    assert blobs.get(blobs.put(b"fits").sha256) == b"fits"
    assert AuditKeyring.load_or_create(small_disk.root / "audit").keys
