"""One hash chain over every audit record in the database.

Each record a store writes to an audited table — an attempt, an evidence record, an image,
an audit row (MCP calls, terminal plans and receipts, model requests, settings changes), a
usage row, a session, a session event, a turn — gets one chain entry *in the same
transaction*. The entry names the record (``ref_table``/``ref_id``, the SQLite rowid), holds
the SHA-256 of the record's canonical bytes (``digest``) and the hash of the entry before it
(``prev``); its own ``hash`` covers all of that. Records with no row of their own (a
retention cut, a quarantine) keep their canonical JSON in the entry's ``body``; such a
*body entry*'s row stores its ``digest`` empty, since it is the body's SHA-256, and every
entry's row stores only the first :data:`PREV_KEPT` hex digits of its ``prev``, since the
row before it holds that hash whole (:func:`iter_entries` and :func:`entry_at` read both
back whole; what is hashed and verified is the same, and the digits kept still say when
an entry is not where it was written: reordered or inserted).

Canonical bytes of a row are its columns as compact, key-sorted JSON, with large content
columns (an evidence record's text, a session message's body) replaced by their SHA-256.
So the chain commits to every byte of every record, while an export of the chain carries
hashes of what was said, not the conversation itself.

What the chain proves (``deepseek_eyes.audit.verify``): a changed byte in a record or an
entry, a removed, inserted or reordered entry, and a record added or removed outside the
chain. What it cannot prove alone: that the newest entries were not cut off together with
the stored checkpoints after them. Signed checkpoints pinned elsewhere close that gap.

The records one write transaction chains share one entry: a *batch entry*, kind
``chain.batch``, is a body entry (``ref`` null, the entry hashed exactly as any other) whose
body names each record of the transaction (its queued log rows, its session events, its
turn record, …), in the order written, with that record's digest, in runs of consecutive
rowids of one table and kind::

    {"records":[["audit","mcp.call",12,"<base64>"],["usage","",7,"<base64>"]],"v":3}

(canonical JSON: ``[table, kind, first rowid, digests]``, the base64 of the run's records'
SHA-256 bytes one after another, for rowids ``first``, ``first + 1`` …; a kind written
``""`` is the table's usual one, :data:`_USUAL_KIND`. Version 2, which older databases
hold, spells every kind and the digests in hex, 64 characters each: both are read, and
:data:`RUN_LENGTH_SQL` counts either in SQL. Version 3 makes a short text turn's two
entries 161 bytes smaller, ``bench/store_growth.py``). A
transaction with one record gives it a single entry (``ref`` set, no body), which is
cheaper; :data:`FOLD_AT` is where a batch starts. The body's hash is the entry's
``digest``, so the entry commits to every record's identity, kind, place and bytes; verify
checks each record against its own digest, so a changed record is still named exactly
(``audit:12``), a record trimmed by retention is excused record by record, and a record
added behind the chain's back is found because no entry, batch or single, names it. What
it saves: a turn's answer, its turn record and the request and usage rows booked during it
are one entry, not one each (an entry row, an index entry and an entry hash a record:
``bench/store_growth.py``, ``bench/audit_verify.py``). The writer keeps a transaction's
records until its entries are written (before the commit, before a body entry of its own,
before anything reads the chain: :meth:`ChainWriter.write`), then folds them. A record's
entry is found by :func:`entry_of` (``audit show``, the console). Entries of both forms
interleave in one chain; a database written before batch entries (or before they covered
whole transactions) holds single entries and small batches, which verify as they always
did (no migration).

Appends serialize on SQLite's write lock (``BEGIN IMMEDIATE``), so several processes
sharing the database extend one chain. A connection remembers the tail its last commit
left (:class:`Connection`), so on SQLite the next transaction's writer starts from it
without reading it: entries are appended by ``seq``, the table's primary key, so when
another process extended the chain meanwhile the first insert fails on a taken ``seq`` and
the writer reads the real tail and makes its entries again after it (on PostgreSQL the
tail comes with the transaction's lock: store/postgres.py).

A record's rowid is needed only when its entry is made, so where the caller does not read
it (:func:`insert_later`: a session event, a turn record) a PostgreSQL transaction's
INSERTs are pipelined and their rowids read together, with the chain's tail, when the
records fold (:meth:`ChainWriter.add_later`); on SQLite, where a rowid costs no round
trip, :func:`insert_later` is :func:`insert`.

Tables deleted from by design (the attempts log's trim, evidence quarantine) record the
cut as a ``retention`` entry first, with a signed checkpoint naming it in the same
transaction (``deepseek_eyes.audit.checkpoints.record_cut``): an unsigned retention entry
excuses nothing, since anyone who can write the file could append one.
"""

