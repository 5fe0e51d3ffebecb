"""What the web console reads from a data directory: conversations, their images with
evidence and attempts, the audit chain's head, usage by category.

Read-only and bounded: every list has a limit, every text a length cap (``MAX_TEXT``, the
rest said as ``truncated``), so a session with a huge tool result or thousands of events
costs the page a bounded answer. The answers are JSON leaving the process (plain dicts);
the page renders every string with ``textContent``, whatever it holds.

Why the evidence comes from ``audit show``'s walk
(:func:`deepseek_eyes.audit.show.image_provenance`) rather than a query of its own: an
image's provenance (image → attempts → evidence record → upstream request → usage, each with
its chain entry and whether it is still intact) is already resolved there, and the console
shows exactly what ``audit show TURN`` would. It is asked for one image at a time, as each
comes on screen: a conversation of fifty images paints its first turn without resolving
fifty provenances first (bench/console.py).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from typing import Any

from deepseek_eyes.audit.show import image_provenance, show
from deepseek_eyes.errors import ConsoleError
from deepseek_eyes.store import chain
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.events import SCOPES_MIGRATION, SessionStore, title_of
from deepseek_eyes.usage import UsageTracker

__all__ = [
    "CLIENTS",
    "MAX_AUDIT_ROWS",
    "MAX_TEXT",
    "audit_head",
    "audit_record",
    "audit_search",
    "conversation",
    "conversations",
    "fork_tree",
    "image_in_scope",
    "image_meta",
    "in_scope",
    "provenance",
    "require_scope",
    "screens",
    "usage_view",
]

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


#: The client a session's ``source`` names (the gateway's front it came through).
CLIENTS = {"cli": "CLI", "gateway": "OpenAI", "gateway:anthropic": "Claude Code",
           "gateway:responses": "Codex"}
#: Sessions of a fork tree shown at once.
MAX_TREE = 200


def _client(source: object) -> str:
    return CLIENTS.get(str(source), str(source or "-"))


def _path(paths: set[str], latest: str | None) -> str | None:
    """A conversation's path: ``both`` once it has had bridged and native turns."""
    return "both" if {"bridged", "native"} <= paths else latest


def _marks(values: list[str]) -> str:
    return ",".join("?" * len(values))


def in_scope(db: Database, session_id: str, scope: str | None) -> bool:
    """Whether a login bound to ``scope`` may see the session (None: a person's own login,
    which sees every one)."""
    if scope is None:
        return True
    if db.schema_version < SCOPES_MIGRATION:
        return False
    row = db.query_one("SELECT scope FROM session_scopes WHERE session_id = ?",
                       (session_id,))
    return row is not None and row[0] == scope


def require_scope(db: Database, session_id: str, scope: str | None) -> None:
    """Refuse a session the login may not see as if it did not exist.

    Raises:
        ConsoleError: ``CONSOLE_NOT_FOUND``.
    """
    if not in_scope(db, session_id, scope):
        raise ConsoleError("no conversation has that id", code="CONSOLE_NOT_FOUND",
                           details={"session_id": session_id[:200]})


def image_in_scope(db: Database, sha256: str, scope: str | None) -> bool:
    """Whether a login bound to ``scope`` may see a stored image: one a message of its own
    conversations holds, or a screenshot of their browser or desktop steps."""
    if scope is None:
        return True
    if db.schema_version < SCOPES_MIGRATION or len(sha256) != 64 or not all(
            c in "0123456789abcdef" for c in sha256):
        return False
    pattern = f"%{sha256}%"
    found = db.query_one(
        "SELECT 1 FROM events e JOIN session_scopes c ON c.session_id = e.session_id"
        " WHERE c.scope = ? AND e.body LIKE ? LIMIT 1", (scope, pattern))
    if found is None:
        found = db.query_one(
            "SELECT 1 FROM audit a WHERE a.kind IN ('browser.action', 'desktop.action')"
            " AND a.details LIKE ? AND json_extract(a.details, '$.owner') IN"
            " (SELECT session_id FROM session_scopes WHERE scope = ?) LIMIT 1",
            (pattern, scope))
    return found is not None


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
    marks = _marks(ids)
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
            "client": _client(r["source"]),
            "path": _path(found[r["id"]]["paths"], found[r["id"]]["path"]),
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


