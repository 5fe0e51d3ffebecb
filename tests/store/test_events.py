from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from deepseek_eyes.errors import StoreError
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.events import (
    Guard,
    Held,
    SessionConflict,
    SessionStore,
    TurnRecord,
    body_digest,
)
from helpers import raw_store


def test_events_are_append_only_and_ordered(tmp_path: Path) -> None:
    db = Database(tmp_path / "eyes.db")
    store = SessionStore(db)
    assert store.ensure("s1", "cli") is True
    assert store.ensure("s1", "cli") is False
    first = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    second = {"role": "assistant", "content": "hello"}
    assert store.append("s1", [first, second], turn_id="t1") == [0, 1]
    assert store.append("s1", [{"role": "user", "content": "again"}]) == [2]
    events = store.events("s1")
    assert [e.seq for e in events] == [0, 1, 2]
    assert events[0].message == first
    assert events[0].body_sha256 == body_digest(first)
    assert events[1].turn_id == "t1"
    for statement in ("UPDATE events SET body = '{}'", "DELETE FROM events"):
        with pytest.raises(StoreError, match="append-only"):
            db.execute(statement)
    raw = raw_store(tmp_path / "eyes.db")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        raw.execute("UPDATE events SET role = 'system'")
    raw.close()


def test_session_ids_are_validated(tmp_path: Path) -> None:
    store = SessionStore(Database(tmp_path / "eyes.db"))
    for bad in ("", "../x", "a b", "x" * 129, "ünï"):
        with pytest.raises(StoreError) as info:
            store.ensure(bad, "gateway")
        assert info.value.code == "STORE_SESSION_INVALID"


