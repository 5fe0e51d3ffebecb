"""The store on PostgreSQL: the dialect layer, the migrations from the one definition,
failures of the server, several processes on one database.

The rest of the store's tests run on PostgreSQL too (``DEEPSEEK_EYES_TEST_DATABASE=
postgresql``, tests/store/test_on_postgresql.py); these are what only PostgreSQL has.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pydantic import ValidationError

from deepseek_eyes.audit.checkpoints import sign_checkpoint
from deepseek_eyes.audit.keys import AuditKeyring, audit_directory
from deepseek_eyes.audit.verify import verify_database
from deepseek_eyes.errors import StoreError
from deepseek_eyes.gateway.readiness import DatabaseCheck
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import StoreSettings
from deepseek_eyes.store import pg_schema, pg_wire
from deepseek_eyes.store.db import MIGRATIONS, Database
from deepseek_eyes.store.postgres import redact, translate
from services import PostgresCluster
from store.test_events import CHANGES, _answered

SRC = Path(__file__).resolve().parents[2] / "src"
AUDIT = "INSERT INTO audit (ts, kind, subject, details) VALUES (?,?,?,?)"


def test_sqlite_statements_are_translated_for_postgresql() -> None:
    assert translate("SELECT * FROM audit WHERE kind = ? AND details LIKE ?") == (
        "SELECT * FROM audit WHERE kind = %s AND details ILIKE %s", False, None)
    text, numbered, returning = translate(
        "INSERT OR IGNORE INTO sessions (id, created_at, source) VALUES (?,?,?)")
    assert text.endswith("VALUES (%s,%s,%s) ON CONFLICT DO NOTHING RETURNING rowid")
    assert (numbered, returning) == (False, "rowid")
    text, _, _ = translate("INSERT OR REPLACE INTO route_state (route, fingerprint, last_code)"
                           " VALUES (?,?,?)")
    assert text.endswith("ON CONFLICT (route, fingerprint) DO UPDATE SET "
                         "last_code = EXCLUDED.last_code")
    # rowid is the integer key where there is one; ?N go by name; a literal % and ? stay.
    assert translate("SELECT rowid FROM audit WHERE rowid = ?2 AND kind = '?%' LIMIT ?1") == (
        "SELECT id FROM audit WHERE id = %(p2)s AND kind = '?%%' LIMIT NULLIF(%(p1)s, -1)",
        True, None)
    assert translate("INSERT INTO chain (seq, hash) VALUES (?,?)")[2] == "seq"
    with pytest.raises(ValueError, match="whose rowid"):
        translate("SELECT rowid FROM route_state")


def test_every_migration_has_its_postgresql_form() -> None:
    statements = [s for v in range(1, len(MIGRATIONS) + 1)
                  for s in pg_schema.migration_statements(v)]
    joined = "\n".join(statements)
    assert "AUTOINCREMENT" not in joined
    assert "RAISE(ABORT" not in joined
    # every append-only trigger became a refusing function and a row trigger
    for name in ("evidence_no_update", "events_no_update", "events_no_delete",
                 "chain_no_update", "chain_no_delete"):
        assert f"CREATE TRIGGER {name} BEFORE" in joined
        assert f"CREATE FUNCTION {name}_refuse()" in joined
    assert pg_schema.rowid_column("events") == "id"
    assert pg_schema.rowid_column("sessions") == "rowid"
    assert pg_schema.tables()["sessions"].columns[-1].name == "fork_at"  # ALTERs applied


def test_the_url_never_carries_a_password() -> None:
    with pytest.raises(ValidationError, match="password"):
        StoreSettings(database_url="postgresql://eyes:hunter2@db.example:5432/eyes")
    with pytest.raises(ValidationError, match="postgresql://"):
        StoreSettings(database_url="mysql://db.example/eyes")
    assert "hunter2" not in redact("postgresql://eyes:hunter2@db/eyes")
    # libpq also reads a password from the query, under any spelling it decodes
    for query in ("password=hunter2", "sslmode=require&password=hunter2",
                  "pass%77ord=hunter2", "sslpassword=hunter2", "Password=hunter2"):
        url = f"postgresql://eyes@db.example:5432/eyes?{query}"
        with pytest.raises(ValidationError, match="password"):
            StoreSettings(database_url=url)
        assert "hunter2" not in redact(url)
    assert redact("postgresql://eyes@db/eyes?sslmode=require") == (
        "postgresql://eyes@db/eyes?sslmode=require")
    assert StoreSettings(database_url="postgresql://eyes@db/eyes?passfile=/run/pgpass")
    ok = StoreSettings.model_validate({"database_url": "postgresql://eyes@db/eyes",
                                       "database_password": {"env": "EYES_DB_PASSWORD"}})
    assert ok.database_password is not None
    assert ok.database_password.env == "EYES_DB_PASSWORD"


def test_the_append_only_tables_refuse_changes_like_sqlite(postgres_url: str) -> None:
    db = Database(Path("unused.db"), url=postgres_url)
    try:
        db.execute(AUDIT, (1.0, "k", "s", "{}"), chain="test")
        for statement in ("UPDATE chain SET kind = 'x'", "DELETE FROM chain"):
            with pytest.raises(StoreError, match="append-only") as refused:
                db.execute(statement)
            assert refused.value.code == "STORE_WRITE_FAILED"
        assert db.schema_version == len(MIGRATIONS)
    finally:
        db.close()


def test_a_database_newer_than_the_code_is_refused(postgres_url: str) -> None:
    Database(Path("unused.db"), url=postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as pg:
        pg.execute("UPDATE eyes_schema SET version = %s", (len(MIGRATIONS) + 1,))
    with pytest.raises(StoreError, match="newer") as refused:
        Database(Path("unused.db"), url=postgres_url)
    assert refused.value.code == "STORE_WRITE_FAILED"
    with pytest.raises(StoreError, match="newer") as read:
        Database.open_read_only(Path("unused.db"), url=postgres_url)
    assert read.value.code == "STORE_READ_FAILED"


def _rows(url: str, sql: str) -> int:
    with psycopg.connect(url, autocommit=True) as pg:
        row = pg.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def test_a_transaction_cut_midway_writes_nothing_and_the_next_one_reconnects(
    postgres_url: str,
) -> None:
    db = Database(Path("unused.db"), url=postgres_url)
    try:
        def cut_midway() -> None:
            with db.transaction() as conn:
                # its result read: the statement ran on the server before the cut
                assert conn.execute(AUDIT, (1.0, "first", None, "{}")).lastrowid
                with psycopg.connect(postgres_url, autocommit=True) as admin:
                    admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                  " WHERE datname = current_database()"
                                  " AND pid <> pg_backend_pid()")
                conn.execute(AUDIT, (2.0, "second", None, "{}"))

        with pytest.raises(StoreError) as cut:
            cut_midway()
        assert cut.value.code == "STORE_DATABASE_UNAVAILABLE"
        assert _rows(postgres_url, "SELECT COUNT(*) FROM audit") == 0  # nothing half-written
        db.execute(AUDIT, (3.0, "after", None, "{}"), chain="test")  # connects again
        assert _rows(postgres_url, "SELECT COUNT(*) FROM audit") == 1
    finally:
        db.close()


def test_a_link_cut_before_the_transactions_first_round_trip_is_replaced_once(
    postgres_url: str,
) -> None:
    """Statements queued (no result read yet, no commit sent) ran nowhere: on a link found
    dead at the first round trip they are sent again on a new one, and commit once."""
    db = Database(Path("unused.db"), url=postgres_url)
    try:
        with db.transaction() as conn:
            conn.execute(AUDIT, (1.0, "first", None, "{}"))  # queued, not read
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                              " WHERE datname = current_database()"
                              " AND pid <> pg_backend_pid()")
            conn.execute(AUDIT, (2.0, "second", None, "{}"))
        assert _rows(postgres_url, "SELECT COUNT(*) FROM audit") == 2
    finally:
        db.close()


def test_a_server_down_is_a_code_and_back_it_serves_again(
    postgres_cluster: PostgresCluster, tmp_path: Path,
) -> None:
    url = postgres_cluster.new_database()
    home = DataHome(tmp_path / "home", database_url=url)
    check = DatabaseCheck(home)
    assert check.backend == "postgresql"
    check.check()
    home.audit.append("mcp.call", "srv.tool", outcome="ok")
    home.db.flush()
    postgres_cluster.stop()
    try:
        home.audit.append("mcp.call", "srv.tool", outcome="while-down")  # queued
        with pytest.raises(StoreError) as down:
            home.db.flush()
        assert down.value.code == "STORE_DATABASE_UNAVAILABLE"
        assert "password" not in str(down.value.details)
        with pytest.raises(StoreError) as probe:
            check.check()
        assert probe.value.code == "STORE_DATABASE_UNAVAILABLE"
    finally:
        postgres_cluster.start()
    check.check()  # the first request after: a new connection, no restart of ours
    home.db.flush()  # the queued row outlived the outage
    assert [r["subject"] for r in home.db.query("SELECT subject FROM audit ORDER BY id")] \
        == ["srv.tool", "srv.tool"]
    sign_checkpoint(home.db, home.audit_keys())
    report = verify_database(home.db, AuditKeyring.read_only(audit_directory(home.root)))
    assert report.ok, report.as_json()
    home.db.close()


def test_three_processes_migrate_once_and_extend_one_chain(
    postgres_url: str, tmp_path: Path,
) -> None:
    """Three replicas start together on an empty database: one migrates, the others wait
    for it (the schema lock), then all three append to one chain at once: audit rows,
    their own sessions (side by side) and one shared session (compare-and-set, a loser
    reads again)."""
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(SRC)!r})
        from deepseek_eyes.store.db import Database
        from deepseek_eyes.store.events import Guard, SessionConflict, SessionStore
        db = Database(Path("unused.db"), url={postgres_url!r})
        sessions = SessionStore(db)
        sessions.ensure("shared", "test")
        mine = "own-" + sys.argv[1]
        sessions.append(mine, [], create="test")
        message = {{"role": "user", "content": sys.argv[1]}}
        for i in range(20):
            with db.transaction():
                db.execute({AUDIT!r}, (float(i), "w", sys.argv[1], "{{}}"), chain="test")
            sessions.append(mine, [message])
            while True:
                head = sessions.snapshot("shared").head
                try:
                    sessions.append("shared", [message], guard=Guard(head))
                    break
                except SessionConflict:
                    continue
        db.close()
    """)
    env = {k: v for k, v in os.environ.items() if k != "DEEPSEEK_EYES_DATABASE_URL"}
    procs = [subprocess.Popen([sys.executable, "-c", script, f"w{n}"], env=env,  # noqa: S603
                              stderr=subprocess.PIPE, text=True) for n in range(3)]
    for proc in procs:
        _, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
    assert _rows(postgres_url, "SELECT version FROM eyes_schema") == len(MIGRATIONS)
    assert _rows(postgres_url, "SELECT COUNT(*) FROM eyes_schema") == 1
    home = DataHome(tmp_path / "home", database_url=postgres_url)
    sign_checkpoint(home.db, home.audit_keys())
    report = verify_database(home.db, home.audit_keys())
    assert report.ok, report.as_json()
    assert report.entries == 60 + 4 + 3 * 40  # audit rows, sessions, events
    for name in ("shared", "own-w0", "own-w1", "own-w2"):
        seqs = [int(r[0]) for r in home.db.query(
            "SELECT seq FROM events WHERE session_id = ? ORDER BY seq", (name,))]
        assert seqs == list(range(60 if name == "shared" else 20)), name
    home.db.close()