#: ``look`` rereads listed for one turn (the runtime caps them far below this).
MAX_LOOKS = 50


def _looks(calls: object) -> list[dict[str, Any]]:
    """The turn's ``look`` rereads as the runtime recorded them: the image, the route that
    read it again (or ``pixels`` for a seeing model), whether it came from the cache, the
    region asked for, the failure's code."""
    if not isinstance(calls, list):
        return []
    out = []
    for call in calls:
        if not isinstance(call, Mapping) or call.get("tool") != "look":
            continue
        region = call.get("region")
        out.append({"image": str(call.get("image") or ""),
                    "route": "pixels" if call.get("pixels") else call.get("route"),
                    "cached": bool(call.get("cached")),
                    "region": list(region) if isinstance(region, list) else None,
                    "code": call.get("code"),
                    "record_sha256": call.get("record_sha256")})
        if len(out) >= MAX_LOOKS:
            break
    return out


def _step(step: str, item: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    """One link of an image's provenance with its chain entry: verified when the record is
    still the one its entry's digest was taken of (``chain.record_digest``, as
    ``audit verify`` checks it)."""
    chain = item.get("chain")
    return {"step": step, "ref": item.get("ref"),
            "seq": chain.get("seq") if isinstance(chain, Mapping) else None,
            "verified": bool(isinstance(chain, Mapping) and chain.get("intact")), **fields}


def _evidence_body(db: Database, record_sha256: object) -> dict[str, Any] | None:
    # The chain's projection keeps the record as its hash; the page needs its boxes.
    row = db.query_one("SELECT route, record FROM evidence WHERE record_sha256 = ?",
                       (str(record_sha256),))
    if row is None:
        return None
    try:
        record = json.loads(str(row[1]))
    except ValueError:
        return None
    found = record.get("evidence") if isinstance(record, dict) else None
    # The stored body wraps the evidence object.
    return {"route": row[0], "record": found} if isinstance(found, dict) else None


def _image_turns(db: Database, session_id: str) -> dict[str, str]:
    """Each image's sha256 to the first turn of the session that acquired its evidence."""
    out: dict[str, str] = {}
    for row in db.query("SELECT id, details FROM turns WHERE session_id = ?"
                        " ORDER BY started_at LIMIT ?", (session_id, MAX_TURNS)):
        try:
            details = json.loads(str(row[1] or "{}"))
        except ValueError:
            continue
        for entry in details.get("evidence") or () if isinstance(details, dict) else ():
            if isinstance(entry, dict) and isinstance(entry.get("sha256"), str):
                out.setdefault(entry["sha256"], str(row[0]))
    return out


def provenance(db: Database, session_id: str, sha256: str) -> dict[str, Any]:
    """One image of a conversation, as the page asks for it once the image is on screen:
    its evidence record (the boxes), the attempts of its acquisition (route, latency,
    failover, cache), and its provenance, image -> attempts -> evidence -> upstream request
    -> usage, each link with whether its chain entry still verifies.

    Raises:
        ConsoleError: ``CONSOLE_NOT_FOUND``: not an image this conversation's turns used.
    """
    turn_id = _image_turns(db, session_id).get(sha256) if len(session_id) <= 200 else None
    found = None if turn_id is None else image_provenance(db, turn_id, sha256)
    if found is None:
        raise ConsoleError("no turn of this conversation acquired evidence for that image",
                           code="CONSOLE_NOT_FOUND", details={"sha256": sha256[:64]})
    image = found["image"]
    steps = [_step("image", item, sha256=sha256) for item in image.get("image") or ()]
    attempts = []
    for item in image.get("attempts") or ():
        record = item["record"]
        details = record.get("details")
        attempts.append({
            "seq": record.get("seq"), "route": record.get("route"),
            "phase": record.get("phase"), "outcome": record.get("outcome"),
            "code": record.get("code"), "latency_ms": record.get("latency_ms"),
            "cache": bool(isinstance(details, Mapping) and details.get("cached")) or (
                record.get("phase") == "cache" and record.get("outcome") == "hit"),
            "verified": _step("attempt", item)["verified"]})
        steps.append(_step("attempt", item, phase=record.get("phase"),
                           outcome=record.get("outcome"), route=record.get("route")))
    steps += [_step("cache hit", item) for item in image.get("cache_hits") or ()]
    evidence = None
    for item in image.get("evidence") or ():
        evidence = _evidence_body(db, item["record"].get("record_sha256")) or evidence
        steps.append(_step("evidence", item,
                           record_sha256=item["record"].get("record_sha256")))
    for item in found["requests"]:
        details = item["record"].get("details")
        details = details if isinstance(details, Mapping) else {}
        if details.get("outcome") == "pending":
            continue  # written ahead; its completion row follows with the usage
        steps.append(_step("upstream request", item,
                           request_sha256=details.get("request_sha256"),
                           model=details.get("model"), category=details.get("category")))
        usage = details.get("usage")
        if isinstance(usage, Mapping):
            steps.append(_step("usage", item, usage={
                k: v for k, v in usage.items() if isinstance(v, int | float)}))
    return {"sha256": sha256, "turn_id": turn_id, "cached": found["cached"],
            "evidence": evidence, "attempts": attempts, "steps": steps,
            "verified": bool(steps) and all(s["verified"] for s in steps)}


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
        "superseded": e.turn_id in superseded, "parts": _parts(e.message),
        "calls": _calls(e.message), "tool_call_id": e.message.get("tool_call_id"),
        "name": e.message.get("name"),
    } for e in events]
    turn_views = []
    for turn in turns:
        usage = turn.details.get("usage")
        turn_views.append({"id": turn.id, "started_at": turn.started_at,
                           "seconds": round(turn.ended_at - turn.started_at, 3),
                           "model": turn.model, "path": turn.path, "outcome": turn.outcome,
                           "code": turn.code, "usage": usage if isinstance(usage, dict) else None,
                           "looks": _looks(turn.details.get("tool_calls"))})
    shown = [str(part["sha256"]) for e in events for part in _parts(e.message)
             if part["type"] == "image"]
    acquired = _image_turns(db, session_id)
    images: dict[str, dict[str, Any]] = {}
    for sha, meta in image_meta(db, shown).items():
        images[sha] = {"sha256": sha, "turn_id": acquired.get(sha), **meta}
    fork = store.fork_of(session_id)
    source = db.query_one("SELECT source FROM sessions WHERE id = ?", (session_id,))
    return {"id": session_id, "scope": store.scope_of(session_id), "messages": messages,
            "client": _client(None if source is None else source[0]),
            "path": _path({t.path for t in turns}, turns[-1].path if turns else None),
            "turns": turn_views, "images": images,
            # A scoped login sees the branches of its own scope only.
            "fork": None if fork is None or not in_scope(db, fork.parent, scope)
            else {"parent": fork.parent, "at": fork.at},
            "tree": [node for node in fork_tree(db, session_id)
                     if in_scope(db, str(node["id"]), scope)]}


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


