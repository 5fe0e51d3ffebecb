from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from deepseek_eyes.errors import StoreError
from deepseek_eyes.store.db import MIGRATIONS, Database
from helpers import raw_store


@pytest.mark.sqlite_only
def test_migrates_to_latest_in_wal_mode(tmp_path: Path) -> None:
    db = Database(tmp_path / "eyes.db")
    assert db.schema_version == len(MIGRATIONS)
    mode = db.query_one("PRAGMA journal_mode")
    assert mode is not None
    assert mode[0] == "wal"
    tables = {r["name"] for r in db.query("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"images", "evidence", "attempts", "audit", "usage", "route_state"} <= tables
    db.close()
    # Reopening applies nothing twice.
    assert Database(tmp_path / "eyes.db").schema_version == len(MIGRATIONS)


@pytest.mark.sqlite_only
def test_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "eyes.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        Database(path)


def test_evidence_rows_cannot_be_updated(tmp_path: Path) -> None:
    db = Database(tmp_path / "eyes.db")
    db.execute(
        "INSERT INTO evidence VALUES ('k','p','r','v',NULL,'h','{}',0)",
    )
    with pytest.raises(StoreError, match="immutable"):
        db.execute("UPDATE evidence SET record = '{\"x\":1}' WHERE key = 'k'")


def test_transaction_rolls_back(tmp_path: Path) -> None:
    db = Database(tmp_path / "eyes.db")

    def write_then_fail() -> None:
        with db.transaction() as conn:
            conn.execute("INSERT INTO audit (ts, kind, details) VALUES (0, 'x', '{}')")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_then_fail()
    assert db.query("SELECT * FROM audit") == []


@pytest.mark.sqlite_only
def test_a_write_the_database_refuses_inside_a_transaction_is_store_write_failed(
        tmp_path: Path) -> None:
    """As every other write says it: a caller (a turn's last commit) catches our error, not
    sqlite3's; inner blocks are part of the outer one, and all of it is rolled back."""
    db = Database(tmp_path / "eyes.db")
    db.execute("CREATE TRIGGER refuse BEFORE INSERT ON audit WHEN NEW.kind = 'no' "
               "BEGIN SELECT RAISE(ABORT, 'refused'); END")

    def write_then_be_refused() -> None:
        with db.transaction() as conn:
            conn.execute("INSERT INTO audit (ts, kind, details) VALUES (0, 'yes', '{}')")
            with db.transaction() as inner:
                inner.execute("INSERT INTO audit (ts, kind, details) VALUES (0, 'no', '{}')")

    with pytest.raises(StoreError) as info:
        write_then_be_refused()
    assert info.value.code == "STORE_WRITE_FAILED"
    assert isinstance(info.value.__cause__, sqlite3.IntegrityError)
    assert db.query("SELECT * FROM audit") == []
    db.execute("INSERT INTO audit (ts, kind, details) VALUES (0, 'after', '{}')")
    assert len(db.query("SELECT * FROM audit")) == 1


def test_a_queued_row_the_database_refuses_is_dropped_with_the_write_it_preceded(
        tmp_path: Path) -> None:
    """Rows queued before a write transaction are written at its start (on PostgreSQL
    without waiting for their results). One the database refuses for what it holds fails
    that write and is dropped, not queued again to fail every later one; a row queued with
    it in the same batch goes with it, as any failed batch does."""
    db = Database(tmp_path / "eyes.db")
    sql = "INSERT INTO audit (ts, kind, details) VALUES (?, ?, '{}')"
    db.append(sql, (1.0, "fine"), chain="test.fine")
    db.append(sql, (None, "refused"), chain="test.refused")  # ts is NOT NULL
    with pytest.raises(StoreError) as info, db.transaction() as conn:
        conn.execute(sql, (2.0, "mine"))
    assert info.value.code == "STORE_WRITE_FAILED"
    assert isinstance(info.value.__cause__, sqlite3.IntegrityError)
    with db.transaction() as conn:
        conn.execute(sql, (3.0, "after"))
    assert [r[0] for r in db.query("SELECT kind FROM audit ORDER BY ts")] == ["after"]
    db.close()


def test_appended_rows_are_batched_but_always_visible(tmp_path: Path) -> None:
    db = Database(tmp_path / "eyes.db")
    db.append("INSERT INTO audit (ts, kind, details) VALUES (1, 'a', '{}')")
    # Not yet written: another connection sees nothing.
    other = raw_store(tmp_path / "eyes.db")
    assert other.execute("SELECT COUNT(*) FROM audit").fetchone()[0] == 0
    # A query through this object flushes first.
    assert len(db.query("SELECT * FROM audit")) == 1
    for i in range(64):
        db.append("INSERT INTO audit (ts, kind, details) VALUES (?, 'b', '{}')", (i,))
    assert other.execute("SELECT COUNT(*) FROM audit").fetchone()[0] == 65  # batch of 64
    db.append("INSERT INTO audit (ts, kind, details) VALUES (2, 'c', '{}')")
    db.close()  # close flushes
    assert other.execute("SELECT COUNT(*) FROM audit").fetchone()[0] == 66
    other.close()


def test_a_row_appended_later_is_made_when_written_in_its_place_in_the_queue(
        tmp_path: Path) -> None:
    """append_later queues the row as append does; only its parameters are made later,
    once, by the flush that writes it (rows queued around it keep their order)."""
    db = Database(tmp_path / "eyes.db")
    sql = "INSERT INTO audit (ts, kind, details) VALUES (?, ?, ?)"
    made: list[str] = []

    def build(ts: float, kind: str) -> tuple[float, str, str]:
        made.append(kind)
        return ts, kind, '{"made":true}'

    db.append(sql, (1.0, "before", "{}"), chain="test.row")
    db.append_later(sql, build, 2.0, "later", chain="test.row")
    db.append(sql, (3.0, "after", "{}"), chain="test.row")
    assert made == []  # queued, not made
    other = raw_store(tmp_path / "eyes.db")
    assert other.execute("SELECT COUNT(*) FROM audit").fetchone()[0] == 0
    rows = db.query("SELECT kind, details FROM audit ORDER BY id")  # flushes first
    assert [tuple(r) for r in rows] == [
        ("before", "{}"), ("later", '{"made":true}'), ("after", "{}")]
    assert made == ["later"]
    db.close()
    assert made == ["later"]  # made once
    other.close()


def test_rows_appended_later_count_toward_the_batch_and_its_age(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row appended later is as durable as an appended one: the 64th queued row flushes
    the batch, and one queued after the oldest has waited a second flushes it too."""
    from deepseek_eyes.store import db as db_module

    db = Database(tmp_path / "eyes.db")
    sql = "INSERT INTO audit (ts, kind, details) VALUES (?, 'later', '{}')"
    other = raw_store(tmp_path / "eyes.db")
    count = "SELECT COUNT(*) FROM audit"
    for i in range(db_module.APPEND_BATCH - 1):
        db.append_later(sql, lambda ts: (ts,), float(i), chain="test.row")
    assert other.execute(count).fetchone()[0] == 0
    db.append_later(sql, lambda ts: (ts,), 64.0, chain="test.row")
    assert other.execute(count).fetchone()[0] == db_module.APPEND_BATCH
    now = [1000.0]
    monkeypatch.setattr(db_module.time, "monotonic", lambda: now[0])
    db.append_later(sql, lambda ts: (ts,), 65.0, chain="test.row")
    assert other.execute(count).fetchone()[0] == db_module.APPEND_BATCH
    now[0] += db_module.APPEND_MAX_AGE_S
    db.append_later(sql, lambda ts: (ts,), 66.0, chain="test.row")
    assert other.execute(count).fetchone()[0] == db_module.APPEND_BATCH + 2
    db.close()
    other.close()


def test_a_row_appended_later_outlives_a_rolled_back_write(tmp_path: Path) -> None:
    """Queued before a write transaction that rolls back, the row is queued again (made, as
    the rolled-back write left it) and written by the next one."""
    db = Database(tmp_path / "eyes.db")
    sql = "INSERT INTO audit (ts, kind, details) VALUES (?, ?, '{}')"
    made: list[str] = []

    def build(ts: float, kind: str) -> tuple[float, str]:
        made.append(kind)
        return ts, kind

    def write_then_fail() -> None:
        with db.transaction() as conn:
            conn.execute(sql, (2.0, "mine"))
            raise RuntimeError("the block failed")

    db.append_later(sql, build, 1.0, "later", chain="test.row")
    with pytest.raises(RuntimeError):
        write_then_fail()
    assert [r[0] for r in db.query("SELECT kind FROM audit ORDER BY id")] == ["later"]
    assert made == ["later"]
    db.close()


def test_hooks_after_a_commit_run_once_it_committed_and_never_after_a_rollback(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """What a caller may know only of committed rows (store/events.py) is told after the
    outermost commit, in order; a rolled-back transaction's hooks never run; a hook that
    raises is logged and the write stays committed; outside a transaction it is refused."""
    db = Database(tmp_path / "eyes.db")
    ran: list[str] = []
    with db.transaction():
        db.after_commit(lambda: ran.append("first"))
        with db.transaction():  # part of the outer one: its hook waits for that commit
            db.after_commit(lambda: ran.append("inner"))
        assert ran == []
    assert ran == ["first", "inner"]

    def failing() -> None:
        with db.transaction():
            db.after_commit(lambda: ran.append("rolled back"))
            raise RuntimeError("the block fails")

    with pytest.raises(RuntimeError):
        failing()
    with db.transaction():
        pass
    assert ran == ["first", "inner"]

    def broken() -> None:
        raise ValueError("a broken hook")

    with db.transaction() as conn:
        conn.execute("INSERT INTO audit (ts, kind, subject, details) VALUES (?,?,?,?)",
                     (1.0, "test.kept", "s", "{}"))
        db.after_commit(broken)
        db.after_commit(lambda: ran.append("after the broken one"))
    assert ran[-1] == "after the broken one"
    assert "a hook after a commit failed" in caplog.text
    assert db.query_one("SELECT COUNT(*) FROM audit WHERE kind = 'test.kept'")[0] == 1  # type: ignore[index]
    with pytest.raises(RuntimeError):
        db.after_commit(lambda: None)
    db.close()