def test_blobs_in_postgresql_are_content_addressed_immutable_and_verified(
    postgres_url: str, tmp_path: Path,
) -> None:
    home = DataHome(tmp_path / "home", database_url=postgres_url, blobs_url=postgres_url)
    try:
        data = b"\x89PNG not really"
        ref = home.blobs.put(data)
        assert home.blobs.put(data) == ref  # the same bytes are one blob
        assert home.blobs.contains(ref.sha256)
        assert home.blobs.get(ref.sha256) == data
        assert not (tmp_path / "home" / "blobs").exists()  # nothing on disk
        # Written before the row that names it: a rolled-back transaction keeps it.
        other = b"another image"
        def fails_after_the_blob() -> None:
            with home.db.transaction():
                home.blobs.put(other)
                raise RuntimeError("the row that names it failed")

        with pytest.raises(RuntimeError):
            fails_after_the_blob()
        assert home.blobs.get(hashlib.sha256(other).hexdigest()) == other
        with pytest.raises(StoreError) as missing:
            home.blobs.get("0" * 64)
        assert missing.value.code == "STORE_BLOB_MISSING"
        with psycopg.connect(postgres_url, autocommit=True) as pg:
            with pytest.raises(psycopg.errors.IntegrityConstraintViolation):
                pg.execute("UPDATE eyes_blobs SET data = 'x'")
            pg.execute("SET session_replication_role = replica")  # a superuser's edit
            pg.execute("UPDATE eyes_blobs SET data = %s WHERE sha256 = %s",
                       (b"\x89PNG forged", ref.sha256))
        with pytest.raises(StoreError) as corrupt:
            home.blobs.get(ref.sha256)
        assert corrupt.value.code == "STORE_BLOB_CORRUPT"
    finally:
        home.close()


