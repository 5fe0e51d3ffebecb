"""``audit show ID``: a record with its chain entry, and an answer's whole provenance.

``ID`` is a chain entry's seq, a turn id (``turn-…``; what a final answer names in
``deepseekeyes.provenance.turn_id``), a session id, an image's SHA-256, an evidence
record's SHA-256, an upstream request's SHA-256 or a vision operation id. A turn resolves to
its images, each image to the acquisition's attempts and its evidence record, and the turn
to every upstream request it made, each with the usage it was billed. Every record comes
with its chain entry and whether it still matches the entry's digest (``intact``); the
whole chain is checked by ``audit verify``.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Sequence
from typing import Any

from deepseek_eyes.audit.records import ShownItem
from deepseek_eyes.errors import AuditError
from deepseek_eyes.store import chain
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.events import read_details, read_usage

__all__ = ["image_provenance", "show", "whole_requests"]

_HEX64 = re.compile(r"^(?:sha256:)?([0-9a-f]{64})$")
_JSON_COLUMNS = ("details",)


def _item(conn: sqlite3.Connection, table: str, rowid: int) -> ShownItem:
    record = chain.read_record(conn, table, rowid)
    entry = chain.entry_of(conn, table, rowid)
    shown: dict[str, object] = dict(record or {})
    for column in _JSON_COLUMNS:
        text = shown.get(column)
        if isinstance(text, str):
            with contextlib.suppress(ValueError):
                shown[column] = json.loads(text)
    return {
        "ref": f"{table}:{rowid}",
        "record": shown,
        "chain": None if entry is None else {
            "seq": entry[0], "kind": entry[1], "hash": entry[3],
            "intact": record is not None and chain.record_digest(record) == entry[2],
        },
    }


def _items(conn: sqlite3.Connection, table: str, where: str,
           params: Sequence[Any]) -> list[ShownItem]:
    rows = conn.execute(
        f"SELECT rowid FROM {table} WHERE {where} ORDER BY rowid LIMIT 500",  # noqa: S608
        params).fetchall()
    return [_item(conn, table, int(r[0])) for r in rows]


def _image(conn: sqlite3.Connection, sha256: str, operation_id: str | None,
           record_sha256: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "sha256": sha256,
        "image": _items(conn, "images", "sha256 = ?", (sha256,)),
        "acquisitions": _items(
            conn, "audit", "kind = 'vision.acquire' AND subject = ?"
            + (" AND details LIKE ?" if operation_id else ""),
            (sha256, f'%"{operation_id}"%') if operation_id else (sha256,)),
        # A cache hit writes no acquisition row: its attempt row is the record of it (a
        # turn's hits write none: the turn record's evidence list names them).
        "cache_hits": _items(
            conn, "attempts", "phase = 'cache' AND outcome = 'hit' AND details LIKE ?",
            (f'%"image_sha256":"{sha256}"%',)),
    }
    if operation_id:
        attempts = _items(conn, "attempts", "operation_id = ?", (operation_id,))
        acquired = None if attempts or not record_sha256 else _acquisition_of(
            conn, record_sha256)
        if acquired is not None:
            # A turn's cache hit writes no attempts row (its turn record names the hit):
            # the attempts shown are those of the acquisition that made the evidence.
            out["acquired_by"] = acquired
            attempts = _items(conn, "attempts", "operation_id = ?", (acquired,))
        out["attempts"] = attempts
    if record_sha256:
        out["evidence"] = _items(conn, "evidence", "record_sha256 = ?", (record_sha256,))
    return out


def image_provenance(db: Database, turn_id: str, sha256: str) -> dict[str, Any] | None:
    """One image of a turn, as :func:`show` resolves it within the turn (its record, the
    acquisition's attempts and its evidence record), and the turn's upstream requests with
    their usage; None when the turn used no such image. A page that shows a turn's images
    one at a time asks for each here rather than for the whole turn."""
    with db.reading() as conn:
        turns = _items(conn, "turns", "id = ?", (turn_id,))
        for turn in turns:
            details = turn["record"].get("details")
            for entry in (details.get("evidence") or ()) if isinstance(details, dict) else ():
                if isinstance(entry, dict) and entry.get("sha256") == sha256:
                    return {"turn": turn, "image": _image(
                        conn, sha256, entry.get("operation_id"), entry.get("record_sha256")),
                        "cached": bool(entry.get("cached")),
                        "requests": _requests_of(conn, turn_id)}
    return None


def _acquisition_of(conn: sqlite3.Connection, record_sha256: str) -> str | None:
    """The operation whose acquisition made the evidence record ``record_sha256``."""
    row = conn.execute(
        "SELECT details FROM audit WHERE kind = 'vision.acquire' AND details LIKE ?"
        " ORDER BY id LIMIT 1", (f'%"record_sha256":"{record_sha256}"%',)).fetchone()
    if row is None:
        return None
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        operation = json.loads(row[0]).get("operation_id")
        return operation if isinstance(operation, str) else None
    return None


def _turn(conn: sqlite3.Connection, turn_id: str) -> dict[str, Any] | None:
    turns = _items(conn, "turns", "id = ?", (turn_id,))
    requests = _requests_of(conn, turn_id)
    if not turns and not requests:
        return None
    evidence: list[dict[str, Any]] = []
    for turn in turns:
        details = turn["record"].get("details")
        if isinstance(details, dict):
            read_details(details)  # whole, as the turns API shows it; `intact` is of the row
            evidence.extend(e for e in details.get("evidence") or () if isinstance(e, dict))
    images = [
        _image(conn, str(e.get("sha256")), e.get("operation_id"), e.get("record_sha256"))
        for e in evidence
    ]
    return {"kind": "turn", "id": turn_id, "turn": turns, "images": images,
            "requests": requests, "outcome_unknown": _unresolved(requests)}


def _details(item: ShownItem) -> dict[str, Any]:
    details = item["record"].get("details")
    return details if isinstance(details, dict) else {}


def whole_requests(requests: Sequence[ShownItem]) -> list[ShownItem]:
    """A turn's ``llm.request`` items (every one of the turn, in order) with each answered
    call's details whole: the request hash and model its pending row says (an answered
    row leaves them out when they are the same: runtime/turn/ledger.py
    ``stored_completion``) and its usage's derived fields
    (:func:`~deepseek_eyes.store.events.read_usage`). Each item's ``intact`` is of the
    record as stored; rows stored whole are shown as they are."""
    ahead: dict[tuple[Any, Any], dict[str, Any]] = {}
    for item in requests:
        details = _details(item)
        if details.get("outcome") == "pending":
            ahead[(details.get("call"), details.get("attempt") or 1)] = details
            continue
        pending = ahead.get((details.get("call"), details.get("attempt") or 1))
        if pending is not None and "request_sha256" not in details \
                and details.get("outcome", "ok") == "ok":
            for key in ("request_sha256", "model"):
                if key not in details and key in pending:
                    details[key] = pending[key]
        usage = details.get("usage")
        if isinstance(usage, dict | list):
            details["usage"] = read_usage(usage)
    return list(requests)


def _requests_of(conn: sqlite3.Connection, turn_id: str) -> list[ShownItem]:
    return whole_requests(
        _items(conn, "audit", "kind = 'llm.request' AND subject = ?", (turn_id,)))


def _requests_by_digest(conn: sqlite3.Connection, digest: str) -> list[ShownItem]:
    """The ``llm.request`` items of upstream request ``digest``: the rows that name it and
    the answered rows that name it through their pending row."""
    named = _items(conn, "audit", "kind = 'llm.request' AND details LIKE ?",
                   (f'%"request_sha256":"{digest}"%',))
    subjects = list(dict.fromkeys(i["record"].get("subject") for i in named))
    return [item for subject in subjects
            for item in (_requests_of(conn, subject) if isinstance(subject, str)
                         else [i for i in named if i["record"].get("subject") is None])
            if _details(item).get("request_sha256") == digest]


def _unresolved(requests: Sequence[ShownItem]) -> list[dict[str, Any]]:
    """The turn's calls written ahead and never completed: "called, outcome unknown"."""
    def fields(item: ShownItem) -> dict[str, Any]:
        details = item["record"].get("details")
        return details if isinstance(details, dict) else {}

    done = {(f.get("call"), f.get("attempt") or 1) for f in map(fields, requests)
            if f.get("outcome") != "pending"}
    return [{"call": f.get("call"), "attempt": f.get("attempt"),
             "request_sha256": f.get("request_sha256"), "status": "called, outcome unknown"}
            for f in map(fields, requests)
            if f.get("outcome") == "pending" and (f.get("call"), f.get("attempt")) not in done]