from __future__ import annotations

import binascii
import hashlib
import json
import json.encoder
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from deepseek_eyes import canonical_json
from deepseek_eyes.store import stored as _stored

__all__ = [
    "BATCH",
    "BATCH_VERSION",
    "CHAINED_TABLES",
    "COUNTED_BODY",
    "ENTRY_COLUMNS",
    "FOLD_AT",
    "GENESIS",
    "PREV_KEPT",
    "RUN_LENGTH_SQL",
    "ChainWriter",
    "Connection",
    "Record",
    "SqlValue",
    "adopt_existing",
    "batch_members",
    "canonical_bytes",
    "entry_at",
    "entry_hash",
    "entry_of",
    "insert",
    "insert_later",
    "iter_entries",
    "project_row",
    "read_record",
    "read_records",
    "record_digest",
    "ref_text",
    "table_of_insert",
    "whole_entry",
]

GENESIS = "0" * 64
#: What a body entry's row holds in ``digest``: its body's SHA-256 (:func:`whole_entry`).
_ELIDED = ""
#: How many leading hex digits of ``prev`` (the hash of the entry before it, GENESIS for
#: the first, which that entry's own row holds whole) an entry's row keeps: read whole by
#: :func:`iter_entries` and :func:`entry_at` when they are that hash's; otherwise left as
#: stored, so verify says the link is broken (``AUDIT_CHAIN_BROKEN``), as it did for a
#: whole prev that did not match. Rows written before hold it whole (56 bytes more each).
PREV_KEPT = 8
#: An entry row's columns, in the order :func:`iter_entries` and :func:`entry_at` read them.
ENTRY_COLUMNS = ("seq", "ts", "kind", "ref_table", "ref_id", "body", "digest", "prev", "hash")

#: The kind of a batch entry (see the module docstring); no record is of this kind.
BATCH = "chain.batch"
#: A write transaction's records get one batch entry from this many on; one record gets a
#: single entry.
FOLD_AT = 2
#: The body version batch entries are written in (2: hex digests, every kind spelled; 3:
#: base64 digests, a table's usual kind as ""). Both are read.
BATCH_VERSION = 3
#: The key under which checkpoints count entries that carry a body (retention cuts).
COUNTED_BODY = "body"

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

#: The kind a table's records have but for exceptions (``adopted.*``): what a version 3
#: batch body writes as "" (the audit table has many kinds, so none).
_USUAL_KIND: Mapping[str, str] = {
    "images": "vision.image",
    "evidence": "vision.evidence",
    "evidence_quarantine": "vision.quarantine",
    "attempts": "vision.attempt",
    "usage": "usage",
    "sessions": "session",
    "events": "session.event",
    "turns": "turn",
}

