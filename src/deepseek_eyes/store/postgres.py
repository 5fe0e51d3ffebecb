"""The store on PostgreSQL: a connection that speaks the SQLite the store's code writes.

About 150 statements in the store, the audit, the vision cache, the runtime, the console,
the gateway and the MCP host are SQLite SQL run on a ``sqlite3.Connection``. Rather than
fork each one, :class:`PgConnection` *is* such a connection to the type checker and to the
code (a subclass of :class:`~deepseek_eyes.store.chain.Connection` whose own SQLite side is
never used) and runs every statement on PostgreSQL through psycopg 3, translated by
:func:`translate`:

* ``?`` and ``?N`` placeholders to psycopg's; a literal ``%`` escaped.
* ``INSERT OR IGNORE`` to ``ON CONFLICT DO NOTHING``; ``INSERT OR REPLACE`` to an upsert on
  the table's primary key (read from the migrations, :mod:`~deepseek_eyes.store.pg_schema`).
* ``rowid`` to the table's integer key (or its ``rowid`` column); an INSERT returns it,
  which is the cursor's ``lastrowid``.
* ``LIKE`` to ``ILIKE`` (SQLite's LIKE ignores ASCII case).
* ``PRAGMA user_version`` to the ``eyes_schema`` table; ``PRAGMA table_info`` answered
  from the migrations; other pragmas do nothing.
* ``json_extract(doc, '$.key')``: a SQL function of ours returning text (numbers compare as
  text on PostgreSQL: call sites that compare them cast both sides, which SQLite reads the
  same way).

Rows are :class:`Row`: by name and by index, like ``sqlite3.Row``. PostgreSQL's errors
become the ``sqlite3`` exception of the same meaning, carrying ``pg_sqlstate`` (so
:func:`~deepseek_eyes.store.failures.store_error` maps them: a lost server is
``STORE_DATABASE_UNAVAILABLE``); the connection is opened again by the next statement
outside a transaction.

**What is serialized, and why.** Only what must be (SQLite's one write lock serializes
every write transaction; here two run side by side until they need the same thing). Each
lock is transaction-level (``pg_advisory_xact_lock``), held to the commit:

* the chain's tail, :data:`CHAIN_LOCK`, queued just before a write transaction reads the
  chain's head (:meth:`~deepseek_eyes.store.chain.ChainWriter.of`), or with its first
  INSERT into an audited table, whose rowid the same round trip brings back: every entry
  names the one before it, so from the head read to the commit appends take turns;
* a key the transaction reads, then writes on (:meth:`PgConnection.hold`, called through
  :meth:`~deepseek_eyes.store.db.Database.hold`: a session's compare-and-set append, an
  idempotency key's claim, the attempts trim), queued before that read;
* the schema, :data:`SCHEMA_LOCK`, for setup and each migration (replicas that start
  together migrate once).

Keys are taken before the chain lock in every writer of the store (log rows queued before
a transaction are chained when it chains its own first record: :meth:`PgConnection.
defer_chain`), so no two transactions wait for each other in a circle. Reads take no lock:
``BEGIN`` is a REPEATABLE READ snapshot, so readers never wait for writers nor they for
them. A write transaction runs at READ COMMITTED, so the statement after a lock sees what
the lock's last holder committed.

**Connections** come from a psycopg pool per connection object (``[store]
database_pool_size``), checked when lent (:meth:`PgConnection._borrow`). The one in use is
kept between transactions (one is in use at a time): borrowing and giving one back for
each transaction cost the pool's locks and bookkeeping, about 0.1 ms a gateway turn. Kept
idle :data:`CHECK_IDLE_S` or longer, it is asked a round trip before its next transaction,
as a lent one is, and after :data:`KEEP_S` it goes back to the pool between two
transactions, so the pool's own rules (a connection's lifetime) still apply to it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from deepseek_eyes.errors import StoreError
from deepseek_eyes.store import chain as _chain
from deepseek_eyes.store import pg_schema, pg_wire

__all__ = ["CHAIN_LOCK", "DEFAULT_POOL_SIZE", "SCHEMA_LOCK", "PgConnection", "Row", "connect",
           "lock_id", "redact", "translate"]


def lock_id(key: str) -> int:
    """The advisory lock (a signed 64-bit key) a transaction holds for ``key``: the first
    8 bytes of the SHA-256 of ``"eyes:" + key`` (the prefix keeps clear of other programs'
    locks on the same database; two keys sharing one only wait for each other)."""
    digest = hashlib.sha256(f"eyes:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


#: The lock held from a write transaction's read of the chain's tail to its end (see the
#: module docstring), and the one setup and migrations hold.
CHAIN_LOCK = lock_id("chain")
SCHEMA_LOCK = lock_id("schema")
#: The SQLSTATE eyes_expect raises (a class of our own: no PostgreSQL condition is "EY").
EXPECTATION_FAILED = "EY001"

#: A pool's connections when ``[store] database_pool_size`` does not say: a Database runs
#: one statement at a time (under its lock), so one connection is in use and a second is
#: at hand while a lost one is replaced.
DEFAULT_POOL_SIZE = 2
#: A connection idle this long is asked a round trip before it is lent (see _borrow).
CHECK_IDLE_S = 5.0
#: How long the connection in use is kept between transactions before it goes back to the
#: pool once (see PgConnection._done).
KEEP_S = 60.0
#: How long a borrow waits for a connection to be made (libpq's connect_timeout too).
CONNECT_TIMEOUT_S = 5.0

_SETUP = (
    "CREATE TABLE IF NOT EXISTS eyes_schema (version INTEGER NOT NULL)",
    "INSERT INTO eyes_schema (version) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM eyes_schema)",
    # '$.a.b[2]' -> {a,b,2}: the JSON paths the store's SQL uses
    "CREATE OR REPLACE FUNCTION eyes_json_path(path text) RETURNS text[] LANGUAGE sql "
    "IMMUTABLE AS $fn$ SELECT CASE WHEN path = '$' THEN ARRAY[]::text[] ELSE "
    "string_to_array(trim(both '.' from regexp_replace(substr(path, 2), "
    "'\\[(\\d+)\\]', '.\\1', 'g')), '.') END $fn$",
    "CREATE OR REPLACE FUNCTION json_extract(doc text, path text) RETURNS text "
    "LANGUAGE sql IMMUTABLE AS $fn$ SELECT (doc::jsonb) #>> eyes_json_path(path) $fn$",
    # SQLite's instr (where a text first holds another, from 1; 0: nowhere), for the
    # conditions both engines share (migration 15's index): inlined, so a query's
    # condition matches an index's.
    "CREATE OR REPLACE FUNCTION instr(haystack text, needle text) RETURNS integer "
    "LANGUAGE sql IMMUTABLE AS $fn$ SELECT strpos(haystack, needle) $fn$",
    "CREATE OR REPLACE FUNCTION json_each(doc text, path text) RETURNS TABLE (value text) "
    "LANGUAGE sql IMMUTABLE AS $fn$ SELECT e::text FROM jsonb_array_elements("
    "(doc::jsonb) #> eyes_json_path(path)) e $fn$",
    # The chain's lock, then its tail and newest checkpoint in one statement: a VOLATILE
    # function's queries each take a new snapshot (at READ COMMITTED), so the two reads
    # after the lock see what its last holder committed, as separate statements would.
    "CREATE OR REPLACE FUNCTION eyes_chain_head(lock bigint) RETURNS TABLE (t_seq bigint, "
    "t_hash text, c_seq bigint, c_hash text, c_ts double precision, c_key_id text, "
    "c_mac text, c_counts text, c_ordinal bigint, c_id bigint) LANGUAGE plpgsql VOLATILE "
    "AS $fn$ BEGIN PERFORM pg_advisory_xact_lock(lock); RETURN QUERY SELECT "
    "t.seq::bigint, t.hash::text, c.seq::bigint, c.hash::text, c.ts::double precision, "
    "c.key_id::text, c.mac::text, c.counts::text, c.ordinal::bigint, c.id::bigint "
    "FROM (SELECT 1) AS one LEFT JOIN (SELECT h.seq, h.hash FROM chain h "
    "ORDER BY h.seq DESC LIMIT 1) AS t ON true LEFT JOIN (SELECT k.seq, k.hash, k.ts, "
    "k.key_id, k.mac, k.counts, k.ordinal, k.id FROM chain_checkpoints k "
    "ORDER BY k.id DESC LIMIT 1) AS c ON true; END $fn$",
    # A write's expectation (PgConnection.expect): fails the transaction when the
    # database is not as the writer guessed, so the guess needs no round trip of its own.
    "CREATE OR REPLACE FUNCTION eyes_expect(actual text, expected text) RETURNS integer "
    "LANGUAGE plpgsql VOLATILE AS $fn$ BEGIN IF actual IS DISTINCT FROM expected THEN "
    f"RAISE EXCEPTION 'not as expected' USING ERRCODE = '{EXPECTATION_FAILED}'; END IF; "
    "RETURN 1; END $fn$",
    # verify asks SQLite's catalogue whether the chain table exists
    "CREATE OR REPLACE VIEW sqlite_master AS SELECT 'table'::text AS type, "
    "tablename::text AS name, tablename::text AS tbl_name FROM pg_tables "
    "WHERE schemaname = current_schema()",
)


def redact(url: str) -> str:
    """``url`` without a password (for messages): none in its user info, and none in a
    query parameter libpq reads one from (``?password=…``, however it is spelled or
    encoded; a URL from the environment is not checked as the settings file's is)."""
    from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

    from deepseek_eyes.settings.store import SECRET_PARAMETERS

    url = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.split("?", 1)[0] + ("?***" if "?" in url else "")
    if not parts.query:
        return url
    query = "&".join(
        f"{quote(key)}={'***' if key.strip().lower() in SECRET_PARAMETERS else quote(value)}"
        for key, value in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit(parts._replace(query=query))


# --- translation ----------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_INSERT_OR = re.compile(r"^\s*INSERT\s+OR\s+(IGNORE|REPLACE)\s+INTO\s+(\w+)", re.IGNORECASE)
_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)", re.IGNORECASE)
_COLUMNS = re.compile(r"^\s*INSERT\s+INTO\s+\w+\s*\(([^()]*)\)", re.IGNORECASE)
_FROM = re.compile(r"\b(?:FROM|UPDATE|INTO|JOIN)\s+(\w+)", re.IGNORECASE)
_WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)
_PRAGMA = re.compile(r"^\s*PRAGMA\s+(\w+)\s*(?:\(\s*(\w+)\s*\)|=\s*(\d+))?\s*;?\s*$",
                     re.IGNORECASE)
