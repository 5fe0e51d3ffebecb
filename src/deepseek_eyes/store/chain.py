"""One hash chain over every audit record in the database.

Each record a store writes to an audited table — an attempt, an evidence record, an image,
an audit row (MCP calls, terminal plans and receipts, model requests, settings changes), a
usage row, a session, a session event, a turn — gets one chain entry *in the same
transaction*. The entry names the record (``ref_table``/``ref_id``, the SQLite rowid), holds
the SHA-256 of the record's canonical bytes (``digest``) and the hash of the entry before it
(``prev``); its own ``hash`` covers all of that. Records with no row of their own (a
retention cut, a quarantine) keep their canonical JSON in the entry's ``body``.

Canonical bytes of a row are its columns as compact, key-sorted JSON, with large content
columns (an evidence record's text, a session message's body) replaced by their SHA-256.
So the chain commits to every byte of every record, while an export of the chain carries
hashes of what was said, not the conversation itself.

What the chain proves (``deepseek_eyes.audit.verify``): a changed byte in a record or an
entry, a removed, inserted or reordered entry, and a record added or removed outside the
chain. What it cannot prove alone: that the newest entries were not cut off together with
the stored checkpoints after them. Signed checkpoints pinned elsewhere close that gap.

Appends serialize on SQLite's write lock (``BEGIN IMMEDIATE``), so several processes
sharing the database extend one chain. Tables deleted from by design (the attempts log's
trim, evidence quarantine) record the cut as a ``retention`` entry first, with a signed
checkpoint naming it in the same transaction (``deepseek_eyes.audit.checkpoints.record_cut``):
an unsigned retention entry excuses nothing, since anyone who can write the file could
append one.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from deepseek_eyes import canonical_json

__all__ = [
    "CHAINED_TABLES",
    "GENESIS",
    "ChainWriter",
    "Record",
    "SqlValue",
    "adopt_existing",
    "canonical_bytes",
    "entry_hash",
    "insert",
    "iter_entries",
    "project_row",
    "read_record",
    "read_records",
    "record_digest",
    "ref_text",
    "table_of_insert",
]

GENESIS = "0" * 64

#: The audited tables, each with the columns whose content enters the chain as a hash.
CHAINED_TABLES: Mapping[str, frozenset[str]] = {
    "images": frozenset(),
    "evidence": frozenset({"record"}),
    "evidence_quarantine": frozenset({"record"}),
    "attempts": frozenset(),
    "audit": frozenset(),
    "usage": frozenset(),
    "sessions": frozenset(),
    "events": frozenset({"body"}),
    "turns": frozenset(),
}

#: A value SQLite hands back for a column.
SqlValue = int | float | str | bytes | None
#: A chained record as the chain sees it: an audited row's columns by name, its content
#: columns replaced by their ``sha256:`` (:func:`project_row`). Keys are the table's columns.
Record = dict[str, SqlValue]

_HEX = re.compile(r"^[0-9a-f]{64}$")
_dumps = canonical_json.CANONICAL.dumps  # a scalar's canonical text, for entry_hash

_INSERT = re.compile(r"^\s*INSERT\s+(?:OR\s+\w+\s+)?INTO\s+(\w+)", re.IGNORECASE)


def canonical_bytes(value: Any) -> bytes:
    """``value`` in the :data:`~deepseek_eyes.canonical_json.CANONICAL` format: every
    digest and entry hash of the chain is over these bytes."""
    return canonical_json.dumps_bytes(value)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def table_of_insert(sql: str) -> str:
    """The audited table an INSERT writes to.

    Raises:
        ValueError: for any other statement or table (a programming error, not input).
    """
    match = _INSERT.match(sql)
    if match is None or match.group(1) not in CHAINED_TABLES:
        raise ValueError(f"not an INSERT into an audited table: {sql[:60]!r}")
    return match.group(1)


def project_row(table: str, row: Mapping[str, SqlValue]) -> Record:
    """A row as the chain sees it: content columns replaced by ``sha256:<hex>``."""
    hashed = CHAINED_TABLES[table]
    out: Record = {}
    for column, value in row.items():
        if column in hashed and value is not None:
            text = value if isinstance(value, bytes) else str(value).encode("utf-8")
            out[column] = "sha256:" + _sha256(text)
        else:
            out[column] = value
    return out


def read_records(
    conn: sqlite3.Connection, table: str, rowids: Sequence[int]
) -> dict[int, Record]:
    """The projected records at ``rowids`` (those still there), in one query."""
    if table not in CHAINED_TABLES:
        raise ValueError(f"not an audited table: {table}")
    cur = conn.execute(
        f"SELECT rowid AS _rowid_, * FROM {table} WHERE rowid IN"  # noqa: S608
        " (SELECT value FROM json_each(?))", (json.dumps(list(rowids)),))
    names = [d[0] for d in cur.description][1:]
    return {
        int(row[0]): project_row(table, dict(zip(names, row[1:], strict=True))) for row in cur
    }


def read_record(conn: sqlite3.Connection, table: str, rowid: int) -> Record | None:
    """The projected record at ``rowid`` of an audited table, or None when it is gone."""
    if table not in CHAINED_TABLES:
        raise ValueError(f"not an audited table: {table}")
    cur = conn.execute(f"SELECT * FROM {table} WHERE rowid = ?", (rowid,))  # noqa: S608
    row = cur.fetchone()
    if row is None:
        return None
    names = [d[0] for d in cur.description]
    return project_row(table, dict(zip(names, row, strict=True)))


def record_digest(record: Mapping[str, Any]) -> str:
    return _sha256(canonical_bytes(record))


def entry_hash(
    seq: int, ts: float, kind: str, ref: str | None, digest: str, prev: str
) -> str:
    """The hash an entry carries: it commits to the entry before and to the record.

    It hashes ``canonical_bytes({"v": 1, "seq", "ts", "kind", "ref", "digest", "prev"})``,
    written out here key by key in sorted order (the same bytes, at a third of the cost:
    verifying is mostly this). ``digest`` and ``prev`` are hex; the rest goes through JSON.
    """
    fast = (type(seq) is int and type(ts) in (float, int) and isinstance(kind, str)
            and (ref is None or isinstance(ref, str)) and isinstance(digest, str)
            and isinstance(prev, str) and _HEX.match(digest) and _HEX.match(prev))
    if not fast:  # only a tampered export gets here; its values hash as they are
        return _sha256(canonical_bytes({
            "v": 1, "seq": seq, "ts": ts, "kind": kind, "ref": ref, "digest": digest,
            "prev": prev,
        }))
    text = (f'{{"digest":"{digest}","kind":{_dumps(kind)},"prev":"{prev}",'
            f'"ref":{_dumps(ref)},"seq":{int(seq)},"ts":{_dumps(ts)},"v":1}}')
    return _sha256(text.encode("utf-8"))


def ref_text(table: str | None, rowid: int | None) -> str | None:
    return None if table is None or rowid is None else f"{table}:{rowid}"


class ChainWriter:
    """Appends entries inside an open write transaction on ``conn``.

    The tail is read once, when the writer is made: the transaction holds SQLite's write
    lock, so no other process can extend the chain until it commits.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        row = conn.execute("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1").fetchone()
        self.seq, self.head = (int(row[0]), str(row[1])) if row else (0, GENESIS)

    def add_row(self, kind: str, table: str, rowid: int, ts: float) -> int:
        record = read_record(self._conn, table, rowid)
        if record is None:
            raise ValueError(f"{table}:{rowid} vanished inside its own transaction")
        return self._add(kind, table, rowid, None, record_digest(record), ts)

    def add_body(self, kind: str, body: Mapping[str, Any], ts: float) -> int:
        text = canonical_bytes(dict(body))
        return self._add(kind, None, None, text.decode("utf-8"), _sha256(text), ts)

    def _add(
        self, kind: str, table: str | None, rowid: int | None, body: str | None, digest: str,
        ts: float,
    ) -> int:
        seq = self.seq + 1
        value = entry_hash(seq, ts, kind, ref_text(table, rowid), digest, self.head)
        self._conn.execute(
            "INSERT INTO chain (seq, ts, kind, ref_table, ref_id, body, digest, prev, hash)"
            " VALUES (?,?,?,?,?,?,?,?,?)",
            (seq, ts, kind, table, rowid, body, digest, self.head, value),
        )
        self.seq, self.head = seq, value
        return seq


