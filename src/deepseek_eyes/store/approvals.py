"""Approvals that wait in one process, listed and decided from any replica.

An ask-first MCP call (and a terminal plan) waits for a person in the process that runs it:
the waiting call is an HTTP request of that process, and only that process can release it.
Behind a load balancer, the person's console lands on any replica, so each waiting request
is also a row here: its owner (:mod:`deepseek_eyes.store.owner`), its kind and id, what the
console shows of it (the fields the console lists, never a secret: arguments are the
already-cut canonical text, the audit keeps only their hash) and a decision column.

Why a compare-and-set rather than a message to the owner: the decision must be taken once,
whichever replicas two people click on at the same moment. ``UPDATE … WHERE decision IS
NULL`` is that, on SQLite and PostgreSQL alike; the loser is told it was taken already. The
owner learns of a decision by polling its own rows while something waits (a few times a
second, nothing when nothing waits); a decision taken in the owner's own console stays the
in-process fast path, after the same compare-and-set.

A row whose owner is gone is never approvable: on this host :func:`~.owner.alive` judges
the process; another host's process is judged by ``heartbeat``, which its owner refreshes
while it waits (every :data:`HEARTBEAT_S`; older than :data:`STALE_S` is gone). The owner
removes its row when the wait ends, whatever ended it (the audit says how).

A row whose owner died stays, listed ``expired``, for :data:`EXPIRED_KEEP_S`, then a
replica's :meth:`PendingApprovals.sweep` deletes it. Nothing the audit needs goes with it:
the request itself was audited when it began to wait (``mcp.ask`` asked, a plan's own
rows), its arguments only as a hash (the row's cut text is for the console); a decision is
audited by the owner when it applies it. The one thing only a row can hold is a decision
its owner died before applying (taken in the ~200 ms before its next look): the sweep
hands such a row to its caller, which audits it in the same transaction as the delete,
so it is never lost and never audited twice (the delete is a compare-and-set too).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from deepseek_eyes.store.db import Database
from deepseek_eyes.store.owner import alive, on_this_host, owner

__all__ = ["EXPIRED_KEEP_S", "HEARTBEAT_S", "STALE_S", "Decision", "Outcome", "Pending",
           "PendingApprovals", "replica_name"]

#: How often an owner refreshes the heartbeat of its waiting rows.
HEARTBEAT_S = 2.0
#: A row of another host whose heartbeat is older than this: its process is gone.
STALE_S = 15.0
#: How long a gone owner's row stays listed ``expired`` before a sweep deletes it.
EXPIRED_KEEP_S = 3600.0
#: Rows one sweep looks at (the oldest first): a backlog goes in a few sweeps.
_SWEEP_BATCH = 1024

Kind = Literal["mcp", "plan"]
Decision = Literal["approve", "deny"]
#: What a decision did: ``decided`` (this one won), ``taken`` (another came first),
#: ``expired`` (its process is gone), ``missing`` (no such request waits anywhere).
Outcome = Literal["decided", "taken", "expired", "missing"]


def replica_name(name: str) -> str:
    """A process as a person reads it: ``host:pid`` (the boot id and start time say
    nothing to a reader)."""
    parts = name.split("|")
    return f"{parts[0]}:{parts[2]}" if len(parts) == 4 else name


@dataclass(frozen=True)
class Pending:
    """One waiting request's row."""

    kind: str
    id: str
    owner: str
    shown: dict[str, Any]
    created_at: float
    heartbeat: float
    decision: str | None
    via: str | None
    by: str | None
    decided_at: float | None = None

    def live(self, now: float | None = None) -> bool:
        """Whether the process it waits in still runs (see the module docstring)."""
        if on_this_host(self.owner):
            return alive(self.owner)
        return (time.time() if now is None else now) - self.heartbeat <= STALE_S