_LIMIT = re.compile(r"\bLIMIT\s+(%s|%\(p\d+\)s|-1\b)", re.IGNORECASE)
_TRANSLATED: dict[str, tuple[str, bool, str | None]] = {}


def _rewrite_words(text: str, rowid: str | None) -> str:
    """Outside string literals: ``LIKE`` -> ``ILIKE`` and ``rowid`` -> the table's."""
    def word(match: re.Match[str]) -> str:
        value = match.group(0)
        upper = value.upper()
        if upper == "LIKE":
            return "ILIKE"
        if upper == "ROWID" and rowid is not None:
            return rowid
        return value
    return _WORD.sub(word, text)


def translate(sql: str) -> tuple[str, bool, str | None]:
    """SQLite ``sql`` as psycopg runs it on PostgreSQL: the text, whether its placeholders
    are numbered (``?3``: parameters go by name ``p3``), and the column an INSERT returns
    (its rowid), if any.

    Raises:
        ValueError: for a statement it cannot translate safely (a programming error).
    """
    known = _TRANSLATED.get(sql)
    if known is not None:
        return known
    text = sql.strip().rstrip(";")
    suffix = ""
    returning: str | None = None
    conflict = _INSERT_OR.match(text)
    if conflict:
        how, table = conflict.group(1).upper(), conflict.group(2)
        text = re.sub(r"^\s*INSERT\s+OR\s+\w+\s+INTO", "INSERT INTO", text, count=1,
                      flags=re.IGNORECASE)
        if how == "IGNORE":
            suffix = " ON CONFLICT DO NOTHING"
        else:
            definition = pg_schema.tables().get(table)
            columns = _COLUMNS.match(text)
            if definition is None or not definition.key or columns is None:
                raise ValueError(f"cannot translate INSERT OR REPLACE into {table}")
            names = [c.strip() for c in columns.group(1).split(",")]
            rest = [n for n in names if n not in definition.key]
            suffix = (f" ON CONFLICT ({', '.join(definition.key)}) DO "
                      + ("UPDATE SET " + ", ".join(f"{n} = EXCLUDED.{n}" for n in rest)
                         if rest else "NOTHING"))
    rowid: str | None = None
    if re.search(r"\browid\b", text, re.IGNORECASE):
        # The statement's own table (the first one named): the store's statements that
        # name a rowid read or write one table, a subquery's only with an explicit column.
        first = _FROM.search(text)
        rowid = pg_schema.rowid_column(first.group(1)) if first else None
        if rowid is None:
            raise ValueError(f"cannot tell whose rowid: {sql[:80]!r}")
    inserted = _INSERT.match(text)
    if inserted and not re.search(r"\bRETURNING\b", text, re.IGNORECASE):
        returning = pg_schema.rowid_column(inserted.group(1))
        if returning is not None:
            suffix += f" RETURNING {returning}"
    out: list[str] = []
    numbered = False
    i, n = 0, len(text)
    plain_start = 0
    while i < n:
        ch = text[i]
        if ch in "'\"":
            out.append(_rewrite_words(text[plain_start:i], rowid))
            end = i + 1
            while end < n:
                if text[end] == ch:
                    if end + 1 < n and text[end + 1] == ch:
                        end += 2
                        continue
                    break
                end += 1
            out.append(text[i:end + 1].replace("%", "%%"))
            i = plain_start = end + 1
            continue
        if ch == "?" or ch == "%":
            out.append(_rewrite_words(text[plain_start:i], rowid))
            if ch == "%":
                out.append("%%")
                i += 1
            else:
                digits = re.match(r"\d+", text[i + 1:])
                if digits:
                    numbered = True
                    out.append(f"%(p{digits.group(0)})s")
                    i += 1 + len(digits.group(0))
                else:
                    out.append("%s")
                    i += 1
            plain_start = i
            continue
        i += 1
    out.append(_rewrite_words(text[plain_start:], rowid))
    # SQLite's LIMIT -1 is "no limit"; PostgreSQL's is LIMIT NULL (or ALL).
    translated = _LIMIT.sub(r"LIMIT NULLIF(\1, -1)", "".join(out))
    result = (translated + suffix, numbered, returning)
    if len(_TRANSLATED) < 4096:  # the project's statements are fixed strings
        _TRANSLATED[sql] = result
    return result


def _params(params: Sequence[Any] | Mapping[str, Any], numbered: bool) -> Any:
    if numbered:
        return {f"p{n}": value for n, value in enumerate(params, start=1)}
    return params


_TAIL = "SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1"  # store/chain.py's
#: The newest checkpoint, as audit/checkpoints.py reads it before it signs (written only
#: under the chain lock, so it is fetched with the tail; another spelling there is simply
#: read when asked).
_LAST_CHECKPOINT = ("SELECT seq, hash, ts, key_id, mac, counts, ordinal, id FROM"
                    " chain_checkpoints ORDER BY id DESC LIMIT 1")
_CHAIN_WRITE = re.compile(r"^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+chain\b",
                          re.IGNORECASE)
_CHECKPOINT_WRITE = re.compile(
    r"^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+chain_checkpoints\b", re.IGNORECASE)
