"""Fencing checked by the write that publishes: a stale lease holder cannot publish.

A single-flight lease (:mod:`deepseek_eyes.store.state.leases`) lives in Redis with a
time to live; its fencing token grows with every grant. Redis alone cannot stop a holder
that paused past its lease (a stalled process, a partition) from writing its result after
the next holder took over: whatever it checks in Redis, it can stall again between that
check and its database commit. So the database, which orders the writes, checks the token:

* **claim** (:meth:`FlightFences.claim`): a holder writes its token into ``flight_fences``
  right after Redis granted the lease, before doing the work; a larger token already there
  means the lease passed on meanwhile, and the claim fails.
* **publish** (:meth:`FlightFences.publish` inside the result's own write transaction):
  the write deletes the row only if it still holds this holder's token, and commits the
  result only then. A newer holder's claim replaced the token, so a stale holder's publish
  finds nothing to delete and is refused (``VISION_FLIGHT_LEASE_LOST``) before anything
  commits. On PostgreSQL the claim's UPDATE and the publish's DELETE lock the same row,
  so whichever commits first decides and the other sees its result; on SQLite writers are
  serialized anyway.

A holder whose publish committed first removed the row: the next holder's claim inserts
its own and finds the published result right after (the router looks again), so the work
is done once. Rows of holders that failed or died stay until the next claim of their key
replaces them (one short row per key of work, never read otherwise).
"""

from __future__ import annotations

import sqlite3
import time

from deepseek_eyes.errors import VisionError
from deepseek_eyes.store.db import Database

__all__ = ["LEASE_LOST", "FlightFences", "lease_lost"]

#: The code a holder whose lease passed to another replica stops its work with.
LEASE_LOST = "VISION_FLIGHT_LEASE_LOST"


def lease_lost(fence: int, reason: str) -> VisionError:
    """The error that stops a holder whose lease passed on (``details['flight']`` is
    ``"lost"``: the shared flight waits for the new holder's result instead)."""
    return VisionError(
        f"this replica's single-flight lease (fence {fence}) passed to another replica "
        f"({reason}); its result was not published", code=LEASE_LOST,
        details={"flight": "lost", "fence": fence, "reason": reason})


class FlightFences:
    """The current holder's fencing token per key of work, in the shared database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def claim(self, key: str, fence: int) -> bool:
        """Record ``fence`` as the holder of ``key``'s work; False when a larger token is
        already there (this holder's lease passed on before it started).

        Raises:
            StoreError: the store's write codes.
        """
        with self._db.transaction() as conn:
            if self._raise(conn, key, fence):
                return True
            conn.execute("INSERT OR IGNORE INTO flight_fences (key, fence, claimed_at)"
                         " VALUES (?,?,?)", (key, fence, time.time()))
            # Inserted, or another holder's row appeared meanwhile: the compare decides.
            return self._raise(conn, key, fence) or self._holds(conn, key, fence)

    @staticmethod
    def _raise(conn: sqlite3.Connection, key: str, fence: int) -> bool:
        cur = conn.execute("UPDATE flight_fences SET fence = ?, claimed_at = ?"
                           " WHERE key = ? AND fence < ?", (fence, time.time(), key, fence))
        return cur.rowcount == 1

    @staticmethod
    def _holds(conn: sqlite3.Connection, key: str, fence: int) -> bool:
        row = conn.execute("SELECT fence FROM flight_fences WHERE key = ?", (key,)).fetchone()
        return row is not None and int(row[0]) == fence

    def publish(self, conn: sqlite3.Connection, key: str, fence: int) -> None:
        """Inside the transaction that writes the result: take ``key``'s row if it still
        holds ``fence``.

        Raises:
            VisionError: ``VISION_FLIGHT_LEASE_LOST`` (raise it out of the transaction, so
                the result rolls back with it).
        """
        cur = conn.execute("DELETE FROM flight_fences WHERE key = ? AND fence = ?",
                           (key, fence))
        if cur.rowcount != 1:
            raise lease_lost(fence, "a newer holder claimed the work")
