"""Privacy-reduced audit log: identities, hashes, sizes, durations and codes only.

Callers hand :meth:`AuditLog.append` plain fields; anything that could carry content is
reduced before it is stored: strings longer than a short identifier become their SHA-256,
and keys that look like credentials are refused outright. The reduction lives here, in one
place, so no caller has to remember it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from deepseek_eyes import canonical_json
from deepseek_eyes.audit.records import AuditRow
from deepseek_eyes.store.db import Database

__all__ = ["AuditLog", "message_digest", "reduce_for_audit"]

#: Keys whose values are never kept. ``token`` but not ``tokens``: ``prompt_tokens`` and the
#: other usage counts are numbers an audit must keep, ``access_token`` is a credential.
_SECRETISH = re.compile(r"(?i)(api[_-]?key|secret|token(?!s)|password|authorization|cookie)")
MAX_PLAIN_STRING = 128
MAX_ITEMS = 64
#: Built once here: ``bool | int | float`` written in the ``isinstance`` call was a new
#: union for every value reduced, and a row reduces every field.
_KEPT_AS_IS = (bool, int, float)
_SEQUENCE = (list, tuple)


@functools.lru_cache(maxsize=1024)
def _secretish(key: str) -> bool:
    """Whether ``key`` looks like a credential's name. Cached: callers write the same few
    field names on every row, and the search cost more than the rest of a row's reduction."""
    return _SECRETISH.search(key) is not None


def message_digest(text: str) -> str:
    """How an error message or free text enters the audit: its SHA-256, never the text."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def reduce_for_audit(value: Any, depth: int = 0) -> Any:
    """Reduce a value to what the audit may hold (bounded, no free text, no secrets)."""
    if depth > 6:
        return "…"
    if value is None or isinstance(value, _KEPT_AS_IS):
        return value
    if isinstance(value, str):
        return value if len(value) <= MAX_PLAIN_STRING else message_digest(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for i, (key, item) in enumerate(value.items()):
            if i >= MAX_ITEMS:
                out["…"] = len(value) - MAX_ITEMS
                break
            key_text = str(key)
            if _secretish(key_text):
                out[key_text] = "[redacted]"
            elif depth < 6 and (item is None or isinstance(item, _KEPT_AS_IS) or (
                    isinstance(item, str) and len(item) <= MAX_PLAIN_STRING)):
                out[key_text] = item  # what the call below returns, without a call per field
            else:
                out[key_text] = reduce_for_audit(item, depth + 1)
        return out
    if isinstance(value, _SEQUENCE):
        items = [reduce_for_audit(v, depth + 1) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(f"… {len(value) - MAX_ITEMS} more")
        return items
    return message_digest(repr(value))


_INSERT = "INSERT INTO audit (ts, kind, subject, details) VALUES (?,?,?,?)"


def _row(ts: float, kind: str, subject: str | None,
         fields: Mapping[str, Any]) -> tuple[float, str, str | None, str]:
    """An audit row's parameters: its fields reduced and encoded (see the module docstring)."""
    return ts, kind, subject, canonical_json.ASCII_LENIENT.dumps(reduce_for_audit(fields))


class AuditLog:
    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    def append(self, kind: str, subject: str | None = None, **fields: Any) -> None:
        details = canonical_json.ASCII_LENIENT.dumps(reduce_for_audit(fields))
        self._db.append(
            "INSERT INTO audit (ts, kind, subject, details) VALUES (?,?,?,?)",
            (self._clock(), kind, subject, details),
            chain=kind,
        )

    def append_later(self, kind: str, subject: str | None, fields: Mapping[str, Any]) -> None:
        """:meth:`append`, the row reduced and encoded when its queue is flushed
        (:meth:`Database.append_later <deepseek_eyes.store.db.Database.append_later>`):
        the same row, queued, written and lost as :meth:`append`'s. ``fields`` is the
        caller's to give away (nobody may change it afterwards)."""
        self._db.append_later(_INSERT, _row, self._clock(), kind, subject, fields, chain=kind)

    def write(self, kind: str, subject: str | None = None, **fields: Any) -> None:
        """:meth:`append`, committed before it returns (with the rows queued before it): a
        row that must exist before what it announces happens, such as a billed call.

        Raises:
            StoreError: the write failed (``STORE_FULL`` on a full disk); nothing happened.
        """
        details = canonical_json.ASCII_LENIENT.dumps(reduce_for_audit(fields))
        self._db.execute(
            "INSERT INTO audit (ts, kind, subject, details) VALUES (?,?,?,?)",
            (self._clock(), kind, subject, details),
            chain=kind,
        )

    def recent(self, limit: int = 100) -> list[AuditRow]:
        rows = self._db.query(
            "SELECT ts, kind, subject, details FROM audit ORDER BY id DESC LIMIT ?", (limit,)
        )
        return [
            {"ts": r["ts"], "kind": r["kind"], "subject": r["subject"],
             "details": json.loads(r["details"])}
            for r in rows
        ]