_HEX = re.compile(r"^[0-9a-f]{64}$")
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
            text = repr(value)  # the exact type: int's own repr (see _number_json)
        elif value is None:
            text = "null"
        elif kind is float and value - value == 0.0:
            text = repr(value)
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
    refuses). The type is tested exactly, so the builtin ``repr`` is the type's own (what
    ``json`` calls as ``float.__repr__``), at less cost than calling that slot wrapper."""
    if type(value) is float:
        return repr(value) if value - value == 0.0 else None
    if type(value) is int:
        return repr(value)
    return None


def _hash_entry(seq: int, ts_json: str, kind_json: str, ref_json: str, digest: str,
                prev: str) -> str:
    """SHA-256 of an entry's canonical bytes, from its fields' JSON (keys in sorted order)."""
    return hashlib.sha256(
        f'{{"digest":"{digest}","kind":{kind_json},"prev":"{prev}","ref":{ref_json},'
        f'"seq":{seq},"ts":{ts_json},"v":1}}'.encode()).hexdigest()


def ref_text(table: str | None, rowid: int | None) -> str | None:
    return None if table is None or rowid is None else f"{table}:{rowid}"


#: A record waiting for its transaction's entry: ``(kind, table, rowid, digest, ts)``, the
#: digest's 32 bytes (a batch entry stores them so; a single entry in hex).
_Member = tuple[str, str, int, bytes, float]
#: A record whose rowid its INSERT's cursor gives when read (:meth:`ChainWriter.add_later`):
#: its place among the members, kind, table, the INSERT, its parameters, the cursor, time.
_Later = tuple[int, str, str, str, Sequence[Any], sqlite3.Cursor, float]


class ChainWriter:
    """Appends entries inside an open write transaction on ``conn``.

    The tail is read once, when the writer is made: the transaction holds the write lock,
    so no other process can extend the chain until it commits. Get one with :meth:`of`, so
    a transaction's records share it. A buffered writer (the one :meth:`of` gives a
    :class:`Connection`'s transaction) keeps the records it is given and folds them into
    one entry when the transaction's entries are written (:meth:`write`), or before an
    entry of its own (a retention cut) and whenever its :attr:`seq` or :attr:`head` is
    asked for: one record, one single entry; :data:`FOLD_AT` or more, one batch entry.
    """

    def __init__(self, conn: sqlite3.Connection, *, buffered: bool = False,
                 tail: tuple[int, str] | None = None) -> None:
        self._conn = conn
        #: Whether the tail is the one this transaction read (else one remembered from the
        #: connection's last commit: see :meth:`write`).
        self._confirmed = tail is None or not buffered
        if tail is None or not buffered:
            row = conn.execute("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1"
                               ).fetchone()
            tail = (int(row[0]), str(row[1])) if row else (0, GENESIS)
        self._seq, self._head = tail
        self.first = self._seq + 1  # the seq of this writer's first entry
        self._buffered = buffered
        self._rows: list[tuple[Any, ...]] = []
        self._members: list[_Member] = []
        self._later: list[_Later] = []
        #: Records and body entries this writer chained, counted as checkpoints count them
        #: (a record under its table, a body entry under ``"body"``).
        self.counted: dict[str, int] = {}
        self._ts: object = None  # the last entry's time and its JSON (see _add)
        #: The connection's row encoders (``_encoder_of`` fills it), looked up per row.
        self._encoders: Mapping[str, _stored.RowEncoder | None] = (
            conn.encoders if isinstance(conn, Connection) else {})
        self._ts_json: str | None = None

    @classmethod
    def of(cls, conn: sqlite3.Connection) -> ChainWriter:
        """The writer of the write transaction open on ``conn``: one per transaction of a
        :class:`Connection` (its tail read once, or taken from the connection's last
        commit on SQLite; its entries written in one statement before the commit), a fresh
        unbuffered one on any other connection."""
        if isinstance(conn, Connection) and conn.tracking and conn.in_transaction:
            if conn.writer is None:
                conn.writer = cls(conn, buffered=True, tail=conn.tail)
            return conn.writer
        return cls(conn)

    @property
    def seq(self) -> int:
        """The chain's last entry once this writer's records are folded into entries."""
        self._settle()
        return self._seq

    @property
    def head(self) -> str:
        """The hash of :attr:`seq`'s entry."""
        self._settle()
        return self._head

    @property
    def written(self) -> tuple[int, str] | None:
        """The chain's ``(seq, hash)`` after this writer's entries, once they are all in
        the table and the tail they follow was the chain's; None before."""
        if self._confirmed and not self._rows and not self._members and not self._later:
            return self._seq, self._head
        return None

    def _settle(self) -> None:
        """Fold the records waiting into their entry, and make sure the tail they follow
        is the chain's (read it, or write them, which finds out)."""
        if self._members or self._later:
            self._fold()
        if not self._confirmed:
            if self._rows:
                self.write()
            else:
                self._rebase()

    def add_row(self, kind: str, table: str, rowid: int, ts: float) -> None:
        """Chain the row at ``rowid`` as it reads back (rows already stored)."""
        record = read_record(self._conn, table, rowid)
        if record is None:
            raise ValueError(f"{table}:{rowid} vanished inside its own transaction")
        self._member(kind, table, rowid, bytes.fromhex(record_digest(record)), ts)

    def add_insert(
        self, kind: str, table: str, sql: str, params: Sequence[Any], rowid: int, ts: float
    ) -> None:
        """Chain the row ``sql`` just inserted with ``params`` at ``rowid``: its canonical
        bytes computed from the values and the declared column types
        (:class:`~deepseek_eyes.store.stored.RowEncoder`), read back only when those do not
        say for certain what was stored."""
        self._member(kind, table, rowid, self._digest_of(table, sql, params, rowid), ts)

    def add_later(self, kind: str, table: str, sql: str, params: Sequence[Any],
                  cursor: sqlite3.Cursor, ts: float) -> None:
        """Chain the row ``sql`` inserts with ``params``, whose rowid ``cursor`` gives when
        read (an INSERT queued on PostgreSQL's pipeline), in its place among the records:
        the rowid is read when the records fold, so a transaction's INSERTs and the
        chain's tail come back in one round trip. None inserted (``INSERT OR IGNORE``):
        nothing chained, as :func:`insert`. An unbuffered writer reads it now."""
        if not self._buffered:
            rowid = _rowid_of(cursor)
            if rowid is not None:
                self.add_insert(kind, table, sql, params, rowid, ts)
            return
        self._later.append((len(self._members), kind, table, sql, params, cursor, ts))

    def _resolve(self) -> None:
        """The records of :meth:`add_later` as members, in their places (their rowids read:
        on PostgreSQL one round trip for all that have not come back yet)."""
        later, self._later = self._later, []
        members, merged = self._members, []
        at = 0
        for place, kind, table, sql, params, cursor, ts in later:
            merged.extend(members[at:place])
            at = place
            rowid = _rowid_of(cursor)
            if rowid is not None:
                merged.append((kind, table, rowid, self._digest_of(table, sql, params, rowid),
                               ts))
        merged.extend(members[at:])
        self._members = merged

    def _member(self, kind: str, table: str, rowid: int, digest: bytes, ts: float) -> None:
        if self._buffered:
            self._members.append((kind, table, rowid, digest, ts))
        else:  # a raw connection: one entry now, as before batch entries
            self._count(table)
            self._add(kind, table, rowid, None, digest.hex(), ts)

    def _count(self, key: str, n: int = 1) -> None:
        self.counted[key] = self.counted.get(key, 0) + n

    def _digest_of(self, table: str, sql: str, params: Sequence[Any], rowid: int) -> bytes:
        """The digest (its 32 bytes) of the row ``sql`` just inserted with ``params`` at
        ``rowid``."""
        encoder = self._encoders.get(sql)
        if encoder is None:
            encoder = _encoder_of(self._conn, table, sql)
        digest = None
        if encoder is not None:
            fast = encoder.fast_raw  # the common values, without digest_raw()'s call
            if fast is not None and len(params) == encoder.width:
                digest = fast(params, rowid)
            if digest is None:
                digest = encoder.digest_raw(params, rowid)
        if digest is None:
            record = read_record(self._conn, table, rowid)
            if record is None:
                raise ValueError(f"{table}:{rowid} vanished inside its own transaction")
            digest = bytes.fromhex(record_digest(record))
        return digest

    def add_inserts(self, rows: Sequence[tuple[str, str, str, Sequence[Any], int]],
                    ts: float) -> None:
        """Chain rows just inserted, in the order written, each ``(kind, table, sql,
        params, rowid)``: with the transaction's other records (buffered), or as one entry
        for these rows (one batch entry for :data:`FOLD_AT` or more, else one each)."""
        encoders = self._encoders
        members = self._members if self._buffered else []
        append = members.append
        last: str | None = None  # the rows of one flush are mostly of one INSERT
        fast: Callable[[Sequence[Any], int], bytes | None] | None = None
        width = -1
        for kind, table, sql, params, rowid in rows:
            if sql is not last:
                last, encoder = sql, encoders.get(sql)
                fast, width = ((encoder.fast_raw, encoder.width) if encoder is not None
                               else (None, -1))
            digest = fast(params, rowid) if fast is not None and len(params) == width \
                else None
            if digest is None:
                digest = self._digest_of(table, sql, params, rowid)
            append((kind, table, rowid, digest, ts))
        if not self._buffered:
            self._fold(members)

    def add_batch(self, members: Sequence[tuple[str, str, int, str]], ts: float) -> int:
        """One batch entry covering ``members`` (``(kind, table, rowid, digest)``, in the
        order written; the rows are stored already), after the records waiting; returns
        its seq.

        Raises:
            ValueError: for a member that is not an audited table's row with a digest.
        """
        self._settle()  # the seq returned is the chain's
        for _kind, _table, _rowid, digest in members:
            if not _HEX.match(digest):
                raise ValueError("a record's digest is not SHA-256 hex")
        return self._add_runs(_runs([(k, t, r, bytes.fromhex(d), ts) for k, t, r, d in members]),
                              ts)

    def _fold(self, members: list[_Member] | None = None) -> None:
        """The records waiting (or ``members``) as their entry: one single entry for fewer
        than :data:`FOLD_AT`, else one batch entry naming them all in order."""
        if members is None:
            if self._later:
                self._resolve()
            members, self._members = self._members, []
        if not members:
            return
        if len(members) < FOLD_AT:
            for kind, table, rowid, digest, ts in members:
                self._count(table)
                self._add(kind, table, rowid, None, digest.hex(), ts)
            return
        self._add_runs(_runs(members), members[0][4])

    def _add_runs(self, runs: Sequence[tuple[str, str, int, list[bytes]]], ts: float) -> int:
        pieces = []
        # A kind written "" would read back as the table's usual one: such a record (none
        # is) keeps the entry at version 2.
        compact = BATCH_VERSION == 3 and all(kind for _table, kind, _first, _d in runs)
        for table, kind, first, digests in runs:
            self._count(table, len(digests))
            # Canonical JSON (a table name is \w+, a kind is written as JSON, hex and base64
            # are themselves); version 3 writes a table's usual kind as "".
            if compact:
                kind_json = '""' if _USUAL_KIND.get(table) == kind else (
                    _KIND_JSON.get(kind) or _kind_json(kind))
                text = binascii.b2a_base64(b"".join(digests), newline=False).decode("ascii")
            else:
                kind_json = _KIND_JSON.get(kind) or _kind_json(kind)
                text = b"".join(digests).hex()
            pieces.append(f'["{table}",{kind_json},{first},"{text}"]')
        body = '{"records":[' + ",".join(pieces) + ('],"v":3}' if compact else '],"v":2}')
        return self._add(BATCH, None, None, body, _sha256(body.encode("utf-8")), ts)

    def add_body(self, kind: str, body: Mapping[str, Any], ts: float) -> int:
        """An entry carrying ``body`` (a retention cut), after the records waiting; returns
        its seq."""
        if kind == BATCH:
            raise ValueError("a batch entry is made by add_batch")
        self._settle()  # the seq returned is the chain's
        text = canonical_bytes(dict(body))
        self._count(COUNTED_BODY)
        return self._add(kind, None, None, text.decode("utf-8"), _sha256(text), ts)

    def _add(
        self, kind: str, table: str | None, rowid: int | None, body: str | None, digest: str,
        ts: float,
    ) -> int:
        seq = self._seq + 1
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
                f'{{"digest":"{digest}{kind_piece}{self._head}{ref_piece}{rowid}","seq":{seq},'
                f'"ts":{ts_json},"v":1}}'.encode()).hexdigest()
        elif ts_json is not None:
            ref = ref_text(table, rowid)
            value = _hash_entry(seq, ts_json, _kind_json(kind),
                                "null" if ref is None else f'"{ref}"', digest, self._head)
        else:
            value = entry_hash(seq, ts, kind, ref_text(table, rowid), digest, self._head)
        # A body entry is stored without its digest, its body's SHA-256 (:func:`whole_entry`;
        # every body entry's digest is, or verify refuses it: checked, so none is lost).
        stored = _ELIDED if body is not None and digest == _sha256(body.encode("utf-8")) \
            else digest
        row = (seq, ts, kind, table, rowid, body, stored, self._head[:PREV_KEPT], value)
        if self._buffered:
            self._rows.append(row)
        else:
            self._conn.execute(_INSERT_ENTRY, row)
        self._seq, self._head = seq, value
        return seq

    def write(self) -> None:
        """Fold the records waiting and write the buffered entries (before the commit, and
        before anything in the transaction reads the chain table).

        A tail remembered from the connection's last commit (SQLite) is checked by the
        write itself: when another process extended the chain since, the first entry's
        ``seq`` is taken and the insert fails on the primary key, so the tail is read and
        the entries are made again after it."""
        if self._members or self._later:
            self._fold()
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        if self._confirmed:
            _insert_entries(self._conn, rows)
            return
        try:
            _insert_entries(self._conn, rows)
        except sqlite3.IntegrityError:
            if self._conn.execute("SELECT 1 FROM chain WHERE seq = ?", (rows[0][0],)
                                  ).fetchone() is None:
                raise  # not the tail: something else is wrong
            self._rebase(rows)
            rows, self._rows = self._rows, []
            _insert_entries(self._conn, rows)
        self._confirmed = True

    def _rebase(self, rows: Sequence[tuple[Any, ...]] = ()) -> None:
        """Read the chain's tail, and make ``rows`` (entries made after a remembered tail
        that was not the chain's) again after it."""
        row = self._conn.execute("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1"
                                 ).fetchone()
        self._seq, self._head = (int(row[0]), str(row[1])) if row else (0, GENESIS)
        self.first = self._seq + 1
        self._confirmed = True
        self._ts = None
        for _seq, ts, kind, table, rowid, body, digest, _prev, _hash in rows:
            if body is not None and digest == _ELIDED:  # stored so: the body's own hash
                digest = _sha256(body.encode("utf-8"))
            self._add(kind, table, rowid, body, digest, ts)


