"""Which scopes were shown which evidence record: what ``cached`` may tell each of them.

The evidence cache is shared by everyone on a data directory: an image that any client
sent is described once, and every later request for it is a hit. A hit answers in a few
milliseconds with ``cached: true``, so without this a client of one gateway key could test
whether anyone (another key, the local user) ever sent a given image (issue #34 item 3).

So each scope (:mod:`deepseek_eyes.store.scopes`) sees the cache as if it were its own:
``cached`` is true only for a record this scope was shown before. The acquisition is
still shared underneath (nothing is asked of a route twice; usage is saved), and a scope's
first hit on a record another scope acquired is answered no sooner than that acquisition
took (:meth:`EvidenceScopes.note` gives the time to wait for), so its timing looks like a
fresh one. What stays visible is written in docs/security.md ("Scopes").

A row is written once per scope and record (the first time it is shown), and rows are
never removed; so once this process has read or written a pair it remembers it, and a
repeated hit asks the database nothing. That matters beyond the lookup: a read flushes
the queued log rows first, so one read a hit made every hit a write transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from deepseek_eyes.store.db import Database

__all__ = ["DEFAULT_ACQUIRED_MS", "MAX_PAD_MS", "MAX_REMEMBERED", "EvidenceScopes", "Shown"]

#: The time a fresh acquisition is taken to have cost when none was recorded (a record
#: from before scopes, or one a concurrent acquisition has not noted yet).
DEFAULT_ACQUIRED_MS = 1500.0
#: The longest a first hit is held back: a route's own timeouts bound a fresh acquisition.
MAX_PAD_MS = 30_000.0
#: Pairs (scope, record) remembered as shown; past this many the memory starts again
#: (a forgotten pair costs one indexed lookup, nothing else).
MAX_REMEMBERED = 4096


@dataclass(frozen=True)
class Shown:
    """A record as one scope is shown it: ``before``, whether this scope was shown it
    before; ``acquired_ms``, how long the acquisition that produced it took (what a first
    showing to this scope is padded to)."""

    before: bool
    acquired_ms: float


class EvidenceScopes:
    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock
        self._shown: set[tuple[str, str]] = set()

    def note(self, scope: str, record_sha256: str, *, acquired_ms: float | None) -> Shown:
        """Note that ``scope`` is shown the record; ``acquired_ms``: this showing acquired
        it (a fresh acquisition and its duration), None: it came from the cache.

        Raises:
            StoreError: the store could not be read or written.
        """
        pair = (scope, record_sha256)
        if pair in self._shown:
            return Shown(True, 0.0)
        row = self._db.query_one(
            "SELECT 1 FROM evidence_scopes WHERE scope = ? AND record_sha256 = ?",
            (scope, record_sha256))
        if row is not None:
            self._remember(pair)
            return Shown(True, 0.0)
        took = acquired_ms
        if took is None:
            prior = self._db.query_one(
                "SELECT MAX(acquired_ms) AS ms FROM evidence_scopes WHERE record_sha256 = ?",
                (record_sha256,))
            took = float(prior["ms"]) if prior is not None and prior["ms"] is not None \
                else DEFAULT_ACQUIRED_MS
        self._db.execute(
            "INSERT OR IGNORE INTO evidence_scopes (scope, record_sha256, first_at, acquired_ms)"
            " VALUES (?,?,?,?)", (scope, record_sha256, self._clock(), acquired_ms))
        self._remember(pair)
        return Shown(False, min(took, MAX_PAD_MS))

    def _remember(self, pair: tuple[str, str]) -> None:
        if len(self._shown) >= MAX_REMEMBERED:
            self._shown.clear()
        self._shown.add(pair)