def _sqlite_home(root: Path) -> str:
    """A SQLite data directory with a little of everything; returns a blob's hash."""
    from deepseek_eyes.store.events import SessionStore, TurnRecord
    from deepseek_eyes.usage import ProviderUsage, UsageCategory

    home = DataHome(root, database_url="")
    sessions = SessionStore(home.db)
    for i in range(3):
        home.audit.append("mcp.call", f"srv.tool{i}", outcome="ok", ms=i)
        home.usage.record_exact(UsageCategory.FINAL, ProviderUsage(10, 2), source="t",
                                model="m")
        sessions.append(f"s{i}", [{"role": "user", "content": f"hello {i}"}], create="test",
                        turn=TurnRecord(id=f"turn-{i}", session_id=f"s{i}", started_at=1.0,
                                        ended_at=2.0, model="m", path="text", outcome="ok",
                                        code=None, details={"base": 0}))
    for _ in range(20):  # a batch entry
        home.audit.append("mcp.call", "srv.batch", outcome="ok")
    blob = home.blobs.put(b"an image's bytes")
    home.close()  # seals a checkpoint
    return blob.sha256


def test_store_migrate_copies_a_data_directory_and_verifies_the_chain_there(
    postgres_cluster: PostgresCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from click.testing import CliRunner

    from deepseek_eyes.cli import cli

    monkeypatch.setenv("DEEPSEEK_EYES_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DEEPSEEK_EYES_DATABASE_URL", raising=False)
    sha = _sqlite_home(tmp_path / "home")
    url = postgres_cluster.new_database()
    done = CliRunner().invoke(cli, ["store", "migrate", "--to", url, "--json"])
    assert done.exit_code == 0, done.output
    view = json.loads(done.output)
    assert view["verify"]["ok"] is True
    assert view["rows"]["sessions"] == 3
    assert view["blobs"] == 1
    # The target serves as the store: the sessions continue, rowids and blobs kept.
    home = DataHome(tmp_path / "home", database_url=url, blobs_url=url)
    try:
        assert home.blobs.get(sha) == b"an image's bytes"
        from deepseek_eyes.store.events import SessionStore

        SessionStore(home.db).append("s0", [{"role": "user", "content": "again"}])
        sign_checkpoint(home.db, home.audit_keys())
        assert verify_database(home.db, home.audit_keys()).ok
    finally:
        home.db.close()
    # A target that is not empty is refused, nothing written.
    again = CliRunner().invoke(cli, ["store", "migrate", "--to", url])
    assert again.exit_code != 0
    assert isinstance(again.exception, StoreError)
    assert again.exception.code == "STORE_MIGRATE_TARGET_NOT_EMPTY"


def _ours(url: str) -> int:
    """Server connections to ``url``'s database other than this probe's."""
    return _rows(url, "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()"
                      " AND pid <> pg_backend_pid()")


def _settled_count(url: str, wanted: Callable[[int], bool]) -> int:
    """:func:`_ours` once ``wanted`` holds for it (or after 30 s): a backend whose client
    closed or which was terminated leaves ``pg_stat_activity`` on its own time."""
    deadline = time.monotonic() + 30.0
    count = _ours(url)
    while not wanted(count) and time.monotonic() < deadline:
        time.sleep(0.05)
        count = _ours(url)
    return count


def test_a_database_lends_from_a_bounded_pool_and_leaves_nothing_open(
    postgres_url: str, tmp_path: Path,
) -> None:
    """[store] database_pool_size reaches the pool; transactions and lone statements borrow
    and give back (never more connections than the pool's size, one kept for the next),
    and closing leaves no server connection behind."""
    settings = StoreSettings(database_url=postgres_url, database_pool_size=3)
    home = DataHome(tmp_path / "home", database_url=settings.database_url,
                    database_pool_size=settings.database_pool_size)
    db = home.db
    try:
        for i in range(20):
            with db.transaction():
                db.execute(AUDIT, (float(i), "k", "s", "{}"), chain="test")
            assert db.query_one("SELECT COUNT(*) FROM audit")[0] == i + 1
        assert _ours(postgres_url) == 1  # one at a time, kept idle between uses
        # The idle one is cut: found dead when lent (its BEGIN or first round trip), and
        # replaced before anything ran.
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                          " WHERE datname = current_database() AND pid <> pg_backend_pid()")
        db.execute(AUDIT, (99.0, "after", None, "{}"), chain="test")
        assert db.query_one("SELECT COUNT(*) FROM audit")[0] == 21
        assert 1 <= _settled_count(postgres_url, lambda n: 1 <= n <= 3) <= 3
        assert db._conn._pool.max_size == 3  # type: ignore[attr-defined]
    finally:
        home.close()
    assert _settled_count(postgres_url, lambda n: n == 0) == 0