def _runs(members: Sequence[_Member]) -> list[tuple[str, str, int, list[bytes]]]:
    """A batch body's runs (see the module docstring): consecutive rowids of one table and
    kind share one.

    Raises:
        ValueError: for a member that is not an audited table's row.
    """
    runs: list[tuple[str, str, int, list[bytes]]] = []
    digests: list[bytes] = []
    last_table = last_kind = ""
    after = 0  # the rowid the open run would take next
    for kind, table, rowid, digest, _ts in members:
        if rowid != after or table != last_table or kind != last_kind:
            if table not in CHAINED_TABLES or type(rowid) is not int or kind == BATCH:
                raise ValueError(f"not a record to chain: {table}:{rowid} ({kind})")
            digests = []
            runs.append((table, kind, rowid, digests))
            last_table, last_kind = table, kind
        digests.append(digest)
        after = rowid + 1
    return runs

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
    for a table's shape each time, the chain writer of its open write transaction, and
    what its last commit left: the chain's tail (SQLite: the next transaction's writer
    starts from it instead of reading it, :meth:`ChainWriter.write`) and how many entries
    name each table through a seq (:attr:`counts`, which a checkpoint signs).
    :meth:`forget_encoders` after any schema change (a migration)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.encoders: dict[str, _stored.RowEncoder | None] = {}
        #: The open write transaction's writer (:meth:`ChainWriter.of`), while ``tracking``.
        self.writer: ChainWriter | None = None
        self.tracking = False
        #: The chain's ``(seq, hash)`` as this connection's last commit left it, or None.
        self.tail: tuple[int, str] | None = None
        #: ``(seq, counts)``: how many entries through ``seq`` name each table (a body
        #: entry's key ``"body"``), as checkpoints count them; None when unknown.
        self.counts: tuple[int, dict[str, int]] | None = None
        #: The newest checkpoint row as the last commit left it, ``(id, checkpoint)``
        #: (audit/checkpoints.py's; SQLite), and the one the open transaction wrote.
        self.checkpoint: tuple[int, object] | None = None
        self.checkpoint_written: tuple[int, object] | None = None

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

    def ended(self, *, committed: bool = False) -> None:
        """The write transaction ended; ``committed``: its entries are the chain's now."""
        writer = self.writer
        if committed and writer is not None and writer.written:
            seq, head = writer.written
            counts = self.counts
            self.counts = None
            if counts is not None and counts[0] == writer.first - 1:
                total = dict(counts[1])
                for key, n in writer.counted.items():
                    total[key] = total.get(key, 0) + n
                self.counts = (seq, total)
            # On PostgreSQL the tail comes with the transaction's lock (store/postgres.py).
            if getattr(self, "dialect", "sqlite") == "sqlite":
                self.tail = (seq, head)
        if committed and self.checkpoint_written is not None:
            self.checkpoint = self.checkpoint_written
        self.checkpoint_written = None
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


