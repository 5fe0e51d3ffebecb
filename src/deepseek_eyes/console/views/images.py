"""A conversation's images: their stored size, the turn that acquired each one's evidence,
and one image's provenance as ``audit show`` resolves it
(:func:`deepseek_eyes.audit.show.image_provenance`): image -> attempts -> evidence record
-> upstream request -> usage, each link with whether its chain entry still verifies. It is
asked for one image at a time, as each comes on screen: a conversation of fifty images
paints its first turn without resolving fifty provenances first (bench/console.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from deepseek_eyes.audit.show import image_provenance
from deepseek_eyes.errors import ConsoleError
from deepseek_eyes.store.db import Database

__all__ = ["MAX_TURNS", "image_meta", "image_turns", "provenance"]

#: Turns whose provenance is resolved for one conversation.
MAX_TURNS = 200


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


def image_turns(db: Database, session_id: str) -> dict[str, str]:
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


def provenance(db: Database, session_id: str, sha256: str) -> dict[str, Any]:
    """One image of a conversation, as the page asks for it once the image is on screen:
    its evidence record (the boxes), the attempts of its acquisition (route, latency,
    failover, cache), and its provenance, image -> attempts -> evidence -> upstream request
    -> usage, each link with whether its chain entry still verifies.

    Raises:
        ConsoleError: ``CONSOLE_NOT_FOUND``: not an image this conversation's turns used.
    """
    turn_id = image_turns(db, session_id).get(sha256) if len(session_id) <= 200 else None
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
