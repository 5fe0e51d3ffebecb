"""The runtime's SQLite database (WAL) with forward-only schema migrations.

One file, ``eyes.db`` in the data directory, holds the evidence index, the attempts log,
route state, the audit and usage. Migrations are numbered SQL scripts applied in one
transaction each and tracked by ``PRAGMA user_version``; a database newer than this code is
refused rather than guessed at.

Why a lock around one connection instead of a pool: every statement here is small, WAL lets
other processes read while we write, and the asyncio runtime calls in from worker threads.

Why log rows are appended in batches (:meth:`Database.append`): a cache hit must cost about
what hashing the image costs, and three separate commits (attempt, usage, audit) cost more
than the hash itself. Appended rows are written when 64 are pending, when the oldest has
waited a second, before any query on this connection, at close, and inside the next write
transaction (:meth:`Database.transaction`), so they commit with the record that follows
them: a turn's request, usage and audit rows commit with its answer, in one transaction.
Every reader through this object sees them, and a crash loses at most the last second of
log rows, never evidence, route state or the rows of a committed answer. The chained
records of one transaction (queued rows and the block's own) get one chain entry naming
each of them (:mod:`~deepseek_eyes.store.chain`), not one entry a row; a write inside an
open transaction (:meth:`Database.execute`) keeps its records with the block's. A writer
that sums many small events into one row (:meth:`Database.on_flush`; the usage estimate of
each MCP result) hands its rows over at the start of every flush and every write
transaction, so they are written, seen and lost exactly as the queued rows are. A row
queued with :meth:`Database.append_later` (an MCP call's audit row) is one of the queued
rows in every way but one: its parameters (the reduced, encoded details) are made by the
flush that writes it, where a batch's encodings run one after another, warm, instead of
one on every call's path.

Why transactions nest (:meth:`Database.transaction` inside another is part of it): one
turn's answer, its turn record and the checkpoint that signs them are written by three
modules, and one commit for all of them costs a third of three. An inner block has no
rollback of its own: an error that leaves the outer block rolls back everything, and one
caught in between (a seal that could not be signed) leaves what the inner block wrote to
commit with the rest.

Why one chain writer per transaction (:meth:`~deepseek_eyes.store.chain.ChainWriter.of`):
the chain's tail is read once when a write transaction first chains a record (or taken
from the connection's last commit and checked by the insert itself), not once per record;
the transaction holds the write lock, so it cannot go stale meanwhile; and the
transaction's records are folded into one entry when its entries are written.

Why :meth:`Database.open_read_only` exists: verifying the audit must not write, so it opens
the file with SQLite's ``mode=ro`` when a WAL is there to read, and ``immutable=1`` when
there is none (``mode=ro`` would create the WAL index, and fails in a directory it cannot
write). An immutable read takes no lock, so :meth:`Database.changed_since_open` tells the
verifier when a writer checkpointed into the file meanwhile, and it reads again.

Why no ``sqlite3.Error`` leaves this object: every method (and every ``with`` block it
hands out) turns one into a :class:`StoreError` through
:func:`~deepseek_eyes.store.failures.store_error`, so a full disk is ``STORE_FULL``
wherever it strikes. Queued rows outlive a write that failed for the store's sake (a full
disk, a lock, an I/O error): a rolled-back batch goes back to the front of the queue and is
written by the next transaction that succeeds, so the process recovers without a restart
once there is room. A nested block that fails with one dooms its outer transaction: it
rolls back at its end even when the error was caught in between, since SQLite may already
have rolled it back.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from deepseek_eyes.errors import StoreError
from deepseek_eyes.stages import stage
from deepseek_eyes.store import chain as _chain
from deepseek_eyes.store.failures import keeps_rows, store_error
from deepseek_eyes.store.keyring import Keyring

__all__ = ["MIGRATIONS", "Database", "configured_url"]


class _Later(NamedTuple):
    """A queued row's parameters made when the row is written (:meth:`Database.append_later`)."""

    build: Callable[..., Sequence[Any]]
    args: tuple[Any, ...]


#: A queued write: (INSERT, params, the chain kind of its row and its audited table, or
#: None and None when the row is not chained).
_Pending = tuple[str, Sequence[Any] | _Later, str | None, str | None]
#: A queued write whose parameters are made (what :meth:`Database._write_pending` writes).
_Built = tuple[str, Sequence[Any], str | None, str | None]

APPEND_BATCH = 64
APPEND_MAX_AGE_S = 1.0