def insert_later(
    conn: sqlite3.Connection, kind: str, sql: str, params: Sequence[Any], ts: float
) -> None:
    """:func:`insert` for a caller that does not read the rowid. On a connection that
    pipelines a transaction's statements (PostgreSQL's ``defer_chain``) the INSERT makes no
    round trip of its own: its rowid comes back with the transaction's next one, before its
    entry is made (:meth:`ChainWriter.add_later`; held on the connection until the
    transaction's writer is made, as its log rows are). Elsewhere (SQLite) :func:`insert`."""
    defer = getattr(conn, "defer_chain", None)
    if defer is None or not isinstance(conn, Connection) or not conn.tracking \
            or not conn.in_transaction:
        insert(conn, kind, sql, params, ts)
        return
    table = table_of_insert(sql)
    cursor = conn.execute(sql, params)
    if conn.writer is not None:
        conn.writer.add_later(kind, table, sql, params, cursor, ts)
    else:
        defer([(kind, table, sql, params, cursor)], ts)


def _rowid_of(cursor: sqlite3.Cursor) -> int | None:
    """The rowid an INSERT's ``cursor`` reports, or None when it inserted nothing."""
    if cursor.rowcount <= 0 or cursor.lastrowid is None:
        return None
    return int(cursor.lastrowid)