#: Audit rows one search answers (the page asks for the next ones with ``before``).
MAX_AUDIT_ROWS = 200


def _verified(conn: Any, table: str, rowid: int) -> tuple[int | None, bool]:
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
            seq, verified = _verified(conn, table, int(row[0]))
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


#: Steps of one conversation's screens shown (newest first).
MAX_SCREEN_STEPS = 100


def screens(db: Database, session_id: str) -> dict[str, Any]:
    """The browser and desktop sessions of a conversation, from their audit rows
    (``browser.action``, ``desktop.action``: what the services record of each step, never
    typed text or a window title): per screen its latest state id, URL or window, latest
    stored screenshot and steps newest first (each with whether it verifies against the
    chain), and the latest observation the model was given (the last tool result of a
    ``browser_*`` or ``desktop_*`` call, bounded).

    Raises:
        ConsoleError: ``CONSOLE_NOT_FOUND``.
    """
    if len(session_id) > 200 or not SessionStore(db).exists(session_id):
        raise ConsoleError("no conversation has that id", code="CONSOLE_NOT_FOUND",
                           details={"session_id": session_id[:200]})
    out: dict[str, Any] = {}
    with db.reading() as conn:
        for kind in ("browser", "desktop"):
            rows = conn.execute(
                "SELECT id, ts, subject, details FROM audit WHERE kind = ?"
                " AND json_extract(details, '$.owner') = ? ORDER BY id DESC LIMIT ?",
                (f"{kind}.action", session_id, MAX_SCREEN_STEPS)).fetchall()
            steps = []
            for row in rows:
                try:
                    details = json.loads(str(row[3]))
                except ValueError:
                    details = {}
                details = details if isinstance(details, dict) else {}
                seq, verified = _verified(conn, "audit", int(row[0]))
                steps.append({"id": row[0], "ts": row[1], "action": row[2],
                              "outcome": details.get("outcome"), "code": details.get("code"),
                              "state_before": details.get("state_before"),
                              "state_after": details.get("state_after"),
                              "where": details.get("url") or details.get("window"),
                              "ms": details.get("ms"),
                              "screenshot": details.get("screenshot_sha256"),
                              "seq": seq, "verified": verified})
            if steps:
                shots = [s["screenshot"] for s in steps if isinstance(s["screenshot"], str)]
                stored = image_meta(db, shots)
                latest = next((sha for sha in shots if sha in stored), None)
                out[kind] = {"state_id": steps[0]["state_after"], "where": steps[0]["where"],
                             "screenshot": None if latest is None else {
                                 "sha256": latest, **stored[latest]},
                             "steps": steps}
    observation = None
    for event in reversed(SessionStore(db).events(session_id, limit=MAX_EVENTS)):
        name = str(event.message.get("name") or "")
        if event.role == "tool" and name.startswith(("browser_", "desktop_")):
            observation = {"tool": name, "ts": event.ts,
                           "parts": [p for p in _parts(event.message) if p["type"] == "text"]}
            break
    return {"id": session_id, "screens": out, "observation": observation}


