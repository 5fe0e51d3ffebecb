"""The report v2 of each browser or desktop session a conversation closed, for the
console's screens.

A session's report (:mod:`deepseek_eyes.browser.report`,
:mod:`deepseek_eyes.desktop.report`: every step with its redacted arguments, the states
before and after, its outcome and code, the URL, its duration; the assertions with
expected and actual values) is stored as a blob when the session closes, and the close's
tool result names it (``report stored as sha256:…``).
That sentence, in the conversation's own tool results, is how a report is found: the
conversation points at its reports, the console never guesses from the blob store.

Bounded: the newest :data:`MAX_REPORTS` reports, each read only under :data:`MAX_BYTES`,
with at most :data:`MAX_ROWS` steps and assertions shown (the rest counted). The report
was redacted when written (typed text as a length and hash, URLs redacted); its strings
still came from pages, so the page shows them as text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.store.blobs import BlobStore
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.events import SessionStore

__all__ = ["MAX_REPORTS", "MAX_ROWS", "SCHEMAS", "stored_reports"]

#: Reports shown per conversation, newest first.
MAX_REPORTS = 5
#: Steps and assertions shown per report.
MAX_ROWS = 500
#: A report blob larger than this is named, not read.
MAX_BYTES = 8 * 1024 * 1024
#: The schemas shown (older reports are named with their schema only).
SCHEMAS = ("deepseekeyes.browser.report.v2", "deepseekeyes.desktop.report.v2")
_STORED = re.compile(r"report stored as sha256:([0-9a-f]{64})")
_EVENTS = 2_000
_STEP_FIELDS = ("index", "tool", "arguments", "state_before", "state_after", "outcome",
                "code", "url", "duration_ms", "screenshot")
_ASSERTION_FIELDS = ("kind", "expected", "actual", "passed", "state_id", "step")


def _named(db: Database, session_id: str) -> list[tuple[str, str, float]]:
    """``(sha256, tool, ts)`` of each report the conversation's tool results name, newest
    first, each once."""
    found: list[tuple[str, str, float]] = []
    for event in reversed(SessionStore(db).events(session_id, limit=_EVENTS)):
        if event.role != "tool":
            continue
        content = event.message.get("content")
        texts = [content] if isinstance(content, str) else [
            str(p.get("text") or "") for p in content or () if isinstance(p, Mapping)]
        for text in texts:
            for sha in _STORED.findall(text):
                if all(sha != seen for seen, _, _ in found):
                    found.append((sha, str(event.message.get("name") or ""), event.ts))
        if len(found) >= MAX_REPORTS:
            break
    return found[:MAX_REPORTS]


def _rows(items: object, fields: tuple[str, ...]) -> tuple[list[dict[str, Any]], int]:
    if not isinstance(items, list):
        return [], 0
    rows = [{k: item.get(k) for k in fields} for item in items[:MAX_ROWS]
            if isinstance(item, Mapping)]
    return rows, max(0, len(items) - MAX_ROWS)


def _read(blobs: BlobStore, sha: str) -> dict[str, Any] | str:
    """The report's JSON object, or the reason it cannot be shown."""
    try:
        if blobs.path_for(sha).stat().st_size > MAX_BYTES:
            return f"larger than {MAX_BYTES} bytes"
        data = json.loads(blobs.get(sha))
    except (DeepSeekEyesError, OSError):
        return "not stored"
    except (ValueError, RecursionError):
        return "not JSON"
    return data if isinstance(data, dict) else "not a report"


def stored_reports(db: Database, blobs: BlobStore, session_id: str) -> list[dict[str, Any]]:
    """The conversation's stored reports, newest first: schema, summary, timing, steps and
    assertions (bounded), or why one cannot be shown."""
    out: list[dict[str, Any]] = []
    for sha, tool, ts in _named(db, session_id):
        data = _read(blobs, sha)
        if isinstance(data, str) or data.get("schema") not in SCHEMAS:
            out.append({"sha256": sha, "tool": tool, "ts": ts, "schema": None
                        if isinstance(data, str) else data.get("schema"),
                        "unreadable": data if isinstance(data, str) else "another schema"})
            continue
        steps, more_steps = _rows(data.get("steps"), _STEP_FIELDS)
        assertions, more_assertions = _rows(data.get("assertions"), _ASSERTION_FIELDS)
        summary = data.get("summary")
        timing = data.get("timing")
        out.append({"sha256": sha, "tool": tool, "ts": ts, "schema": data["schema"],
                    "summary": summary if isinstance(summary, dict) else {},
                    "timing": timing if isinstance(timing, dict) else {},
                    "steps": steps, "more_steps": more_steps,
                    "assertions": assertions, "more_assertions": more_assertions,
                    "unreadable": None})
    return out