def batch_members(body: object) -> list[tuple[str, int, str, str]]:
    """A batch entry's records, ``(table, rowid, kind, digest)`` in the order written
    (its runs expanded; each digest in hex, whichever version the body is).

    Raises:
        ValueError: when ``body`` is not a batch entry's body (an edited entry).
    """
    try:
        parsed = json.loads(body) if isinstance(body, str) else None
    except ValueError:
        parsed = None
    runs = parsed.get("records") if isinstance(parsed, dict) else None
    version = parsed.get("v") if isinstance(parsed, dict) else None
    if not isinstance(runs, list) or type(version) is not int or version not in (2, 3):
        raise ValueError("not a batch entry's body")
    out: list[tuple[str, int, str, str]] = []
    for item in runs:
        if not (isinstance(item, list) and len(item) == 4 and item[0] in CHAINED_TABLES
                and isinstance(item[1], str) and type(item[2]) is int
                and isinstance(item[3], str) and item[3]):
            raise ValueError("not a batch entry's run of records")
        table, kind, first, digests = item
        if version == 3:
            kind = kind or _USUAL_KIND.get(table, "")
            digests = _run_hex(digests) if kind else ""
        if not digests or len(digests) % 64:
            raise ValueError("not a batch entry's run of records")
        out.extend((table, first + n, kind, digests[n * 64:(n + 1) * 64])
                   for n in range(len(digests) // 64))
    return out


def _run_hex(text: str) -> str:
    """A version 3 run's digests (base64 of their bytes, one after another) in hex; only
    the one spelling the writer makes is read.

    Raises:
        ValueError: for anything else.
    """
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not a batch entry's run of records") from exc
    if not raw or len(raw) % 32 or binascii.b2a_base64(raw, newline=False) != text.encode():
        raise ValueError("not a batch entry's run of records")
    return raw.hex()


#: The first entry at or after a seq (and at most another) that names a table: a single
#: entry's ref, or a batch entry whose body has a run of the table (``["table",``; the
#: body is parsed to be sure). COALESCE keeps SQLite on the seq range, off ``chain_ref``
#: (which would visit every batch entry, whose ref_table is NULL).
_NEXT_NAMING = (
    "SELECT seq, ref_id, body FROM chain WHERE seq >= ? AND seq <= ? AND"
    " (COALESCE(ref_table, '') = ? OR (COALESCE(ref_table, '') = '' AND kind = ?"
    " AND body LIKE ?)) ORDER BY seq LIMIT 1")
#: How many records a run of a batch body (``m``, of the entry ``c``) names, in SQL: its
#: digests' text is 64 hex characters a record (version 2), or the base64 of 32 bytes a
#: record (version 3: ``4 * ceil(32 n / 3)`` characters, so ``length * 3 / 128`` is n).
RUN_LENGTH_SQL = (
    "CASE WHEN CAST(json_extract(c.body, '$.v') AS INTEGER) = 3"
    " THEN length(json_extract(m.value, '$[3]')) * 3 / 128"
    " ELSE length(json_extract(m.value, '$[3]')) / 64 END")
#: Every batch entry naming the record (the CASTs keep the rowid arithmetic numeric on
#: PostgreSQL too, where json_extract returns text: store/postgres.py).
_BATCH_NAMING = (  # constants only, no input:
    "SELECT c.seq FROM chain c, json_each(c.body, '$.records') m WHERE c.kind = ?1"  # noqa: S608
    " AND c.ref_table IS NULL AND json_extract(m.value, '$[0]') = ?2"
    " AND ?3 >= CAST(json_extract(m.value, '$[2]') AS INTEGER)"
    " AND ?3 < CAST(json_extract(m.value, '$[2]') AS INTEGER)"
    " + " + RUN_LENGTH_SQL)


def entry_of(conn: sqlite3.Connection, table: str, rowid: int) -> tuple[int, str, str, str] | None:
    """The entry that names the record ``table:rowid``: ``(seq, kind, digest, hash)``, with
    the record's own digest when it is a batch entry (``kind`` :data:`BATCH`); None when no
    entry names it.

    A single entry is found by the ``chain_ref`` index. A batch entry by a binary search
    over ``seq``: a table's rowids grow with the chain (one writer at a time, each record
    chained in the transaction that wrote it), so each probe, the first entry from a point
    on that names the table, says which half holds the record. Where that order does not
    hold (a rowid used again after its row was deleted), every batch entry is searched.
    """
    row = conn.execute("SELECT seq, kind, digest, hash FROM chain WHERE ref_table = ?"
                       " AND ref_id = ? ORDER BY seq DESC LIMIT 1", (table, rowid)).fetchone()
    if row is not None:
        return int(row[0]), str(row[1]), str(row[2]), str(row[3])
    if table not in CHAINED_TABLES:
        return None
    top = conn.execute("SELECT MAX(seq) FROM chain").fetchone()[0]
    low, high = 1, int(top or 0)
    pattern = f'%["{table}",%'
    found: int | None = None
    while low <= high and found is None:
        middle = (low + high) // 2
        probe = conn.execute(_NEXT_NAMING, (middle, high, table, BATCH, pattern)).fetchone()
        if probe is None:
            high = middle - 1
            continue
        seq = int(probe[0])
        if probe[2] is None:  # a single entry of the table: its rowid says which way
            rowids = [int(probe[1])]
        else:
            try:
                rowids = [r for t, r, _k, _d in batch_members(probe[2]) if t == table]
            except ValueError:
                break  # an edited entry: verify says so; search them all
        if rowid in rowids:
            found = seq
        elif not rowids or min(rowids) < rowid < max(rowids):
            break  # not in the order the search relies on
        elif rowid < min(rowids):
            high = seq - 1
        else:
            low = seq + 1
    if found is None:
        hit = conn.execute(_BATCH_NAMING, (BATCH, table, rowid)).fetchone()
        if hit is None:
            return None
        found = int(hit[0])
    entry = conn.execute("SELECT kind, body, hash FROM chain WHERE seq = ?", (found,)
                         ).fetchone()
    try:
        digest = next(d for t, r, _k, d in batch_members(entry[1]) if (t, r) == (table, rowid))
    except (ValueError, StopIteration):
        return None
    return found, str(entry[0]), digest, str(entry[2])


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


def whole_entry(row: Sequence[Any], before: str) -> dict[str, Any]:
    """An entry row (:data:`ENTRY_COLUMNS`) by column, with what it was stored without put
    back: a body entry's empty ``digest`` is its body's SHA-256 (a batch's body holds 32
    bytes a record already, its digest 64 hex characters more each transaction), and a
    ``prev`` kept as its first :data:`PREV_KEPT` digits is ``before``, the hash the row
    before it holds (GENESIS for the first), when it begins so (else it is left as stored,
    and does not match). Rows written before entries were stored so hold them whole, and
    are read as they are. Nothing is hashed differently: the entry's hash covers its
    digest and whole prev, so an edited body is found by its entry's hash
    (``AUDIT_ENTRY_TAMPERED``, as before)."""
    entry = dict(zip(ENTRY_COLUMNS, row, strict=True))
    body = entry["body"]
    if entry["digest"] == _ELIDED and isinstance(body, str):
        entry["digest"] = _sha256(body.encode("utf-8"))
    prev = entry["prev"]
    if type(prev) is str and len(prev) == PREV_KEPT and before[:PREV_KEPT] == prev:
        entry["prev"] = before
    return entry


def entry_at(conn: sqlite3.Connection, seq: int) -> dict[str, Any] | None:
    """The entry ``seq``, whole (:func:`whole_entry`), or None."""
    row = conn.execute(
        "SELECT seq, ts, kind, ref_table, ref_id, body, digest, prev, hash FROM chain"
        " WHERE seq = ?", (seq,)).fetchone()
    if row is None:
        return None
    if not isinstance(row[7], str) or len(row[7]) != PREV_KEPT or seq <= 1:
        return whole_entry(row, GENESIS)
    before = conn.execute("SELECT hash FROM chain WHERE seq = ?", (seq - 1,)).fetchone()
    # No entry before it (removed: verify says so): its prev stays as stored.
    return whole_entry(row, "" if before is None else str(before[0]))


def iter_entries(conn: sqlite3.Connection, *,
                 batch: int = 5000) -> Iterator[dict[str, Any]]:
    """Every entry in ``seq`` order, whole (:func:`whole_entry`: an entry's short ``prev``
    is read against the hash of the row read before it), read in batches."""
    last = -1
    before = GENESIS
    while True:
        rows = conn.execute(
            "SELECT seq, ts, kind, ref_table, ref_id, body, digest, prev, hash FROM chain"
            " WHERE seq > ? ORDER BY seq LIMIT ?", (last, batch)).fetchall()
        if not rows:
            return
        for row in rows:
            yield whole_entry(row, before)
            before = row[8]
        last = int(rows[-1][0])