def test_sessions_listing_and_turns(tmp_path: Path) -> None:
    clock = iter(range(100, 200))
    store = SessionStore(Database(tmp_path / "eyes.db"), clock=lambda: float(next(clock)))
    store.ensure("old", "cli")
    store.append("old", [{"role": "user", "content": "a"}])
    store.ensure("new", "gateway")
    store.append("new", [{"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}])
    listing = store.sessions()
    assert [row["id"] for row in listing] == ["new", "old"]
    assert listing[0]["events"] == 2
    store.record_turn(TurnRecord("t", "new", 1.0, 2.0, "m", "text", "ok", None, {"k": 1}))
    (turn,) = store.turns("new")
    assert turn.details == {"k": 1}
    assert turn.path == "text"


@pytest.mark.sqlite_only
def test_unkept_messages_keep_their_hash_and_role_only(tmp_path: Path) -> None:
    """``unkept=True`` (a ``store: false`` request): the row holds the real message's hash
    and its role, never its content, and indexes no call ids (nothing restores from it)."""
    db = Database(tmp_path / "eyes.db")
    store = SessionStore(db)
    said = {"role": "user", "content": "secret words"}
    called = {"role": "assistant", "content": "", "reasoning_content": "secret thought",
              "tool_calls": [{"id": "call_unkept", "type": "function",
                              "function": {"name": "f", "arguments": "{}"}}]}
    assert store.append("s1", [said, called], create="gateway", scope="k",
                        unkept=True) == [0, 1]
    events = store.events("s1")
    assert [e.message for e in events] == [{"role": "user", "unkept": True},
                                           {"role": "assistant", "unkept": True}]
    assert [e.body_sha256 for e in events] == [body_digest(said), body_digest(called)]
    assert store.issued_calls(["call_unkept"], scope="k") == {}
    assert store.body_hashes("s1") == ([body_digest(said), body_digest(called)], 1, "k")
    assert store.body_hashes("none") == ([], -1, None)
    raw = (tmp_path / "eyes.db").read_bytes() + b"".join(
        p.read_bytes() for p in tmp_path.glob("eyes.db-*"))
    assert b"secret" not in raw
    # A kept message beside them is kept as ever; its row stores body_sha256 empty (the
    # hash of the body it holds), the unkept ones their real hash; all read the same.
    store.append("s1", [said])
    assert store.events("s1")[-1].message == said
    assert [r[0] for r in db.query("SELECT body_sha256 FROM events ORDER BY seq")] == \
        [body_digest(said), body_digest(called), ""]
    assert store.events("s1")[-1].body_sha256 == body_digest(said)
    assert store.body_hashes("s1")[0] == [body_digest(said), body_digest(called),
                                          body_digest(said)]


def test_a_minted_session_is_created_with_its_messages_and_a_taken_id_fails_whole(
        tmp_path: Path) -> None:
    """``minted``: the id was just made, so its row is not asked whether it was inserted
    (on PostgreSQL, no round trip); an id someone holds fails the transaction, writing
    nothing, instead of appending to that session."""
    db = Database(tmp_path / "eyes.db")
    store = SessionStore(db)
    message = {"role": "user", "content": "hi"}
    minted = store.new_id()
    assert store.append(minted, [message], create="gateway", scope="key:a", minted=True) == [0]
    assert store.scope_of(minted) == "key:a"
    assert [e.message for e in store.events(minted)] == [message]
    with pytest.raises(StoreError) as info:
        store.append(minted, [message, message], create="gateway", scope="key:b",
                     minted=True)
    assert info.value.code == "STORE_WRITE_FAILED"
    assert [e.seq for e in store.events(minted)] == [0]
    assert store.scope_of(minted) == "key:a"
    assert db.query_one("SELECT COUNT(*) FROM sessions")[0] == 1  # type: ignore[index]


def test_the_turns_that_superseded_an_attempt_are_read_by_their_index(tmp_path: Path) -> None:
    """A session's snapshot asks for its retried turns on every turn; with hundreds of
    turns only the one that names a ``retry_of`` is read (the partial index of migration
    15, whose condition is the read's own), and it still hides the superseded attempt."""
    from deepseek_eyes.store.events import _RETRIED

    db = Database(tmp_path / "eyes.db", url="")
    store = SessionStore(db)
    store.append("s", [{"role": "user", "content": "q"}], create="test", scope="gateway:k")
    with store.batch():
        for n in range(400):
            store.record_turn(TurnRecord(f"t{n}", "s", float(n), float(n), "m", "text", "ok",
                                         None, {"base": 0}))
    store.append("s", [{"role": "assistant", "content": "first try"}], turn_id="t400")
    store.record_turn(TurnRecord("t400", "s", 400.0, 400.5, "m", "text", "error", "X",
                                 {"base": 0}))
    store.append("s", [{"role": "assistant", "content": "second try"}], turn_id="t401")
    store.record_turn(TurnRecord("t401", "s", 401.0, 401.5, "m", "text", "ok", None,
                                 {"base": 0, "retry_of": "t400"}))
    plan = " ".join(str(tuple(row)) for row in db.query("EXPLAIN QUERY PLAN " + _RETRIED,
                                                        ("s",)))
    assert "turns_retried" in plan, plan
    snap = store.snapshot("s")
    assert [e.message["content"] for e in snap.events] == ["q", "second try"]
    db.close()


def test_a_snapshot_orders_the_events_it_read_by_seq(tmp_path: Path) -> None:
    """On PostgreSQL a snapshot's reads are branches of one UNION, which promises no order
    of rows: the events read are put in seq order (and the head is the last one's) however
    they came."""
    store = SessionStore(Database(tmp_path / "eyes.db", url=""))
    rows = [("s", seq, 1.0, "user", None, "h", f'{{"role":"user","content":"m{seq}"}}')
            for seq in (2, 0, 1)]
    snap = store._snapshot("s", [], [rows, [], [], [], [("s", "gateway:k")]])
    assert [e.seq for e in snap.events] == [0, 1, 2]
    assert [e.message["content"] for e in snap.events] == ["m0", "m1", "m2"]
    assert snap.head == 2


def _answered(store: SessionStore, session: str = "s") -> None:
    """A turn of ``store`` on ``session`` as the runtime writes it: its request (a user
    message creating the session in scope ``gateway:k``, and its lease), then its answer
    with its record; and the history noted after it (``h1``, two messages)."""
    store.append(session, [{"role": "user", "content": "q"}], create="test", scope="gateway:k")
    _lease(store, "t1", session)
    store.append(session, [{"role": "assistant", "content": "a"}], turn_id="t1",
                 turn=TurnRecord("t1", session, 1.0, 2.0, "m", "text", "ok", None,
                                 {"base": 0}), guard=Guard(0, 0))
    store.remember_prefix("gateway:k", "h1", session, 2)


def _lease(store: SessionStore, turn_id: str, session: str = "s") -> None:
    with store.batch() as conn:
        store.leases.open(conn, turn_id=turn_id, session_id=session, base=0,
                          started_at=1.0, model="m", path="text")


def _appended(store: SessionStore, content: str) -> None:
    store.append("s", [{"role": "user", "content": content}])


def _noted_elsewhere(store: SessionStore, prefix: str, length: int) -> None:
    store.append("elsewhere", [{"role": "user", "content": "e"}], create="test",
                 scope="gateway:k")
    store.remember_prefix("gateway:k", prefix, "elsewhere", length)


#: What another process's store may write after :func:`_answered` that a read of the
#: session, or the lookup of history ``h1``/``h2``, would see: each must fail an append
#: judged from what the store held before it (the lookup's scope is ``gateway:k``).
CHANGES: dict[str, Callable[[SessionStore], None]] = {
    "an event": lambda other: _appended(other, "x"),
    "a failed turn": lambda other: other.record_turn(TurnRecord(
        "t2", "s", 3.0, 3.5, "m", "text", "failed", "X", {"base": 1})),
    "a turn in flight": lambda other: _lease(other, "t2"),
    "a retry started earlier": lambda other: other.record_turn(TurnRecord(
        "t2", "s", 0.5, 4.0, "m", "text", "ok", None, {"base": 0, "retry_of": "t1"})),
    "a longer history noted elsewhere": lambda other: _noted_elsewhere(other, "h2", 3),
    "its history noted for another session": lambda other: _noted_elsewhere(other, "h1", 2),
}


@pytest.mark.parametrize("change", [None, *CHANGES])
def test_an_append_judged_from_a_held_session_checks_everything_it_was_judged_from(
        tmp_path: Path, change: str | None) -> None:
    """A turn judged from what the store held of its session (``Guard.held``: no read)
    appends only if a read would have judged it the same: its last event, its latest
    turn, no turn in flight, the same turns superseding an attempt and, for a stock
    client, the same session found for its history. Here the check is read under the
    session's lock before the rows (SQLite; PostgreSQL without ``expect``); anything
    changed is a conflict and nothing is written."""
    db = Database(tmp_path / "eyes.db")
    store, other = SessionStore(db), SessionStore(db)
    _answered(store)
    held = Held("t1", 0, ("gateway:k", ("h1", "h2")))
    if change is not None:
        CHANGES[change](other)
    before = [(e.seq, e.message["content"]) for e in store.events("s")]
    guard = Guard(1, held=held)
    if change is None:
        assert store.append("s", [{"role": "user", "content": "next"}], guard=guard,
                            scope="gateway:k") == [2]
        return
    with pytest.raises(SessionConflict):
        store.append("s", [{"role": "user", "content": "next"}], guard=guard,
                     scope="gateway:k")
    assert [(e.seq, e.message["content"]) for e in store.events("s")] == before
    db.close()


def test_nothing_is_held_on_sqlite(tmp_path: Path) -> None:
    """On SQLite a turn reads its session (a read there is no round trip): the store holds
    nothing to judge from, even after its own answer."""
    store = SessionStore(Database(tmp_path / "eyes.db", url=""))
    _answered(store)
    assert store.held("s", scope="gateway:k") is None
    assert store.held("s", scope="gateway:k", lookup=("gateway:k", ["h1", "h2"])) is None