def show(db: Database, ident: str) -> dict[str, Any]:
    """What ``ident`` names, with its chain entries.

    Raises:
        AuditError: ``AUDIT_NOT_FOUND`` when nothing does.
    """
    ident = ident.strip()
    with db.reading() as conn:
        if ident.isdigit() and len(ident) <= 18:
            entry = chain.entry_at(conn, int(ident))
            if entry is not None:
                out: dict[str, Any] = {"kind": "chain_entry", "entry": entry}
                if entry["ref_table"] in chain.CHAINED_TABLES:
                    out["record"] = _item(conn, entry["ref_table"], int(entry["ref_id"]))
                return out
        turn = _turn(conn, ident)
        if turn is not None:
            return turn
        session = _items(conn, "sessions", "id = ?", (ident,))
        if session:
            return {"kind": "session", "id": ident, "session": session,
                    "turns": _items(conn, "turns", "session_id = ?", (ident,))}
        attempts = _items(conn, "attempts", "operation_id = ?", (ident,))
        if attempts:
            return {"kind": "operation", "id": ident, "attempts": attempts,
                    "acquisitions": _items(conn, "audit", "kind = 'vision.acquire' AND"
                                           " details LIKE ?", (f'%"{ident}"%',))}
        match = _HEX64.match(ident.lower())
        if match:
            digest = match.group(1)
            if conn.execute("SELECT 1 FROM images WHERE sha256 = ?", (digest,)).fetchone():
                return {"kind": "image", **_image(conn, digest, None, None)}
            evidence = _items(conn, "evidence", "record_sha256 = ?", (digest,))
            if evidence:
                return {"kind": "evidence", "id": digest, "evidence": evidence}
            requests = _requests_by_digest(conn, digest)
            if requests:
                return {"kind": "request", "id": digest, "requests": requests}
    raise AuditError(
        f"nothing in the audit is named {ident!r} (try a chain seq, a turn id, a session id,"
        " an image, evidence or request sha256, or an operation id)",
        code="AUDIT_NOT_FOUND", details={"id": ident})