_BEGIN = "BEGIN"
_LOCK_CHAIN = f"SELECT pg_advisory_xact_lock({CHAIN_LOCK})"
#: The chain lock, tail and newest checkpoint at once (eyes_chain_head in _SETUP): one row,
#: the tail's two columns then the checkpoint's, NULL where there is none.
_CHAIN_HEAD = "SELECT * FROM eyes_chain_head(%s)"  # with CHAIN_LOCK: prepared once
_CHECKPOINT_COLUMNS = ("seq", "hash", "ts", "key_id", "mac", "counts", "ordinal", "id")
_LOCK_KEY = "SELECT pg_advisory_xact_lock(%s)"
_CHAINED_INSERT: dict[str, bool] = {}
_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ"
#: A row for defer_chain: kind, table, the INSERT, its parameters, and its rowid, or the
#: INSERT's cursor to read it from when the records fold.
_Deferred = tuple[str, str, str, Sequence[Any], int | sqlite3.Cursor]


#: What a statement is to :meth:`PgConnection._execute`.
_STATEMENT, _BEGIN_TX, _END_TX, _PRAGMA_STMT = "statement", "begin", "end", "pragma"


class _Plan:
    """One SQL text as :meth:`PgConnection._execute` runs it, worked out once per text
    (the store's statements are fixed strings, run thousands of times): its kind, its
    translation, and what running it means for the chain's prefetched tail."""

    __slots__ = ("begin", "chain_write", "chained_insert", "checkpoint_write", "kind",
                 "last_checkpoint", "numbered", "returning", "rollback", "tail", "text")

    def __init__(self, sql: str) -> None:
        head = sql.lstrip()[:20].upper()
        self.text, self.numbered, self.returning = sql, False, None
        self.begin: str | None = None
        self.rollback = self.tail = self.last_checkpoint = False
        self.chain_write = self.checkpoint_write = self.chained_insert = False
        if head.startswith("BEGIN"):
            self.kind = _BEGIN_TX
            self.begin = "read" if "IMMEDIATE" not in head else "write"
        elif head.startswith(("COMMIT", "END", "ROLLBACK")):
            self.kind = _END_TX
            self.rollback = head.startswith("ROLLBACK")
        elif head.startswith("PRAGMA"):
            self.kind = _PRAGMA_STMT
        else:
            self.kind = _STATEMENT
            self.text, self.numbered, self.returning = translate(sql)
            self.tail, self.last_checkpoint = sql == _TAIL, sql == _LAST_CHECKPOINT
            self.chain_write = bool(_CHAIN_WRITE.match(self.text))
            self.checkpoint_write = bool(_CHECKPOINT_WRITE.match(self.text))
            self.chained_insert = _chained_insert(self.text)


_PLANS: dict[str, _Plan] = {}


def _plan(sql: str) -> _Plan:
    """``sql``'s plan, kept for the next time (up to 4,096 texts).

    Raises:
        ValueError: as :func:`translate`.
    """
    plan = _Plan(sql)
    if len(_PLANS) < 4096:
        _PLANS[sql] = plan
    return plan


class _NeverRaised(Exception):
    """Stands for psycopg's errors until psycopg is loaded (see _Psycopg)."""


#: libpq's PQTRANSACTION_IDLE: a connection outside any transaction.
_IDLE = 0


class _Psycopg:
    """psycopg's error classes, bound when the first connection is made (psycopg is
    imported only when PostgreSQL is used), so a statement's ``except`` does not import
    it each time."""

    error: type[Exception] = _NeverRaised
    operational: type[Exception] = _NeverRaised

    @classmethod
    def bind(cls) -> None:
        import psycopg

        cls.error, cls.operational = psycopg.Error, psycopg.OperationalError


# --- rows and cursors -------------------------------------------------------------------

_NOWHERE = sqlite3.connect(":memory:", check_same_thread=False)
_NO_CURSOR = _NOWHERE.cursor()


class Row(sqlite3.Row):
    """A result row by index and by (case-insensitive) name, as ``sqlite3.Row``."""

    __slots__ = ("_index", "_names", "_values")
    _names: Sequence[str]
    _index: Mapping[str, int]
    _values: tuple[Any, ...]

    def __new__(cls, names: Sequence[str], index: Mapping[str, int],
                values: tuple[Any, ...]) -> Row:
        row = super().__new__(cls, _NO_CURSOR, values)
        row._names, row._index, row._values = names, index, values
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            try:
                return self._values[self._index[key.lower()]]
            except KeyError:
                raise IndexError(f"No item with that key: {key}") from None
        return self._values[key]

    def keys(self) -> list[str]:
        return list(self._names)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Row):
            return bool(self._values == other._values and self._names == other._names)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values)

    def __repr__(self) -> str:
        return f"Row({dict(zip(self._names, self._values, strict=False))!r})"


_Description = tuple[tuple[str, None, None, None, None, None, None], ...]
#: Each result shape's name index and ``description`` (the store's statements have a few
#: dozen shapes).
_SHAPES: dict[tuple[str, ...], tuple[dict[str, int], _Description]] = {}


def _shape(names: tuple[str, ...]) -> tuple[dict[str, int], _Description]:
    index: dict[str, int] = {}
    for n, name in enumerate(names):
        index.setdefault(name.lower(), n)
    shape = (index, tuple((name, None, None, None, None, None, None) for name in names))
    if len(_SHAPES) < 4096:
        _SHAPES[names] = shape
    return shape


class PgCursor(sqlite3.Cursor):
    """The rows of one statement, fetched at once (the store's results are small or read
    in batches), with ``rowcount``, ``lastrowid`` and ``description`` as sqlite3's. A
    statement queued in a transaction's pipeline gets its result when first read (see
    :meth:`PgConnection._queue`)."""

    def __init__(self, connection: PgConnection) -> None:
        super().__init__(connection)
        self._owner = connection
        self._rows: list[Row] = []
        self._at = 0
        self._rowcount = -1
        self._lastrowid: int | None = None
        self._description: tuple[tuple[str, None, None, None, None, None, None], ...] | None
        self._description = None
        #: Queued, not read yet: psycopg's cursor, the column an INSERT returns, and the
        #: statement's place in the pipeline.
        self._lazy = False
        self._psy: Any = None
        self._returning: str | None = None
        self._index = 0
        #: An expectation's failure (see PgConnection.expect).
        self._expect: Callable[[], StoreError] | None = None

    def _settled(self) -> PgCursor:
        if self._lazy:
            self._lazy = False
            self._owner._settle(self)
        return self

    def _load(self, names: Sequence[str] | None, rows: Iterable[tuple[Any, ...]],
              rowcount: int, lastrowid: int | None) -> PgCursor:
        if names is not None:
            fixed = tuple(names)
            shape = _SHAPES.get(fixed) or _shape(fixed)
            index = shape[0]
            self._rows = [Row(fixed, index, r if type(r) is tuple else tuple(r))
                          for r in rows]
            self._description = shape[1]
        self._rowcount, self._lastrowid = rowcount, lastrowid
        self._psy, self._lazy = None, False
        return self

    def failure(self) -> sqlite3.Error | None:
        """The statement's own failure on the server, as sqlite3's error (None: it ran, it
        did not run, or its round trip was not made); never a round trip."""
        slot = self._psy
        error = getattr(slot, "error", None)
        return _as_sqlite(error) if error is not None else None

    @property
    def rowcount(self) -> int:
        return self._settled()._rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._settled()._lastrowid

    @property
    def description(self) -> Any:
        return self._settled()._description

    def fetchone(self) -> Any:
        self._settled()
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchall(self) -> list[Any]:
        self._settled()
        rows, self._at = self._rows[self._at:], len(self._rows)
        return rows

    def fetchmany(self, size: int | None = 1) -> list[Any]:
        self._settled()
        count = size or 1
        rows = self._rows[self._at:self._at + count]
        self._at += len(rows)
        return rows

    def __iter__(self) -> PgCursor:
        return self

    def __next__(self) -> Any:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row