#: Append only. Never edit a migration that has shipped; add the next one.
MIGRATIONS: tuple[str, ...] = (
    # 1: images, evidence, attempts, route state, audit, usage
    """
    CREATE TABLE images (
        sha256 TEXT PRIMARY KEY,
        pixel_sha256 TEXT NOT NULL,
        width INTEGER NOT NULL,
        height INTEGER NOT NULL,
        media_type TEXT NOT NULL,
        size INTEGER NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX images_pixel ON images(pixel_sha256);

    CREATE TABLE evidence (
        key TEXT PRIMARY KEY,
        pixel_sha256 TEXT NOT NULL,
        route TEXT NOT NULL,
        variant TEXT NOT NULL,
        question_sha256 TEXT,
        record_sha256 TEXT NOT NULL,
        record TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE TRIGGER evidence_no_update BEFORE UPDATE ON evidence
    BEGIN SELECT RAISE(ABORT, 'evidence records are immutable'); END;

    CREATE TABLE evidence_quarantine (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL,
        record_sha256 TEXT NOT NULL,
        record TEXT NOT NULL,
        reason TEXT NOT NULL,
        quarantined_at REAL NOT NULL
    );

    CREATE TABLE attempts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ts REAL NOT NULL,
        operation_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        route TEXT,
        phase TEXT NOT NULL,
        outcome TEXT NOT NULL,
        code TEXT,
        latency_ms REAL,
        details TEXT NOT NULL
    );
    CREATE INDEX attempts_operation ON attempts(operation_id, seq);

    CREATE TABLE route_state (
        route TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        health_ok INTEGER,
        health_at REAL,
        health_code TEXT,
        probe_ok INTEGER,
        probe_at REAL,
        probe_code TEXT,
        circuit_open_until REAL,
        last_code TEXT,
        PRIMARY KEY (route, fingerprint)
    );

    CREATE TABLE audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ts REAL NOT NULL,
        kind TEXT NOT NULL,
        subject TEXT,
        details TEXT NOT NULL
    );

    CREATE TABLE usage (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ts REAL NOT NULL,
        category TEXT NOT NULL,
        exact INTEGER NOT NULL,
        source TEXT,
        model TEXT,
        calls INTEGER NOT NULL,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        reasoning_tokens INTEGER NOT NULL,
        cache_hit_tokens INTEGER NOT NULL,
        cache_miss_tokens INTEGER NOT NULL,
        estimated_tokens INTEGER NOT NULL
    );
    """,
    # 2: sessions, their append-only events, and one summary row per finished turn
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        source TEXT NOT NULL
    );

    CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        seq INTEGER NOT NULL,
        ts REAL NOT NULL,
        role TEXT NOT NULL,
        turn_id TEXT,
        body_sha256 TEXT NOT NULL,
        body TEXT NOT NULL,
        UNIQUE (session_id, seq)
    );
    CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'session events are append-only'); END;
    CREATE TRIGGER events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'session events are append-only'); END;

    CREATE TABLE turns (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        started_at REAL NOT NULL,
        ended_at REAL NOT NULL,
        model TEXT,
        path TEXT NOT NULL,
        outcome TEXT NOT NULL,
        code TEXT,
        details TEXT NOT NULL
    );
    CREATE INDEX turns_session ON turns(session_id, started_at);
    """,
    # 3: a session started from another one whose history the client did not extend
    """
    ALTER TABLE sessions ADD COLUMN forked_from TEXT REFERENCES sessions(id);
    ALTER TABLE sessions ADD COLUMN fork_at INTEGER;
    """,
    # 4: one hash chain over every audit record, and its signed checkpoints (store/chain.py)
    """
    CREATE TABLE chain (
        seq INTEGER PRIMARY KEY,
        ts REAL NOT NULL,
        kind TEXT NOT NULL,
        ref_table TEXT,
        ref_id INTEGER,
        body TEXT,
        digest TEXT NOT NULL,
        prev TEXT NOT NULL,
        hash TEXT NOT NULL
    );
    CREATE INDEX chain_ref ON chain(ref_table, ref_id);
    CREATE TRIGGER chain_no_update BEFORE UPDATE ON chain
    BEGIN SELECT RAISE(ABORT, 'the audit chain is append-only'); END;
    CREATE TRIGGER chain_no_delete BEFORE DELETE ON chain
    BEGIN SELECT RAISE(ABORT, 'the audit chain is append-only'); END;

    CREATE TABLE chain_checkpoints (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        seq INTEGER NOT NULL,
        hash TEXT NOT NULL,
        ts REAL NOT NULL,
        key_id TEXT NOT NULL,
        mac TEXT NOT NULL
    );
    """,
    # 5: lookups by hash (evidence resources, look's route, audit show) and by audit kind
    """
    CREATE INDEX evidence_record ON evidence(record_sha256);
    CREATE INDEX evidence_pixel ON evidence(pixel_sha256);
    CREATE INDEX audit_kind_subject ON audit(kind, subject);
    """,
    # 6: which session event issued a tool call id (the gateway restores the reasoning a
    # client dropped from that event); derived from events, so not chained itself
    """
    CREATE TABLE event_calls (
        call_id TEXT NOT NULL,
        event_id INTEGER NOT NULL REFERENCES events(id)
    );
    CREATE INDEX event_calls_id ON event_calls(call_id);
    INSERT INTO event_calls (call_id, event_id)
        SELECT json_extract(c.value, '$.id'), e.id
        FROM events e, json_each(e.body, '$.tool_calls') c
        WHERE e.role = 'assistant' AND json_valid(e.body)
          AND json_type(c.value, '$.id') = 'text';
    INSERT INTO event_calls (call_id, event_id)
        SELECT json_extract(c.value, '$.id'), e.id
        FROM events e, json_each(e.body, '$.internal_calls') c
        WHERE e.role = 'assistant' AND json_valid(e.body)
          AND json_type(c.value, '$.id') = 'text';
    """,
    # 7: checkpoints commit to per-table entry counts and their own ordinal (audit/
    # checkpoints.py); rows from before keep NULL and verify as they were signed
    """
    ALTER TABLE chain_checkpoints ADD COLUMN counts TEXT;
    ALTER TABLE chain_checkpoints ADD COLUMN ordinal INTEGER;
    """,
    # 8: turns in flight, leased to the process running them (closed as aborted when it
    # died: runtime/turn/recovery.py), and answers kept under a client's Idempotency-Key
    """
    CREATE TABLE turn_leases (
        turn_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        owner TEXT NOT NULL,
        started_at REAL NOT NULL,
        base INTEGER NOT NULL,
        retry_of TEXT,
        model TEXT,
        path TEXT
    );
    CREATE INDEX turn_leases_session ON turn_leases(session_id);
    CREATE TABLE idempotency_keys (
        scope TEXT NOT NULL,
        key_sha256 TEXT NOT NULL,
        request_sha256 TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('running', 'done')),
        owner TEXT NOT NULL,
        created_at REAL NOT NULL,
        turn_id TEXT,
        session_id TEXT,
        response TEXT,
        PRIMARY KEY (scope, key_sha256)
    );
    CREATE INDEX idempotency_created ON idempotency_keys(created_at);
    -- Turns an earlier version left half-written (the session's last event is a request
    -- message no turn record ended after) get a lease no process holds: the next runtime
    -- to open the store closes them as aborted, as it closes a dead process's.
    INSERT INTO turn_leases (turn_id, session_id, owner, started_at, base, path)
        SELECT 'turn-' || lower(hex(randomblob(10))), e.session_id, '', e.ts, e.seq, 'text'
        FROM events e
        WHERE e.turn_id IS NULL
          AND e.seq = (SELECT MAX(seq) FROM events WHERE session_id = e.session_id)
          AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id = e.session_id
                          AND t.ended_at >= e.ts);
    """,
    # 9: conversations found again without a session id: the hash of a session's
    # client-visible history after each answer, per client scope (runtime/turn/prepare.py)
    """
    CREATE TABLE session_prefixes (
        scope TEXT NOT NULL,
        prefix_sha256 TEXT NOT NULL,
        session_id TEXT NOT NULL,
        length INTEGER NOT NULL,
        ts REAL NOT NULL,
        PRIMARY KEY (scope, prefix_sha256)
    );
    """,
    # 10: every stored thing a client reaches back to belongs to a scope (store/scopes.py):
    # a session to the gateway key, the CLI or the terminal that made it; an evidence
    # record to the scopes that acquired or were shown it. Not chained: ownership is an
    # access rule, like session_prefixes, and the sessions row it names is. Existing
    # sessions: the CLI's ("cli"/"chat") stay the CLI's; a gateway session whose noted
    # histories all name one gateway key is that key's; any other is "legacy", which no
    # gateway key reaches (docs/security.md, "Scopes"). Gateway scopes are now spelled
    # "gateway:<key id>" everywhere, so the noted histories and idempotency keys follow.
    """
    CREATE TABLE session_scopes (
        session_id TEXT PRIMARY KEY REFERENCES sessions(id),
        scope TEXT NOT NULL
    );
    CREATE INDEX session_scopes_scope ON session_scopes(scope);
    UPDATE session_prefixes SET scope = 'gateway:' || scope;
    UPDATE idempotency_keys SET scope = 'gateway:' || scope;
    INSERT INTO session_scopes (session_id, scope)
        SELECT s.id, CASE
            WHEN s.source IN ('cli', 'chat') THEN 'cli'
            WHEN s.source = 'gateway' AND (SELECT COUNT(DISTINCT p.scope) FROM session_prefixes p
                                           WHERE p.session_id = s.id) = 1
                THEN (SELECT p.scope FROM session_prefixes p WHERE p.session_id = s.id LIMIT 1)
            ELSE 'legacy' END
        FROM sessions s;
    CREATE TABLE evidence_scopes (
        scope TEXT NOT NULL,
        record_sha256 TEXT NOT NULL,
        first_at REAL NOT NULL,
        acquired_ms REAL,
        PRIMARY KEY (scope, record_sha256)
    );
    CREATE INDEX evidence_scopes_record ON evidence_scopes(record_sha256);
    """,
    # 11: which final model sees, as learned per upstream (runtime/sight.py): a pixel
    # probe's verdict or an upstream's refusal of image parts, until it expires
    """
    CREATE TABLE model_sight (
        upstream TEXT NOT NULL,
        model TEXT NOT NULL,
        sees INTEGER NOT NULL,
        how TEXT NOT NULL,
        code TEXT,
        checked_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        PRIMARY KEY (upstream, model)
    );
    """,
    # 12: responses of the Responses front a client may continue with previous_response_id
    # (gateway/responses.py): the response id, the session it answered in, the scope that
    # asked; one answered with store: false is never noted
    """
    CREATE TABLE stored_responses (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        scope TEXT NOT NULL,
        ts REAL NOT NULL
    );
    """,
    # 13: what replicas share for the console (store/approvals.py): each call or plan that
    # waits for a person, named with the process it waits in, what the console shows of it
    # and the decision taken on any replica (set once); and each replica's MCP servers'
    # status (store/replica_status.py). Not chained: the audit records each decision.
    """
    CREATE TABLE pending_approvals (
        kind TEXT NOT NULL,
        id TEXT NOT NULL,
        owner TEXT NOT NULL,
        shown TEXT NOT NULL,
        created_at REAL NOT NULL,
        heartbeat REAL NOT NULL,
        decision TEXT,
        decided_via TEXT,
        decided_by TEXT,
        decided_at REAL,
        PRIMARY KEY (kind, id)
    );
    CREATE INDEX pending_approvals_owner ON pending_approvals(owner);
    CREATE TABLE replica_mcp_status (
        replica TEXT NOT NULL,
        server TEXT NOT NULL,
        status TEXT,
        latency_ms REAL,
        last_error TEXT,
        ts REAL NOT NULL,
        PRIMARY KEY (replica, server)
    );
    """,
    # 14: the fencing token of the replica that holds each single-flight lease now
    # (store/fences.py): claimed when the lease is granted, checked and removed by the
    # write that publishes the work's result, in that write's transaction, so a holder
    # whose lease passed to another cannot publish after the new holder claimed it.
    """
    CREATE TABLE flight_fences (
        key TEXT PRIMARY KEY,
        fence INTEGER NOT NULL,
        claimed_at REAL NOT NULL
    );
    """,
    # 15: the turns that superseded an earlier attempt, found without reading every turn
    # of the session: a session's snapshot asks for them on every turn (store/events.py
    # _RETRIED, in these words), and a long agent session has thousands of turns, each of
    # whose details was parsed as JSON to find the few that name a retry_of. The condition
    # looks for the key's text, not into the JSON: an index condition is evaluated on every
    # write of the row, and a row whose details are not JSON (a tampered one, which verify
    # must find) would then fail the write instead of being stored as it is.
    """
    CREATE INDEX turns_retried ON turns(session_id)
        WHERE outcome = 'ok' AND instr(details, '"retry_of"') > 0;
    """,
)

CHAIN_MIGRATION = 4

#: The store's PostgreSQL database, when the process's store is there (settings/store.py).
ENV_DATABASE_URL = "DEEPSEEK_EYES_DATABASE_URL"


def configured_url() -> str | None:
    """The PostgreSQL database the process's store is in (``DEEPSEEK_EYES_DATABASE_URL``),
    or None for the SQLite file of the data directory."""
    return _configured(None)


def _configured(url: str | None) -> str | None:
    """The PostgreSQL URL a :class:`Database` opens: ``url``, else the environment's when
    ``url`` is None; None (SQLite) for ``""`` or when neither names one."""
    if url is None:
        url = os.environ.get(ENV_DATABASE_URL)
    return url or None


def _statements(script: str) -> list[str]:
    """A migration script as its statements, to run inside one transaction of ours
    (``executescript`` would commit it first); a trigger's body stays whole."""
    statements: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\n;"):
                statements.append(pending)
            pending = ""
    if pending.strip(" \t\n;"):
        statements.append(pending)
    return statements


