"""Compare-and-set appends, leases, superseded attempts and the process-liveness rule."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepseek_eyes.store.db import Database
from deepseek_eyes.store.events import Guard, SessionConflict, SessionStore, TurnRecord
from deepseek_eyes.store.owner import alive, owner
from helpers import fresh_database


def _record(turn_id: str, session: str, *, base: int, outcome: str = "ok",
            retry_of: str | None = None) -> TurnRecord:
    details: dict[str, object] = {"base": base}
    if retry_of is not None:
        details["retry_of"] = retry_of
    return TurnRecord(turn_id, session, time.time(), time.time(), "m", "text", outcome, None,
                      details)


def test_a_guarded_append_fails_when_another_turn_appended_first(tmp_path: Path) -> None:
    store = SessionStore(Database(tmp_path / "eyes.db"))
    store.append("s", [{"role": "user", "content": "a"}], create="test")
    snap = store.snapshot("s")
    assert snap.head == 0
    # Two turns read head 0; the first to append wins, the second is refused, unwritten.
    assert store.append("s", [{"role": "user", "content": "b"}], guard=Guard(snap.head)) == [1]
    with pytest.raises(SessionConflict) as lost:
        store.append("s", [{"role": "user", "content": "c"}], guard=Guard(snap.head))
    assert lost.value.code == "STORE_SESSION_CONFLICT"
    assert lost.value.details["head"] == 1
    assert [m["content"] for m in store.messages("s")] == ["a", "b"]
    # A guard with no messages checks too (a retry logs nothing, and must still lose).
    with pytest.raises(SessionConflict):
        store.append("s", [], guard=Guard(0))


def test_attempts_of_one_turn_append_beside_each_other(tmp_path: Path) -> None:
    db = Database(tmp_path / "eyes.db")
    store = SessionStore(db)
    (base,) = store.append("s", [{"role": "user", "content": "q"}], create="test")
    for turn in ("t1", "t2"):  # two attempts of the turn that started at ``base``
        with store.batch() as conn:
            store.leases.open(conn, turn_id=turn, session_id="s", base=base,
                              started_at=time.time(), model="m", path="text")
    store.append("s", [{"role": "assistant", "content": "one"}], turn_id="t1",
                 guard=Guard(base, base), turn=_record("t1", "s", base=base))
    # t2 read head == base too; t1's answer is another attempt's, not a conflict.
    store.append("s", [{"role": "assistant", "content": "two"}], turn_id="t2",
                 guard=Guard(base, base), turn=_record("t2", "s", base=base, retry_of="t1"))
    assert store.leases.held("s") == []
    # The later attempt supersedes the earlier one in what a client and the model see.
    assert [m["content"] for m in store.messages("s")] == ["q", "two"]
    assert [e.turn_id for e in store.events("s")] == [None, "t1", "t2"]
    # A client message appended since is a conflict even for the same base.
    store.append("s", [{"role": "user", "content": "next"}])
    with pytest.raises(SessionConflict):
        store.append("s", [{"role": "assistant", "content": "late"}], turn_id="t3",
                     guard=Guard(2, base))


def test_a_failed_attempt_supersedes_nothing(tmp_path: Path) -> None:
    store = SessionStore(Database(tmp_path / "eyes.db"))
    (base,) = store.append("s", [{"role": "user", "content": "q"}], create="test")
    store.append("s", [{"role": "assistant", "content": "one"}], turn_id="t1",
                 turn=_record("t1", "s", base=base))
    store.record_turn(_record("t2", "s", base=base, outcome="failed", retry_of="t1"))
    assert [m["content"] for m in store.messages("s")] == ["q", "one"]
    latest = store.snapshot("s").latest
    assert latest is not None
    assert (latest.id, latest.base, latest.running) == ("t2", base, False)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=12))
def test_every_interleaving_of_stale_writers_keeps_one_ordered_log(
    tmp_path_factory: pytest.TempPathFactory, order: list[int],
) -> None:
    """Writers that read the session, then append guarded by what they read, in any order:
    every append that succeeds saw the head it wrote after; nothing is ever interleaved."""
    with fresh_database():
        store = SessionStore(Database(tmp_path_factory.mktemp("cas") / "eyes.db"))
    store.append("s", [], create="test")
    seen = {w: store.snapshot("s").head for w in range(4)}
    written: list[tuple[int, int]] = []
    for writer in order:
        try:
            (seq,) = store.append("s", [{"role": "user", "content": f"w{writer}"}],
                                  guard=Guard(seen[writer]))
        except SessionConflict:
            seen[writer] = store.snapshot("s").head  # it reads again
            continue
        written.append((seen[writer], seq))
        seen[writer] = seq
    assert all(seq == head + 1 for head, seq in written)
    assert [e.seq for e in store.events("s")] == list(range(len(written)))


def test_a_lease_names_this_process_and_a_dead_one_is_told_apart(tmp_path: Path) -> None:
    me = owner()
    assert alive(me)
    host, boot, pid, start = me.split("|")
    assert int(pid) == os.getpid()
    child = subprocess.run(
        [sys.executable, "-c", "from deepseek_eyes.store.owner import owner; print(owner())"],
        capture_output=True, text=True, check=True, env={**os.environ})
    gone = child.stdout.strip()
    assert gone != me
    assert not alive(gone)  # it exited
    assert not alive(f"{host}|{boot}|{pid}|{int(start) + 1 if start != '-' else 1}")  # reused
    assert not alive(f"{host}|another-boot|{pid}|{start}")  # the machine restarted since
    assert alive(f"elsewhere|{boot}|1|1")  # another host's process: not ours to judge
    db = Database(tmp_path / "eyes.db")
    store = SessionStore(db)
    with store.batch() as conn:
        store.leases.open(conn, turn_id="mine", session_id="s", base=-1, started_at=1.0,
                          model="m", path="text")
    db.execute("INSERT INTO turn_leases (turn_id, session_id, owner, started_at, base)"
               " VALUES ('theirs', 's', ?, 2.0, -1)", (gone,))
    assert [lease.turn_id for lease in store.leases.orphaned(alive)] == ["theirs"]