def usage_view(db: Database, *, days: int = 30) -> dict[str, Any]:
    """Usage by category (exact provider usage, estimates and avoided replay, counters kept
    apart, as ``deepseek-eyes usage`` shows them), and per day and category for ``days``."""
    since = time.time() - days * 86400
    daily = db.query(
        "SELECT date(ts, 'unixepoch') AS day, category, exact, SUM(calls),"
        " SUM(prompt_tokens + completion_tokens), SUM(cache_hit_tokens),"
        " SUM(estimated_tokens) FROM usage WHERE ts >= ? GROUP BY day, category"
        " ORDER BY day, category", (since,))
    models = db.query(
        "SELECT COALESCE(model, '-'), SUM(calls), SUM(prompt_tokens), SUM(completion_tokens),"
        " SUM(cache_hit_tokens) FROM usage WHERE ts >= ? AND exact = 1 GROUP BY model"
        " ORDER BY SUM(prompt_tokens + completion_tokens) DESC LIMIT 20", (since,))
    cache = db.query(
        "SELECT date(ts, 'unixepoch') AS day, SUM(prompt_tokens), SUM(cache_hit_tokens)"
        " FROM usage WHERE ts >= ? AND exact = 1 GROUP BY day ORDER BY day", (since,))
    return {
        "days": days,
        "summary": UsageTracker(db).summary(),
        "daily": [{"day": r[0], "category": r[1], "exact": bool(r[2]), "calls": r[3],
                   "tokens": r[4], "cache_hit_tokens": r[5], "estimated_tokens": r[6],
                   # the chart's three kinds: what the provider billed, what was
                   # estimated of it, and what was not sent at all
                   "kind": "exact" if r[2] else (
                       "avoided" if r[1] == "avoided_replay" else "estimated")}
                  for r in daily],
        "models": [{"model": r[0], "calls": r[1], "prompt_tokens": r[2],
                    "completion_tokens": r[3], "cache_hit_tokens": r[4]} for r in models],
        "cache_daily": [{"day": r[0], "prompt_tokens": r[1], "cache_hit_tokens": r[2],
                         "share": round(r[2] / r[1], 4) if r[1] else None} for r in cache],
    }
