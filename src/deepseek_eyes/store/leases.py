"""Turns in flight: one lease row per turn, from its logged request to its turn record.

A turn logs its request (the session's new messages) before any upstream call, and writes
its turn record (ok, failed, aborted) when it ends. Between the two, a process can die. The
lease, written in the same transaction as the request and removed in the same transaction
as the record, is how the next process to open the store finds such a turn and closes it
(:mod:`deepseek_eyes.runtime.turn.recovery`): ``owner`` names the process
(:mod:`deepseek_eyes.store.owner`), so a turn another live process is running is left
alone.

The lease also carries what a turn's later writes are checked against: ``base``, the
sequence number of the session's last event when the turn's request was logged, and
``retry_of``, the turn this one is a new attempt of (see
:meth:`~deepseek_eyes.store.events.SessionStore.append`).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass

from deepseek_eyes.store.db import Database
from deepseek_eyes.store.owner import owner

__all__ = ["Lease", "TurnLeases"]


@dataclass(frozen=True)
class Lease:
    turn_id: str
    session_id: str
    owner: str
    started_at: float
    base: int
    retry_of: str | None
    model: str | None
    path: str | None


class TurnLeases:
    def __init__(self, db: Database) -> None:
        self._db = db

    def open(self, conn: sqlite3.Connection, *, turn_id: str, session_id: str, base: int,
             started_at: float, model: str, path: str, retry_of: str | None = None) -> None:
        """Lease a turn to this process, inside the caller's transaction (the one that logs
        its request)."""
        conn.execute(
            "INSERT OR REPLACE INTO turn_leases (turn_id, session_id, owner, started_at, base,"
            " retry_of, model, path) VALUES (?,?,?,?,?,?,?,?)",
            (turn_id, session_id, owner(), started_at, base, retry_of, model, path),
        )

    def move(self, conn: sqlite3.Connection, turn_id: str, session_id: str, base: int) -> None:
        """The turn went on in a fork: its lease follows it."""
        conn.execute("UPDATE turn_leases SET session_id = ?, base = ? WHERE turn_id = ?",
                     (session_id, base, turn_id))

    def close(self, conn: sqlite3.Connection, turn_id: str) -> None:
        """The turn's record is written (in the caller's transaction): no lease any more."""
        conn.execute("DELETE FROM turn_leases WHERE turn_id = ?", (turn_id,))

    def held(self, session_id: str) -> list[Lease]:
        """The turns in flight in a session, oldest first."""
        return [self._lease(r) for r in self._db.query(
            "SELECT * FROM turn_leases WHERE session_id = ? ORDER BY started_at", (session_id,))]

    def orphaned(self, alive: Callable[[str], bool], *, now: float | None = None,
                 min_age_s: float = 0.0) -> list[Lease]:
        """Leases whose owner is no longer running (``alive`` says), oldest first."""
        cutoff = (time.time() if now is None else now) - min_age_s
        rows = self._db.query(
            "SELECT * FROM turn_leases WHERE started_at <= ? ORDER BY started_at", (cutoff,))
        return [lease for lease in map(self._lease, rows) if not alive(lease.owner)]

    @staticmethod
    def _lease(row: sqlite3.Row) -> Lease:
        return Lease(row["turn_id"], row["session_id"], row["owner"], row["started_at"],
                     int(row["base"]), row["retry_of"], row["model"], row["path"])
