"""A conversation's browser and desktop sessions, from their audit rows (what the services
record of each step, never typed text or a window title), and the latest observation the
model was given.
"""

from __future__ import annotations

import json
from typing import Any

from deepseek_eyes.console.views.audit import chain_entry
from deepseek_eyes.console.views.images import image_meta
from deepseek_eyes.console.views.shown import MAX_EVENTS, parts
from deepseek_eyes.errors import ConsoleError
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.events import SessionStore

__all__ = ["MAX_SCREEN_STEPS", "screens"]

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
                seq, verified = chain_entry(conn, "audit", int(row[0]))
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
                           "parts": [p for p in parts(event.message) if p["type"] == "text"]}
            break
    return {"id": session_id, "screens": out, "observation": observation}