def test_the_kept_connection_is_asked_first_after_an_idle_while(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The connection kept between transactions is the same one (no pool round trip per
    transaction); kept idle CHECK_IDLE_S or longer, it is asked a round trip before the
    next transaction, so one the server ended meanwhile is replaced before anything of
    the transaction is sent, and the write lands once."""
    from deepseek_eyes.store import postgres

    home = DataHome(tmp_path / "home", database_url=postgres_url)
    db = home.db
    try:
        pids = set()
        for i in range(5):
            with db.transaction() as conn:
                db.execute(AUDIT, (float(i), "k", "s", "{}"), chain="test")
                pids.add(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        assert len(pids) == 1
        monkeypatch.setattr(postgres, "CHECK_IDLE_S", 0.0)  # (at 5 s: 2 pipelines)
        pipelines: list[Any] = []
        real = pg_wire.Pipeline.__init__

        def opened(self: Any, conn: Any) -> None:
            pipelines.append(conn)
            real(self, conn)

        monkeypatch.setattr(pg_wire.Pipeline, "__init__", opened)
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                          " WHERE datname = current_database() AND pid <> pg_backend_pid()")
        _settled_count(postgres_url, lambda n: n == 0)
        with db.transaction():
            db.execute(AUDIT, (9.0, "after", None, "{}"), chain="test")
        # Found dead by the question: the transaction's one pipeline is on the new link
        # (not one on the old link that failed, then one on a new link).
        assert len(pipelines) == 1
        assert db.query_one("SELECT COUNT(*) FROM audit WHERE kind = 'after'")[0] == 1
        with db.transaction() as conn:
            assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] not in pids
        assert db._conn._pg is not None  # type: ignore[attr-defined]  # kept
        # Kept KEEP_S: given back between two transactions (the pool's lifetime applies).
        monkeypatch.setattr(postgres, "KEEP_S", 0.0)
        db.execute(AUDIT, (10.0, "later", None, "{}"), chain="test")
        assert db._conn._pg is None  # type: ignore[attr-defined]
        assert db.query_one("SELECT COUNT(*) FROM audit WHERE kind = 'later'")[0] == 1
    finally:
        home.close()


def test_the_pool_size_is_a_bounded_setting() -> None:
    assert StoreSettings().database_pool_size == 2
    for bad in (0, 65):
        with pytest.raises(ValidationError):
            StoreSettings(database_pool_size=bad)


def test_the_reads_fetched_with_the_chain_lock_are_the_ones_the_writers_make() -> None:
    """The chain's tail and the newest checkpoint come with the chain lock's round trip
    only when asked in exactly these words (otherwise they are read when asked)."""
    from deepseek_eyes.audit import checkpoints
    from deepseek_eyes.store import postgres

    assert checkpoints._LAST == postgres._LAST_CHECKPOINT
    assert postgres._TAIL == "SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1"


def _round_trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the round trips from now on (until ``monkeypatch.undo()``): each one's number
    of results expected (statements, prepares, BEGIN and COMMIT), in order."""
    from deepseek_eyes.store import pg_wire

    trips: list[int] = []
    real = pg_wire.Pipeline.sync

    def counted(self: pg_wire.Pipeline) -> None:
        trips.append(len(self._expected))
        real(self)

    monkeypatch.setattr(pg_wire.Pipeline, "sync", counted)
    return trips


def test_rows_queued_before_a_write_go_with_its_first_round_trip(
        postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Log rows flushed at the start of a write transaction are not waited for: they go
    with its first round trip (here a read), their rowids come back with the chain's tail
    when the records fold, and the commit is the third trip; the chain verifies."""
    from deepseek_eyes.store import chain

    db = Database(tmp_path / "eyes.db", url=postgres_url)
    trips = _round_trips(monkeypatch)
    db.append(AUDIT, (1.0, "test.queued", "s", "{}"), chain="test.queued")
    with db.transaction() as conn:
        db.hold("session:x")
        assert conn.execute("SELECT count(*) FROM audit").fetchone()[0] == 1
        chain.insert_later(conn, "test.mine", AUDIT, (2.0, "test.mine", "s", "{}"), 2.0)
    assert len(trips) == 3, trips
    monkeypatch.undo()
    kinds = [r[0] for r in db.query("SELECT kind FROM audit ORDER BY id")]
    assert kinds == ["test.queued", "test.mine"]
    keys = DataHome(tmp_path / "home").audit_keys()
    sign_checkpoint(db, keys)
    assert verify_database(db, keys).ok
    db.close()


def test_a_sessions_snapshot_is_one_round_trip(
        postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A continued turn reads its session once: a snapshot's five reads are one statement
    (one round trip, no transaction to begin and commit), and a stock client's lookup of
    its session goes in it too. A read that fails there fails with its code, and the
    next read is served."""
    from deepseek_eyes.store.events import SessionStore

    db = Database(tmp_path / "eyes.db", url=postgres_url)
    try:
        sessions = SessionStore(db)
        sessions.append("once", [{"role": "user", "content": "hi"}], create="test",
                        scope="gateway:k")
        trips = _round_trips(monkeypatch)
        snap = sessions.snapshot("once")
        assert trips == [1], trips  # the five reads as one statement, no BEGIN or COMMIT
        monkeypatch.undo()
        assert ([e.message["content"] for e in snap.events], snap.head, snap.scope) == \
            (["hi"], 0, "gateway:k")
        # A stock client's history looked up with the session it is expected to find.
        sessions.remember_prefix("gateway:k", "h1", "once", 1)
        trips = _round_trips(monkeypatch)
        found, again = sessions.find_with_snapshot("gateway:k", ["h1"], "once")
        assert trips == [1], trips  # the lookup and the five reads, one statement
        monkeypatch.undo()
        assert found == "once"
        assert again is not None
        assert again.head == 0
        with pytest.raises(StoreError) as failed:
            db.read_each([("SELECT 1", ()), ("SELECT nothing FROM no_such_table", ())])
        assert failed.value.code == "STORE_READ_FAILED"
        assert [[tuple(r) for r in rows] for rows in db.read_each([("SELECT 1", ())])] == \
            [[(1,)]]
        assert sessions.snapshot("once").head == 0
    finally:
        db.close()


def test_reads_made_one_statement_return_what_each_read_returns(
        postgres_url: str, tmp_path: Path) -> None:
    """The snapshot's reads as one statement (``read_each(shapes=…)``) give each read's
    rows exactly as the reads one by one in a transaction do: values, types and order
    (several events, a retried turn superseded, a running lease, a scope, a history's
    lookup), and nothing for a session that is not there."""
    from deepseek_eyes.store import events
    from deepseek_eyes.store.events import SessionStore, TurnRecord
    from deepseek_eyes.store.postgres import together

    db = Database(tmp_path / "eyes.db", url=postgres_url)
    try:
        sessions = SessionStore(db)
        sessions.append("s", [{"role": "user", "content": f"m{n}", "n": n / 3}
                              for n in range(4)], create="test", scope="gateway:k")
        sessions.record_turn(TurnRecord("t1", "s", 1.5, 2.0, "m", "text", "ok", None,
                                        {"base": 1}))
        sessions.record_turn(TurnRecord("t2", "s", 2.25, 3.0, "m", "text", "ok", None,
                                        {"base": 1, "retry_of": "t1"}))
        with db.transaction() as conn:
            sessions.leases.open(conn, turn_id="t3", session_id="s", base=3,
                                 started_at=4.125, model="m", path="text")
        sessions.remember_prefix("gateway:k", "h1", "s", 2)
        reader = SessionStore(db)  # knows none of the events the writer appended
        for name in ("s", "nobody"):
            _kept, reads = reader._snapshot_reads(name)
            reads = [(events._prefix_query(2), ("gateway:k", "h1", "h2")), *reads]
            shapes = ("it", *events._SNAPSHOT_SHAPES)
            one_by_one = [[tuple(row) for row in rows] for rows in db.read_each(reads)]
            together_rows = db.read_each(reads, shapes=shapes)
            assert together_rows == one_by_one
            assert [[type(v) for v in row] for rows in together_rows for row in rows] == \
                [[type(v) for v in row] for rows in one_by_one for row in rows]
            if name == "s":
                assert [row[1] for row in one_by_one[1]] == [0, 1, 2, 3]  # in order
                assert one_by_one[2] == [("t1",)]
                assert one_by_one[4][0][0] == "t3"
    finally:
        db.close()
    with pytest.raises(ValueError, match="cannot read together"):
        together(("SELECT ?1, ?2",), ("tt",))
    with pytest.raises(ValueError, match="cannot read together"):
        together(("SELECT ?",), ("x",))


def test_an_expected_session_is_checked_with_the_writes_not_read_before_them(
        postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deferred turn's append (``expect=True``) does not read its session before it
    writes: the guard and the scope are checked by a statement sent with the writes
    (eyes_expect), so the write is two round trips (rows with the chain's tail, then the
    entries with the commit), not three. When the session is not as guessed (another turn
    appended, another scope's), the transaction fails whole with SessionConflict: nothing
    written, the log rows queued before it still queued and written by the next write."""
    from deepseek_eyes.store.events import Guard, SessionConflict, SessionStore

    db = Database(tmp_path / "eyes.db", url=postgres_url)
    try:
        sessions = SessionStore(db)
        sessions.append("s", [{"role": "user", "content": "0"}], create="test",
                        scope="gateway:k")
        trips = _round_trips(monkeypatch)
        assert sessions.append("s", [{"role": "user", "content": "1"}], guard=Guard(0),
                               scope="gateway:k", expect=True) == [1]
        assert len(trips) == 2, trips
        monkeypatch.undo()
        sessions.append("s", [{"role": "assistant", "content": "2"}])  # another turn's
        for scope, head in (("gateway:k", 1), ("gateway:other", 2)):
            db.append(AUDIT, (1.0, f"test.queued.{scope}", "s", "{}"), chain="test.queued")
            with pytest.raises(SessionConflict) as moved:
                sessions.append("s", [{"role": "user", "content": "x"}], guard=Guard(head),
                                scope=scope, expect=True)
            assert moved.value.code == "STORE_SESSION_CONFLICT"
            assert [e.message["content"] for e in sessions.events("s")] == ["0", "1", "2"]
        db.flush()
        kinds = [r[0] for r in db.query("SELECT kind FROM audit ORDER BY id")]
        assert kinds == ["test.queued.gateway:k", "test.queued.gateway:other"]
        # The same guess, right this time, with no scope: appended.
        assert sessions.append("s", [{"role": "user", "content": "3"}], guard=Guard(2),
                               expect=True) == [3]
        keys = DataHome(tmp_path / "home").audit_keys()
        sign_checkpoint(db, keys)
        assert verify_database(db, keys).ok
    finally:
        db.close()


def test_a_history_lookup_reads_the_rows_it_names_however_many_sessions_share_a_scope(
        postgres_url: str, tmp_path: Path) -> None:
    """With one gateway key every session has one scope. The lookup of a stock client's
    history must still read only the noted rows its hashes name and their sessions' scope
    rows (by key), not every session of the scope: the planner, asked for a join, hashed
    the whole ``session_scopes`` table every turn at a few hundred sessions (600 here).
    Custom and generic plans both."""
    from deepseek_eyes.store.events import SessionStore, _prefix_query

    db = Database(tmp_path / "eyes.db", url=postgres_url)
    try:
        sessions = SessionStore(db)
        sessions.append("mine", [{"role": "user", "content": "hi"}], create="test",
                        scope="gateway:k")
        sessions.remember_prefix("gateway:k", "h-mine", "mine", 1)
        sessions.append("theirs", [{"role": "user", "content": "hi"}], create="test",
                        scope="gateway:other")
        sessions.remember_prefix("gateway:other", "h-theirs", "theirs", 1)
    finally:
        db.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO sessions (id, created_at, source) SELECT 's' || n, 0, 'test'"
            " FROM generate_series(1, 600) n")
        conn.execute("INSERT INTO session_scopes (session_id, scope) SELECT 's' || n,"
                     " 'gateway:k' FROM generate_series(1, 600) n")
        conn.execute("INSERT INTO session_prefixes (scope, prefix_sha256, session_id, length,"
                     " ts) SELECT 'gateway:k', 'h' || n, 's' || n, 2, 0"
                     " FROM generate_series(1, 600) n")
        conn.execute("ANALYZE")
        numbered = iter(range(1, 4))
        query = re.sub("%s", lambda _: f"${next(numbered)}", translate(_prefix_query(2))[0])
        params = ("gateway:k", "h-mine", "h7")
        for mode in ("force_custom_plan", "force_generic_plan"):
            conn.execute(f"SET plan_cache_mode = {mode}")
            conn.execute("DEALLOCATE ALL")
            conn.execute("PREPARE lookup (text, text, text) AS " + query)
            plan = "\n".join(r[0] for r in conn.execute(_execute("EXPLAIN", params)))
            assert "Seq Scan" not in plan, plan
            assert "Hash" not in plan, plan
            assert conn.execute(_execute("", params)).fetchall() == [(2, "s7")]
            # another scope's noted history is never found
            assert conn.execute(_execute("", ("gateway:k", "h-theirs", "h-none"))
                                ).fetchall() == []


def _execute(prefix: str, params: tuple[str, ...]) -> psycopg.sql.Composed:
    """``EXECUTE lookup`` with literal arguments (a prepared statement's are typed)."""
    from psycopg import sql

    return sql.SQL(prefix + " EXECUTE lookup ({})").format(
        sql.SQL(", ").join(map(sql.Literal, params)))


def test_the_retried_turns_of_a_long_session_are_read_by_their_index(
        postgres_url: str, tmp_path: Path) -> None:
    """On PostgreSQL the snapshot's read of the retried turns parsed every turn's details
    as JSON (15 ms a turn at 2,000 turns); the partial index of migration 15 serves it,
    custom and generic plans, and finds the one that is there."""
    from deepseek_eyes.store.events import _RETRIED

    Database(tmp_path / "eyes.db", url=postgres_url).close()  # migrated
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO sessions (id, created_at, source) VALUES ('s', 0, 'test')")
        conn.execute(
            "INSERT INTO turns (id, session_id, started_at, ended_at, model, path, outcome,"
            " code, details) SELECT 't' || n, 's', n, n, 'm', 'text', 'ok', NULL,"
            " '{\"base\":0}' FROM generate_series(1, 2000) n")
        conn.execute("INSERT INTO turns (id, session_id, started_at, ended_at, model, path,"
                     " outcome, code, details) VALUES ('r', 's', 3000, 3000, 'm', 'text', 'ok',"
                     " NULL, '{\"base\":0,\"retry_of\":\"t7\"}')")
        conn.execute("ANALYZE")
        query = translate(_RETRIED)[0].replace("%s", "$1")
        for mode in ("force_custom_plan", "force_generic_plan"):
            conn.execute(f"SET plan_cache_mode = {mode}")
            conn.execute("DEALLOCATE ALL")
            conn.execute("PREPARE retried (text) AS " + query)
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN EXECUTE retried ('s')"))
            assert "turns_retried" in plan, plan
            assert "Seq Scan" not in plan, plan
            assert conn.execute("EXECUTE retried ('s')").fetchall() == [("t7",)]


@pytest.mark.parametrize("change", [None, *CHANGES])
def test_a_session_this_store_answered_last_is_judged_unread_and_checked_by_its_write(
        postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        change: str | None) -> None:
    """After its own answer a store holds a session as a read would give it (events,
    head, latest turn, scope) and gives it once without a round trip (``held``; not to
    another scope's request, nor for a history looked up in another scope, and neither
    spends it); the
    append judged from it checks with its writes that nothing it was judged from changed
    (two round trips, as any guessed append), else fails whole with SessionMoved: nothing
    written, the session as the other store left it."""
    from deepseek_eyes.store.events import Guard, Held, SessionMoved, SessionStore

    db = Database(tmp_path / "eyes.db", url=postgres_url)
    try:
        store, other = SessionStore(db), SessionStore(db)
        _answered(store)
        trips = _round_trips(monkeypatch)
        assert store.held("s", scope="gateway:k", lookup=("gateway:other", ["h1", "h2"])) is None
        # Another scope's request naming the session gets nothing held (its read refuses
        # it), and leaves what is held for this scope's next turn.
        assert store.held("s", scope="gateway:other") is None
        held = store.held("s", scope="gateway:k", lookup=("gateway:k", ["h1", "h2"]))
        assert trips == []
        monkeypatch.undo()
        assert held is not None
        assert held.held == Held("t1", 0, ("gateway:k", ("h1", "h2")))
        read = SessionStore(db).snapshot("s")
        assert ([(e.seq, e.turn_id, e.message) for e in held.events], held.head,
                held.latest, held.scope) == \
            ([(e.seq, e.turn_id, e.message) for e in read.events], read.head,
             read.latest, read.scope)
        assert store.held("s", scope="gateway:k") is None  # once: then read, or its own answer
        if change is not None:
            CHANGES[change](other)
        before = [(e.seq, e.message["content"]) for e in store.events("s")]
        trips = _round_trips(monkeypatch)
        guard = Guard(held.head, held=held.held)
        if change is None:
            assert store.append("s", [{"role": "user", "content": "next"}], guard=guard,
                                scope="gateway:k", expect=True) == [2]
            assert len(trips) == 2, trips
            return
        with pytest.raises(SessionMoved):
            store.append("s", [{"role": "user", "content": "next"}], guard=guard,
                         scope="gateway:k", expect=True)
        monkeypatch.undo()
        assert [(e.seq, e.message["content"]) for e in store.events("s")] == before
        assert "next" not in {str(e.message.get("content")) for e in store.events("s")}
    finally:
        db.close()


def test_a_store_holds_sessions_only_while_it_finds_them_as_it_left_them(
        postgres_url: str, tmp_path: Path) -> None:
    """Replicas dealt one conversation's turns in turn each find the session moved on
    since their last answer: a store whose held sessions keep proving changed (each a
    failed round trip and a read) stops holding them after a few, and reads; once its
    reads find them as it left them again (one process alone), it holds again."""
    from deepseek_eyes.store.events import Guard, SessionMoved, SessionStore, TurnRecord

    db = Database(tmp_path / "eyes.db", url=postgres_url)
    try:
        store, other = SessionStore(db), SessionStore(db)
        _answered(store)

        def answer(number: int) -> None:  # this store's next answer, read first
            head = store.snapshot("s").head
            store.append("s", [{"role": "assistant", "content": f"a{number}"}],
                         turn_id=f"t{number}", guard=Guard(head),
                         turn=TurnRecord(f"t{number}", "s", float(number), float(number),
                                         "m", "text", "ok", None, {"base": head}))

        misses = 0
        for number in range(2, 30):
            held = store.held("s", scope="gateway:k")
            if held is None:
                break
            other.append("s", [{"role": "user", "content": f"elsewhere {number}"}])
            with pytest.raises(SessionMoved):
                store.append("s", [{"role": "user", "content": "here"}], scope="gateway:k",
                             guard=Guard(held.head, held=held.held), expect=True)
            misses += 1
            answer(number)
        assert 3 <= misses <= 10, misses
        for number in range(30, 40):  # alone again: its reads find what it left
            if store.held("s", scope="gateway:k") is not None:
                break
            answer(number)
        else:
            pytest.fail("the store never held the session again")
        assert number - 30 <= 3
    finally:
        db.close()
