"""What write transactions wait for, seen from outside: on SQLite one writer at a time (its
write lock), on PostgreSQL only writers that need the same thing (a session's key, the
chain's tail: store/postgres.py).

Each test runs on both engines with two :class:`Database` objects (two connections, as two
processes have); writer A stops inside its transaction until the test lets it go.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from deepseek_eyes.audit.checkpoints import sign_checkpoint
from deepseek_eyes.audit.keys import AuditKeyring
from deepseek_eyes.audit.verify import verify_database
from deepseek_eyes.store import chain
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.events import Guard, SessionConflict, SessionStore
from deepseek_eyes.store.postgres import lock_id
from services import PostgresCluster

#: How long A waits for B to commit when B must not (SQLite): the negative is not
#: provable by waiting on an event, and a slow machine can only make B later, never
#: earlier, so this bound cannot fail a correct run.
NOT_MEANWHILE_S = 0.3
#: How long anything that must happen is waited for.
DEADLINE_S = 30.0


@pytest.fixture(params=["sqlite", "postgresql"])
def two_writers(request: pytest.FixtureRequest, tmp_path: Path
                ) -> Iterator[tuple[str, Database, Database, str]]:
    """Two databases objects on one store, the engine's name, and its URL ("" on SQLite)."""
    url = ""
    if request.param == "postgresql":
        cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
        url = cluster.new_database()
    first = Database(tmp_path / "eyes.db", url=url)
    second = Database(tmp_path / "eyes.db", url=url)
    try:
        yield request.param, first, second, url
    finally:
        first.close()
        second.close()


MESSAGE = {"role": "user", "content": "hello"}


def _in_thread(work: object) -> tuple[threading.Thread, threading.Event, list[BaseException]]:
    done = threading.Event()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            work()  # type: ignore[operator]
        except BaseException as exc:  # handed to the test
            failed.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done, failed


def _verified(db: Database, tmp_path: Path) -> None:
    keys = AuditKeyring.load_or_create(tmp_path / "audit-keys")
    sign_checkpoint(db, keys)
    report = verify_database(db, keys)
    assert report.ok, report.as_json()


def test_a_write_on_another_session_commits_while_one_is_open_on_postgresql_only(
    two_writers: tuple[str, Database, Database, str], tmp_path: Path,
) -> None:
    engine, db_a, db_b, _url = two_writers
    a, b = SessionStore(db_a), SessionStore(db_b)
    a.append("session-x", [MESSAGE], create="test")
    with a.batch() as conn:
        # A turn's first half on X: its key, the compare-and-set read, its lease.
        db_a.hold("session:session-x")
        head = int(conn.execute("SELECT COALESCE(MAX(seq), -1) FROM events"
                                " WHERE session_id = ?", ("session-x",)).fetchone()[0])
        a.leases.open(conn, turn_id="turn-a", session_id="session-x", base=head,
                      started_at=1.0, model="m", path="text")
        thread, b_done, failed = _in_thread(
            lambda: b.append("session-y", [MESSAGE], create="test"))
        if engine == "postgresql":
            assert b_done.wait(DEADLINE_S), "B waited for A's transaction on another session"
            assert not failed, failed
            assert b.exists("session-y")  # committed, A still open
        else:
            assert not b_done.wait(NOT_MEANWHILE_S)  # SQLite: one writer at a time
        a.append("session-x", [MESSAGE], guard=Guard(head))  # A chains: the tail's lock now
    thread.join(DEADLINE_S)
    assert b_done.is_set()
    assert not failed, failed
    assert [e.seq for e in a.events("session-x")] == [0, 1]
    assert [e.seq for e in a.events("session-y")] == [0]
    _verified(db_a, tmp_path)


def _waiting_on(url: str, key: str) -> bool:
    """Whether some backend waits for ``key``'s advisory lock (store/postgres.py)."""
    ident = lock_id(key) & 0xFFFF_FFFF_FFFF_FFFF
    with psycopg.connect(url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND objsubid = 1 AND classid::bigint = %s AND objid::bigint = %s",
            (ident >> 32, ident & 0xFFFF_FFFF)).fetchone()
    return bool(row and row[0])


