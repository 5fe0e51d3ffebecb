"""The conversations list and a conversation's fork tree: one bounded page at a time,
paged in two steps so that ten thousand sessions cost a page of rows.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from deepseek_eyes.console.views.shown import client_name, path_name, question_marks
from deepseek_eyes.errors import ConsoleError
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.events import SCOPES_MIGRATION, title_of

__all__ = ["MAX_LIST", "MAX_TREE", "conversations", "fork_tree"]

#: Conversations listed at once.
MAX_LIST = 500
#: Sessions of a fork tree shown at once.
MAX_TREE = 200


def conversations(db: Database, *, search: str | None, limit: int,
                  offset: int = 0, scope: str | None = None) -> dict[str, Any]:
    """One page of sessions, most recently active first, each with its preview (the first
    user words), model, client and path; the page's ``next_offset`` (None at the end).
    ``scope``: only the sessions of that client scope (a login made with a gateway key).

    Paged here, in two steps, so that a directory of ten thousand sessions costs a page of
    rows: the page's ids by last activity first (one pass over the events), then the
    preview, model and paths of those ids only.

    Raises:
        ConsoleError: ``CONSOLE_ARGUMENT_INVALID`` for a search past 200 characters.
    """
    if search is not None and len(search) > 200:
        raise ConsoleError("a search is at most 200 characters",
                           code="CONSOLE_ARGUMENT_INVALID", details={"field": "q"})
    limit = max(1, min(limit, MAX_LIST))
    offset = max(0, offset)
    clauses, params = list[str](), list[Any]()
    if search:
        escaped = search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        clauses.append("EXISTS (SELECT 1 FROM events f WHERE f.session_id = s.id"
                       " AND f.body LIKE ? ESCAPE '\\')")
        params.append(f"%{escaped}%")
    if scope is not None:
        if db.schema_version < SCOPES_MIGRATION:
            return {"conversations": [], "offset": offset, "limit": limit, "next_offset": None}
        clauses.append("s.id IN (SELECT session_id FROM session_scopes WHERE scope = ?)")
        params.append(scope)
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    # The inner LIMIT -1 keeps SQLite from flattening the subquery into the ORDER BY, which
    # would look each session's last event up twice.
    page = db.query(
        "SELECT id, created_at, source, forked_from, last_at FROM ("  # noqa: S608 - constant fragments, values bound
        "SELECT s.id, s.created_at, s.source, s.forked_from,"
        " (SELECT MAX(ts) FROM events e WHERE e.session_id = s.id) AS last_at"
        f" FROM sessions s{where} LIMIT -1) AS listed"  # named: PostgreSQL requires it
        " ORDER BY COALESCE(last_at, created_at) DESC, id LIMIT ? OFFSET ?",
        (*params, limit + 1, offset))
    more = len(page) > limit
    rows = [dict(r) for r in page[:limit]]
    ids = [str(r["id"]) for r in rows]
    if not ids:
        return {"conversations": [], "offset": offset, "limit": limit, "next_offset": None}
    found: dict[str, dict[str, Any]] = {i: {"paths": set(), "turns": 0, "model": None,
                                            "path": None, "title": "", "scope": "legacy"}
                                        for i in ids}
    marks = question_marks(ids)
    for row in db.query(
            "SELECT session_id, path, model, started_at FROM turns"  # noqa: S608 - only "?" marks are formatted in
            f" WHERE session_id IN ({marks}) ORDER BY started_at", tuple(ids)):
        info = found[str(row[0])]
        info["paths"].add(str(row[1]))
        info["turns"] += 1
        info["model"], info["path"] = row[2], row[1]
    for row in db.query(
            "SELECT session_id, body FROM events u WHERE session_id IN"  # noqa: S608 - only "?" marks are formatted in
            f" ({marks}) AND role = 'user' AND seq = (SELECT MIN(seq) FROM events v"
            " WHERE v.session_id = u.session_id AND v.role = 'user')", tuple(ids)):
        with contextlib.suppress(ValueError):
            found[str(row[0])]["title"] = title_of(json.loads(str(row[1])))
    if db.schema_version >= SCOPES_MIGRATION:
        for row in db.query(
                "SELECT session_id, scope FROM session_scopes"  # noqa: S608 - only "?" marks are formatted in
                f" WHERE session_id IN ({marks})", tuple(ids)):
            found[str(row[0])]["scope"] = row[1]
    return {
        "conversations": [{
            "id": r["id"], "preview": found[r["id"]]["title"], "model": found[r["id"]]["model"],
            "scope": found[r["id"]]["scope"], "source": r["source"],
            "client": client_name(r["source"]),
            "path": path_name(found[r["id"]]["paths"], found[r["id"]]["path"]),
            "turns": found[r["id"]]["turns"], "last_at": r["last_at"],
            "created_at": r["created_at"], "forked_from": r["forked_from"]} for r in rows],
        "offset": offset, "limit": limit, "next_offset": offset + limit if more else None,
    }


def fork_tree(db: Database, session_id: str) -> list[dict[str, Any]]:
    """The fork tree ``session_id`` sits in: its root and every descendant (at most
    ``MAX_TREE``), each with its parent, where it branched and its depth, in tree order."""
    root, seen = session_id, {session_id}
    for _ in range(MAX_TREE):
        row = db.query_one("SELECT forked_from FROM sessions WHERE id = ?", (root,))
        if row is None or row[0] is None or str(row[0]) in seen:
            break
        root = str(row[0])
        seen.add(root)
    out: list[dict[str, Any]] = []

    def walk(node: str, parent: str | None, at: int | None, depth: int) -> None:
        if len(out) >= MAX_TREE:
            return
        out.append({"id": node, "parent": parent, "at": at, "depth": depth,
                    "current": node == session_id})
        for child in db.query("SELECT id, fork_at FROM sessions WHERE forked_from = ?"
                              " ORDER BY created_at, id LIMIT ?", (node, MAX_TREE)):
            if all(item["id"] != child[0] for item in out):
                walk(str(child[0]), node, child[1], depth + 1)

    walk(root, None, None, 0)
    return out
