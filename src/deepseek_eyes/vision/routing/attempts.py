"""The bounded, privacy-reduced attempts log of the vision router.

Every health check, probe, circuit decision, cache lookup, route call and gate result is a
row. Rows hold identities, hashes, sizes, codes and latencies, never pixels, prompts, keys
or raw messages: details pass through :func:`deepseek_eyes.audit.reduce_for_audit`. The
table is trimmed to ``max_rows`` so a long-running gateway cannot grow it without bound.
A trim is a signed cut (:func:`deepseek_eyes.audit.checkpoints.record_cut`); without the
audit key (a database outside a data home, an exposed keyring) the rows are kept.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from deepseek_eyes import canonical_json
from deepseek_eyes.audit import reduce_for_audit
from deepseek_eyes.audit.checkpoints import record_cut
from deepseek_eyes.errors import AuditError
from deepseek_eyes.store.db import Database

__all__ = [
    "Attempt", "AttemptLog", "OperationLog"]

TRIM_EVERY = 256

log = logging.getLogger(__name__)


class AttemptLog:
    def __init__(
        self, db: Database, *, max_rows: int = 50_000, clock: Callable[[], float] = time.time
    ) -> None:
        self._db = db
        self._max_rows = max_rows
        self._clock = clock
        self._inserts = 0

    def operation(self, kind: str) -> OperationLog:
        return OperationLog(self, f"{kind}-{uuid.uuid4().hex[:16]}")

    def _write(self, operation_id: str, seq: int, row: _Row) -> None:
        details = canonical_json.ASCII_LENIENT.dumps(row["details"])
        self._db.append(
            "INSERT INTO attempts (ts, operation_id, seq, route, phase, outcome, code,"
            " latency_ms, details) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                row["ts"], operation_id, seq, row["route"], row["phase"], row["outcome"],
                row["code"], row["latency_ms"], details,
            ),
            chain="vision.attempt",
        )
        self._inserts += 1
        if self._inserts % TRIM_EVERY == 0:
            self.trim()

    def trim(self) -> None:
        """Drop the oldest rows past ``max_rows``; the cut is a ``retention`` chain entry
        with the signed checkpoint that names it. Without the audit key nothing is cut."""
        with self._db.transaction() as conn:
            self._db.hold("attempts.trim")  # one trim at a time reads, then cuts
            row = conn.execute("SELECT MIN(id), MAX(id) FROM attempts").fetchone()
            if row[0] is None or int(row[1]) - self._max_rows < int(row[0]):
                return
            through = int(row[1]) - self._max_rows
            try:
                record_cut(self._db, conn, {
                    "table": "attempts", "through_rowid": through, "reason": "max_rows"},
                    self._clock())
            except AuditError as exc:
                log.warning("the attempts log was not trimmed: %s (%s)", exc.message, exc.code)
                return
            conn.execute("DELETE FROM attempts WHERE id <= ?", (through,))

    def rows(self, operation_id: str) -> list[Attempt]:
        rows = self._db.query(
            "SELECT ts, seq, route, phase, outcome, code, latency_ms, details FROM attempts"
            " WHERE operation_id = ? ORDER BY seq",
            (operation_id,),
        )
        return [
            {
                "seq": r["seq"], "route": r["route"], "phase": r["phase"],
                "outcome": r["outcome"], "code": r["code"], "latency_ms": r["latency_ms"],
                "details": json.loads(r["details"]),
            }
            for r in rows
        ]

    def count(self) -> int:
        row = self._db.query_one("SELECT COUNT(*) n FROM attempts")
        return int(row["n"]) if row else 0


class Attempt(TypedDict):
    """One step of an acquisition as callers and errors carry it (``details.attempts``)."""

    seq: int
    route: str | None
    phase: str  # intake cache health probe circuit route gate flight ...
    outcome: str
    code: str | None
    latency_ms: float | None
    details: Any  # privacy-reduced (reduce_for_audit): a JSON object


class _Row(TypedDict):
    ts: float
    route: str | None
    phase: str
    outcome: str
    code: str | None
    latency_ms: float | None
    details: Any


@dataclass
class OperationLog:
    """The attempts of one acquisition, kept in order and mirrored to the database."""

    log: AttemptLog
    operation_id: str
    entries: list[Attempt] = field(default_factory=list)

    def record(
        self,
        phase: str,
        outcome: str,
        *,
        route: str | None = None,
        code: str | None = None,
        latency_ms: float | None = None,
        write: bool = True,
        **details: Any,
    ) -> Attempt:
        """Add a step to the operation, and its row to the attempts log unless ``write`` is
        False: a step some other chained record already names (a cache hit a turn's
        evidence list holds) stays in :attr:`entries` only."""
        row: _Row = {
            "ts": self.log._clock(),
            "route": route,
            "phase": phase,
            "outcome": outcome,
            "code": code,
            "latency_ms": None if latency_ms is None else round(latency_ms, 3),
            "details": reduce_for_audit(details),
        }
        seq = len(self.entries)
        if write:
            self.log._write(self.operation_id, seq, row)
        public: Attempt = {"seq": seq, "route": route, "phase": phase, "outcome": outcome,
                           "code": code, "latency_ms": row["latency_ms"],
                           "details": row["details"]}
        self.entries.append(public)
        return public
