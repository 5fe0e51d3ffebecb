"""Signed checkpoints of the audit chain, and the retention cuts they authorise.

A checkpoint says "the chain had this entry, with this hash, as its head at this time, and
through it this many entries named each audited table". Its ``ordinal`` is its place among
the stored checkpoints (1, 2, 3 …), signed with it, so a checkpoint removed from the middle
leaves a gap that :mod:`.verify` finds. Stored checkpoints let :mod:`.verify` notice a
chain rewritten under them; a checkpoint *pinned* somewhere an attacker cannot reach
(printed, mailed, kept by a monitoring system) also catches what the database alone cannot:
the newest entries cut off together with the checkpoints after them.

The pinned form is one line, what ``audit checkpoint`` prints and ``audit verify
--checkpoint`` takes: ``seq:hash:ts:key_id:mac:ordinal:counts`` (``counts`` as
``table=n,…``). Checkpoints signed before counts existed (version 1) have five fields and
keep verifying as they were signed. Checkpoints are written when a data home closes with
new entries, after every runtime turn, on ``audit checkpoint``, and in the transaction of
every retention cut (:func:`record_cut`), so the cut is signed before anything is gone.

Why counts, when the head's hash already commits to every entry before it: a pinned line
then says what it vouches for (how many requests, attempts, turns) without the database,
and a rewrite is reported as "the audit table lost 3 records", not only "another hash".
A checkpoint's counts are the last one's plus what came after (one statement), or, when
the connection's last commit left the counts through the tail this transaction started
from (:attr:`~deepseek_eyes.store.chain.Connection.counts`: no other process wrote since),
those plus the transaction's own, with no statement at all. Likewise the newest checkpoint
(its ordinal) is the one the connection's last commit wrote, on SQLite: the next one is
inserted at the next row id, which a newer checkpoint of another process would have taken
(the insert then fails, and the newest is read and the checkpoint signed again). A turn's
seal is then one INSERT.

A stored checkpoint's ``hash`` and ``mac`` are the base64 of their 32 bytes (44 characters,
not 64 hex: one checkpoint a turn, ``bench/store_growth.py``); they are read back as hex
(:func:`stored_hex`), and rows written before, in hex, are read as they are. Nothing signed
or compared changes: the MAC is over the hex, as before, and a pinned line is hex.
"""

from __future__ import annotations

import binascii
import json
import re
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deepseek_eyes.audit.records import CheckpointView
from deepseek_eyes.errors import AuditError, DeepSeekEyesError
from deepseek_eyes.store.chain import (
    BATCH,
    CHAINED_TABLES,
    COUNTED_BODY,
    RUN_LENGTH_SQL,
    ChainWriter,
    Connection,
    canonical_bytes,
)
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.keyring import Keyring

__all__ = ["BODY", "Checkpoint", "checkpoint_if_new", "head", "read_checkpoints", "record_cut",
           "sign_checkpoint", "sign_in", "stored_checkpoints", "stored_hex"]

#: The counts key of entries that carry a body instead of naming a row (retention cuts).
BODY = COUNTED_BODY
_COUNT_KEYS = frozenset(CHAINED_TABLES) | {BODY}


_HEX = re.compile(r"[0-9a-f]{64}")


def _packed(value: str) -> str:
    """A 64-hex ``hash`` or ``mac`` as a checkpoint row stores it: the base64 of its bytes
    (anything else, which signing never makes, as it is)."""
    if _HEX.fullmatch(value) is None:
        return value
    return binascii.b2a_base64(bytes.fromhex(value), newline=False).decode("ascii")


def stored_hex(value: object) -> str:
    """A checkpoint row's ``hash`` or ``mac`` in hex: base64 of 32 bytes, spelled as
    :func:`_packed` spells it, read back; any other value (hex, as older rows hold it, or
    an edited one, which then fails its signature) as it is."""
    text = str(value)
    if len(text) != 44:
        return text
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        return text
    if len(raw) != 32 or binascii.b2a_base64(raw, newline=False).decode("ascii") != text:
        return text
    return raw.hex()


