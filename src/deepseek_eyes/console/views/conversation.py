"""One conversation as the page shows it: its messages (tool calls and results bounded), its
turns with their usage and ``look`` rereads, its images (the evidence of each is asked
for separately, :func:`~deepseek_eyes.console.views.images.provenance`) and its fork tree,
all of it within the login's scope.
"""

from __future__ import annotations

from typing import Any

from deepseek_eyes.console.views.images import MAX_TURNS, image_meta, image_turns
from deepseek_eyes.console.views.listing import fork_tree
from deepseek_eyes.console.views.scope import in_scope, require_scope
from deepseek_eyes.console.views.shown import (
    MAX_EVENTS,
    calls,
    client_name,
    looks,
    parts,
    path_name,
)
from deepseek_eyes.errors import ConsoleError
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.events import SessionStore

__all__ = ["conversation"]



def conversation(db: Database, session_id: str, *, scope: str | None = None) -> dict[str, Any]:
    """One conversation: its messages (tool calls and results bounded), its turns with
    their usage, each image's size and the turn that acquired its evidence (the evidence
    itself is asked for per image, :func:`provenance`, as each comes on screen), and its
    fork tree.

    Raises:
        ConsoleError: ``CONSOLE_NOT_FOUND``.
    """
    store = SessionStore(db)
    if len(session_id) > 200 or not store.exists(session_id):
        raise ConsoleError("no conversation has that id", code="CONSOLE_NOT_FOUND",
                           details={"session_id": session_id[:200]})
    require_scope(db, session_id, scope)
    turns = store.turns(session_id)[-MAX_TURNS:]
    superseded = {t.details.get("retry_of") for t in turns if t.outcome == "ok"} - {None}
    events = store.events(session_id, limit=MAX_EVENTS)
    messages = [{
        "seq": e.seq, "ts": e.ts, "role": e.role, "turn_id": e.turn_id,
        "superseded": e.turn_id in superseded, "parts": parts(e.message),
        "calls": calls(e.message), "tool_call_id": e.message.get("tool_call_id"),
        "name": e.message.get("name"),
    } for e in events]
    turn_views = []
    for turn in turns:
        usage = turn.details.get("usage")
        turn_views.append({"id": turn.id, "started_at": turn.started_at,
                           "seconds": round(turn.ended_at - turn.started_at, 3),
                           "model": turn.model, "path": turn.path, "outcome": turn.outcome,
                           "code": turn.code, "usage": usage if isinstance(usage, dict) else None,
                           "looks": looks(turn.details.get("tool_calls"))})
    shown = [str(part["sha256"]) for e in events for part in parts(e.message)
             if part["type"] == "image"]
    acquired = image_turns(db, session_id)
    images: dict[str, dict[str, Any]] = {}
    for sha, meta in image_meta(db, shown).items():
        images[sha] = {"sha256": sha, "turn_id": acquired.get(sha), **meta}
    fork = store.fork_of(session_id)
    source = db.query_one("SELECT source FROM sessions WHERE id = ?", (session_id,))
    return {"id": session_id, "scope": store.scope_of(session_id), "messages": messages,
            "client": client_name(None if source is None else source[0]),
            "path": path_name({t.path for t in turns}, turns[-1].path if turns else None),
            "turns": turn_views, "images": images,
            # A scoped login sees the branches of its own scope only.
            "fork": None if fork is None or not in_scope(db, fork.parent, scope)
            else {"parent": fork.parent, "at": fork.at},
            "tree": [node for node in fork_tree(db, session_id)
                     if in_scope(db, str(node["id"]), scope)]}