def test_two_writers_on_one_session_still_serialize_and_the_second_conflicts(
    two_writers: tuple[str, Database, Database, str], tmp_path: Path,
) -> None:
    engine, db_a, db_b, url = two_writers
    a, b = SessionStore(db_a), SessionStore(db_b)
    a.append("session-x", [MESSAGE], create="test")
    with a.batch():
        a.append("session-x", [MESSAGE], guard=Guard(0))
        thread, b_done, failed = _in_thread(
            lambda: b.append("session-x", [MESSAGE], guard=Guard(0)))
        if engine == "postgresql":  # B waits on the session's key, seen in pg_locks
            waiting = threading.Event()
            for _ in range(int(DEADLINE_S / 0.05)):
                if _waiting_on(url, "session:session-x"):
                    waiting.set()
                    break
                if b_done.wait(0.05):
                    break
            assert waiting.is_set(), "B did not wait for the session's lock"
        else:
            assert not b_done.wait(NOT_MEANWHILE_S)
        assert not b_done.is_set()
    thread.join(DEADLINE_S)
    assert b_done.is_set()
    assert len(failed) == 1, failed
    assert isinstance(failed[0], SessionConflict), failed
    assert failed[0].code == "STORE_SESSION_CONFLICT"
    assert [e.seq for e in a.events("session-x")] == [0, 1]
    _verified(db_a, tmp_path)


AUDIT = "INSERT INTO audit (ts, kind, subject, details) VALUES (?,?,?,?)"


def test_log_rows_queued_around_a_transactions_own_records_are_all_chained(
    two_writers: tuple[str, Database, Database, str], tmp_path: Path,
) -> None:
    """Queued log rows are written at a transaction's start and by a read inside it; on
    PostgreSQL their entries wait for the transaction's writer (the chain lock after its
    keys), or join it at once when it exists: either way every row is chained."""
    _engine, db, _other, _url = two_writers
    db.append(AUDIT, (1.0, "before", None, "{}"), chain="log")
    with db.transaction() as conn:
        assert db.query_one("SELECT COUNT(*) FROM audit")[0] == 1  # type: ignore[index]
        chain.insert(conn, "record", AUDIT, (2.0, "record", None, "{}"), 2.0)
        db.append(AUDIT, (3.0, "after", None, "{}"), chain="log")
        assert db.query_one("SELECT COUNT(*) FROM audit")[0] == 3  # type: ignore[index]
    db.append(AUDIT, (4.0, "alone", None, "{}"), chain="log")
    db.flush()
    named: list[tuple[str, int]] = []  # what the entries name, in chain order
    for table, rowid, kind, body in db.query(
            "SELECT ref_table, ref_id, kind, body FROM chain ORDER BY seq"):
        if table is not None:
            named.append((str(table), int(rowid)))
        elif kind == chain.BATCH:  # a transaction's records share one entry
            named.extend((t, r) for t, r, _k, _d in chain.batch_members(body))
    rows = [int(r[0]) for r in db.query("SELECT rowid FROM audit ORDER BY rowid")]
    assert len(rows) == 4
    assert named == [("audit", rowid) for rowid in rows]
    _verified(db, tmp_path)


SESSION = ("INSERT OR IGNORE INTO sessions (id, created_at, source, forked_from, fork_at)"
           " VALUES (?,?,?,?,?)")


