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

Log rows written together (the queued rows of :meth:`Database.append
<deepseek_eyes.store.db.Database.append>`: attempts, audit rows, usage) get one entry for the
whole batch once there are :data:`FOLD_AT` or more of them: a *batch entry*, kind
``chain.batch``, is a body entry (``ref`` null, the entry hashed exactly as any other) whose
body names each record it covers, in the order written, with that record's digest, in runs
of consecutive rowids of one table and kind::

    {"records":[["audit","mcp.call",12,"<hex><hex>"],["usage","usage",7,"<hex>"]],"v":2}

(canonical JSON: ``[table, kind, first rowid, digests]``, the run's records' SHA-256 in hex
one after another, 64 characters each, for rowids ``first``, ``first + 1`` …). The body's
hash is the entry's ``digest``, so the entry commits to every record's identity, kind, place
and bytes; verify
checks each record against its own digest, so a changed record is still named exactly
(``audit:12``), a record trimmed by retention is excused record by record, and a record
added behind the chain's back is found because no entry, batch or single, names it. What
it saves: one entry row, one index entry and one entry hash per record (the write path's
cost was mostly those: ``bench/audit_verify.py``). Smaller batches, and records written in
a transaction of their own (a turn's session events and turn record, an evidence record),
keep one entry each, which ``audit show`` and the tamper tests address record by record.
Entries of both forms interleave in one chain; a database written before batch entries
existed holds only single entries, which verify as they always did (no migration).

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
import json.encoder
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from deepseek_eyes import canonical_json
from deepseek_eyes.store import stored as _stored

__all__ = [
    "BATCH",
    "CHAINED_TABLES",
    "FOLD_AT",
    "GENESIS",
    "ChainWriter",
    "Connection",
    "Record",
    "SqlValue",
    "adopt_existing",
    "batch_members",
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

#: The kind of a batch entry (see the module docstring); no record is of this kind.
BATCH = "chain.batch"
#: Log rows written together get one batch entry from this many on; fewer get one each.
FOLD_AT = 16

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
_HEXES = re.compile(r"[0-9a-f]+")
#: A str's canonical JSON: what ``canonical_json.CANONICAL`` writes for it (not escaped to ASCII).
_encode_str = json.encoder.encode_basestring

_INSERT = re.compile(r"^\s*INSERT\s+(?:OR\s+\w+\s+)?INTO\s+(\w+)", re.IGNORECASE)


def canonical_bytes(value: Any) -> bytes:
    """``value`` in the :data:`~deepseek_eyes.canonical_json.CANONICAL` format: every
    digest and entry hash of the chain is over these bytes."""
    return canonical_json.dumps_bytes(value)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_TABLE_OF: dict[str, str] = {}


def table_of_insert(sql: str) -> str:
    """The audited table an INSERT writes to.

    Raises:
        ValueError: for any other statement or table (a programming error, not input).
    """
    table = _TABLE_OF.get(sql)
    if table is not None:
        return table
    match = _INSERT.match(sql)
    if match is None or match.group(1) not in CHAINED_TABLES:
        raise ValueError(f"not an INSERT into an audited table: {sql[:60]!r}")
    if len(_TABLE_OF) < 256:  # a few fixed strings
        _TABLE_OF[sql] = match.group(1)
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
    if getattr(conn, "dialect", "sqlite") == "postgresql":  # store/postgres.py
        cur = conn.execute(
            f"SELECT rowid AS _rowid_, * FROM {table} WHERE rowid"  # noqa: S608
            " = ANY(CAST(? AS BIGINT[]))", ("{" + ",".join(map(str, map(int, rowids))) + "}",))
    else:
        cur = conn.execute(
            f"SELECT rowid AS _rowid_, * FROM {table} WHERE rowid IN"  # noqa: S608
            " (SELECT value FROM json_each(?))", (json.dumps(list(rowids)),))
    names = [d[0] for d in cur.description][1:]
    return {
        int(row[0]): project_row(table, _stored_columns(names, row[1:])) for row in cur
    }


def _stored_columns(names: Sequence[str], values: Sequence[Any]) -> dict[str, SqlValue]:
    """A row's columns by name, without PostgreSQL's ``rowid`` column (store/pg_schema.py:
    a column there, hidden in SQLite, never part of a record)."""
    return {name: value for name, value in zip(names, values, strict=True)
            if name != "rowid"}


def read_record(conn: sqlite3.Connection, table: str, rowid: int) -> Record | None:
    """The projected record at ``rowid`` of an audited table, or None when it is gone."""
    if table not in CHAINED_TABLES:
        raise ValueError(f"not an audited table: {table}")
    cur = conn.execute(f"SELECT * FROM {table} WHERE rowid = ?", (rowid,))  # noqa: S608
    row = cur.fetchone()
    if row is None:
        return None
    names = [d[0] for d in cur.description]
    return project_row(table, _stored_columns(names, row))


_ORDER: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}


def record_digest(record: Mapping[str, Any]) -> str:
    """SHA-256 of a record's canonical bytes. A record of plain column values (str, int,
    finite float, None) is written out key by key, the keys' order and JSON kept per set of
    columns (a table's rows share one); anything else goes through the encoder (the same
    bytes: ``tests/store/test_stored_row.py`` checks both against ``canonical_bytes``)."""
    keys = tuple(record)
    order = _ORDER.get(keys)
    if order is None:
        if not keys or not all(type(k) is str for k in keys):
            return _sha256(canonical_bytes(record))
        order = tuple((k, ("{" if n == 0 else ",") + _encode_str(k) + ":")
                      for n, k in enumerate(sorted(keys)))
        if len(_ORDER) < 256:  # one per audited table and shape
            _ORDER[keys] = order
    parts: list[str] = []
    for key, prefix in order:
        value = record[key]
        kind = type(value)
        if kind is str:
            text = _encode_str(value)
        elif kind is int:
            text = int.__repr__(value)
        elif value is None:
            text = "null"
        elif kind is float and value - value == 0.0:
            text = float.__repr__(value)
        else:  # bytes, bool, NaN or an infinity: as the encoder writes or refuses it
            return _sha256(canonical_bytes(record))
        parts.append(prefix)
        parts.append(text)
    parts.append("}")
    return _sha256("".join(parts).encode("utf-8"))


def entry_hash(
    seq: int, ts: float, kind: str, ref: str | None, digest: str, prev: str
) -> str:
    """The hash an entry carries: it commits to the entry before and to the record.

    It hashes ``canonical_bytes({"v": 1, "seq", "ts", "kind", "ref", "digest", "prev"})``,
    written out here key by key in sorted order (:func:`_hash_entry`: the same bytes, at a
    fraction of the cost; verifying is mostly this). ``digest`` and ``prev`` are hex.
    """
    ts_json = _number_json(ts)
    fast = (type(seq) is int and ts_json is not None and isinstance(kind, str)
            and (ref is None or isinstance(ref, str)) and isinstance(digest, str)
            and isinstance(prev, str) and _HEX.match(digest) and _HEX.match(prev))
    if not fast or ts_json is None:  # a tampered export gets here; its values hash as they are
        return _sha256(canonical_bytes({
            "v": 1, "seq": seq, "ts": ts, "kind": kind, "ref": ref, "digest": digest,
            "prev": prev,
        }))
    return _hash_entry(seq, ts_json, _kind_json(kind),
                       "null" if ref is None else _encode_str(ref), digest, prev)


def _number_json(value: object) -> str | None:
    """A finite float's or an int's canonical JSON (their ``repr``, as ``json`` writes
    them); None for anything else (NaN and the infinities, which the strict format
    refuses)."""
    if type(value) is float:
        return float.__repr__(value) if value - value == 0.0 else None
    if type(value) is int:
        return int.__repr__(value)
    return None


def _hash_entry(seq: int, ts_json: str, kind_json: str, ref_json: str, digest: str,
                prev: str) -> str:
    """SHA-256 of an entry's canonical bytes, from its fields' JSON (keys in sorted order)."""
    return hashlib.sha256(
        f'{{"digest":"{digest}","kind":{kind_json},"prev":"{prev}","ref":{ref_json},'
        f'"seq":{seq},"ts":{ts_json},"v":1}}'.encode()).hexdigest()


def ref_text(table: str | None, rowid: int | None) -> str | None:
    return None if table is None or rowid is None else f"{table}:{rowid}"


class ChainWriter:
    """Appends entries inside an open write transaction on ``conn``.

    The tail is read once, when the writer is made: the transaction holds SQLite's write
    lock, so no other process can extend the chain until it commits. Get one with
    :meth:`of`, so a transaction's records share it.
    """

    def __init__(self, conn: sqlite3.Connection, *, buffered: bool = False) -> None:
        self._conn = conn
        row = conn.execute("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1").fetchone()
        self.seq, self.head = (int(row[0]), str(row[1])) if row else (0, GENESIS)
        self._buffered = buffered
        self._rows: list[tuple[Any, ...]] = []
        self._ts: object = None  # the last entry's time and its JSON (see _add)
        #: The connection's row encoders (``_encoder_of`` fills it), looked up per row.
        self._encoders: Mapping[str, _stored.RowEncoder | None] = (
            conn.encoders if isinstance(conn, Connection) else {})
        self._ts_json: str | None = None

    @classmethod
    def of(cls, conn: sqlite3.Connection) -> ChainWriter:
        """The writer of the write transaction open on ``conn``: one per transaction of a
        :class:`Connection` (its tail read once, its entries written in one statement
        before the commit), a fresh unbuffered one on any other connection."""
        if isinstance(conn, Connection) and conn.tracking and conn.in_transaction:
            if conn.writer is None:
                conn.writer = cls(conn, buffered=True)
            return conn.writer
        return cls(conn)

    def add_row(self, kind: str, table: str, rowid: int, ts: float) -> int:
        """Chain the row at ``rowid`` as it reads back (rows already stored)."""
        record = read_record(self._conn, table, rowid)
        if record is None:
            raise ValueError(f"{table}:{rowid} vanished inside its own transaction")
        return self._add(kind, table, rowid, None, record_digest(record), ts)

    def add_insert(
        self, kind: str, table: str, sql: str, params: Sequence[Any], rowid: int, ts: float
    ) -> int:
        """Chain the row ``sql`` just inserted with ``params`` at ``rowid``: its canonical
        bytes computed from the values and the declared column types
        (:class:`~deepseek_eyes.store.stored.RowEncoder`), read back only when those do not
        say for certain what was stored."""
        return self._add(kind, table, rowid, None, self._digest_of(table, sql, params, rowid),
                         ts)

    def _digest_of(self, table: str, sql: str, params: Sequence[Any], rowid: int) -> str:
        """The digest of the row ``sql`` just inserted with ``params`` at ``rowid``."""
        encoder = self._encoders.get(sql)
        if encoder is None:
            encoder = _encoder_of(self._conn, table, sql)
        digest = None
        if encoder is not None:
            fast = encoder.fast_hex  # the common values, without digest()'s call
            if fast is not None and len(params) == encoder.width:
                digest = fast(params, rowid)
            if digest is None:
                digest = encoder.digest(params, rowid)
        if digest is None:
            record = read_record(self._conn, table, rowid)
            if record is None:
                raise ValueError(f"{table}:{rowid} vanished inside its own transaction")
            digest = record_digest(record)
        return digest

    def add_inserts(self, rows: Sequence[tuple[str, str, str, Sequence[Any], int]],
                    ts: float) -> None:
        """Chain rows just inserted, in the order written, each ``(kind, table, sql,
        params, rowid)``: one batch entry for :data:`FOLD_AT` or more, else one entry each
        (see the module docstring)."""
        if len(rows) < FOLD_AT:
            for kind, table, sql, params, rowid in rows:
                self.add_insert(kind, table, sql, params, rowid, ts)
            return
        # add_batch's runs, made in the pass that makes the digests (one loop a record).
        encoders = self._encoders
        runs: list[tuple[str, str, int, list[str]]] = []
        digests: list[str] = []
        last_table = last_kind = ""
        after = 0
        for kind, table, sql, params, rowid in rows:
            encoder = encoders.get(sql)
            fast = encoder.fast_hex if encoder is not None else None
            digest = fast(params, rowid) if fast is not None \
                and len(params) == encoder.width else None  # type: ignore[union-attr]
            if digest is None:
                digest = self._digest_of(table, sql, params, rowid)
            if rowid != after or table != last_table or kind != last_kind:
                if kind == BATCH or table not in CHAINED_TABLES:
                    raise ValueError(f"not a record to chain: {table}:{rowid} ({kind})")
                digests = []
                runs.append((table, kind, rowid, digests))
                last_table, last_kind = table, kind
            digests.append(digest)
            after = rowid + 1
        self._add_runs(runs, ts)

    def add_batch(self, members: Sequence[tuple[str, str, int, str]], ts: float) -> int:
        """One batch entry covering ``members`` (``(kind, table, rowid, digest)``, in the
        order written; the rows are stored already): its body in runs (see the module
        docstring).

        Raises:
            ValueError: for a member that is not an audited table's row with a digest.
        """
        runs: list[tuple[str, str, int, list[str]]] = []
        run: tuple[str, str, int, list[str]] | None = None
        after = 0  # the rowid the open run would take next
        for kind, table, rowid, digest in members:
            if run is not None and rowid == after and table == run[0] and kind == run[1]:
                run[3].append(digest)
            else:
                if table not in CHAINED_TABLES or type(rowid) is not int or kind == BATCH:
                    raise ValueError(f"not a record to chain: {table}:{rowid} ({kind})")
                run = (table, kind, rowid, [digest])
                runs.append(run)
            after = rowid + 1
        return self._add_runs(runs, ts)

    def _add_runs(self, runs: Sequence[tuple[str, str, int, list[str]]], ts: float) -> int:
        pieces = []
        for table, kind, first, digests in runs:
            hexes = "".join(digests)
            if len(hexes) != 64 * len(digests) or not _HEXES.fullmatch(hexes):
                raise ValueError("a record's digest is not SHA-256 hex")
            # Canonical JSON (a table name is \w+, a kind is written as JSON, hex is itself).
            pieces.append(f'["{table}",{_KIND_JSON.get(kind) or _kind_json(kind)},{first},'
                          f'"{hexes}"]')
        body = '{"records":[' + ",".join(pieces) + '],"v":2}'
        return self._add(BATCH, None, None, body, _sha256(body.encode("utf-8")), ts)

    def add_body(self, kind: str, body: Mapping[str, Any], ts: float) -> int:
        if kind == BATCH:
            raise ValueError("a batch entry is made by add_batch")
        text = canonical_bytes(dict(body))
        return self._add(kind, None, None, text.decode("utf-8"), _sha256(text), ts)

    def _add(
        self, kind: str, table: str | None, rowid: int | None, body: str | None, digest: str,
        ts: float,
    ) -> int:
        seq = self.seq + 1
        if ts is self._ts:  # a batch's entries share one time: its JSON is made once
            ts_json: str | None = self._ts_json
        else:
            ts_json = self._ts_json = _number_json(ts)
            self._ts = ts
        if ts_json is not None and table is not None and type(rowid) is int:  # our own hex:
            # entry_hash's bytes, key by key in sorted order, with the JSON of kind and ref
            # spelled once per (kind, table) (a table name is \w+, a rowid an int's digits)
            kind_piece = _KIND_PIECE.get(kind) or _kind_piece(kind)
            ref_piece = _REF_PIECE.get(table) or _ref_piece(table)
            value = hashlib.sha256(
                f'{{"digest":"{digest}{kind_piece}{self.head}{ref_piece}{rowid}","seq":{seq},'
                f'"ts":{ts_json},"v":1}}'.encode()).hexdigest()
        elif ts_json is not None:
            ref = ref_text(table, rowid)
            value = _hash_entry(seq, ts_json, _kind_json(kind),
                                "null" if ref is None else f'"{ref}"', digest, self.head)
        else:
            value = entry_hash(seq, ts, kind, ref_text(table, rowid), digest, self.head)
        row = (seq, ts, kind, table, rowid, body, digest, self.head, value)
        if self._buffered:
            self._rows.append(row)
        else:
            self._conn.execute(_INSERT_ENTRY, row)
        self.seq, self.head = seq, value
        return seq

    def write(self) -> None:
        """Write the buffered entries (before the commit, and before anything in the
        transaction reads the chain table)."""
        if self._rows:
            rows, self._rows = self._rows, []
            _insert_entries(self._conn, rows)


_KIND_JSON: dict[str, str] = {}
#: The entry's canonical text between ``digest`` and ``prev``, per kind, and between
#: ``prev`` and the rowid, per table (see :meth:`ChainWriter._add`).
_KIND_PIECE: dict[str, str] = {}
_REF_PIECE: dict[str, str] = {}


def _kind_piece(kind: str) -> str:
    piece = f'","kind":{_kind_json(kind)},"prev":"'
    if len(_KIND_PIECE) < 1024:  # a few dozen kinds
        _KIND_PIECE[kind] = piece
    return piece


def _ref_piece(table: str) -> str:
    piece = f'","ref":"{table}:'  # a table name is \w+: its JSON is itself
    if len(_REF_PIECE) < 256:
        _REF_PIECE[table] = piece
    return piece


def _kind_json(kind: str) -> str:
    """A kind's JSON string, remembered: kinds are a few dozen names, hashed per entry."""
    text = _KIND_JSON.get(kind)
    if text is None:
        text = _encode_str(kind)
        if len(_KIND_JSON) < 1024:
            _KIND_JSON[kind] = text
    return text


_INSERT_ENTRY = ("INSERT INTO chain (seq, ts, kind, ref_table, ref_id, body, digest, prev,"
                 " hash) VALUES (?,?,?,?,?,?,?,?,?)")

#: Multi-row forms of :data:`_INSERT_ENTRY`, by rows per statement (at most 64 * 9 = 576
#: parameters, under SQLite's oldest limit of 999).
_ENTRY_CHUNKS = (64, 16, 4)
_INSERT_ENTRIES = {n: _INSERT_ENTRY + ",(?,?,?,?,?,?,?,?,?)" * (n - 1) for n in _ENTRY_CHUNKS}


def _insert_entries(conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert entries in ``seq`` order, many rows per statement: one statement of 64 rows
    costs SQLite about 40% less than 64 runs of the one-row statement (``executemany``),
    measured by ``bench/audit_verify.py``. The last few go one by one."""
    start, total = 0, len(rows)
    for size in _ENTRY_CHUNKS:
        if total - start < size:
            continue
        sql = _INSERT_ENTRIES[size]
        while total - start >= size:
            conn.execute(sql, [value for row in rows[start:start + size] for value in row])
            start += size
    if start < total:
        conn.executemany(_INSERT_ENTRY, rows[start:])


class Connection(sqlite3.Connection):
    """A connection that keeps the row encoders of its audited tables' INSERTs
    (``sqlite3.connect(..., factory=Connection)``), so a chained write does not ask SQLite
    for a table's shape each time, and the chain writer of its open write transaction.
    :meth:`forget_encoders` after any schema change (a migration)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.encoders: dict[str, _stored.RowEncoder | None] = {}
        #: The open write transaction's writer (:meth:`ChainWriter.of`), while ``tracking``.
        self.writer: ChainWriter | None = None
        self.tracking = False

    def forget_encoders(self) -> None:
        self.encoders.clear()

    def begun(self) -> None:
        """A write transaction began (``BEGIN IMMEDIATE`` ran): its writer is made on first
        use and kept until :meth:`ended`."""
        self.writer, self.tracking = None, True

    def write_chain(self) -> None:
        """Write the open transaction's buffered chain entries now."""
        if self.writer is not None:
            self.writer.write()

    def ended(self) -> None:
        self.writer, self.tracking = None, False


def _encoder_of(conn: sqlite3.Connection, table: str, sql: str) -> _stored.RowEncoder | None:
    """The encoder of ``sql``'s rows on ``conn`` (kept on a :class:`Connection`); None for an
    INSERT whose shape :mod:`~deepseek_eyes.store.stored` does not parse."""
    cache = conn.encoders if isinstance(conn, Connection) else {}
    try:
        return cache[sql]
    except KeyError:
        pass
    insert = _stored.parse_insert(sql)
    encoder = None
    if insert is not None and insert.table == table:
        encoder = _stored.RowEncoder(_stored.table_shape(conn, table), insert,
                                     CHAINED_TABLES[table])
    if len(cache) < 256:  # the project's INSERTs are a few fixed strings
        cache[sql] = encoder
    return encoder


def insert(
    conn: sqlite3.Connection, kind: str, sql: str, params: Sequence[Any], ts: float
) -> int | None:
    """Run one INSERT into an audited table and chain the row, inside the caller's
    transaction; returns the rowid, or None when ``INSERT OR IGNORE`` inserted nothing."""
    table = table_of_insert(sql)
    cur = conn.execute(sql, params)
    if cur.rowcount <= 0 or cur.lastrowid is None:
        return None
    ChainWriter.of(conn).add_insert(kind, table, sql, params, int(cur.lastrowid), ts)
    return int(cur.lastrowid)


def batch_members(body: object) -> list[tuple[str, int, str, str]]:
    """A batch entry's records, ``(table, rowid, kind, digest)`` in the order written
    (its runs expanded).

    Raises:
        ValueError: when ``body`` is not a batch entry's body (an edited entry).
    """
    try:
        parsed = json.loads(body) if isinstance(body, str) else None
    except ValueError:
        parsed = None
    runs = parsed.get("records") if isinstance(parsed, dict) else None
    if not isinstance(runs, list) or parsed.get("v") != 2:  # type: ignore[union-attr]
        raise ValueError("not a batch entry's body")
    out: list[tuple[str, int, str, str]] = []
    for item in runs:
        if not (isinstance(item, list) and len(item) == 4 and item[0] in CHAINED_TABLES
                and isinstance(item[1], str) and type(item[2]) is int
                and isinstance(item[3], str) and item[3] and len(item[3]) % 64 == 0):
            raise ValueError("not a batch entry's run of records")
        table, kind, first, digests = item
        out.extend((table, first + n, kind, digests[n * 64:(n + 1) * 64])
                   for n in range(len(digests) // 64))
    return out


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
