"""The audit chain as the console shows it: its head and checkpoints, a search of MCP calls
or vision attempts with each row's chain entry and whether it verifies, and any record by
id as ``audit show`` resolves it.
"""

from __future__ import annotations

import json
from typing import Any

from deepseek_eyes.audit.checkpoints import stored_hex
from deepseek_eyes.audit.show import show
from deepseek_eyes.errors import ConsoleError
from deepseek_eyes.store import chain
from deepseek_eyes.store.db import Database

__all__ = ["MAX_AUDIT_ROWS", "audit_head", "audit_record", "audit_search", "chain_entry"]

#: Audit rows one search answers (the page asks for the next ones with ``before``).
MAX_AUDIT_ROWS = 200


def audit_head(db: Database) -> dict[str, Any]:
    """The chain's head, its length and its checkpoints (the newest first, at most 20)."""
    with db.reading() as conn:
        head = conn.execute("SELECT seq, hash, ts, kind FROM chain ORDER BY seq DESC LIMIT 1"
                            ).fetchone()
        count = conn.execute("SELECT COUNT(*) FROM chain").fetchone()[0]
        checkpoints = conn.execute(
            "SELECT seq, hash, ts, key_id FROM chain_checkpoints ORDER BY id DESC LIMIT 20"
        ).fetchall()
        kinds = conn.execute(
            "SELECT kind, COUNT(*) FROM chain GROUP BY kind ORDER BY COUNT(*) DESC LIMIT 30"
        ).fetchall()
    return {
        "head": None if head is None else {"seq": head[0], "hash": head[1], "ts": head[2],
                                           "kind": head[3]},
        "entries": count,
        "checkpoints": [{"seq": c[0], "hash": stored_hex(c[1]), "ts": c[2], "key_id": c[3]}
                        for c in checkpoints],
        "kinds": [{"kind": k[0], "entries": k[1]} for k in kinds],
    }


def chain_entry(conn: Any, table: str, rowid: int) -> tuple[int | None, bool]:
    """A row's chain entry and whether the row is still the record its digest was taken of
    (``chain.read_record`` and ``chain.record_digest``, as ``audit verify`` checks it)."""
    entry = chain.entry_of(conn, table, rowid)  # a single entry, or the batch naming it
    if entry is None:
        return None, False
    record = chain.read_record(conn, table, rowid)
    return entry[0], record is not None and chain.record_digest(record) == entry[2]


def audit_search(db: Database, kind: str, *, server: str | None = None,
                 tool: str | None = None, route: str | None = None,
                 outcome: str | None = None, since: float | None = None,
                 until: float | None = None, before: int | None = None,
                 limit: int = MAX_AUDIT_ROWS) -> dict[str, Any]:
    """MCP calls (``kind`` ``mcp``: by server, tool, outcome, time) or vision attempts
    (``vision``: by route, outcome, time), newest first, each with its chain entry and
    whether it verifies; ``next_before`` pages on (None at the end).

    Raises:
        ConsoleError: ``CONSOLE_ARGUMENT_INVALID`` for another kind or a filter past 200
            characters.
    """
    for name, value in (("server", server), ("tool", tool), ("route", route),
                        ("outcome", outcome)):
        if value is not None and len(value) > 200:
            raise ConsoleError(f"{name} is at most 200 characters",
                               code="CONSOLE_ARGUMENT_INVALID", details={"field": name})
    limit = max(1, min(limit, MAX_AUDIT_ROWS))
    where: list[str] = []
    params: list[Any] = []
    if kind == "mcp":
        table, sql = "audit", ("SELECT id, ts, subject, details FROM audit"
                               " WHERE kind = 'mcp.call'")
        for column, value in (("subject", server),
                              ("json_extract(details, '$.tool')", tool),
                              ("json_extract(details, '$.status')", outcome)):
            if value:
                where.append(f"{column} = ?")
                params.append(value)
    elif kind == "vision":
        table, sql = "attempts", ("SELECT id, ts, operation_id, route, phase, outcome, code,"
                                  " latency_ms FROM attempts WHERE 1 = 1")
        for column, value in (("route", route), ("outcome", outcome)):
            if value:
                where.append(f"{column} = ?")
                params.append(value)
    else:
        raise ConsoleError("kind is mcp or vision", code="CONSOLE_ARGUMENT_INVALID",
                           details={"field": "kind"})
    bounds: tuple[tuple[str, float | None], ...] = (
        ("ts >= ?", since), ("ts <= ?", until), ("id < ?", before))
    for condition, bound in bounds:
        if bound is not None:
            where.append(condition)
            params.append(bound)
    query = sql + "".join(f" AND {w}" for w in where) + " ORDER BY id DESC LIMIT ?"
    rows: list[dict[str, Any]] = []
    with db.reading() as conn:
        # Only constant fragments and "?" marks are formatted into the query.
        found = conn.execute(query, (*params, limit + 1)).fetchall()
        for row in found[:limit]:
            seq, verified = chain_entry(conn, table, int(row[0]))
            if kind == "mcp":
                try:
                    details = json.loads(str(row[3]))
                except ValueError:
                    details = {}
                details = details if isinstance(details, dict) else {}
                rows.append({"id": row[0], "ts": row[1], "server": row[2],
                             "tool": details.get("tool"), "plane": details.get("plane"),
                             "risk": details.get("risk"), "outcome": details.get("status"),
                             "code": details.get("code"),
                             "duration_ms": details.get("duration_ms"),
                             "seq": seq, "verified": verified})
            else:
                rows.append({"id": row[0], "ts": row[1], "operation_id": row[2],
                             "route": row[3], "phase": row[4], "outcome": row[5],
                             "code": row[6], "latency_ms": row[7],
                             "seq": seq, "verified": verified})
    return {"kind": kind, "rows": rows,
            "next_before": rows[-1]["id"] if len(found) > limit and rows else None}


def audit_record(db: Database, ident: str) -> dict[str, Any]:
    """Any record by id, as ``audit show ID`` resolves it (a chain seq, a turn, a session,
    an image, evidence or request sha256, an operation id).

    Raises:
        ConsoleError: ``CONSOLE_ARGUMENT_INVALID`` for an id past 200 characters.
        AuditError: ``AUDIT_NOT_FOUND``.
    """
    if not ident.strip() or len(ident) > 200:
        raise ConsoleError("an id is 1-200 characters", code="CONSOLE_ARGUMENT_INVALID",
                           details={"field": "id"})
    return show(db, ident)
