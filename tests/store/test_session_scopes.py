"""Sessions, reasoning and noted histories belong to a scope (store/scopes.py): the store's
own rules, on a real SQLite file, and migration 10 on a database an earlier version wrote."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from deepseek_eyes.store import scopes
from deepseek_eyes.store.db import MIGRATIONS, Database
from deepseek_eyes.store.events import SCOPES_MIGRATION, ForeignSession, SessionStore
from deepseek_eyes.vision.evidence.scopes import DEFAULT_ACQUIRED_MS, EvidenceScopes

ALICE = scopes.gateway("alice-key-0123456789abcdef")
BOB = scopes.gateway("bob-key-0123456789abcdef0")


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(Database(tmp_path / "eyes.db"))


def test_a_scope_names_a_key_by_an_id_never_the_key() -> None:
    assert ALICE.startswith("gateway:")
    assert "alice-key" not in ALICE
    assert ALICE != BOB
    assert scopes.gateway(None) == scopes.GATEWAY_OPEN
    assert scopes.vision(None) == scopes.CLI
    assert scopes.vision("t" * 40).startswith("vision:")
    assert scopes.label(ALICE) == ALICE[:20]
    assert scopes.label(scopes.CLI) == "cli"


def test_an_append_to_another_scopes_session_writes_nothing(store: SessionStore) -> None:
    store.append("s", [{"role": "user", "content": "mine"}], create="gateway", scope=ALICE)
    assert store.scope_of("s") == ALICE
    with pytest.raises(ForeignSession) as refused:
        store.append("s", [{"role": "user", "content": "theirs"}], scope=BOB)
    assert refused.value.code == "STORE_SESSION_FOREIGN"
    assert ALICE not in str(refused.value.to_dict())  # the owner is not named
    # Creating it again under the same id is no way in either.
    with pytest.raises(ForeignSession):
        store.append("s", [{"role": "user", "content": "theirs"}], create="gateway", scope=BOB)
    assert [m["content"] for m in store.messages("s")] == ["mine"]
    assert store.snapshot("s").scope == ALICE
    assert store.snapshot("nope").scope is None
    assert store.scope_of("nope") is None
    # ensure() and an unscoped create: the CLI's, and nobody's.
    assert store.ensure("c", "cli") is True
    assert store.scope_of("c") == scopes.CLI
    store.append("u", [], create="test")
    assert store.scope_of("u") == scopes.LEGACY


def test_issued_calls_and_noted_histories_are_found_only_in_their_scope(
    store: SessionStore,
) -> None:
    message = {"role": "assistant", "content": "", "reasoning": "alice's thoughts",
               "tool_calls": [{"id": "call_1", "name": "weather", "arguments": "{}"}]}
    store.append("a", [message], create="gateway", scope=ALICE)
    assert store.issued_calls(["call_1"], scope=ALICE)["call_1"][0]["reasoning"] == \
        "alice's thoughts"
    assert store.issued_calls(["call_1"], scope=BOB) == {}
    store.remember_prefix(ALICE, "h1", "a", 1)
    assert store.find_prefix(ALICE, ["h1"]) == "a"
    # A row noted under Bob's scope that names Alice's session (as a forged or older row
    # would) still does not lead there.
    store.remember_prefix(BOB, "h1", "a", 1)
    assert store.find_prefix(BOB, ["h1"]) is None


@pytest.mark.sqlite_only
def test_migration_10_gives_every_existing_session_a_scope(tmp_path: Path) -> None:
    path = tmp_path / "eyes.db"
    conn = sqlite3.connect(path)
    for script in MIGRATIONS[:SCOPES_MIGRATION - 1]:
        conn.executescript(script)
    key = "0123456789abcdef0123456789abcdef"  # a key id as version 9 stored it
    rows = [("cli-1", "cli"), ("chat-1", "chat"), ("gw-one", "gateway"),
            ("gw-two", "gateway"), ("gw-none", "gateway"), ("other", "test")]
    conn.executemany("INSERT INTO sessions (id, created_at, source) VALUES (?,0,?)", rows)
    conn.executemany(
        "INSERT INTO session_prefixes (scope, prefix_sha256, session_id, length, ts)"
        " VALUES (?,?,?,1,0)",
        [(key, "p1", "gw-one"), (key, "p2", "gw-one"), (key, "p3", "gw-two"),
         ("open", "p4", "gw-two")])
    conn.execute("INSERT INTO idempotency_keys (scope, key_sha256, request_sha256, state,"
                 " owner, created_at) VALUES (?, 'k', 'r', 'done', '', 0)", (key,))
    conn.execute(f"PRAGMA user_version = {SCOPES_MIGRATION - 1}")
    conn.commit()
    conn.close()
    db = Database(path)
    try:
        store = SessionStore(db)
        owners = {sid: store.scope_of(sid) for sid, _ in rows}
        assert owners == {"cli-1": "cli", "chat-1": "cli", "gw-one": f"gateway:{key}",
                          "gw-two": "legacy", "gw-none": "legacy", "other": "legacy"}
        # The key's scope is spelled as the gateway spells it now: its history still leads
        # to its session, and its idempotency key is still its own.
        assert store.find_prefix(f"gateway:{key}", ["p2"]) == "gw-one"
        assert db.query_one("SELECT scope FROM idempotency_keys")["scope"] == f"gateway:{key}"
        listed = {row["id"]: row["scope"] for row in store.sessions()}
        assert listed == owners
    finally:
        db.close()


def test_evidence_is_new_to_each_scope_once(tmp_path: Path) -> None:
    seen = EvidenceScopes(Database(tmp_path / "eyes.db"), clock=lambda: 1.0)
    fresh = seen.note(ALICE, "r1", acquired_ms=420.0)
    assert fresh.before is False
    assert seen.note(ALICE, "r1", acquired_ms=None).before is True
    first = seen.note(BOB, "r1", acquired_ms=None)
    assert (first.before, first.acquired_ms) == (False, 420.0)  # padded to Alice's time
    assert seen.note(BOB, "r1", acquired_ms=None).before is True
    # A record nobody noted the time of (acquired before scopes): the default pad.
    assert seen.note(BOB, "r-old", acquired_ms=None).acquired_ms == DEFAULT_ACQUIRED_MS


@pytest.mark.sqlite_only
def test_a_repeated_showing_asks_the_database_nothing(tmp_path: Path) -> None:
    """A pair this process read or wrote is remembered: the hit repeated most runs no
    statement (a read would also flush the queued log rows: a write per hit). Another
    process's view (a new EvidenceScopes on the same file) still reads the row."""
    db = Database(tmp_path / "eyes.db")
    try:
        EvidenceScopes(db, clock=lambda: 1.0).note(ALICE, "r1", acquired_ms=420.0)
        seen = EvidenceScopes(db, clock=lambda: 1.0)
        statements: list[str] = []
        db._conn.set_trace_callback(statements.append)
        assert seen.note(ALICE, "r1", acquired_ms=None).before is True  # read from the row
        assert statements
        statements.clear()
        assert seen.note(ALICE, "r1", acquired_ms=None).before is True
        assert statements == []
        assert seen.note(BOB, "r1", acquired_ms=None).before is False  # not Alice's memory
        assert statements
    finally:
        db._conn.set_trace_callback(None)
        db.close()


def test_the_session_a_lookup_is_expected_to_find_is_read_with_it(
    store: SessionStore,
) -> None:
    """A stock client's continued history is looked up with the snapshot of the session
    this process noted it for: that snapshot when the lookup finds that session, nothing
    of a session it did not find (another's guess, another scope)."""
    store.append("a", [{"role": "user", "content": "one"}], create="gateway", scope=ALICE)
    store.append("b", [{"role": "user", "content": "two"}], create="gateway", scope=BOB)
    store.remember_prefix(ALICE, "h1", "a", 1)
    found, snap = store.find_with_snapshot(ALICE, ["h1", "h2"], "a")
    assert found == "a"
    assert snap is not None
    assert ([e.message["content"] for e in snap.events], snap.head, snap.scope) == \
        (["one"], 0, ALICE)
    assert store.find_with_snapshot(ALICE, ["h1"], "b") == ("a", None)
    assert store.find_with_snapshot(BOB, ["h1"], "b") == (None, None)
    assert store.find_with_snapshot(ALICE, [], "a") == (None, None)
