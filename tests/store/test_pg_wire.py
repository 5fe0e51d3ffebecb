"""The store's PostgreSQL wire (store/pg_wire.py): statements pipelined straight over
libpq, with psycopg's adapters, errors and prepared statements, and waits that leave the
interpreter free."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import psycopg
import pytest

from deepseek_eyes.store import pg_wire
from deepseek_eyes.store.db import Database

KV = "INSERT INTO kv (k, v) VALUES (?,?)"


@pytest.fixture
def conn(postgres_url: str) -> psycopg.Connection:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("CREATE TABLE t (id BIGSERIAL PRIMARY KEY, a TEXT NOT NULL,"
                           " b BIGINT, c DOUBLE PRECISION, d BYTEA)")
        yield connection


def _prepared(conn: psycopg.Connection) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT statement FROM pg_prepared_statements WHERE name LIKE 'eyes_%'").fetchall()]


def test_a_pipeline_runs_statements_in_order_and_reads_rows_with_psycopgs_types(
        conn: psycopg.Connection) -> None:
    pipe = pg_wire.Pipeline(conn)
    pipe.send("BEGIN", None)
    first = pipe.send("INSERT INTO t (a, b, c, d) VALUES (%s, %s, %s, %s) RETURNING id",
                      ("x%y", 7, 1.5, b"\x00\xff"))
    second = pipe.send("INSERT INTO t (a) VALUES (%(p1)s) RETURNING id", {"p1": "z"})
    read = pipe.send("SELECT a, b, c, d FROM t WHERE a LIKE '%%' ORDER BY id", ())
    pipe.send("COMMIT", None)
    assert first.result is None  # nothing read before the round trip
    pipe.close()
    assert first.rows()[1] == [(1,)]
    assert second.rows()[1] == [(2,)]
    names, rows, count = read.rows()
    assert names == ["a", "b", "c", "d"]
    assert count == 2
    assert rows == [("x%y", 7, 1.5, b"\x00\xff"), ("z", None, None, None)]
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_the_first_failure_is_psycopgs_error_and_what_followed_did_not_run(
        conn: psycopg.Connection) -> None:
    pipe = pg_wire.Pipeline(conn)
    pipe.send("BEGIN", None)
    ok = pipe.send("INSERT INTO t (a) VALUES (%s) RETURNING id", ("kept?",))
    bad = pipe.send("INSERT INTO t (a) VALUES (%s)", (None,))  # NOT NULL
    after = pipe.send("SELECT 1", ())
    with pytest.raises(psycopg.errors.NotNullViolation) as caught:
        pipe.sync()
    assert caught.value.sqlstate == "23502"
    assert ok.result is not None
    assert bad.result is None
    assert after.result is None
    pipe.abandon()
    conn.execute("ROLLBACK")
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
    # The connection is usable again, in and out of pipeline mode.
    assert pg_wire.run(conn, "SELECT %s::int + 1", (41,)).rows()[1] == [(42,)]


def test_a_statement_is_prepared_on_its_second_use_and_a_bad_one_never_is(
        conn: psycopg.Connection) -> None:
    sql = "SELECT count(*) FROM t WHERE a = %s"
    pg_wire.run(conn, sql, ("a",))
    assert _prepared(conn) == []
    for _ in range(3):
        assert pg_wire.run(conn, sql, ("a",)).rows()[1] == [(0,)]
    assert _prepared(conn) == ["SELECT count(*) FROM t WHERE a = $1"]
    broken = "SELECT nope FROM t WHERE a = %s"
    for _ in range(3):  # fails at its prepare too: not kept as prepared, fails the same
        with pytest.raises(psycopg.errors.UndefinedColumn):
            pg_wire.run(conn, broken, ("a",))
    assert len(_prepared(conn)) == 1
    with pytest.raises(psycopg.ProgrammingError, match="2 placeholders but 1"):
        pg_wire.run(conn, "SELECT %s, %s", ("only one",))


def test_a_large_parameter_goes_out_whole(conn: psycopg.Connection) -> None:
    blob = bytes(range(256)) * 16384  # 4 MiB: more than the socket takes at once
    slot = pg_wire.run(conn, "INSERT INTO t (a, d) VALUES (%s, %s) RETURNING length(d)",
                       ("big", blob))
    assert slot.rows()[1] == [(len(blob),)]
    assert conn.execute("SELECT d FROM t").fetchone()[0] == blob


def test_a_wait_on_the_server_leaves_other_threads_running(postgres_url: str,
                                                           conn: psycopg.Connection) -> None:
    """A statement that waits (here on an advisory lock another session holds) waits in
    poll, not inside libpq with the interpreter held: the process's other threads run."""
    with psycopg.connect(postgres_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(4242)")
        done = threading.Event()

        def wait_for_lock() -> None:
            pg_wire.run(conn, "SELECT pg_advisory_lock(%s)", (4242,))
            done.set()

        waiter = threading.Thread(target=wait_for_lock)
        waiter.start()
        ticks = 0
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:  # the interpreter is ours meanwhile
            ticks += 1
            time.sleep(0.001)
        assert not done.is_set()
        assert ticks >= 10  # a held interpreter allows none (the lock is never released)
        holder.execute("SELECT pg_advisory_unlock(4242)")
        waiter.join(timeout=10)
        assert done.is_set()


def test_the_store_connection_reads_rows_through_the_wire(postgres_url: str,
                                                          tmp_path: Path) -> None:
    """PgConnection's results come from the wire: a row by name and index, a rowcount, a
    lastrowid, a failure as sqlite3's error of the same meaning (and the transaction it
    failed rolled back whole)."""
    db = Database(tmp_path / "eyes.db", url=postgres_url)
    try:
        store = db._conn
        store.raw("CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
        store.execute("BEGIN IMMEDIATE")
        first = store.execute(KV, ("s-1", "alice"))
        store.execute(KV, ("s-2", "bob"))
        store.execute("COMMIT")
        assert first.rowcount == 1
        row = store.execute("SELECT k, v FROM kv WHERE v = ?", ("bob",)).fetchone()
        assert (row["k"], row[1]) == ("s-2", "bob")
        assert store.execute("SELECT count(*) FROM kv").fetchone()[0] == 2
        with pytest.raises(sqlite3.IntegrityError):
            store.execute(KV, ("s-1", "again"))
        store.execute("BEGIN IMMEDIATE")
        store.execute(KV, ("s-3", "carol"))
        doomed = store.execute(KV, ("s-1", "dup"))
        with pytest.raises(sqlite3.IntegrityError):
            _ = doomed.rowcount
        store.execute("ROLLBACK")
        assert [r[0] for r in store.execute("SELECT k FROM kv ORDER BY k").fetchall()] == [
            "s-1", "s-2"]
    finally:
        db.close()


def test_a_round_trip_cut_off_mid_way_leaves_no_connection_to_lend(
        conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    """Interrupted while waiting for its results (a signal, a lost link), a pipeline's
    connection holds replies nobody will read: it is closed, never given to the next
    transaction in that state."""
    pipe = pg_wire.Pipeline(conn)
    pipe.send("BEGIN", None)
    pipe.send("SELECT pg_sleep(0.05)", ())

    def interrupted(self: pg_wire.Pipeline, events: int) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(pg_wire.Pipeline, "_wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pipe.sync()
    monkeypatch.undo()
    pipe.abandon()
    assert conn.closed