# --- errors -------------------------------------------------------------------------------

#: SQLite primary result codes given to translated errors (store/failures.py reads them).
_BUSY, _READONLY, _IOERR, _FULL, _CONSTRAINT = 5, 8, 10, 13, 19


def _as_sqlite(exc: Exception) -> sqlite3.Error:
    """The ``sqlite3`` exception of the same meaning as psycopg's ``exc``."""
    import psycopg

    state = getattr(exc, "sqlstate", None) or ""
    cls: type[sqlite3.Error] = sqlite3.OperationalError
    code, name = 1, "SQLITE_ERROR"
    unavailable = False
    if isinstance(exc, psycopg.IntegrityError) or state.startswith("23"):
        cls, code, name = sqlite3.IntegrityError, _CONSTRAINT, "SQLITE_CONSTRAINT"
    elif state == "53100":  # disk_full
        code, name = _FULL, "SQLITE_FULL"
    elif state in ("25006", "42501"):  # read_only_sql_transaction, insufficient_privilege
        code, name = _READONLY, "SQLITE_READONLY"
    elif state in ("55P03", "40001", "40P01", "57014"):  # lock, serialization, deadlock,
        code, name = _BUSY, "SQLITE_BUSY"                  # lock_timeout's cancel
    elif (isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError | _Lost)
          or state.startswith(("08", "57P"))):
        code, name, unavailable = _IOERR, "SQLITE_IOERR", True
    elif isinstance(exc, psycopg.ProgrammingError | psycopg.DataError):
        cls = sqlite3.ProgrammingError if not state else sqlite3.OperationalError
    error = cls(_first_line(exc))
    error.sqlite_errorcode = code
    error.sqlite_errorname = name
    error.pg_sqlstate = state  # type: ignore[attr-defined]
    error.pg_unavailable = unavailable  # type: ignore[attr-defined]
    # A failed expectation is its writer's error (store/failures.py raises it as it is).
    error.store_failure = getattr(exc, "store_failure", None)  # type: ignore[attr-defined]
    return error


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


# --- the connection ---------------------------------------------------------------------


