"""Sessions as append-only event logs in SQLite.

Every user, assistant and tool message of a session is one row, in order, holding the
message as canonical JSON with images as blob references (``sha256`` plus media type and
size), never as pixels. Rows are never updated or deleted (triggers enforce it), so what a
user sent stays exactly as sent. The model-facing view (evidence instead of images, bounded
history) is derived from these rows at every turn and never written back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from deepseek_eyes import canonical_json
from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import StoreError
from deepseek_eyes.store import chain
from deepseek_eyes.store.db import Database

__all__ = [
    "SESSION_ID", "Event", "Fork", "SessionStore", "TurnRecord", "body_digest", "message_calls",
]

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
MAX_EVENTS_READ = 10_000


_IN_BATCH = 500  # ids per IN (...) query; SQLite allows 32,766 variables, this stays small


def message_calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The tool calls of a stored assistant message, in the order the model made them: the
    ones the runtime ran itself (``internal_calls``), then the client's (``tool_calls``)."""
    calls = [*(message.get("internal_calls") or ()), *(message.get("tool_calls") or ())]
    return [c for c in calls if isinstance(c, Mapping)]


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    if message.get("role") != "assistant":
        return []
    return [c["id"] for c in message_calls(message) if isinstance(c.get("id"), str)]


def _canonical(value: Any) -> str:
    # LENIENT: a stored message can hold NaN (a model's JSON parsed as Python does), and
    # stored body digests were taken with NaN allowed.
    return canonical_json.LENIENT.dumps(value)


def body_digest(message: JsonObject) -> str:
    return hashlib.sha256(_canonical(message).encode()).hexdigest()


class SessionSummary(TypedDict):
    """``SessionStore.sessions``: one session and its event count, for ``sessions list``."""

    id: str
    created_at: float
    source: str | None
    forked_from: str | None
    fork_at: int | None
    events: int
    last_at: float | None


@dataclass(frozen=True)
class Event:
    session_id: str
    seq: int
    ts: float
    role: str
    turn_id: str | None
    body_sha256: str
    message: JsonObject  # a chat message as the client or model sent it, kept verbatim


@dataclass(frozen=True)
class Fork:
    """Where a session branched off: its parent and how many of the parent's messages
    the new history shares."""

    parent: str
    at: int


@dataclass(frozen=True)
class TurnRecord:
    id: str
    session_id: str
    started_at: float
    ended_at: float
    model: str | None
    path: str  # "text", "bridged" or "native"
    outcome: str  # "ok" or "failed"
    code: str | None
    details: dict[str, Any]


_INSERT_TURN = (
    "INSERT INTO turns (id, session_id, started_at, ended_at, model, path, outcome, code,"
    " details) VALUES (?,?,?,?,?,?,?,?,?)"
)


def _turn_row(turn: TurnRecord) -> tuple[Any, ...]:
    return (
        turn.id, turn.session_id, turn.started_at, turn.ended_at, turn.model, turn.path,
        turn.outcome, turn.code, _canonical(turn.details),
    )