def test_records_whose_rowid_nobody_reads_are_chained_in_order_with_no_round_trip_each(
    two_writers: tuple[str, Database, Database, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """chain.insert_later: on PostgreSQL the INSERTs go on the transaction's pipeline and
    their rowids come back together, before its entry is made (one round trip for all,
    then the commit's); on SQLite it is chain.insert. Either way every row is named by the
    chain in the order written, between rows chained at once and queued log rows, and an
    INSERT OR IGNORE that inserted nothing is not chained."""
    engine, db, _other, _url = two_writers
    trips: list[int] = []
    if engine == "postgresql":
        sync = db._conn._sync  # type: ignore[attr-defined]

        def counted() -> None:
            trips.append(1)
            sync()
        monkeypatch.setattr(db._conn, "_sync", counted)
    db.append(AUDIT, (1.0, "queued", None, "{}"), chain="log")
    with db.transaction() as conn:
        db.hold("key")
        assert db.query_one("SELECT COUNT(*) FROM audit")[0] == 1  # type: ignore[index]
        read = len(trips)
        for n in (2, 3, 4):
            chain.insert_later(conn, "later", AUDIT, (float(n), "later", None, "{}"), 5.0)
        chain.insert_later(conn, "session", SESSION, ("s-1", 5.0, "test", None, None), 5.0)
        chain.insert_later(conn, "session", SESSION, ("s-1", 5.0, "test", None, None), 5.0)
        assert len(trips) == read  # the INSERTs made no round trip
    if engine == "postgresql":
        assert len(trips) == read + 1  # their rowids with the chain's tail (then the commit)
    with db.transaction() as conn:
        assert chain.insert(conn, "now", AUDIT, (6.0, "now", None, "{}"), 6.0)
        chain.insert_later(conn, "later", AUDIT, (7.0, "later", None, "{}"), 7.0)
        assert chain.insert(conn, "now", AUDIT, (8.0, "now", None, "{}"), 8.0)
    named: list[tuple[str, int]] = []
    for table, rowid, kind, body in db.query(
            "SELECT ref_table, ref_id, kind, body FROM chain ORDER BY seq"):
        if table is not None:
            named.append((str(table), int(rowid)))
        elif kind == chain.BATCH:
            named.extend((t, r) for t, r, _k, _d in chain.batch_members(body))
    audit = [("audit", int(r[0])) for r in db.query("SELECT rowid FROM audit ORDER BY rowid")]
    sessions = [("sessions", int(r[0])) for r in db.query("SELECT rowid FROM sessions")]
    assert len(audit) == 7
    assert len(sessions) == 1
    assert named == [*audit[:4], *sessions, *audit[4:]]
    _verified(db, tmp_path)


def test_a_writer_waiting_for_the_chains_lock_chains_after_what_its_holder_committed(
    two_writers: tuple[str, Database, Database, str], tmp_path: Path,
) -> None:
    """On PostgreSQL the chain's lock, its tail and its newest checkpoint are one statement
    (store/postgres.py: eyes_chain_head); the reads after the lock must still see what the
    lock's last holder committed, or B's entry would name A's predecessor (a fork of the
    chain, or a taken seq)."""
    engine, db_a, db_b, url = two_writers
    db_a.append(AUDIT, (1.0, "first", None, "{}"), chain="log")
    db_a.flush()
    with db_a.transaction() as conn:
        assert chain.insert(conn, "a", AUDIT, (2.0, "a", None, "{}"), 2.0)
        # A's rowid came back with the chain's lock and tail: A holds the lock.
        thread, b_done, failed = _in_thread(
            lambda: db_b.execute(AUDIT, (3.0, "b", None, "{}"), chain="b"))
        if engine == "postgresql":
            for _ in range(int(DEADLINE_S / 0.05)):
                if _waiting_on(url, "chain") or b_done.wait(0.05):
                    break
            assert _waiting_on(url, "chain"), "B did not wait for the chain's lock"
        else:
            assert not b_done.wait(NOT_MEANWHILE_S)
        assert not b_done.is_set()
    thread.join(DEADLINE_S)
    assert b_done.is_set()
    assert not failed, failed
    kinds = [str(r[0]) for r in db_a.query("SELECT kind FROM chain ORDER BY seq")]
    assert kinds[-2:] == ["a", "b"]
    _verified(db_a, tmp_path)
