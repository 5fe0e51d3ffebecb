"""Blobs in PostgreSQL: the content-addressed store of store/blobs.py, in a table.

Chosen by ``[store] blobs_url`` (``"database"``: the store's own database; or a
``postgresql://`` URL of its own). Same contract as the file store: a blob is named by the
SHA-256 of its bytes, written whole or not at all (one INSERT, committed on its own
connection, so it is stored *before* any row that names it commits: the caller writes the
blob, then the row), immutable (``ON CONFLICT DO NOTHING``: the same bytes twice are one
blob, and an UPDATE or DELETE is refused by a trigger, as for the chain), and verified by
hash when read back, so a row edited behind the store's back is ``STORE_BLOB_CORRUPT``.

Why a connection of its own, not the store's: a blob put from inside an open write
transaction would otherwise commit only with it, and be lost with its rollback while the
file store kept it; and a blob needs no place in the store's write order (the advisory
lock), since writing the same bytes twice is harmless. Its table is made under the
schema lock, as the store's migrations are. S3-compatible object storage is not
built (no such server here to test against).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

from deepseek_eyes.errors import StoreError
from deepseek_eyes.store.blobs import BlobRef, BlobStore, sha256_hex
from deepseek_eyes.store.failures import store_error

__all__ = ["PgBlobStore"]

_SETUP = (
    "CREATE TABLE IF NOT EXISTS eyes_blobs (sha256 TEXT PRIMARY KEY, size BIGINT NOT NULL,"
    " data BYTEA NOT NULL, created_at DOUBLE PRECISION NOT NULL"
    " DEFAULT extract(epoch FROM clock_timestamp()))",
    "CREATE OR REPLACE FUNCTION eyes_blobs_refuse() RETURNS trigger LANGUAGE plpgsql AS $fn$"
    " BEGIN RAISE EXCEPTION 'blobs are immutable' USING ERRCODE ="
    " 'integrity_constraint_violation'; END $fn$",
    "DROP TRIGGER IF EXISTS eyes_blobs_immutable ON eyes_blobs",
    "CREATE TRIGGER eyes_blobs_immutable BEFORE UPDATE OR DELETE ON eyes_blobs"
    " FOR EACH ROW EXECUTE FUNCTION eyes_blobs_refuse()",
)


class PgBlobStore(BlobStore):
    """Blobs in the ``eyes_blobs`` table of a PostgreSQL database."""

    def __init__(self, root: Path, url: str, *, password: str | None = None,
                 pool_size: int | None = None) -> None:
        super().__init__(root)  # kept for what names the data directory's layout
        from deepseek_eyes.store.postgres import DEFAULT_POOL_SIZE, SCHEMA_LOCK, connect

        self.url = url
        self._lock = threading.Lock()
        self._conn = connect(url, password=password, pool_size=pool_size or DEFAULT_POOL_SIZE)
        try:
            with self._lock:
                self._conn.execute("BEGIN")
                self._conn.raw(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK})")
                for statement in _SETUP:
                    self._conn.raw(statement)
                self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._conn.close()
            raise store_error(exc, "cannot open the blob store", root) from exc

    def _run(self, sql: str, params: tuple[Any, ...], action: str, *,
             reading: bool = False) -> list[Any]:
        with self._lock:
            try:
                return list(self._conn.execute_idempotent(sql, params).fetchall())
            except sqlite3.Error as exc:
                raise store_error(exc, action, self.root, reading=reading) from exc

    def contains(self, sha256: str) -> bool:
        self.path_for(sha256)  # a malformed name is refused the same way
        return bool(self._run("SELECT 1 FROM eyes_blobs WHERE sha256 = ?", (sha256,),
                              "cannot read the blob store", reading=True))

    def put(self, data: bytes, *, sha256: str | None = None) -> BlobRef:
        """Raises:
            StoreError: ``STORE_DATABASE_UNAVAILABLE``, ``STORE_FULL`` or
                ``STORE_WRITE_FAILED``; nothing is stored then."""
        digest = sha256 or sha256_hex(data)
        self.path_for(digest)
        self._run("INSERT INTO eyes_blobs (sha256, size, data) VALUES (?,?,?)"
                  " ON CONFLICT DO NOTHING", (digest, len(data), bytes(data)),
                  "cannot write blob")
        return BlobRef(digest, len(data))

    def get(self, sha256: str, *, verify: bool = True) -> bytes:
        """Raises:
            StoreError: ``STORE_BLOB_MISSING``, ``STORE_BLOB_CORRUPT`` (with ``verify``),
                ``STORE_DATABASE_UNAVAILABLE`` or ``STORE_READ_FAILED``."""
        self.path_for(sha256)
        rows = self._run("SELECT data FROM eyes_blobs WHERE sha256 = ?", (sha256,),
                         "cannot read blob", reading=True)
        if not rows:
            raise StoreError("blob not found", code="STORE_BLOB_MISSING",
                             details={"sha256": sha256})
        data = bytes(rows[0][0])
        if verify and sha256_hex(data) != sha256:
            raise StoreError("blob no longer matches its address", code="STORE_BLOB_CORRUPT",
                             details={"sha256": sha256})
        return data

    def close(self) -> None:
        with self._lock:
            self._conn.close()
