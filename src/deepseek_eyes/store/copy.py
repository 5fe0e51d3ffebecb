"""Copy a data directory's store (the SQLite file and the blob files) into an empty
PostgreSQL database: ``deepseek-eyes store migrate --to postgresql://…``.

Rows keep their identity: every table is copied with its integer keys and, for the chained
tables keyed by text, SQLite's rowid in the ``rowid`` column (the chain names records by
rowid), so the chain's entries name the same records on the target and verify there as
they did at the source (the command runs the verification on the target). Identity
sequences continue after the copied rows. Blobs go to the target's blob table, each
checked against its name on the way.

Why only into an empty database: a copy merged into rows already there would interleave two
chains and two sets of rowids; a target with any table of its own is refused
(``STORE_MIGRATE_TARGET_NOT_EMPTY``) before anything is written. The source is migrated to
this version first (as any start of the runtime would), then read in one snapshot.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from deepseek_eyes.errors import StoreError
from deepseek_eyes.store import pg_schema
from deepseek_eyes.store.blobs import sha256_hex
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.failures import store_error

__all__ = ["CopySummary", "copy_to_postgresql"]

_BATCH = 500


@dataclass
class CopySummary:
    rows: dict[str, int] = field(default_factory=dict)
    blobs: int = 0
    blob_bytes: int = 0


def _target_tables(url: str, password: str | None) -> int:
    from deepseek_eyes.store.postgres import connect

    conn = connect(url, password=password)
    try:
        row = conn.execute("SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()"
                           ).fetchone()
        return int(row[0]) if row else 0
    except sqlite3.Error as exc:
        raise store_error(exc, "cannot read the target database", url, reading=True) from exc
    finally:
        conn.close()


def copy_to_postgresql(root: Path, url: str, *, password: str | None = None) -> CopySummary:
    """Copy the store of the data directory ``root`` into the empty database at ``url``.

    Raises:
        StoreError: ``STORE_MIGRATE_TARGET_NOT_EMPTY`` for a target with tables;
            ``STORE_DATABASE_UNAVAILABLE`` and the other store codes as they strike.
    """
    from deepseek_eyes.store.pg_blobs import PgBlobStore
    from deepseek_eyes.store.postgres import PgConnection, redact

    if _target_tables(url, password):
        raise StoreError(
            f"the target database {redact(url)} is not empty: store migrate copies into an "
            "empty database only (create one: CREATE DATABASE …)",
            code="STORE_MIGRATE_TARGET_NOT_EMPTY", details={"database": redact(url)})
    source_path = root / "eyes.db"
    Database(source_path, url="").close()  # migrated to this version, as a start would
    source = Database.open_read_only(source_path, url="")
    target = Database(source_path, url=url, password=password)
    summary = CopySummary()
    try:
        with source.reading() as read, target.transaction() as conn:
            assert isinstance(conn, PgConnection)
            for table, definition in pg_schema.tables().items():
                summary.rows[table] = _copy_table(read, conn, table, definition)
    finally:
        source.close()
        target.close()
    blobs = PgBlobStore(root / "blobs", url, password=password)
    try:
        for path in sorted((root / "blobs").glob("*/*/*")):
            data = path.read_bytes()
            if sha256_hex(data) != path.name:
                raise StoreError(f"blob {path.name} does not match its name; not copied",
                                 code="STORE_BLOB_CORRUPT", details={"sha256": path.name})
            blobs.put(data, sha256=path.name)
            summary.blobs += 1
            summary.blob_bytes += len(data)
    finally:
        blobs.close()
    return summary


def _copy_table(read: sqlite3.Connection, conn: object, table: str,
                definition: pg_schema.TableDef) -> int:
    from deepseek_eyes.store.postgres import PgConnection

    assert isinstance(conn, PgConnection)
    columns = [c.name for c in definition.columns]
    with_rowid = pg_schema.rowid_column(table) == "rowid"
    selected = (["rowid"] if with_rowid else []) + columns
    names = ", ".join(selected)
    marks = ", ".join(["?"] * len(selected))
    cur = read.execute(f"SELECT {names} FROM {table} ORDER BY rowid")  # noqa: S608
    insert = (f"INSERT INTO {table} ({names}) OVERRIDING SYSTEM VALUE VALUES ({marks})")  # noqa: S608
    count = 0
    while True:
        rows = cur.fetchmany(_BATCH)
        if not rows:
            break
        conn.copy_rows(insert, [tuple(r) for r in rows])
        count += len(rows)
    for column in ([definition.integer_key] if definition.integer_key else []) + (
            ["rowid"] if with_rowid else []):
        conn.raw(f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'),"  # noqa: S608 - names from the migrations
                 f" GREATEST((SELECT MAX({column}) FROM {table}), 1),"
                 f" (SELECT MAX({column}) FROM {table}) IS NOT NULL)")
    return count
