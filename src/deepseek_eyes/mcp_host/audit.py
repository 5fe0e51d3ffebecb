"""The MCP call audit: a bounded in-memory ring plus one audit row per call.

A record holds identities, the risk class, status, duration, argument and result hashes,
and on failure the stable code and the SHA-256 of the message. Arguments, results,
credentials and raw messages never enter it.

The row is queued with the store's log rows, as it always was (written once 64 are queued
or the oldest has waited a second, before any read, with the next write transaction, at
close: :mod:`deepseek_eyes.store.db`), but reduced and
encoded by the flush that writes it (:meth:`AuditLog.append_later`): the same row, the
same durability, and a batch's encodings run back to back instead of one per call.

A record is a ``NamedTuple``: immutable like the frozen dataclass it was, and built in a
tenth of the time (a frozen dataclass sets each of its eleven fields through
``object.__setattr__``), which counted on a call's fixed cost.
"""

from __future__ import annotations

import json
import time
from collections import deque
from typing import Any, NamedTuple

from deepseek_eyes.audit import AuditLog, message_digest
from deepseek_eyes.store.db import Database
from deepseek_eyes.telemetry.latency import observe as observe_latency

__all__ = ["McpAudit", "McpAuditRecord", "stored_records"]


class McpAuditRecord(NamedTuple):
    ts: float
    server: str
    tool: str
    kind: str  # tool | resource | prompt
    risk: str
    status: str  # ok | tool-error | failed
    duration_ms: float
    arguments_sha256: str | None
    result_sha256: str | None = None
    code: str | None = None
    message_sha256: str | None = None


class McpAudit:
    def __init__(self, log: AuditLog | None, ring: int = 256) -> None:
        self._log = log
        self.ring: deque[McpAuditRecord] = deque(maxlen=ring)

    def record(
        self, *, server: str, tool: str, kind: str, risk: str, status: str, started: float,
        arguments_sha256: str | None, result_sha256: str | None = None,
        code: str | None = None, message: str | None = None, parent: str | None = None,
    ) -> McpAuditRecord:
        """One call's row; ``parent`` names the Code Mode run that made it (nested)."""
        rec = McpAuditRecord(
            ts=time.time(), server=server, tool=tool, kind=kind, risk=risk, status=status,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            arguments_sha256=arguments_sha256, result_sha256=result_sha256, code=code,
            message_sha256=message_digest(message) if message is not None else None,
        )
        self.ring.append(rec)
        observe_latency("mcp", server, status, rec.duration_ms / 1000)
        if self._log is not None:
            # The row is the record less its time, server (the row's own) and kind, named
            # here from the arguments rather than read back out of the record field by
            # field. `kind` names the audit row's own kind in AuditLog.append*; ours is the
            # plane.
            fields = {"plane": kind, "tool": tool, "risk": risk, "status": status,
                      "duration_ms": rec.duration_ms, "arguments_sha256": arguments_sha256,
                      "result_sha256": result_sha256, "code": code,
                      "message_sha256": rec.message_sha256}
            if parent is not None:
                fields["parent"] = parent
            self._log.append_later("mcp.call", server, fields)
        return rec

    def ask_row(self, *, server: str, tool: str, status: str, ask_id: str,
                arguments_sha256: str, session_id: str | None, via: str | None,
                by: str | None) -> None:
        """One step of an ask-first call (asked, approved, denied, timeout, expired) as an
        ``mcp.ask`` row: identities and the argument hash, never the arguments."""
        if self._log is not None:
            self._log.append("mcp.ask", server, tool=tool, status=status, ask_id=ask_id,
                             arguments_sha256=arguments_sha256, session_id=session_id,
                             via=via, by=by)

    def recent(self) -> list[dict[str, Any]]:
        return [r._asdict() for r in self.ring]


def stored_records(db: Database, limit: int = 100) -> list[dict[str, Any]]:
    """The newest ``limit`` MCP call rows of the SQLite audit, newest first."""
    rows = db.query(
        "SELECT ts, subject, details FROM audit WHERE kind = 'mcp.call' ORDER BY id DESC LIMIT ?",
        (max(1, min(limit, 10_000)),),
    )
    out = []
    for row in rows:
        details = json.loads(row["details"])
        out.append({"ts": row["ts"], "server": row["subject"], "kind": details.pop("plane", None),
                    **details})
    return out
