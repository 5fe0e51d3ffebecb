"""What the web console reads from a data directory: conversations, their images with
evidence and attempts, the audit chain's head, usage by category.

Read-only and bounded: every list has a limit, every text a length cap (``MAX_TEXT``, the
rest said as ``truncated``), so a session with a huge tool result or thousands of events
costs the page a bounded answer. The answers are JSON leaving the process (plain dicts);
the page renders every string with ``textContent``, whatever it holds.

Why the evidence comes from ``audit show``'s walk (:func:`deepseek_eyes.audit.show.show`)
rather than a query of its own: a turn's provenance (image → attempts → evidence record,
each with its chain entry and whether it is still intact) is already resolved there, and the
console shows exactly what ``audit show TURN`` would.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from deepseek_eyes.audit.show import show
from deepseek_eyes.errors import AuditError, ConsoleError
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.events import SessionStore
from deepseek_eyes.usage import UsageTracker

__all__ = ["MAX_TEXT", "audit_head", "conversation", "conversations", "image_meta",
           "usage_view"]

#: The longest text of one message part or tool result the console is sent.
MAX_TEXT = 20_000
#: Conversations listed at once.
MAX_LIST = 500
#: Events of one conversation shown.
MAX_EVENTS = 2_000
#: Turns whose provenance is resolved for one conversation.
MAX_TURNS = 200


def _bounded(text: str) -> dict[str, Any]:
    return {"text": text[:MAX_TEXT], "truncated": len(text) > MAX_TEXT, "length": len(text)}


def conversations(db: Database, *, search: str | None, limit: int) -> list[dict[str, Any]]:
    """Sessions, most recently active first, each with its preview (the first user words),
    model, client (its scope and source) and path (the latest turn's)."""
    if search is not None and len(search) > 200:
        raise ConsoleError("a search is at most 200 characters",
                           code="CONSOLE_ARGUMENT_INVALID", details={"field": "q"})
    rows = SessionStore(db).sessions(limit=max(1, min(limit, MAX_LIST)), search=search or None)
    paths: dict[str, str] = {}
    ids = [str(r["id"]) for r in rows]
    for start in range(0, len(ids), 500):
        batch = ids[start:start + 500]
        marks = ",".join("?" * len(batch))
        for row in db.query(
                "SELECT session_id, path FROM turns t WHERE session_id IN"  # noqa: S608 - only "?" marks are formatted in
                f" ({marks}) AND started_at = (SELECT MAX(started_at) FROM turns u"
                " WHERE u.session_id = t.session_id)", tuple(batch)):
            paths[str(row[0])] = str(row[1])
    return [{"id": r["id"], "preview": r["title"], "model": r["model"], "scope": r["scope"],
             "source": r["source"], "path": paths.get(str(r["id"])), "turns": r["turns"],
             "events": r["events"], "last_at": r["last_at"], "created_at": r["created_at"],
             "forked_from": r["forked_from"]} for r in rows]


def _parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return [{"type": "text", **_bounded(str(content or ""))}]
    out: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "image":
            out.append({"type": "image", "sha256": str(part.get("sha256", "")),
                        "width": part.get("width"), "height": part.get("height")})
        else:
            out.append({"type": "text", **_bounded(str(part.get("text") or ""))})
    return out


def _calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"id": str(call.get("id", "")), "name": str(call.get("name", "")),
             "arguments": _bounded(str(call.get("arguments", ""))),
             "internal": key == "internal_calls"}
            for key in ("tool_calls", "internal_calls")
            for call in message.get(key) or () if isinstance(call, Mapping)]


def _provenance(db: Database, turn_id: str) -> list[dict[str, Any]]:
    """A turn's images, each with its attempts and evidence record (from ``audit show``)."""
    try:
        found = show(db, turn_id)
    except AuditError:
        return []
    images = []
    for image in found.get("images") or ():
        evidence = None
        intact = True
        for item in image.get("evidence") or ():
            chain = item.get("chain")
            intact = intact and bool(chain and chain.get("intact"))
            # The chain's projection keeps the record as its hash; the page needs its boxes.
            row = db.query_one("SELECT route, record FROM evidence WHERE record_sha256 = ?",
                               (str(item["record"].get("record_sha256")),))
            if row is not None:
                try:
                    record = json.loads(str(row[1]))
                except ValueError:
                    record = None
                found_evidence = record.get("evidence") if isinstance(record, dict) else None
                if isinstance(found_evidence, dict):  # the stored body wraps the object
                    evidence = {"route": row[0], "record": found_evidence}
        attempts = []
        for item in image.get("attempts") or ():
            record = item["record"]
            chain = item.get("chain")
            intact = intact and bool(chain is None or chain.get("intact"))
            details = record.get("details")
            attempts.append({
                "seq": record.get("seq"), "route": record.get("route"),
                "phase": record.get("phase"), "outcome": record.get("outcome"),
                "code": record.get("code"), "latency_ms": record.get("latency_ms"),
                "cache": bool(isinstance(details, Mapping) and details.get("cached")) or (
                    record.get("phase") == "cache" and record.get("outcome") == "hit"),
            })
        images.append({"sha256": image.get("sha256"), "evidence": evidence,
                        "attempts": attempts, "intact": intact})
    return images