#: A flush hook (:meth:`Database.on_flush`): rows as :meth:`Database.append` takes them.
_FlushHook = Callable[[], list[tuple[str, Sequence[Any], str | None]]]
_log = logging.getLogger(__name__)


class Database:
    """A migrated SQLite database shared by the runtime's stores."""

    #: Replaced, never changed in place (a read-only copy is made without ``__init__``).
    _flush_hooks: tuple[_FlushHook, ...] = ()

    def __init__(self, path: Path, *, url: str | None = None,
                 password: str | None = None, pool_size: int | None = None) -> None:
        """Open (creating and migrating it) the SQLite database at ``path``, or with
        ``url`` (``postgresql://…``) the PostgreSQL database there instead
        (:mod:`~deepseek_eyes.store.postgres`; ``path`` then names nothing on disk).
        ``url`` None is the one in ``DEEPSEEK_EYES_DATABASE_URL`` when set (the process's
        store is there), ``""`` the SQLite file whatever the environment says.
        ``pool_size``: PostgreSQL's connections at most (``[store] database_pool_size``;
        None: :data:`~deepseek_eyes.store.postgres.DEFAULT_POOL_SIZE`).

        Raises:
            StoreError: as :func:`~deepseek_eyes.store.failures.store_error`;
                ``STORE_DATABASE_UNAVAILABLE`` when PostgreSQL cannot be reached.
        """
        url = _configured(url)
        self.path = path
        #: The PostgreSQL database's URL (never with a password), or None for SQLite.
        self.url = url
        self.read_only = False
        #: The data home's audit keyring, for writes that must be signed in their own
        #: transaction (a retention cut and the checkpoint naming it); None outside one.
        self.audit_keys: Callable[[], Keyring] | None = None
        self._opened: tuple[int, int, int] | None = None
        self._lock = threading.RLock()
        self._pending: list[_Pending] = []
        self._pending_since = 0.0
        self._depth = 0
        self._unwritten: list[_Pending] = []
        #: Batches of _unwritten whose results come back later: (start, rows, cursors).
        self._lazy_rows: list[tuple[int, int, Sequence[sqlite3.Cursor]]] = []
        self._doomed: sqlite3.Error | None = None
        #: What the open transaction's block asked to run once it commits (after_commit).
        self._on_commit: list[Callable[[], None]] = []
        conn: sqlite3.Connection | None = None
        if url is not None:
            self._open_postgres(url, password, pool_size=pool_size)
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._conn = sqlite3.connect(
                path, check_same_thread=False, isolation_level=None, timeout=10.0,
                factory=_chain.Connection,
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, StoreError) or not isinstance(exc, OSError | sqlite3.Error):
                raise
            raise store_error(exc, f"cannot open database {path}", path) from exc

    def _open_postgres(self, url: str, password: str | None, *, read_only: bool = False,
                       pool_size: int | None = None) -> None:
        from deepseek_eyes.store import postgres  # psycopg only when PostgreSQL is used

        conn = self._conn = postgres.connect(
            url, password=password, read_only=read_only,
            pool_size=pool_size or postgres.DEFAULT_POOL_SIZE)
        try:
            if read_only:
                return
            conn.setup()
            self._migrate()
            conn.prefetch_tail = True
        except BaseException as exc:
            conn.close()
            if isinstance(exc, StoreError) or not isinstance(exc, sqlite3.Error):
                raise
            raise store_error(exc, "cannot open the database", self.where) from exc

    @property
    def where(self) -> str:
        """The database for messages: the file, or the URL without a password."""
        if self.url is None:
            return str(self.path)
        from deepseek_eyes.store.postgres import redact

        return redact(self.url)

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return "sqlite" if self.url is None else "postgresql"

    @classmethod
    def open_read_only(cls, path: Path, *, url: str | None = None,
                       password: str | None = None) -> Database:
        """Open an existing database for reading only: no migration, no file created or
        changed (see the module docstring).

        Raises:
            StoreError: ``STORE_READ_FAILED`` when it cannot be opened so, or its schema is
                newer than this code.
        """
        db = cls.__new__(cls)
        db.path = path
        db.read_only = True
        db.audit_keys = None
        db._lock = threading.RLock()
        db._pending = []
        db._pending_since = 0.0
        db._depth = 0
        db._unwritten = []
        db._lazy_rows = []
        db._doomed = None
        db._on_commit = []
        db.url = url = _configured(url)
        if url is not None:
            db._opened = None
            db._open_postgres(url, password, read_only=True)
            db._check_version_to_read()
            return db
        wal = path.with_name(path.name + "-wal")
        immutable = not wal.exists()
        try:
            db._opened = _file_state(path) if immutable else None
            uri = path.resolve().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")
            db._conn = sqlite3.connect(uri, uri=True, check_same_thread=False,
                                       isolation_level=None, timeout=10.0,
                                       factory=_chain.Connection)
        except (OSError, sqlite3.Error) as exc:
            raise store_error(exc, f"cannot open database {path} to read", path,
                              reading=True) from exc
        db._check_version_to_read()
        return db

    def _check_version_to_read(self) -> None:
        """A read-only open's last step, on either engine: its schema version read, and the
        connection closed and refused when that fails or names a schema newer than this code.

        Raises:
            StoreError: ``STORE_READ_FAILED`` (or the read's own code).
        """
        on_file = self.url is None
        try:
            version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
        except sqlite3.Error as exc:
            self._conn.close()
            action = (f"cannot open database {self.path} to read" if on_file
                      else "cannot open the database to read")
            raise store_error(exc, action, self.path if on_file else self.where,
                              reading=True) from exc
        if version > len(MIGRATIONS):
            self._conn.close()
            raise StoreError(
                f"database schema {version} is newer than this DeepSeekEyes "
                f"({len(MIGRATIONS)}); upgrade DeepSeekEyes", code="STORE_READ_FAILED",
                details={"path": str(self.path)} if on_file else {"database": self.where})

    def changed_since_open(self) -> bool:
        """Whether a read-only, lock-free (immutable) open may have read a file that a
        writer changed meanwhile; False for every other open."""
        if self._opened is None:
            return False
        try:
            return _file_state(self.path) != self._opened
        except OSError:
            return True

    @property
    def schema_version(self) -> int:
        """Raises:
            StoreError: as :meth:`query`."""
        try:
            row = self._conn.execute("PRAGMA user_version").fetchone()
        except sqlite3.Error as exc:
            raise self._failure(exc, "cannot read the schema version", reading=True) from exc
        return int(row[0])

    def _failure(self, exc: sqlite3.Error, action: str, *,
                 reading: bool = False) -> StoreError:
        """``exc`` as a :class:`StoreError`; inside a write transaction it dooms that one
        (see the module docstring)."""
        if self._depth and self._doomed is None:
            self._doomed = exc
        return store_error(exc, action, self.path, reading=reading)

    def _migrate(self) -> None:
        current = self.schema_version
        if current > len(MIGRATIONS):
            raise StoreError(
                f"database schema {current} is newer than this DeepSeekEyes "
                f"({len(MIGRATIONS)}); upgrade DeepSeekEyes",
                code="STORE_WRITE_FAILED",
            )
        for version in range(current + 1, len(MIGRATIONS) + 1):
            # The version is read again inside the write transaction: two processes opening
            # a new data directory at once (two `mcp allow`) both read the old one, and the
            # second's BEGIN IMMEDIATE waits for the first's migration, done once it gets
            # the lock. The version bump (and, for the chain, the adoption of the rows
            # already there) commit with the script, or nothing does.
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                if self.url is not None:  # replicas starting together: one migrates
                    self._conn.hold("schema")  # type: ignore[attr-defined]
                if int(self._conn.execute("PRAGMA user_version").fetchone()[0]) >= version:
                    self._conn.execute("ROLLBACK")
                    continue
                if self.url is None:
                    for statement in _statements(MIGRATIONS[version - 1]):
                        self._conn.execute(statement)
                else:
                    self._migrate_postgres(version)
                if version == CHAIN_MIGRATION:
                    _chain.adopt_existing(self._conn, time.time())
                self._conn.execute(f"PRAGMA user_version = {version}")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        self._conn.forget_encoders()

    def _migrate_postgres(self, version: int) -> None:
        """Migration ``version`` on PostgreSQL, from the same definition
        (:mod:`~deepseek_eyes.store.pg_schema`): its schema statements as translated, a
        later migration's data statements through the dialect translator."""
        from deepseek_eyes.store import pg_schema, postgres

        conn = self._conn
        assert isinstance(conn, postgres.PgConnection)
        for statement in pg_schema.migration_statements(version):
            if statement.lstrip().upper().startswith(("CREATE", "ALTER", "DROP")):
                conn.raw(statement)
            else:
                conn.execute(statement)

    def append(self, sql: str, params: Sequence[Any] = (), *, chain: str | None = None,
               quiet: bool = False) -> None:
        """Queue one log-row INSERT; written in a batch (see the module docstring).

        With ``chain`` (the record's kind) the row gets its audit chain entry in the same
        transaction; ``sql`` must then be an INSERT into an audited table. ``quiet``: a
        flush this triggers that fails leaves the row queued and raises nothing (for a
        row written because another write just failed).

        Raises:
            StoreError: when the queue was due and its flush failed, as :meth:`flush` (the
                row stays queued with the others), unless ``quiet``.
        """
        # The table is found (or the call refused) now, not at a later flush.
        table = _chain.table_of_insert(sql) if chain is not None else None
        if chain == _chain.BATCH:
            raise ValueError(f"{_chain.BATCH} is the kind of batch entries, not of a record")
        self._queue((sql, params, chain, table), quiet=quiet)

    def append_later(self, sql: str, build: Callable[..., Sequence[Any]], *args: Any,
                     chain: str | None = None) -> None:
        """:meth:`append`, the row's parameters made by ``build(*args)`` when the row is
        written, not now: queued, written, seen and lost exactly as an appended row (same
        queue, same place in it, same batch size and age), only its encoding moves to the
        flush, where the queued rows' encodings run one after another (for a hot path that
        queues one row a call: an MCP call's audit row). ``build`` must not raise (a flush
        it fails leaves every queued row queued, to fail again) nor call back into this
        object, and ``args`` must not change meanwhile (immutable values, or ones given
        away).

        Raises:
            StoreError: as :meth:`append`.
        """
        table = _chain.table_of_insert(sql) if chain is not None else None
        if chain == _chain.BATCH:
            raise ValueError(f"{_chain.BATCH} is the kind of batch entries, not of a record")
        self._queue((sql, _Later(build, args), chain, table))

    def on_flush(self, hook: _FlushHook) -> None:
        """Call ``hook`` at the start of every flush and write transaction, under the
        lock; the rows it returns, each ``(INSERT, params, chain kind or None)`` as
        :meth:`append` takes them, are queued first and written with the others. For a
        writer that sums events in memory into one row (see the module docstring); the hook
        must not call back into this object."""
        with self._lock:
            self._flush_hooks = (*self._flush_hooks, hook)

    def _collect(self) -> None:
        """Queue what the flush hooks hand over (the lock is held)."""
        for hook in self._flush_hooks:
            for sql, params, chain in hook():
                if not self._pending:
                    self._pending_since = time.monotonic()
                self._pending.append(
                    (sql, params, chain, _chain.table_of_insert(sql) if chain else None))

    def _queue(self, item: _Pending, *, quiet: bool = False) -> None:
        with self._lock:
            if not self._pending:
                self._pending_since = time.monotonic()
            self._pending.append(item)
            if (
                len(self._pending) >= APPEND_BATCH
                or time.monotonic() - self._pending_since >= APPEND_MAX_AGE_S
            ):
                try:
                    self.flush()
                except StoreError:
                    if not quiet:
                        raise

    def flush(self, *, entries: bool = True) -> None:
        """Write every queued row now, in one transaction (or in the open one, with its
        buffered chain entries, so a query inside it sees them; ``entries=False``: a write
        inside it follows, so its records and theirs still share one entry).

        Raises:
            StoreError: ``STORE_FULL`` (the rows stay queued), ``STORE_READ_ONLY`` or
                ``STORE_WRITE_FAILED``.
        """
        with self._lock:
            if self._flush_hooks:
                self._collect()
            if self._depth:
                try:
                    self._write_pending(alone=False)
                    # Buffered entries written, so a query inside sees them (unless a
                    # write inside follows: ``entries=False``); rows whose entries wait for
                    # the transaction's writer (PostgreSQL) wait on.
                    if entries and self._conn.writer is not None:
                        self._conn.write_chain()
                except sqlite3.Error as exc:
                    raise self._failure(exc, "database write failed") from exc
                return
            if not self._pending:
                return
            try:
                with stage("store"):
                    self._begin()
                    try:
                        self._write_pending(alone=True)
                        self._commit()
                    except BaseException:
                        self._rollback()
                        raise
            except sqlite3.Error as exc:
                raise store_error(exc, "database write failed", self.path) from exc

    def _write_pending(self, *, alone: bool) -> None:
        """The queued rows and their chain entries, inside the open transaction; put back
        in the queue when it rolls back (see :meth:`_rollback`). ``alone``: the
        transaction writes nothing else.

        On PostgreSQL the rows' chain entries are made when the transaction chains its own
        first record (or at its commit): the chain lock is taken then, after the keys the
        transaction holds (:meth:`hold`), not when it begins (store/postgres.py)."""
        pending: list[_Built] = [
            (sql, params.build(*params.args) if type(params) is _Later else params, kind, table)
            for sql, params, kind, table in self._pending]
        self._pending = []
        mark = len(self._unwritten)
        self._unwritten.extend(pending)
        now = time.time()
        conn = self._conn
        chained: list[tuple[str, str, str, Sequence[Any], int]] = []
        later: list[tuple[str, str, str, Sequence[Any], int | sqlite3.Cursor]] = []
        try:
            # On PostgreSQL the rows go in one round trip (store/postgres.py), the chain's
            # tail with them when nothing else is written.
            pipelined = getattr(conn, "execute_pipelined", None)
            cursors: Sequence[sqlite3.Cursor] = (
                pipelined([(sql, params) for sql, params, _k, _t in pending])
                if pipelined is not None else [])
            if alone and pipelined is not None and any(p[2] is not None for p in pending):
                conn.prefetch_chain_head()  # type: ignore[attr-defined]
            # Rows written at the start of another write (PostgreSQL): their results are
            # not waited for here but come back with that write's first round trip (their
            # rowids are read when the transaction's records fold); one that fails is told
            # apart when the transaction rolls back (_rollback).
            lazy = pipelined is not None and not alone
            for n, (sql, params, kind, table) in enumerate(pending):
                cur = cursors[n] if cursors else conn.execute(sql, params)
                if kind is None or table is None:
                    continue
                if lazy:
                    later.append((kind, table, sql, params, cur))
                elif cur.rowcount > 0 and cur.lastrowid is not None:
                    chained.append((kind, table, sql, params, cur.lastrowid))
            if lazy:
                self._lazy_rows.append((mark, len(pending), cursors))
            elif cursors and not any(kind is not None for _s, _p, kind, _t in pending):
                # Nothing above read a result: a row that fails fails here, as on SQLite,
                # so it is told apart (and dropped) rather than failing the commit.
                _ = cursors[-1].rowcount
            if later:
                conn.defer_chain(later, now)  # type: ignore[attr-defined]
            elif chained and pipelined is not None:
                conn.defer_chain(chained, now)  # type: ignore[attr-defined]
            elif chained:  # one batch entry for many (store/chain.py)
                _chain.ChainWriter.of(conn).add_inserts(chained, now)
        except sqlite3.Error as exc:
            # A batch that fails for what it holds (a constraint, a bad statement) is
            # dropped, as a failed flush always did: a row that cannot be stored must not
            # fail every later transaction too. One the store could not take (a full disk,
            # a lock, an I/O error) goes back to the queue with the rollback.
            if not keeps_rows(exc):
                del self._unwritten[mark:]
            raise

    def _begin(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        self._conn.begun()
        self._unwritten = []
        self._lazy_rows = []
        self._doomed = None
        self._on_commit = []

    def _commit(self) -> None:
        self._conn.write_chain()
        self._conn.execute("COMMIT")
        self._conn.ended(committed=True)
        self._unwritten = []
        self._lazy_rows = []
        hooks, self._on_commit = self._on_commit, []
        for hook in hooks:
            try:
                hook()
            except Exception:  # committed all the same: a hook's failure is not the write's
                _log.exception("a hook after a commit failed")

    def _rollback(self) -> None:
        # SQLite may have rolled back already (a full disk at COMMIT): then this fails.
        with contextlib.suppress(sqlite3.Error):
            self._conn.execute("ROLLBACK")
        self._conn.ended()
        self._doomed = None
        self._on_commit = []
        # A batch of rows whose results were not waited for (_write_pending) that failed
        # for what it holds is dropped, as one that fails at once is.
        for mark, count, cursors in reversed(self._lazy_rows):
            failures = [c.failure() for c in cursors]  # type: ignore[attr-defined]
            if any(f is not None and not keeps_rows(f) for f in failures):
                del self._unwritten[mark:mark + count]
        self._lazy_rows = []
        # Rows queued before this transaction are not lost with it: they go first again.
        self._pending[:0] = self._unwritten
        self._unwritten = []

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction holding SQLite's write lock, the queued rows first.
        Inside another one it is part of that one (see the module docstring).

        Raises:
            StoreError: for an ``sqlite3.Error`` of the block or of the commit (everything
                rolled back, the queued rows queued again): ``STORE_FULL``,
                ``STORE_READ_ONLY`` or ``STORE_WRITE_FAILED``.
        """
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self._conn
                except sqlite3.Error as exc:
                    raise self._failure(exc, "database write failed") from exc
                finally:
                    self._depth -= 1
                return
            with stage("store"):  # the whole block: what runs inside it is stored
                try:
                    self._begin()
                except sqlite3.Error as exc:
                    self._rollback()
                    raise store_error(exc, "database write failed", self.path) from exc
                self._depth = 1
                try:
                    if self._flush_hooks:
                        self._collect()
                    if self._pending:
                        self._write_pending(alone=False)
                    yield self._conn
                    doomed = self._doomed
                    if doomed is not None:  # caught inside the block; see the docstring
                        raise doomed
                    self._depth = 0
                    self._commit()
                except sqlite3.Error as exc:
                    self._depth = 0
                    self._rollback()
                    raise store_error(exc, "database write failed", self.path) from exc
                except BaseException:
                    self._depth = 0
                    self._rollback()
                    raise

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """One consistent snapshot to read from (a read transaction; WAL lets writers in
        other processes go on meanwhile). Inside a write transaction, that one.

        Raises:
            StoreError: for an ``sqlite3.Error`` of the block, ``STORE_READ_FAILED`` (or
                ``STORE_FULL`` when reading needed room); a flush first, as :meth:`flush`.
        """
        with self._lock:
            self.flush()
            if self._depth:
                try:
                    yield self._conn
                except sqlite3.Error as exc:
                    raise self._failure(exc, "database read failed", reading=True) from exc
                return
            try:
                self._conn.execute("BEGIN")
            except sqlite3.Error as exc:
                raise store_error(exc, "database read failed", self.path,
                                  reading=True) from exc
            try:
                yield self._conn
            except sqlite3.Error as exc:
                raise store_error(exc, "database read failed", self.path,
                                  reading=True) from exc
            finally:
                with contextlib.suppress(sqlite3.Error):  # a read has nothing to keep
                    self._conn.execute("COMMIT")

    def execute(self, sql: str, params: Sequence[Any] = (), *, chain: str | None = None) -> int:
        """Run one write; returns the last row id. With ``chain`` (the record's kind) the
        row and its audit chain entry commit together.

        Raises:
            StoreError: ``STORE_FULL``, ``STORE_READ_ONLY`` or ``STORE_WRITE_FAILED``.
        """
        try:
            with stage("store"), self._lock:
                self.flush(entries=False)
                if chain is None:
                    cur = self._conn.execute(sql, params)
                    return int(cur.lastrowid or 0)
                with self.transaction() as conn:
                    return _chain.insert(conn, chain, sql, params, time.time()) or 0
        except sqlite3.Error as exc:
            raise self._failure(exc, "database write failed") from exc

    def write(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one write whose row id nobody reads (an upsert, an UPDATE, a DELETE), as
        :meth:`execute` without ``chain``; inside a transaction on PostgreSQL it goes with
        the transaction's next round trip instead of making one of its own (its error, if
        any, fails the transaction there).

        Raises:
            StoreError: ``STORE_FULL``, ``STORE_READ_ONLY`` or ``STORE_WRITE_FAILED``.
        """
        try:
            with stage("store"), self._lock:
                self.flush()
                self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise self._failure(exc, "database write failed") from exc

    def after_commit(self, hook: Callable[[], None]) -> None:
        """Inside a write transaction: call ``hook`` once the outermost transaction has
        committed (in the order asked, under the database's lock; not at all when it rolls
        back). For what a caller may know only of committed rows (a session's events as
        they are stored, store/events.py); a hook must not write, and one that raises is
        logged (the transaction committed all the same).

        Raises:
            RuntimeError: outside a write transaction (a programming error).
        """
        with self._lock:
            if not self._depth:
                raise RuntimeError("Database.after_commit() outside a write transaction")
            self._on_commit.append(hook)

    def hold(self, key: str) -> None:
        """Inside a write transaction: no other write transaction that holds ``key`` gets
        past its own ``hold`` until this one ends. Call it before a read the transaction
        then writes on (a compare-and-set), and before anything it chains. On SQLite every
        write transaction holds the one write lock already: nothing to do. On PostgreSQL a
        transaction-level advisory lock on the key (store/postgres.py), so transactions on
        other keys run meanwhile.

        Raises:
            StoreError: as :meth:`transaction` (a lost server: ``STORE_DATABASE_UNAVAILABLE``).
            RuntimeError: outside a write transaction (a programming error).
        """
        if self.url is None:
            return
        with self._lock:
            if not self._depth:
                raise RuntimeError("Database.hold() outside a write transaction")
            try:
                self._conn.hold(key)  # type: ignore[attr-defined]
            except sqlite3.Error as exc:
                raise self._failure(exc, "database write failed") from exc

    def expect(self, sql: str, params: Sequence[Any],
               failure: Callable[[], StoreError]) -> bool:
        """Inside a write transaction, after :meth:`hold` of what it checks: on PostgreSQL
        queue ``sql`` (a statement calling ``eyes_expect(actual, expected)``) with the
        transaction's writes instead of reading and checking before them, and return True;
        when the database is not as expected, the transaction fails at its next round trip
        (a read of a result, or the commit), everything rolled back and queued rows queued
        again, with ``failure()``. On SQLite return False: the caller reads and checks
        (a read there costs no round trip).

        Raises:
            StoreError: as :meth:`transaction`.
            RuntimeError: outside a write transaction (a programming error).
        """
        if self.url is None:
            return False
        with self._lock:
            if not self._depth:
                raise RuntimeError("Database.expect() outside a write transaction")
            try:
                self._conn.expect(sql, params, failure)  # type: ignore[attr-defined]
            except sqlite3.Error as exc:
                raise self._failure(exc, "database write failed") from exc
        return True

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Raises:
            StoreError: ``STORE_READ_FAILED`` (or ``STORE_FULL``); a flush first, as
                :meth:`flush`."""
        with stage("store"), self._lock:
            self.flush()
            try:
                cur = self._conn.execute(sql, params)
                cur.row_factory = sqlite3.Row
                return list(cur.fetchall())
            except sqlite3.Error as exc:
                raise self._failure(exc, "database read failed", reading=True) from exc

    def read_each(self, statements: Sequence[tuple[str, Sequence[Any]]], *,
                  shapes: Sequence[str] | None = None) -> list[list[Any]]:
        """Several reads from one consistent snapshot (:meth:`reading`): each statement's
        rows, in order. On PostgreSQL they go in one round trip with their transaction's
        BEGIN and COMMIT (store/postgres.py); inside a write transaction, in that one.
        With ``shapes`` (each read's columns, a letter each: ``t`` text, ``i`` integer,
        ``f`` real; reads with ``?`` placeholders only) they are one statement there, with
        no transaction around it (:func:`~deepseek_eyes.store.postgres.together`), and
        their rows come back as tuples.

        Raises:
            StoreError: as :meth:`reading`.
        """
        with stage("store"), self._lock:
            if self.url is None or self._depth:
                with self.reading() as conn:
                    return [conn.execute(sql, params).fetchall() for sql, params in statements]
            self.flush()
            if shapes is not None:
                try:
                    return self._conn.read_together(  # type: ignore[attr-defined,no-any-return]
                        statements, shapes)
                except sqlite3.Error as exc:
                    raise store_error(exc, "database read failed", self.path,
                                      reading=True) from exc
            try:
                self._conn.execute("BEGIN")
                cursors = [self._conn.execute(sql, params) for sql, params in statements]
                self._conn.execute("COMMIT")  # queued with the reads: their one round trip
                return [cursor.fetchall() for cursor in cursors]
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):  # a read has nothing to keep
                    self._conn.execute("ROLLBACK")
                raise store_error(exc, "database read failed", self.path,
                                  reading=True) from exc

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def close(self) -> None:
        """Raises:
            StoreError: as :meth:`flush` (the connection is closed all the same; the rows
                still queued are lost with the process)."""
        with self._lock:
            try:
                self.flush()
            finally:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()


def _file_state(path: Path) -> tuple[int, int, int]:
    info = path.stat()
    return info.st_ino, info.st_size, info.st_mtime_ns