class SessionStore:
    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex

    @staticmethod
    def valid_id(session_id: str) -> bool:
        return bool(SESSION_ID.match(session_id))

    def ensure(self, session_id: str, source: str) -> bool:
        """Create the session if it does not exist; True when it was created.

        Raises:
            StoreError: ``STORE_SESSION_INVALID`` for an id outside ``SESSION_ID``.
        """
        if not self.valid_id(session_id):
            raise StoreError(
                "a session id is 1-128 letters, digits, '.', '_', ':' or '-'",
                code="STORE_SESSION_INVALID",
            )
        if self.exists(session_id):
            return False
        self._db.execute(
            "INSERT OR IGNORE INTO sessions (id, created_at, source) VALUES (?,?,?)",
            (session_id, self._clock(), source), chain="session",
        )
        return True

    def batch(self) -> contextlib.AbstractContextManager[object]:
        """A block whose writes through this store (and the database's other stores) are one
        transaction: committed together at its end, or none of them."""
        return self._db.transaction()

    def exists(self, session_id: str) -> bool:
        return self._db.query_one("SELECT 1 FROM sessions WHERE id = ?", (session_id,)) is not None

    def append(
        self,
        session_id: str,
        messages: Sequence[JsonObject],
        *,
        turn_id: str | None = None,
        create: str | None = None,
        fork: Fork | None = None,
        turn: TurnRecord | None = None,
    ) -> list[int]:
        """Append messages in order, in one transaction; returns their sequence numbers.

        ``create`` (a source name) creates the session in the same transaction, ``fork``
        records which session it was started from, and ``turn`` records a finished turn
        with its last messages: one commit per step of a turn keeps the gateway's own
        overhead per turn small.
        """
        if not messages and create is None and turn is None:
            return []
        now = self._clock()
        seqs: list[int] = []
        with self._db.transaction() as conn:
            created: int | None = None
            if create is not None:
                if not self.valid_id(session_id):
                    raise StoreError(
                        "a session id is 1-128 letters, digits, '.', '_', ':' or '-'",
                        code="STORE_SESSION_INVALID",
                    )
                created = chain.insert(
                    conn, "session",
                    "INSERT OR IGNORE INTO sessions (id, created_at, source, forked_from,"
                    " fork_at) VALUES (?,?,?,?,?)",
                    (session_id, now, create, fork.parent if fork else None,
                     fork.at if fork else None), now,
                )
            if created is not None:
                next_seq = 0  # created just now, in this transaction: no events yet
            else:
                row = conn.execute(
                    "SELECT COALESCE(MAX(seq), -1) FROM events WHERE session_id = ?",
                    (session_id,)).fetchone()
                next_seq = int(row[0]) + 1
            for message in messages:
                body = _canonical(message)
                event_id = chain.insert(
                    conn, "session.event",
                    "INSERT INTO events (session_id, seq, ts, role, turn_id, body_sha256, body)"
                    " VALUES (?,?,?,?,?,?,?)",
                    (
                        session_id, next_seq, now, str(message.get("role", "")), turn_id,
                        hashlib.sha256(body.encode()).hexdigest(), body,
                    ), now,
                )
                call_ids = _call_ids(message)
                if call_ids and event_id is not None:
                    conn.executemany(
                        "INSERT INTO event_calls (call_id, event_id) VALUES (?,?)",
                        [(call_id, event_id) for call_id in call_ids],
                    )
                seqs.append(next_seq)
                next_seq += 1
            if turn is not None:
                chain.insert(conn, "turn", _INSERT_TURN, _turn_row(turn), now)
        return seqs

    def events(self, session_id: str, *, limit: int = MAX_EVENTS_READ) -> list[Event]:
        rows = self._db.query(
            "SELECT session_id, seq, ts, role, turn_id, body_sha256, body FROM events"
            " WHERE session_id = ? ORDER BY seq LIMIT ?",
            (session_id, limit),
        )
        return [
            Event(
                r["session_id"], r["seq"], r["ts"], r["role"], r["turn_id"], r["body_sha256"],
                json.loads(r["body"]),
            )
            for r in rows
        ]

    def issued_calls(self, call_ids: Sequence[str]) -> dict[str, list[JsonObject]]:
        """The stored assistant messages that hold each of ``call_ids`` among their tool
        calls, newest first (ids are the upstream's and unique in practice, but nothing
        here relies on it)."""
        wanted = sorted({c for c in call_ids if isinstance(c, str) and c})
        found: dict[str, list[JsonObject]] = {}
        for start in range(0, len(wanted), _IN_BATCH):
            batch = wanted[start:start + _IN_BATCH]
            marks = ",".join("?" * len(batch))
            rows = self._db.query(
                "SELECT c.call_id, e.body FROM event_calls c JOIN events e ON e.id = c.event_id"  # noqa: S608 - only "?" marks are formatted in
                f" WHERE c.call_id IN ({marks}) ORDER BY e.id DESC",
                batch,
            )
            for row in rows:
                found.setdefault(row["call_id"], []).append(json.loads(row["body"]))
        return found

    def messages(self, session_id: str) -> list[JsonObject]:
        return [event.message for event in self.events(session_id)]

    def fork_of(self, session_id: str) -> Fork | None:
        """The session this one was forked from, or None."""
        row = self._db.query_one(
            "SELECT forked_from, fork_at FROM sessions WHERE id = ?", (session_id,)
        )
        if row is None or row["forked_from"] is None:
            return None
        return Fork(str(row["forked_from"]), int(row["fork_at"]))

    def sessions(self, *, limit: int = 100) -> list[SessionSummary]:
        rows = self._db.query(
            "SELECT s.id, s.created_at, s.source, s.forked_from, s.fork_at,"
            " COUNT(e.id) AS events, MAX(e.ts) AS last_at"
            " FROM sessions s LEFT JOIN events e ON e.session_id = s.id"
            " GROUP BY s.id ORDER BY COALESCE(MAX(e.ts), s.created_at) DESC LIMIT ?",
            (limit,),
        )
        return [cast(SessionSummary, dict(r)) for r in rows]  # the SELECT's columns

    def record_turn(self, turn: TurnRecord) -> None:
        self._db.execute(_INSERT_TURN, _turn_row(turn), chain="turn")

    def record_failed_turn(self, turn: TurnRecord) -> StoreError | None:
        """Record a turn that ended in an error; returns the store's error when it cannot
        be written now, instead of raising it: the turn's own error is the one to report.

        On a full disk (``STORE_FULL``, which may be the turn's own failure) the record is
        queued (:meth:`Database.append`) and written, with the rows queued before it, by
        the next transaction that succeeds once there is room.
        """
        try:
            self.record_turn(turn)
        except StoreError as exc:
            if exc.code == "STORE_FULL":
                # Queued even when the flush it may trigger fails: the queue keeps it.
                with contextlib.suppress(StoreError):
                    self._db.append(_INSERT_TURN, _turn_row(turn), chain="turn")
            return exc
        return None

    def turns(self, session_id: str) -> list[TurnRecord]:
        rows = self._db.query(
            "SELECT * FROM turns WHERE session_id = ? ORDER BY started_at", (session_id,)
        )
        return [
            TurnRecord(
                r["id"], r["session_id"], r["started_at"], r["ended_at"], r["model"], r["path"],
                r["outcome"], r["code"], json.loads(r["details"]),
            )
            for r in rows
        ]