def _counts_text(counts: Mapping[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(counts.items()) if v) or "-"


def _counts_json(counts: Mapping[str, int]) -> str:
    """A checkpoint's stored counts: compact JSON (``_from_row`` reads any JSON)."""
    return json.dumps({k: v for k, v in counts.items() if v}, sort_keys=True,
                      separators=(",", ":"))


def _parse_counts(text: str) -> dict[str, int]:
    if text == "-":
        return {}
    out: dict[str, int] = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if name not in _COUNT_KEYS or not value.isdigit() or name in out:
            raise ValueError("counts")
        out[name] = int(value)
    return out


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    hash: str
    ts: float
    key_id: str
    mac: str
    counts: dict[str, int] | None = None  # None: a version 1 checkpoint (no counts)
    ordinal: int | None = None

    @property
    def version(self) -> int:
        return 1 if self.counts is None else 2

    @staticmethod
    def signed_bytes(seq: int, value: str, ts: float, counts: Mapping[str, int] | None = None,
                     ordinal: int | None = None) -> bytes:
        if counts is None:
            return canonical_bytes({
                "v": 1, "type": "deepseekeyes.audit.checkpoint", "seq": seq, "hash": value,
                "ts": ts,
            })
        return canonical_bytes({
            "v": 2, "type": "deepseekeyes.audit.checkpoint", "seq": seq, "hash": value,
            "ts": ts, "counts": {k: v for k, v in counts.items() if v}, "ordinal": ordinal,
        })

    def token(self) -> str:
        base = f"{self.seq}:{self.hash}:{self.ts!r}:{self.key_id}:{self.mac}"
        if self.counts is None:
            return base
        return f"{base}:{self.ordinal}:{_counts_text(self.counts)}"

    @classmethod
    def parse(cls, token: str) -> Checkpoint:
        """A pinned checkpoint line (five fields for version 1, seven for version 2).

        Raises:
            AuditError: ``AUDIT_CHECKPOINT_INVALID`` when it is not one.
        """
        parts = token.strip().split(":")
        try:
            if len(parts) not in (5, 7):
                raise ValueError("five or seven fields")
            seq, value, ts, kid, mac = int(parts[0]), parts[1], float(parts[2]), parts[3], parts[4]
            if seq < 1 or len(value) != 64 or len(mac) != 64 or not kid.startswith("k1-"):
                raise ValueError("field shapes")
            int(value, 16)
            int(mac, 16)
            counts = ordinal = None
            if len(parts) == 7:
                if not parts[5].isdigit():
                    raise ValueError("ordinal")
                ordinal, counts = int(parts[5]), _parse_counts(parts[6])
        except ValueError as exc:
            raise AuditError(
                "a checkpoint is seq:hash:ts:key_id:mac[:ordinal:counts], as `audit "
                "checkpoint` prints it", code="AUDIT_CHECKPOINT_INVALID") from exc
        return cls(seq, value, ts, kid, mac, counts, ordinal)

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> Checkpoint:
        """A checkpoint line of an export (or a stored row as a mapping).

        Raises:
            KeyError, TypeError, ValueError: for fields that are not a checkpoint's.
        """
        counts = item.get("counts")
        if counts is not None:
            if not isinstance(counts, dict) or any(
                    k not in _COUNT_KEYS or type(v) is not int for k, v in counts.items()):
                raise ValueError("counts")
            counts = dict(counts)
        ordinal = item.get("ordinal")
        if ordinal is not None and type(ordinal) is not int:
            raise TypeError("ordinal")
        return cls(int(item["seq"]), str(item["hash"]), float(item["ts"]),
                   str(item["key_id"]), str(item["mac"]), counts, ordinal)

    def as_json(self) -> CheckpointView:
        out: CheckpointView = {"seq": self.seq, "hash": self.hash, "ts": self.ts,
                              "key_id": self.key_id, "mac": self.mac}
        if self.counts is not None:
            out["counts"] = {k: v for k, v in sorted(self.counts.items()) if v}
            out["ordinal"] = self.ordinal
        return out

    def check_signature(self, keyring: Keyring) -> bool:
        """Whether the MAC is right (raises ``AUDIT_KEY_UNKNOWN`` for an unknown key)."""
        return keyring.verify(
            self.signed_bytes(self.seq, self.hash, self.ts, self.counts, self.ordinal),
            self.key_id, self.mac)


def head(db: Database) -> tuple[int, str] | None:
    row = db.query_one("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1")
    return (int(row["seq"]), str(row["hash"])) if row else None


def _has_counts(conn: sqlite3.Connection) -> bool:
    """Whether the checkpoints table has migration 7's columns (a database opened read-only
    is not migrated)."""
    return any(r[1] == "counts" for r in conn.execute("PRAGMA table_info(chain_checkpoints)"))


def _from_row(row: tuple[Any, ...]) -> Checkpoint:
    counts = json.loads(row[5]) if len(row) > 5 and row[5] is not None else None
    ordinal = int(row[6]) if len(row) > 6 and row[6] is not None else None
    return Checkpoint(int(row[0]), stored_hex(row[1]), float(row[2]), str(row[3]),
                      stored_hex(row[4]), counts, ordinal)


def read_checkpoints(conn: sqlite3.Connection) -> list[Checkpoint]:
    """Every stored checkpoint, in the order they were written (inside the caller's read)."""
    extra = ", counts, ordinal" if _has_counts(conn) else ""
    rows = conn.execute(f"SELECT seq, hash, ts, key_id, mac{extra}"  # noqa: S608
                        " FROM chain_checkpoints ORDER BY id").fetchall()
    return [_from_row(tuple(r)) for r in rows]


def stored_checkpoints(db: Database) -> list[Checkpoint]:
    """Every stored checkpoint, in the order they were written."""
    with db.reading() as conn:
        return read_checkpoints(conn)


#: How many entries in a seq range name each table (see :func:`_counts_through`).
_COUNTS_SINCE = (  # constants only, no input:
    "SELECT COALESCE(ref_table, ?), COUNT(*) FROM chain WHERE seq > ? AND seq <= ?"  # noqa: S608
    " AND kind != ? GROUP BY 1"
    " UNION ALL SELECT json_extract(m.value, '$[0]'),"
    " SUM(" + RUN_LENGTH_SQL + ") FROM chain c,"
    " json_each(c.body, '$.records') m WHERE c.seq > ? AND c.seq <= ? AND c.kind = ?"
    " AND c.ref_table IS NULL GROUP BY 1")

_LAST = ("SELECT seq, hash, ts, key_id, mac, counts, ordinal, id FROM chain_checkpoints"
         " ORDER BY id DESC LIMIT 1")


def _counts_through(conn: sqlite3.Connection, keyring: Keyring, seq: int,
                    last: Checkpoint | None) -> dict[str, int]:
    """How many entries through ``seq`` name each table: the last checkpoint's counts (when
    its signature holds) plus the entries after it, so a seal costs its new entries only."""
    base: dict[str, int] = {}
    since = 0
    if last is not None and last.counts is not None and last.seq <= seq:
        try:
            if last.check_signature(keyring):
                base, since = dict(last.counts), last.seq
        except DeepSeekEyesError:
            pass  # count from the start instead
    # Single entries by table, then the records batch entries name, under their tables (as
    # verify counts them): one statement, one round trip on PostgreSQL.
    for key, n in conn.execute(_COUNTS_SINCE, (BODY, since, seq, BATCH, since, seq, BATCH)):
        base[str(key)] = base.get(str(key), 0) + int(n)
    return base


def _counts_of(conn: sqlite3.Connection, writer: ChainWriter) -> dict[str, int] | None:
    """How many entries through the writer's last one name each table, from the counts
    the connection's last commit left (:attr:`~deepseek_eyes.store.chain.Connection.counts`)
    and the writer's own, when they meet: the chain then holds nothing this process did
    not count, and no statement is needed. None otherwise."""
    known = conn.counts if isinstance(conn, Connection) else None
    if known is None or known[0] != writer.first - 1:
        return None
    counts = dict(known[1])
    for key, n in writer.counted.items():
        counts[key] = counts.get(key, 0) + n
    return {key: n for key, n in counts.items() if n}


def _last_checkpoint(conn: sqlite3.Connection) -> Checkpoint | None:
    return _last_row(conn)[1]


def _last_row(conn: sqlite3.Connection) -> tuple[int | None, Checkpoint | None]:
    """The newest stored checkpoint and its row id (None, None: there is none)."""
    row = conn.execute(_LAST).fetchone()
    if row is None:
        return None, None
    try:
        return int(row[7]), _from_row(tuple(row)[:7])
    except (ValueError, TypeError):
        return None, None  # a damaged row: verify reports it; the next one counts anew


def sign_in(conn: sqlite3.Connection, keyring: Keyring, *, ts: float | None = None,
            last: Checkpoint | None = None) -> Checkpoint:
    """Sign the chain's head and store the checkpoint, inside the caller's write
    transaction on ``conn`` (which holds the lock: no other checkpoint can take its
    ordinal). The head is the transaction's chain writer's (already in hand when the
    transaction chained a record); ``last`` is the newest stored checkpoint, when the
    caller has read it.

    Raises:
        AuditError: ``AUDIT_CHAIN_BROKEN`` when the chain is empty.
    """
    checkpoint = _sign(conn, keyring, ts=ts, last=last)
    assert checkpoint is not None  # only an only_new signing is skipped
    return checkpoint


_INSERT = ("INSERT INTO chain_checkpoints (seq, hash, ts, key_id, mac, counts, ordinal)"
           " VALUES (?,?,?,?,?,?,?)")
_INSERT_AT = ("INSERT INTO chain_checkpoints (id, seq, hash, ts, key_id, mac, counts,"
              " ordinal) VALUES (?,?,?,?,?,?,?,?)")


def _remembered(conn: sqlite3.Connection) -> tuple[int, Checkpoint] | None:
    """The newest checkpoint row as the connection's last commit left it (SQLite only: the
    row after it is then inserted at the next id, which another process's newer checkpoint
    has taken, so a stale one fails on the primary key and is read again)."""
    if not isinstance(conn, Connection) or getattr(conn, "dialect", "sqlite") != "sqlite":
        return None
    kept = conn.checkpoint
    if kept is None or not isinstance(kept[1], Checkpoint):
        return None
    return kept[0], kept[1]


def _sign(conn: sqlite3.Connection, keyring: Keyring, *, ts: float | None = None,
          last: Checkpoint | None = None, only_new: bool = False) -> Checkpoint | None:
    """:func:`sign_in`; ``only_new``: None instead when the newest stored checkpoint is at
    the head already."""
    writer = ChainWriter.of(conn)
    writer.write()  # the counts below read the chain table
    if writer.seq == 0:
        raise AuditError("the audit chain is empty: nothing to checkpoint",
                         code="AUDIT_CHAIN_BROKEN")
    seq, value = writer.seq, writer.head
    when = time.time() if ts is None else ts
    remembered = _remembered(conn) if last is None else None
    for stale_ok in ((True, False) if remembered is not None else (False,)):
        last_id: int | None = None
        if stale_ok:
            last_id, last = remembered  # type: ignore[misc]
        elif remembered is not None or last is None:
            last_id, last = _last_row(conn)
        if only_new and last is not None and last.seq >= seq:
            return None
        counts = _counts_of(conn, writer)
        if counts is None:
            counts = _counts_through(conn, keyring, seq, last)
            if isinstance(conn, Connection):  # what the chain held before this transaction
                base = dict(counts)
                for key, n in writer.counted.items():
                    base[key] = base.get(key, 0) - n
                conn.counts = (writer.first - 1, base)
        # Its place among the stored checkpoints: one after the newest one's, when that one
        # has an ordinal (a count of the table would grow with every turn ever sealed).
        if last is not None and last.ordinal is not None:
            ordinal = last.ordinal + 1
        else:
            ordinal = int(conn.execute("SELECT COUNT(*) FROM chain_checkpoints"
                                       ).fetchone()[0]) + 1
        kid, mac = keyring.sign(Checkpoint.signed_bytes(seq, value, when, counts, ordinal))
        row = (seq, _packed(value), when, kid, _packed(mac), _counts_json(counts), ordinal)
        checkpoint = Checkpoint(seq, value, when, kid, mac, counts, ordinal)
        if stale_ok and last_id is not None:
            try:
                conn.execute(_INSERT_AT, (last_id + 1, *row))
            except sqlite3.IntegrityError:
                continue  # another process's checkpoint came after it: read the newest
            _keep(conn, last_id + 1, checkpoint)
            return checkpoint
        cur = conn.execute(_INSERT, row)
        # Remembered on SQLite only (_remembered): PostgreSQL's id is not read, so the
        # INSERT goes with the commit's round trip.
        if last_id is not None and getattr(conn, "dialect", "sqlite") == "sqlite" \
                and cur.lastrowid == last_id + 1:
            _keep(conn, last_id + 1, checkpoint)
        return checkpoint
    raise AssertionError("unreachable: the last pass reads the newest checkpoint")


def _keep(conn: sqlite3.Connection, row_id: int, checkpoint: Checkpoint) -> None:
    """Remember the checkpoint this transaction wrote, for the connection's next one."""
    if isinstance(conn, Connection):
        conn.checkpoint_written = (row_id, checkpoint)


def sign_checkpoint(db: Database, keyring: Keyring, *, ts: float | None = None) -> Checkpoint:
    """Sign the chain's head now and store the checkpoint.

    Raises:
        AuditError: ``AUDIT_CHAIN_BROKEN`` when the chain is empty.
    """
    with db.transaction() as conn:
        return sign_in(conn, keyring, ts=ts)


def checkpoint_if_new(
    db: Database, keyring: Keyring
) -> tuple[tuple[int, str] | None, Checkpoint | None]:
    """The chain's head (None when empty), and a new checkpoint of it when the chain grew
    since the last one. Inside an open write transaction it is part of it, and signs the
    head that transaction's records made."""
    with db.transaction() as conn:
        writer = ChainWriter.of(conn)
        if writer.seq == 0:
            return None, None
        tip = (writer.seq, writer.head)
        return tip, _sign(conn, keyring, only_new=True)


def record_cut(db: Database, conn: sqlite3.Connection, body: Mapping[str, Any],
               ts: float) -> Checkpoint:
    """Write a ``retention`` entry and the signed checkpoint that names it, inside the
    caller's write transaction; the caller deletes what ``body`` names after this returns.

    A retention entry excuses missing records only under a signed checkpoint (see
    :mod:`.verify`), so a cut without the key is no cut: the caller keeps its rows.

    Raises:
        AuditError: ``AUDIT_KEY_MISSING`` when ``db`` belongs to no data home (no key to
            sign with), or the keyring's own codes when it cannot be loaded. Nothing was
            written then.
    """
    if db.audit_keys is None:
        raise AuditError("a retention cut needs the audit key, and this database has none",
                         code="AUDIT_KEY_MISSING")
    keyring = db.audit_keys()
    ChainWriter.of(conn).add_body("retention", body, ts)
    return sign_in(conn, keyring)