class PendingApprovals:
    """The ``pending_approvals`` rows of one database, written as process ``me``."""

    def __init__(self, db: Database, *, me: str | None = None) -> None:
        self._db = db
        self.me = owner() if me is None else me

    def put(self, kind: Kind, ident: str, shown: Mapping[str, Any], created_at: float) -> None:
        """A request begins to wait here.

        Raises:
            StoreError: the store's write codes.
        """
        now = time.time()
        self._db.execute(
            "INSERT OR REPLACE INTO pending_approvals (kind, id, owner, shown, created_at,"
            " heartbeat, decision, decided_via, decided_by, decided_at)"
            " VALUES (?,?,?,?,?,?,NULL,NULL,NULL,NULL)",
            (kind, ident, self.me, json.dumps(dict(shown), separators=(",", ":")),
             created_at, now))

    def remove(self, kind: Kind, ident: str) -> None:
        """The wait ended (decided, timed out, expired): the row goes."""
        self._db.execute("DELETE FROM pending_approvals WHERE kind = ? AND id = ? AND owner = ?",
                         (kind, ident, self.me))

    def beat(self) -> None:
        """This process still waits on its rows (another host's console reads this)."""
        self._db.execute("UPDATE pending_approvals SET heartbeat = ? WHERE owner = ?",
                         (time.time(), self.me))

    def decided_here(self, kind: Kind) -> list[Pending]:
        """This process's rows of ``kind`` that a person decided (on any replica)."""
        return [_pending(r) for r in self._db.query(
            "SELECT * FROM pending_approvals WHERE owner = ? AND kind = ?"
            " AND decision IS NOT NULL", (self.me, kind))]

    def listing(self, kind: Kind) -> list[Pending]:
        """Every row of ``kind``, oldest first."""
        return [_pending(r) for r in self._db.query(
            "SELECT * FROM pending_approvals WHERE kind = ? ORDER BY created_at LIMIT 1024",
            (kind,))]

    def get(self, kind: Kind, ident: str) -> Pending | None:
        row = self._db.query_one("SELECT * FROM pending_approvals WHERE kind = ? AND id = ?",
                                 (kind, ident))
        return None if row is None else _pending(row)

    def decide(self, kind: Kind, ident: str, verdict: Decision, *, via: str,
               by: str) -> tuple[Outcome, Pending | None]:
        """Take a person's decision: one compare-and-set, the first decision wins.

        Raises:
            StoreError: the store's read and write codes.
        """
        row = self.get(kind, ident)
        if row is None:
            return "missing", None
        if row.decision is not None:
            return "taken", row
        if not row.live():
            return "expired", row
        with self._db.transaction() as conn:
            cur = conn.execute(
                "UPDATE pending_approvals SET decision = ?, decided_via = ?, decided_by = ?,"
                " decided_at = ? WHERE kind = ? AND id = ? AND decision IS NULL",
                (verdict, via, by, time.time(), kind, ident))
            won = cur.rowcount == 1
        after = self.get(kind, ident)
        if won:
            return "decided", after
        return ("taken", after) if after is not None else ("missing", None)


    def sweep(self, *, keep: float = EXPIRED_KEEP_S,
              unapplied: Callable[[Pending], None] | None = None,
              now: float | None = None) -> list[Pending]:
        """Delete the rows whose owner is gone and that have not been heard of for ``keep``
        seconds (at least :data:`STALE_S`); return them. A deleted row that holds a
        decision (its owner died before applying it) is handed to ``unapplied`` inside the
        same transaction, so an audit row it writes commits with the delete, or neither.

        Raises:
            StoreError: the store's read and write codes (nothing deleted).
        """
        now = time.time() if now is None else now
        before = now - max(keep, STALE_S)
        gone: list[Pending] = []
        if self._db.query_one("SELECT 1 FROM pending_approvals WHERE heartbeat < ? LIMIT 1",
                              (before,)) is None:
            return gone  # the usual case: a read, no write transaction
        with self._db.transaction() as conn:
            rows = [_pending(r) for r in self._db.query(  # inside: the same transaction
                "SELECT * FROM pending_approvals WHERE heartbeat < ? ORDER BY heartbeat"
                " LIMIT ?", (before, _SWEEP_BATCH))]
            for row in rows:
                if row.live(now):  # a process on this host that still runs
                    continue
                # Compare-and-set: another replica's sweep, or a late heartbeat, wins.
                cur = conn.execute(
                    "DELETE FROM pending_approvals WHERE kind = ? AND id = ? AND owner = ?"
                    " AND heartbeat = ?", (row.kind, row.id, row.owner, row.heartbeat))
                if cur.rowcount != 1:
                    continue
                if row.decision is not None and unapplied is not None:
                    unapplied(row)
                gone.append(row)
        return gone


def _pending(row: Any) -> Pending:
    try:
        shown = json.loads(row["shown"])
    except ValueError:
        shown = {}
    return Pending(str(row["kind"]), str(row["id"]), str(row["owner"]),
                   shown if isinstance(shown, dict) else {}, float(row["created_at"]),
                   float(row["heartbeat"]), row["decision"], row["decided_via"],
                   row["decided_by"],
                   None if row["decided_at"] is None else float(row["decided_at"]))