def conversation(db: Database, session_id: str) -> dict[str, Any]:
    """One conversation: its messages (tool calls and results bounded), its turns with
    their usage, and each image's evidence and attempts.

    Raises:
        ConsoleError: ``CONSOLE_NOT_FOUND``.
    """
    store = SessionStore(db)
    if len(session_id) > 200 or not store.exists(session_id):
        raise ConsoleError("no conversation has that id", code="CONSOLE_NOT_FOUND",
                           details={"session_id": session_id[:200]})
    turns = store.turns(session_id)[-MAX_TURNS:]
    superseded = {t.details.get("retry_of") for t in turns if t.outcome == "ok"} - {None}
    messages = [{
        "seq": e.seq, "ts": e.ts, "role": e.role, "turn_id": e.turn_id,
        "superseded": e.turn_id in superseded, "parts": _parts(e.message),
        "calls": _calls(e.message), "tool_call_id": e.message.get("tool_call_id"),
        "name": e.message.get("name"),
    } for e in store.events(session_id, limit=MAX_EVENTS)]
    images: dict[str, dict[str, Any]] = {}
    turn_views = []
    for turn in turns:
        for image in _provenance(db, turn.id):
            sha = str(image["sha256"])
            if sha not in images or images[sha]["evidence"] is None:
                images[sha] = image
        usage = turn.details.get("usage")
        turn_views.append({"id": turn.id, "started_at": turn.started_at,
                           "seconds": round(turn.ended_at - turn.started_at, 3),
                           "model": turn.model, "path": turn.path, "outcome": turn.outcome,
                           "code": turn.code, "usage": usage if isinstance(usage, dict) else None})
    shown = [str(part["sha256"]) for event in store.events(session_id, limit=MAX_EVENTS)
             for part in _parts(event.message) if part["type"] == "image"]
    for sha, meta in image_meta(db, shown).items():
        images.setdefault(sha, {"sha256": sha, "evidence": None, "attempts": [],
                                "intact": True})
        images[sha].update(meta)
    fork = store.fork_of(session_id)
    return {"id": session_id, "scope": store.scope_of(session_id), "messages": messages,
            "turns": turn_views, "images": images,
            "fork": None if fork is None else {"parent": fork.parent, "at": fork.at}}


def image_meta(db: Database, shas: list[str]) -> dict[str, dict[str, Any]]:
    """Width, height and media type of the stored images among ``shas``."""
    out: dict[str, dict[str, Any]] = {}
    wanted = sorted({s for s in shas if isinstance(s, str)})
    for start in range(0, len(wanted), 500):
        batch = wanted[start:start + 500]
        marks = ",".join("?" * len(batch))
        for row in db.query(
                "SELECT sha256, width, height, media_type FROM images"  # noqa: S608 - only "?" marks are formatted in
                f" WHERE sha256 IN ({marks})", tuple(batch)):
            out[str(row[0])] = {"width": row[1], "height": row[2], "media_type": row[3],
                                "stored": True}
    return out


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
        "checkpoints": [{"seq": c[0], "hash": c[1], "ts": c[2], "key_id": c[3]}
                        for c in checkpoints],
        "kinds": [{"kind": k[0], "entries": k[1]} for k in kinds],
    }


def usage_view(db: Database, *, days: int = 30) -> dict[str, Any]:
    """Usage by category (exact provider usage, estimates and avoided replay, counters kept
    apart, as ``deepseek-eyes usage`` shows them), and per day and category for ``days``."""
    since = time.time() - days * 86400
    daily = db.query(
        "SELECT date(ts, 'unixepoch') AS day, category, exact, SUM(calls),"
        " SUM(prompt_tokens + completion_tokens), SUM(cache_hit_tokens),"
        " SUM(estimated_tokens) FROM usage WHERE ts >= ? GROUP BY day, category"
        " ORDER BY day, category", (since,))
    return {
        "summary": UsageTracker(db).summary(),
        "daily": [{"day": r[0], "category": r[1], "exact": bool(r[2]), "calls": r[3],
                   "tokens": r[4], "cache_hit_tokens": r[5], "estimated_tokens": r[6]}
                  for r in daily],
    }
