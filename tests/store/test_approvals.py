"""The pending approvals gone replicas leave (store/approvals.py): a sweep deletes the rows
of a dead process after the keep time, keeps every row whose process may still act on it,
and a row holding a decision its process never applied is audited in the same transaction
as its delete: once, even when two sweeps race, and the chain still verifies."""

from __future__ import annotations

import time

import pytest

from deepseek_eyes.audit.verify import verify_database
from deepseek_eyes.errors import StoreError
from deepseek_eyes.gateway.replicas import audit_unapplied
from deepseek_eyes.home import DataHome
from deepseek_eyes.store.approvals import EXPIRED_KEEP_S, Pending, PendingApprovals
from deepseek_eyes.store.owner import owner

#: Replicas on other hosts: judged by their heartbeat.
GONE = "replica-b|-|4242|-"
LATE = "replica-c|-|4343|-"


def _unapplied(home: DataHome) -> list[str]:
    return [row["subject"] + ":" + row["details"] for row in home.db.query(
        "SELECT subject, details FROM audit WHERE kind = 'approval.unapplied'")]


def test_a_sweep_deletes_gone_replicas_rows_after_the_keep_time_and_audits_unapplied_ones(
        home: DataHome) -> None:
    t = time.time()
    gone, late, me = (PendingApprovals(home.db, me=m) for m in (GONE, LATE, owner()))
    gone.put("mcp", "ask-waited", {"server": "time", "tool": "now", "arguments": "{}",
                                   "session_id": "s1"}, t)
    gone.put("plan", "plan-decided", {"session_id": "s2", "command": "rm -rf build"}, t)
    assert me.decide("plan", "plan-decided", "approve", via="console", by="ada")[0] \
        == "decided"
    late.put("mcp", "ask-recent", {"server": "time"}, t)
    home.db.execute("UPDATE pending_approvals SET heartbeat = ? WHERE owner = ?",
                    (t + EXPIRED_KEEP_S, LATE))  # heard of well after the others
    me.put("mcp", "ask-mine", {"server": "time"}, t)  # this process: alive

    later = t + EXPIRED_KEEP_S + 60
    assert me.sweep(now=t + EXPIRED_KEEP_S - 60) == []  # not kept long enough yet
    swept = me.sweep(unapplied=audit_unapplied(home.audit), now=later)
    assert sorted((p.kind, p.id) for p in swept) == [("mcp", "ask-waited"),
                                                    ("plan", "plan-decided")]
    left = {(p.kind, p.id) for kind in ("mcp", "plan") for p in me.listing(kind)}
    assert left == {("mcp", "ask-recent"), ("mcp", "ask-mine")}
    (audited,) = _unapplied(home)
    assert audited.startswith("plan:")
    for fact in ('"decision":"approve"', '"via":"console"', '"by":"ada"',
                 '"id":"plan-decided"', '"replica":"replica-b:4242"', '"session_id":"s2"'):
        assert fact in audited
    assert "rm -rf" not in audited  # identities only, never the command
    # Swept again (another replica, the same instant): nothing left to delete or audit.
    assert me.sweep(unapplied=audit_unapplied(home.audit), now=later) == []
    assert len(_unapplied(home)) == 1
    home.seal()
    report = verify_database(home.db, home.audit_keys())
    assert report.ok, report.as_json()
    assert report.kinds["approval.unapplied"] == 1


def test_the_audit_and_the_delete_commit_together_or_not_at_all(home: DataHome) -> None:
    t = time.time()
    board = PendingApprovals(home.db, me=GONE)
    board.put("mcp", "ask-1", {"server": "time"}, t)
    board.decide("mcp", "ask-1", "deny", via="console", by="bob")

    def failing(_row: Pending) -> None:
        raise StoreError("the audit could not be written", code="STORE_WRITE_FAILED")

    with pytest.raises(StoreError):
        board.sweep(unapplied=failing, now=t + EXPIRED_KEEP_S + 60)
    assert board.get("mcp", "ask-1") is not None  # still there: swept next time
    assert [p.id for p in board.sweep(unapplied=audit_unapplied(home.audit),
                                      now=t + EXPIRED_KEEP_S + 60)] == ["ask-1"]
    assert len(_unapplied(home)) == 1