class PgConnection(_chain.Connection):
    """A PostgreSQL connection in ``sqlite3.Connection``'s clothes (the module docstring).

    Used under :class:`~deepseek_eyes.store.db.Database`'s lock, like the SQLite one."""

    dialect = "postgresql"

    def __init__(self, url: str, *, password: str | None = None, read_only: bool = False,
                 pool_size: int = DEFAULT_POOL_SIZE) -> None:
        super().__init__(":memory:", check_same_thread=False, isolation_level=None)
        _Psycopg.bind()
        self.url = url
        self._read_only = read_only
        self._pg: Any = None
        self._in_tx = False
        #: The open transaction's kind ("read" or "write") until its BEGIN is sent.
        self._begin: str | None = None
        #: The open transaction's pipeline (see _queue), and its bookkeeping: statements
        #: sent, how many have their results back, whether a round trip was made, the
        #: statements to send again on a new link until then, the first error.
        self._pipe: pg_wire.Pipeline | None = None
        self._sent = self._synced_upto = 0
        self._synced = False
        self._replay: list[tuple[str, Any, PgCursor | None, str | None, bool]] = []
        self._tx_error: Exception | None = None
        #: The chain's tail, queued with the chain lock (see prefetch_chain_head), until the
        #: chain is written; whether this transaction holds (or queued) the chain lock; the
        #: keys it holds (see hold).
        self._tail_cursor: PgCursor | None = None
        self._last_cursor: PgCursor | None = None  # the newest checkpoint, likewise
        self._chain_locked = False
        self._held: set[int] = set()
        #: The open transaction's expectations sent (see expect).
        self._expects: list[PgCursor] = []
        #: Chain entries of log rows written at this transaction's start, made when its
        #: chain writer is (see defer_chain).
        self._deferred: list[tuple[Sequence[_Deferred], float]] = []
        #: Queue the chain lock and tail after a write transaction's first INSERT into an
        #: audited table (once the chain table exists: :class:`~deepseek_eyes.store.db.
        #: Database` sets it after migrating).
        self.prefetch_tail = False
        self._guard = threading.RLock()
        #: When each idle connection of the pool was given back (see _borrow).
        self._returned: dict[int, float] = {}
        #: Since when the connection kept between transactions has been idle (see _alive).
        self._idle_since: float | None = None
        #: When the connection in use was borrowed (see _done).
        self._kept_since = 0.0
        self._pool = _open_pool(url, password, pool_size, self._configure)
        # Closed with this object: a Database dropped without close() leaves no server
        # connection and no pool thread behind.
        weakref.finalize(self, _close_pool, self._pool)
        try:
            self._alive()  # a server that cannot be reached fails the open
        except (psycopg_error(), _Lost) as exc:
            _close_pool(self._pool)
            raise _as_sqlite(exc) from exc
        self._release()

    def _configure(self, conn: Any) -> None:
        """A new connection of the pool, made ready for the store (its adapters, the lock
        wait bound, a read-only open's default)."""
        int_dumper, number_loader = _adapters()
        conn.adapters.register_dumper(int, int_dumper)
        conn.adapters.register_dumper(bool, int_dumper)
        conn.adapters.register_loader("numeric", number_loader)
        conn.execute("SET lock_timeout = '10s'")
        if self._read_only:
            conn.execute("SET default_transaction_read_only = on")

    # --- the pool ---------------------------------------------------------------------------
    #
    # A connection is borrowed for one transaction (or one lone statement) and given back
    # when it ends. On borrow it is checked: one the client knows is closed or broken is
    # replaced at once, and one idle CHECK_IDLE_S or longer is asked a round trip first (a
    # server restarted meanwhile ended it). One found dead later, before its transaction's
    # first round trip, is replaced and the statements sent again (_again, _first).

    def _borrow(self) -> Any:
        """A checked connection from the pool.

        Raises:
            psycopg.Error, _Lost: the server cannot be reached.
        """
        from psycopg_pool import PoolTimeout

        for attempt in range(3):
            try:
                conn = self._pool.getconn()
            except PoolTimeout as exc:
                raise _Lost(f"no connection to PostgreSQL: {exc}") from exc
            returned = self._returned.pop(id(conn), None)
            if conn.closed or conn.broken:
                self._give_back(conn)
                continue
            if attempt < 2 and not _answers(conn, returned):
                self._give_back(conn)
                continue
            return conn
        raise _Lost("no live connection to PostgreSQL")

    def _give_back(self, conn: Any) -> None:
        """Return ``conn`` to the pool (which drops it when closed or broken)."""
        if conn.closed or conn.broken:
            self._returned.pop(id(conn), None)
        else:
            self._returned[id(conn)] = time.monotonic()
        with contextlib.suppress(Exception):  # a pool closed meanwhile closes it instead
            self._pool.putconn(conn)

    def _release(self) -> None:
        """The connection goes back to the pool (when this object closes)."""
        conn, self._pg = self._pg, None
        self._idle_since = None
        if conn is not None:
            self._give_back(conn)

    def _discard(self) -> None:
        """The connection is lost: closed, and given back for the pool to drop."""
        conn, self._pg = self._pg, None
        self._idle_since = None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
            self._give_back(conn)

    def setup(self) -> None:
        """Make the version table and our SQL functions, once per database, under the
        write lock (several processes may start at once)."""
        self.execute("BEGIN IMMEDIATE")
        try:
            self.raw(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK})")
            for statement in _SETUP:
                self.raw(statement)
        except Exception:
            self.execute("ROLLBACK")
            raise
        self.execute("COMMIT")

    def raw(self, sql: str) -> None:
        """Run PostgreSQL ``sql`` as it is (a migration's translated schema statement);
        inside a transaction it is sent with the transaction's next round trip."""
        import psycopg

        with self._guard:
            try:
                if self._in_tx:
                    self._queue(sql, None)
                else:
                    self._alive().execute(sql)
            except psycopg.Error as exc:
                raise _as_sqlite(exc) from exc
            finally:
                self._done()

    def read_together(self, statements: Sequence[tuple[str, Sequence[Any]]],
                      shapes: Sequence[str]) -> list[list[tuple[Any, ...]]]:
        """Several reads as one lone statement (:func:`together`): one snapshot, as a
        statement's subqueries share one, with no transaction around it (no ``BEGIN``
        and ``COMMIT`` to send and run, and one statement to make instead of several).
        Each read's rows as tuples, in its order. Sent again on a new link when the old
        one was found dead, as any lone read.

        Raises:
            sqlite3.Error: as :meth:`execute`; ``sqlite3.ProgrammingError`` inside a
                transaction (read there with its statements instead).
        """
        with self._guard:
            if self._in_tx:
                raise sqlite3.ProgrammingError("read_together inside a transaction")
        sql = together(tuple(s for s, _ in statements), tuple(shapes))
        args = [value for _, params in statements for value in params]
        rows = self.execute(sql, args).fetchall()
        return apart(rows, shapes)

    def execute_idempotent(self, sql: str, parameters: Any = ()) -> PgCursor:
        """Run one statement on its own, outside the store's write order (no advisory
        lock): for writes that may happen twice with one effect (a content-addressed blob's
        ``INSERT … ON CONFLICT DO NOTHING``). Sent again on a new connection when the old
        one was lost, like a transaction's first statement.

        Raises:
            sqlite3.Error: as :meth:`execute`.
        """
        import psycopg

        with self._guard:
            if self._in_tx:
                raise sqlite3.ProgrammingError("execute_idempotent inside a transaction")
            text, numbered, returning = translate(sql)
            cursor = PgCursor(self)
            try:
                self._first(text, _params(parameters, numbered), cursor, returning)
            except psycopg.Error as exc:
                raise _as_sqlite(exc) from exc
            except _Lost as exc:
                raise _as_sqlite(exc) from exc
            finally:
                self._done()
            return cursor

    def copy_rows(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """Run one INSERT for many rows inside the open transaction (store/copy.py), as the
        statement is written: no translation beyond the placeholders, nothing returned."""
        import psycopg

        with self._guard:
            text = sql.replace("?", "%s")
            self._tail_cursor = self._last_cursor = None  # what it writes is read again
            try:
                if self._in_tx:
                    self._queue(text, rows, many=True)
                else:
                    with self._alive().cursor() as cur:
                        cur.executemany(text, rows)
            except psycopg.Error as exc:
                raise _as_sqlite(exc) from exc
            finally:
                self._done()

    @property
    def in_transaction(self) -> bool:
        return self._in_tx

    def _alive(self, *, fresh_transaction: bool = False) -> Any:
        """The psycopg connection, borrowed from the pool when none is (only between
        transactions, or before a transaction sent anything: one lost inside a transaction
        fails it, and its rollback ends it)."""
        conn = self._pg
        idle, self._idle_since = self._idle_since, None
        if conn is not None and not (conn.closed or conn.broken) and not _answers(conn, idle):
            self._discard()  # the server ended it while it was kept (restarted)
            conn = None
        if conn is None or conn.closed or conn.broken:
            if self._in_tx and not fresh_transaction:
                raise _as_sqlite(_Lost("the connection to PostgreSQL was lost"))
            self._discard()
            conn = self._pg = self._borrow()
            self._kept_since = time.monotonic()
        return conn

    def _done(self) -> None:
        """After a public call: outside a transaction, the connection is kept, idle from
        now (see :meth:`_alive`)."""
        conn = self._pg
        if self._in_tx or conn is None:
            return
        now = time.monotonic()
        if conn.closed or conn.broken or conn.pgconn.transaction_status != _IDLE \
                or now - self._kept_since >= KEEP_S:
            # Left mid-transaction (an end that failed half-way): the pool rolls it back
            # or drops it when given back, as it did for every connection before. Kept
            # KEEP_S: given back, for the pool to close it past its lifetime.
            self._release()
            return
        self._idle_since = now

    def execute(self, sql: str, parameters: Any = (), /) -> PgCursor:
        with self._guard:
            try:
                return self._execute(sql, parameters)
            finally:
                self._done()

    def _execute(self, sql: str, parameters: Any, *, speculate: bool = True) -> PgCursor:
        plan = _PLANS.get(sql) or _plan(sql)
        cursor = PgCursor(self)
        try:
            if plan.kind is not _STATEMENT:
                return self._control(plan, sql, cursor)
            args = _params(parameters, plan.numbered)
            if self._in_tx:
                if plan.tail and self._begin == "write":
                    self.prefetch_chain_head()
                    tail = self._tail_cursor
                    if tail is not None:
                        # Queued with the lock: the same rows (nothing wrote the chain).
                        names, rows = _head_part(tail, tail=True)
                        return cursor._load(names, rows, len(rows), None)
                if plan.last_checkpoint and self._last_cursor is not None:
                    names, rows = _head_part(self._last_cursor, tail=False)
                    return cursor._load(names, rows, len(rows), None)
                self._queue(plan.text, args, cursor, plan.returning)
                if plan.chain_write:
                    self._tail_cursor = None  # the chain written since: read the table
                elif plan.checkpoint_write:
                    self._last_cursor = None
                elif speculate and plan.chained_insert and self.prefetch_tail \
                        and not self._chain_locked and self._begin == "write":
                    # Its rowid is read next, then the chain's tail (store/chain.py's
                    # insert): the lock and the tail go with that round trip.
                    self.prefetch_chain_head()
                return cursor
            # A lone statement (autocommit): no lock. A read is sent again on a new link
            # when the old one was found dead; a lone write is one statement, so the same
            # holds (nothing of it ran).
            self._first(plan.text, args, cursor, plan.returning)
            return cursor
        except _Psycopg.error as exc:
            raise _as_sqlite(exc) from exc
        except _Lost as exc:
            raise _as_sqlite(exc) from exc

    def _control(self, plan: _Plan, sql: str, cursor: PgCursor) -> PgCursor:
        """BEGIN, COMMIT, ROLLBACK and PRAGMA statements."""
        if plan.kind is _BEGIN_TX:
            # Nothing is sent yet: BEGIN goes with the transaction's first statement
            # (and no lock: see hold and prefetch_chain_head).
            self._end_pipeline(quiet=True)
            self._in_tx = True
            self._chain_locked, self._held, self._tail_cursor = False, set(), None
            self._last_cursor = None
            self._begin = plan.begin
            return cursor
        if plan.kind is _END_TX:
            self._end_transaction(rollback=plan.rollback)
            return cursor
        return self._pragma(sql, cursor)

    # --- a transaction in pipeline mode ---------------------------------------------------
    #
    # Inside a transaction every statement is queued on the connection's pipeline
    # (pg_wire.Pipeline: libpq's pipeline mode) and its cursor is read lazily: a round trip
    # is made only when the code reads a result (a row, a rowcount, a rowid) or commits,
    # and carries every statement queued before it. BEGIN, the write lock and the chain's
    # tail go with the first statement; writes nobody reads (a session's scope row, a
    # lease, the chain's entries) go with the next read or the commit. A statement that
    # failed fails the transaction on the server; its error is raised by the next result
    # read or by the commit, and the transaction rolls back whole, as before. Until the
    # first round trip succeeded nothing of the transaction has run: a link found dead
    # then is replaced and the queued statements sent again. A read transaction none of
    # whose results were read before its COMMIT (Database.read_each) is one round trip,
    # the COMMIT with the reads.

    def _tx_conn(self) -> Any:
        """The psycopg connection of the open transaction, in pipeline mode, its BEGIN
        queued."""
        if self._pipe is None:
            try:
                self._open_pipeline()
            except _Psycopg.operational as exc:
                # A link the server ended while it was idle in the pool can fail its
                # BEGIN already: nothing ran, a new one is taken once.
                if self._pg is None or not _link_gone(self._pg, exc):
                    raise
                self._drop_pipeline()
                self._discard()
                self._open_pipeline()
        return self._pg

    def _open_pipeline(self) -> None:
        conn = self._alive(fresh_transaction=True)
        self._pipe = pg_wire.Pipeline(conn)
        self._sent = self._synced_upto = 0
        self._synced = False
        self._tx_error = None
        self._expects = []
        self._pipe.send(_BEGIN if self._begin == "write" else _BEGIN_READ, None)
        self._sent += 1

    # --- what a write transaction holds --------------------------------------------------
    #
    # No lock at BEGIN: two write transactions run side by side until one needs what the
    # other holds. The chain lock is queued just before the chain's tail is read (or with
    # the first INSERT into an audited table, whose rowid is read in the same round trip
    # as the tail), and held to the commit; a key lock (hold) before a read the
    # transaction then writes on. Keys are taken before the chain lock in every writer of
    # the store, so no two transactions wait for each other in a circle (PostgreSQL would
    # end one of them with a deadlock error, STORE_WRITE_FAILED).

    def hold(self, key: str) -> None:
        """Inside a write transaction: hold ``key``'s advisory lock until it ends (queued:
        it is taken, waiting for another holder's commit, in the next round trip, before
        the statements queued after it run).

        Raises:
            sqlite3.ProgrammingError: outside a write transaction.
            sqlite3.Error: as :meth:`execute`.
        """

        with self._guard:
            if not self._in_tx or self._begin != "write":
                raise sqlite3.ProgrammingError("hold() outside a write transaction")
            ident = lock_id(key)
            if ident in self._held:
                return
            self._queue(_LOCK_KEY, (ident,))
            self._held.add(ident)

    def expect(self, sql: str, parameters: Any, failure: Callable[[], StoreError]) -> None:
        """Inside a write transaction: queue ``sql`` (SQLite's SQL calling ``eyes_expect``),
        read by nobody: when the database is not as expected, the transaction fails at its
        next round trip with ``failure()`` (store/failures.py raises it as it is), and
        nothing of it is kept. A guess checked this way costs no round trip of its own.

        Raises:
            sqlite3.ProgrammingError: outside a write transaction.
            sqlite3.Error: as :meth:`execute`.
        """
        with self._guard:
            if not self._in_tx or self._begin != "write":
                raise sqlite3.ProgrammingError("expect() outside a write transaction")
            plan = _PLANS.get(sql) or _plan(sql)
            cursor = PgCursor(self)
            cursor._expect = failure
            self._queue(plan.text, _params(parameters, plan.numbered), cursor)

    def prefetch_chain_head(self) -> None:
        """Queue the chain lock, the chain's tail and its newest checkpoint (one statement,
        eyes_chain_head), once a write transaction (no round trip: the rows come with the
        next one)."""
        if self._chain_locked or not self._in_tx or self._begin != "write":
            return
        head = PgCursor(self)
        if self.prefetch_tail:  # migrated: the checkpoints table has its columns
            # The newest checkpoint too: a seal reads it next (audit/checkpoints.py).
            self._queue(_CHAIN_HEAD, (CHAIN_LOCK,), head)
            self._tail_cursor = self._last_cursor = head
        else:
            self._queue(_LOCK_CHAIN, None)
            self._queue(_TAIL, None, head)
            self._tail_cursor = head
        self._chain_locked = True

    def defer_chain(self, rows: Sequence[_Deferred], ts: float) -> None:
        """Chain ``rows`` (log rows just inserted, as for ``ChainWriter.add_inserts``) when
        this transaction's chain writer is made, first (its own records after them, as
        SQLite orders them), or at the commit: the transaction takes the chain lock when
        it chains its own first record, after the keys it holds, not when it begins. Once
        the transaction has its writer (it chained already), they are chained now. A row
        whose rowid is its INSERT's cursor (:func:`~deepseek_eyes.store.chain.insert_later`)
        has it read when the records fold, not here."""
        if self._writer is not None:
            _chain_rows(self._writer, rows, ts)
            return
        self._deferred.append((rows, ts))

    @property
    def writer(self) -> _chain.ChainWriter | None:
        return self._writer

    @writer.setter
    def writer(self, value: _chain.ChainWriter | None) -> None:
        self._writer = value
        deferred = getattr(self, "_deferred", None)
        if value is not None and deferred:
            self._deferred = []
            for rows, ts in deferred:
                _chain_rows(value, rows, ts)

    def begun(self) -> None:
        self._deferred = []
        super().begun()

    def write_chain(self) -> None:
        if self._deferred and self.tracking and self._in_tx:
            _chain.ChainWriter.of(self)  # made: the setter chains the deferred rows
        super().write_chain()

    def ended(self, *, committed: bool = False) -> None:
        self._deferred = []
        super().ended(committed=committed)

    def _queue(self, text: str, args: Any, cursor: PgCursor | None = None,
               returning: str | None = None, *, many: bool = False) -> None:
        """Queue one statement (or one per row of ``args`` with ``many``) on the open
        transaction's pipeline; ``cursor`` gets its result when read."""
        try:
            conn = self._tx_conn()
            entry = (text, args, cursor, returning, many)
            if not self._synced:
                self._replay.append(entry)
            try:
                self._send(entry)
            except _Psycopg.operational as exc:
                if self._synced or not _link_gone(conn, exc):
                    raise
                self._again()
        except (_Psycopg.error, _Lost) as exc:  # every caller raises sqlite3's errors
            raise _as_sqlite(exc) from exc

    def _send(self, entry: tuple[str, Any, PgCursor | None, str | None, bool]) -> None:
        text, args, cursor, returning, many = entry
        pipe = self._pipe
        assert pipe is not None
        if many:
            for row in args:
                pipe.send(text, row)
        else:
            slot = pipe.send(text, args)
            if cursor is not None:
                cursor._psy, cursor._returning, cursor._index = slot, returning, self._sent
                cursor._lazy = True
                if cursor._expect is not None:
                    self._expects.append(cursor)
        self._sent += 1

    def _again(self) -> None:
        """The link was found dead before the transaction's first round trip: a new one,
        and everything queued sent again (nothing of it ran)."""
        replay = self._replay
        tail, last = self._tail_cursor, self._last_cursor
        self._drop_pipeline()
        self._discard()
        self._open_pipeline()
        self._tail_cursor, self._last_cursor = tail, last  # queued again below
        self._replay = replay
        for entry in replay:
            self._send(entry)

    def _sync(self) -> None:
        """One round trip: everything queued, and its results."""
        try:
            try:
                assert self._pipe is not None
                self._pipe.sync()
            except _Psycopg.operational as exc:
                if self._synced or not _link_gone(self._pg, exc):
                    raise
                self._again()
                assert self._pipe is not None
                self._pipe.sync()
        except _Psycopg.error as exc:
            self._tx_error = exc
            self._synced_upto = self._sent
            for cursor in self._expects:
                if cursor._expect is not None and getattr(cursor._psy, "error", None) is exc:
                    exc.store_failure = cursor._expect()
            raise
        self._synced, self._replay, self._synced_upto = True, [], self._sent

    def _settle(self, cursor: PgCursor) -> None:
        """Load ``cursor`` with its statement's result, making the round trip if it has not
        come back yet."""
        with self._guard:
            try:
                if self._pipe is not None and cursor._index >= self._synced_upto:
                    self._sync()
                if cursor._psy.result is None:
                    error = self._tx_error or _Lost("the statement's result never came")
                    raise error
                self._load(cursor, cursor._psy, cursor._returning)
            except _Psycopg.error as exc:
                raise _as_sqlite(exc) from exc
            except _Lost as exc:
                raise _as_sqlite(exc) from exc

    def _drop_pipeline(self) -> None:
        pipe, self._pipe = self._pipe, None
        self._replay = []
        self._tail_cursor = self._last_cursor = None
        if pipe is not None:
            pipe.abandon()  # the error was raised already, or will be

    def _end_pipeline(self, *, quiet: bool = False) -> None:
        if quiet or self._pipe is None:
            self._drop_pipeline()
            return
        pipe, self._pipe = self._pipe, None
        self._replay = []
        self._tail_cursor = self._last_cursor = None
        pipe.close()  # the last round trip: its errors raised

    def _end_transaction(self, *, rollback: bool) -> None:
        was, self._in_tx = self._in_tx, False
        reading, self._begin = self._begin == "read", None
        if not was:
            return
        if self._pipe is None:
            return  # nothing was sent: nothing to end
        conn = self._pg
        if conn is None or conn.closed or conn.broken:
            self._drop_pipeline()
            if rollback:
                return  # nothing to end: the server ended it with the link
            raise _Lost("the connection to PostgreSQL was lost before the commit")
        if rollback:
            self._drop_pipeline()
            if not (conn.closed or conn.broken):
                conn.execute("ROLLBACK")
            return
        try:
            if not self._synced and reading:
                # A read not read yet (Database.read_each): its commit goes with it, in one
                # round trip. Sent again on a new link with it, a read's commit changes
                # nothing.
                self._queue("COMMIT", None)
                self._sync()
                self._end_pipeline()
                return
            if not self._synced:  # the first round trip may be sent again, never a commit
                self._sync()
                conn = self._pg  # a new link, when the first trip found the old one dead
            assert self._pipe is not None
            self._pipe.send("COMMIT", None)
            self._end_pipeline()  # the commit (and what was queued before it): one trip
        except BaseException:
            self._drop_pipeline()
            if not (conn.closed or conn.broken):
                conn.execute("ROLLBACK")
            raise

    def _first(self, text: str, args: Any = None, cursor: PgCursor | None = None,
               returning: str | None = None) -> Any:
        """Run a lone statement outside a transaction and return the connection. When the
        server went away since the last statement (restarted, or a connection cut while
        idle) it fails on the old link: the statement is sent once more on a new one,
        which is safe because nothing has happened in it yet. A server still down fails
        the second try (``STORE_DATABASE_UNAVAILABLE``)."""
        import psycopg

        conn = self._alive()
        try:
            if cursor is None:
                conn.execute(text)
            else:
                self._run(conn, cursor, text, args, returning)
            return conn
        except psycopg.OperationalError:
            if not (conn.closed or conn.broken):
                raise
        self._discard()
        conn = self._alive()
        if cursor is None:
            conn.execute(text)
        else:
            self._run(conn, cursor, text, args, returning)
        return conn

    @staticmethod
    def _run(conn: Any, cursor: PgCursor, text: str, args: Any,
             returning: str | None) -> PgCursor:
        return PgConnection._load(cursor, pg_wire.run(conn, text, args), returning)

    @staticmethod
    def _load(cursor: PgCursor, slot: pg_wire.Slot, returning: str | None) -> PgCursor:
        if returning is not None:
            rowcount, last = slot.last_key()
            return cursor._load(None, (), rowcount, last)
        names, rows, rowcount = slot.rows()
        return cursor._load(names, rows, rowcount, None)

    def _pragma(self, sql: str, cursor: PgCursor) -> PgCursor:
        match = _PRAGMA.match(sql)
        name = match.group(1).lower() if match else ""
        if name == "user_version" and match is not None:
            if match.group(3) is not None:
                self._write_or_queue("UPDATE eyes_schema SET version = %s",
                                     (int(match.group(3)),))
                return cursor
            row = self._read_now("SELECT version FROM eyes_schema")
            return cursor._load(["user_version"], [(int(row[0]) if row else 0,)], 1, None)
        if name == "table_info" and match is not None and match.group(2):
            definition = pg_schema.tables().get(match.group(2))
            rows = [] if definition is None else [
                (n, c.name, c.declared, int(c.notnull), None, c.pk)
                for n, c in enumerate(definition.columns)]
            return cursor._load(["cid", "name", "type", "notnull", "dflt_value", "pk"],
                                rows, len(rows), None)
        return cursor  # journal_mode, synchronous, foreign_keys: PostgreSQL's own

    def _write_or_queue(self, text: str, args: Any) -> None:
        if self._in_tx:
            self._queue(text, args)
        else:
            self._alive().execute(text, args)

    def _read_now(self, text: str) -> Any:
        if self._in_tx:
            cursor = PgCursor(self)
            self._queue(text, None, cursor)
            return cursor.fetchone()
        return self._alive().execute(text).fetchone()

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> PgCursor:
        """Inside a transaction, queued (sent with the next round trip); outside, one lone
        write each."""

        with self._guard:
            if not self._in_tx:
                cursor = PgCursor(self)
                try:
                    for params in seq_of_parameters:
                        cursor = self._execute(sql, params)
                finally:
                    self._done()
                return cursor
            text, numbered, _returning = translate(sql)
            if _CHAIN_WRITE.match(text):
                self._tail_cursor = None
            elif _CHECKPOINT_WRITE.match(text):
                self._last_cursor = None
            rows = [_params(p, numbered) for p in seq_of_parameters]
            if rows and self.prefetch_tail and not self._chain_locked \
                    and self._begin == "write" and _chained_insert(text):
                self._queue(text, rows, many=True)
                self.prefetch_chain_head()
                return PgCursor(self)._load(None, (), len(rows), None)
            if rows:
                self._queue(text, rows, many=True)
            return PgCursor(self)._load(None, (), len(rows), None)

    def execute_pipelined(self, statements: Sequence[tuple[str, Sequence[Any]]]
                          ) -> list[PgCursor]:
        """Run ``statements`` inside the open transaction in one round trip (the queued
        log rows of a flush: store/db.py); their cursors, in order.

        Raises:
            sqlite3.Error: as :meth:`execute` (the first failure; the transaction is
                then doomed, as after any failed statement).
        """
        with self._guard:  # no chain lock queued: the caller says when (defer_chain)
            return [self._execute(sql, params, speculate=False) for sql, params in statements]

    def executescript(self, sql_script: str, /) -> PgCursor:
        raise NotImplementedError("run statements one by one on PostgreSQL")

    def close(self) -> None:
        with self._guard:
            self._release()
            _close_pool(self._pool)
            super().close()


def _answers(conn: Any, idle_since: float | None) -> bool:
    """Whether ``conn``, idle since ``idle_since`` (None: not idle), may be used: one idle
    :data:`CHECK_IDLE_S` or longer (long enough for the server to have ended it, restarted)
    is asked a round trip first, whether lent by the pool or kept between transactions."""
    if idle_since is None or time.monotonic() - idle_since < CHECK_IDLE_S:
        return True
    try:
        conn.execute("")
    except _Psycopg.error:
        return False
    return True


def _chain_rows(writer: _chain.ChainWriter, rows: Sequence[_Deferred], ts: float) -> None:
    """Give ``writer`` the rows of :meth:`PgConnection.defer_chain`, in order."""
    known: list[tuple[str, str, str, Sequence[Any], int]] = []
    for kind, table, sql, params, rowid in rows:
        if isinstance(rowid, int):
            known.append((kind, table, sql, params, rowid))
            continue
        if known:
            writer.add_inserts(known, ts)
            known = []
        writer.add_later(kind, table, sql, params, rowid, ts)
    if known:
        writer.add_inserts(known, ts)


def psycopg_error() -> type[Exception]:
    import psycopg

    return psycopg.Error


@functools.cache
def _adapters() -> tuple[type[Any], type[Any]]:
    """The dumper and loader every connection registers (made once: psycopg is imported
    only when PostgreSQL is used)."""
    from psycopg.adapt import Dumper, Loader

    class _IntAsUnknown(Dumper):
        """Ints go untyped, as str does: PostgreSQL casts them to the column's or the
        other operand's type (``text_col = 7`` as SQLite would compare it)."""
        oid = 0

        def dump(self, obj: Any) -> bytes:
            return str(int(obj)).encode()

    class _Number(Loader):
        """numeric (SUM, AVG of integers) as int when whole, else float: SQLite's."""

        def load(self, data: Any) -> Any:
            text = bytes(data).decode()
            if "." in text or "e" in text.lower() or text in ("NaN",):
                return float(text)
            return int(text)

    return _IntAsUnknown, _Number


def _open_pool(url: str, password: str | None, size: int,
               configure: Callable[[Any], None]) -> Any:
    """A psycopg pool of at most ``size`` connections to ``url``, none made yet.

    psycopg's pool makes connections in a worker thread and has a borrower wait for one
    (up to its timeout) while that worker retries a server that refuses: a store whose
    server is down would answer every request late. This pool makes a missing connection
    in the borrower's thread instead (as psycopg's own NullConnectionPool does), so a
    server that refuses fails the borrow at once (``STORE_DATABASE_UNAVAILABLE``) and one
    that is back serves the next borrow."""
    from psycopg_pool import ConnectionPool

    class _Pool(ConnectionPool):
        def _get_ready_connection(self, timeout: float | None) -> Any:
            conn = super()._get_ready_connection(timeout)
            if conn is None and self._nconns < self.max_size:
                conn = self._connect(timeout=timeout)
                self._nconns += 1
            return conn

    kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": int(CONNECT_TIMEOUT_S)}
    if password is not None:
        kwargs["password"] = password
    return _Pool(url, kwargs=kwargs, min_size=0, max_size=max(1, size), open=True,
                 configure=configure, name="deepseek-eyes-store", timeout=CONNECT_TIMEOUT_S,
                 reconnect_timeout=CONNECT_TIMEOUT_S, num_workers=1)


def _close_pool(pool: Any) -> None:
    with contextlib.suppress(Exception):
        pool.close(timeout=CONNECT_TIMEOUT_S)


#: What a column of :func:`together` is cast to, by the kind a shape names it.
_KINDS = {"t": "TEXT", "i": "BIGINT", "f": "DOUBLE PRECISION"}


@functools.lru_cache(maxsize=64)
def _slots(shapes: tuple[str, ...]) -> tuple[dict[str, int], tuple[tuple[int, ...], ...]]:
    """How many columns of each kind :func:`together`'s statement has (the most any read
    needs), and where each read's columns are in its rows (column 0 is the read's place)."""
    slots = {kind: max(shape.count(kind) for shape in shapes) for kind in _KINDS}
    start, at = {}, 1
    for kind in _KINDS:
        start[kind] = at
        at += slots[kind]
    picks = []
    for shape in shapes:
        seen = dict.fromkeys(_KINDS, 0)
        pick = []
        for letter in shape:
            pick.append(start[letter] + seen[letter])
            seen[letter] += 1
        picks.append(tuple(pick))
    return slots, tuple(picks)


@functools.lru_cache(maxsize=64)
def together(sqls: tuple[str, ...], shapes: tuple[str, ...]) -> str:
    """SQLite reads ``sqls`` (``?`` placeholders, in order) as one statement: a ``UNION
    ALL`` of one branch each, tagged with its place, its columns cast into typed slots by
    ``shapes`` (a letter a column: ``t`` text, ``i`` integer, ``f`` real) and padded with
    typed NULLs, so every branch has the same columns. Each read keeps its own ``ORDER
    BY`` and ``LIMIT`` inside its branch; :func:`apart` sorts the rows out by their tag,
    so how the branches' rows interleave does not matter, but the order of one read's
    rows is the plan's (a caller to whom it matters sorts them).

    Raises:
        ValueError: a numbered placeholder (``?2``: its parameters would not line up) or
            a shape of a letter not in :data:`_KINDS` (a programming error).
    """
    if len(sqls) != len(shapes):
        raise ValueError("one shape a read")
    for sql, shape in zip(sqls, shapes, strict=True):
        if re.search(r"\?\d", sql) or set(shape) - set(_KINDS):
            raise ValueError(f"cannot read together: {sql[:80]!r} as {shape!r}")
    slots, _picks = _slots(shapes)
    branches = []
    for place, (sql, shape) in enumerate(zip(sqls, shapes, strict=True)):
        names = [f"c{n}" for n in range(len(shape))]
        columns = [str(place)]
        for kind, cast in _KINDS.items():
            mine = [name for name, letter in zip(names, shape, strict=True) if letter == kind]
            columns += [f"CAST({mine[n] if n < len(mine) else 'NULL'} AS {cast})"
                        for n in range(slots[kind])]
        branches.append(f"SELECT {', '.join(columns)} FROM ({sql}) AS q{place}"  # noqa: S608 - the store's own read texts and column names; values stay parameters
                        f"({', '.join(names)})")
    return " UNION ALL ".join(branches)


def apart(rows: Sequence[Sequence[Any]], shapes: Sequence[str]) -> list[list[tuple[Any, ...]]]:
    """The rows of :func:`together`'s statement back as each read's own, each read's in
    the order they came."""
    _, picks = _slots(tuple(shapes))
    out: list[list[tuple[Any, ...]]] = [[] for _ in shapes]
    for row in rows:
        place = row[0]
        out[place].append(tuple(row[n] for n in picks[place]))
    return out


def _head_part(cursor: PgCursor, *, tail: bool) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The chain's tail (``tail``) or its newest checkpoint as their own reads would give
    them, from the cursor prefetch_chain_head queued (the eyes_chain_head row, or the
    tail's own read before migrating)."""
    settled = cursor._settled()
    names = [d[0] for d in settled._description or ()]
    rows = [tuple(r) for r in settled._rows]
    if names[:1] != ["t_seq"]:
        return names, rows
    if tail:
        return ["seq", "hash"], [r[:2] for r in rows if r[0] is not None]
    return list(_CHECKPOINT_COLUMNS), [r[2:] for r in rows if r[9] is not None]


def _chained_insert(text: str) -> bool:
    """Whether ``text`` (translated) inserts into an audited table."""
    known = _CHAINED_INSERT.get(text)
    if known is None:
        match = _INSERT.match(text)
        known = bool(match and match.group(1).lower() in _chain.CHAINED_TABLES)
        if len(_CHAINED_INSERT) < 4096:
            _CHAINED_INSERT[text] = known
    return known


def _link_gone(conn: Any, exc: Exception) -> bool:
    """Whether ``exc`` says the server ended this link (closed, or its backend terminated:
    SQLSTATE classes 08 and 57P, sent just before the server closes the socket)."""
    state = getattr(exc, "sqlstate", None) or ""
    return bool(conn.closed or conn.broken or state.startswith(("08", "57P")))


class _Lost(Exception):
    """The server went away (a stand-in psycopg error with no SQLSTATE)."""


def _unavailable_error(url: str, exc: BaseException) -> StoreError:
    return StoreError(
        f"cannot reach the database {redact(url)}: {exc}", code="STORE_DATABASE_UNAVAILABLE",
        details={"backend": "postgresql"})


def connect(url: str, *, password: str | None = None, read_only: bool = False,
            pool_size: int = DEFAULT_POOL_SIZE) -> PgConnection:
    """A connection to the PostgreSQL database at ``url``.

    Raises:
        StoreError: ``STORE_BACKEND_MISSING`` without psycopg; ``STORE_DATABASE_UNAVAILABLE``
            when the server cannot be reached.
    """
    try:
        import psycopg  # noqa: F401 - the extra's presence, checked before anything else
    except ImportError as exc:
        raise StoreError(
            "a PostgreSQL database_url is configured but psycopg is not installed "
            "(pip install 'deepseek-eyes[scale]')", code="STORE_BACKEND_MISSING",
            details={"package": "psycopg"}) from exc
    try:
        return PgConnection(url, password=password, read_only=read_only,
                            pool_size=pool_size)
    except sqlite3.Error as exc:
        raise _unavailable_error(url, exc) from exc