def insert(
    conn: sqlite3.Connection, kind: str, sql: str, params: Sequence[Any], ts: float
) -> int | None:
    """Run one INSERT into an audited table and chain the row, inside the caller's
    transaction; returns the rowid, or None when ``INSERT OR IGNORE`` inserted nothing."""
    table = table_of_insert(sql)
    cur = conn.execute(sql, params)
    if cur.rowcount <= 0 or cur.lastrowid is None:
        return None
    ChainWriter(conn).add_row(kind, table, int(cur.lastrowid), ts)
    return int(cur.lastrowid)


def adopt_existing(conn: sqlite3.Connection, ts: float) -> int:
    """Chain the rows a database held before it had a chain (migration 4); returns how many.

    They are adopted, not vouched for: the chain proves they did not change *after* this.
    """
    writer = ChainWriter(conn)
    count = 0
    for table in CHAINED_TABLES:
        rowids = [int(r[0]) for r in conn.execute(f"SELECT rowid FROM {table} ORDER BY rowid")]  # noqa: S608
        for rowid in rowids:
            writer.add_row(f"adopted.{table}", table, rowid, ts)
            count += 1
    return count


def iter_entries(conn: sqlite3.Connection, *, batch: int = 5000) -> Iterator[sqlite3.Row]:
    """Every entry in ``seq`` order, read in batches."""
    last = -1
    while True:
        cur = conn.execute(
            "SELECT seq, ts, kind, ref_table, ref_id, body, digest, prev, hash FROM chain"
            " WHERE seq > ? ORDER BY seq LIMIT ?", (last, batch))
        cur.row_factory = sqlite3.Row
        rows = cur.fetchall()
        if not rows:
            return
        yield from rows
        last = int(rows[-1]["seq"])
