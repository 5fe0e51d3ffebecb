"""Sessions as append-only event logs in SQLite.

Every user, assistant and tool message of a session is one row, in order, holding the
message as canonical JSON with images as blob references (``sha256`` plus media type and
size), never as pixels. Rows are never updated or deleted (triggers enforce it), so what a
user sent stays exactly as sent. The model-facing view (evidence instead of images, bounded
history) is derived from these rows at every turn and never written back.

Decisions a newcomer would otherwise undo:

* **Appends are compare-and-set.** Several processes may share one database (two ``serve``
  on one data directory). A turn reads the session, decides what to append, and appends
  with a :class:`Guard`: the write happens only if nothing was appended since it read,
  checked inside the write transaction, which holds the session's key
  (:meth:`~deepseek_eyes.store.db.Database.hold`: SQLite's write lock, a per-session lock
  on PostgreSQL), with the unique ``(session_id, seq)`` as a second guard. A turn that loses gets
  :class:`SessionConflict` and reads again: its history no longer extends the session, so
  it becomes a fork that says so. Without the guard, two continuations sent at once were
  both appended, interleaved.
* **A retry is an attempt, not a fork.** A request that repeats the history a stored turn
  started from (a client retrying a cut stream, "regenerate") is a new attempt of that turn
  in the same session: its turn record names the turn it retries (``retry_of``), and once
  it succeeds, the earlier attempt's output is superseded: :meth:`SessionStore.snapshot`
  and :meth:`SessionStore.messages` leave it out, while the rows stay (append-only).
  Attempts of one turn share its ``base`` (the sequence number its history ended at), so
  they may append beside each other without a conflict.
* **An unkept message is its hash.** A turn whose client asked that nothing be kept (the
  Responses API's ``store: false``) appends each message with ``unkept=True``: the row
  holds the message's real ``body_sha256`` (on the audit chain, as every event's) and, as
  its body, only :func:`unkept_body` (the role and ``"unkept": true``), never the content;
  no call ids are indexed for it. Nothing is ever rendered from such rows: a request that
  keeps nothing carries its whole history, and :meth:`SessionStore.body_hashes` is how it
  finds what the session already holds. A kept message's row stores its ``body_sha256``
  empty (:data:`SAME_AS_BODY`): the hash of the body beside it, computed when read.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import operator
import re
import sqlite3
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from deepseek_eyes import canonical_json
from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import StoreError
from deepseek_eyes.store import chain, scopes
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.leases import TurnLeases

__all__ = [
    "SESSION_ID", "Event", "ForeignSession", "Fork", "Guard", "Held", "SessionConflict",
    "SessionMoved", "SessionStore", "Snapshot", "TurnMark", "TurnRecord", "body_digest",
    "message_calls", "read_details", "read_usage", "stored_details", "stored_usage",
    "unkept_body",
]

#: The migration that gave sessions their scope (store/db.py); a read-only open of an
#: older database shows every session as :data:`~deepseek_eyes.store.scopes.LEGACY`.
SCOPES_MIGRATION = 10

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
MAX_EVENTS_READ = 10_000
#: Sessions whose events :meth:`SessionStore.snapshot` keeps between reads.
SNAPSHOT_SESSIONS = 64
#: How sure a store must be that a session it answered last is still as it left it to
#: judge the next turn from that (:meth:`SessionStore.held`): the share of such sessions
#: found unchanged, over about the last ten (each held write's outcome, and each read of
#: one while it does not hold). One process alone finds them unchanged; replicas a load
#: balancer deals a conversation's turns round (each turn's session moved on another)
#: find them changed, and a wrong guess costs a failed round trip and a read.
HOLD_AT = 0.5


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


def unkept_body(message: Mapping[str, Any]) -> JsonObject:
    """What an unkept message's row holds instead of the message: its role only."""
    return {"role": str(message.get("role", "")), "unkept": True}


class SessionSummary(TypedDict):
    """``SessionStore.sessions``: one session at a glance, for ``sessions list``."""

    id: str
    created_at: float
    source: str | None
    scope: str  # whose it is (store/scopes.py)
    forked_from: str | None
    fork_at: int | None
    events: int
    last_at: float | None
    title: str  # the first user message's first words ("" without one)
    turns: int
    model: str | None  # the latest turn's


TITLE_CHARS = 60


def title_of(message: Mapping[str, Any] | None) -> str:
    """A session's title: its first user message's text, first words, one line."""
    if message is None:
        return ""
    content = message.get("content")
    if isinstance(content, list):
        pieces = [str(p.get("text") or "") if p.get("type") == "text" else "[image]"
                  for p in content if isinstance(p, Mapping)]
        text = " ".join(p for p in pieces if p)
    else:
        text = str(content or "")
    text = " ".join(text.split())
    return text if len(text) <= TITLE_CHARS else text[:TITLE_CHARS - 1].rstrip() + "…"


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


@dataclass(frozen=True)
class Held:
    """A snapshot this store judged from what it holds instead of reading it
    (:meth:`SessionStore.held`): what the write that follows checks too, with its guard's
    head and the session's scope, before any of its rows count. ``turn``: the session's
    latest turn; no turn of it is in flight; ``retried``: how many of its turns superseded
    an earlier attempt (turn rows are only ever inserted, so the same number is the same
    set); ``lookup`` (a stock client's history: its scope and the prefix hashes it would
    have looked up) that the longest noted prefix among them is still this session's."""

    turn: str
    retried: int
    lookup: tuple[str, tuple[str, ...]] | None = None


@dataclass(frozen=True)
class Guard:
    """What an append is checked against: ``head``, the session's last sequence number
    when the appending turn read it (-1: no events), and the turn's ``base`` (None: any
    event since ``head`` is a conflict; a number: events of other attempts of the turn
    that started at that base are not). ``held``: the session was not read but judged
    from what the store held (:class:`Held`), and the append checks all of it: any change
    since is a conflict."""

    head: int
    base: int | None = None
    held: Held | None = None


class ForeignSession(StoreError):
    """``STORE_SESSION_FOREIGN``: the session belongs to another scope (another gateway
    key, the CLI, or from before scopes); nothing was appended to it. The owner is not
    named: a client learns only that the id is taken."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id} belongs to another client scope (another gateway key, "
            "the local CLI, or from before scopes); it cannot be continued here. Omit the "
            "session id, or name a session of your own",
            code="STORE_SESSION_FOREIGN", details={"session_id": session_id})


class SessionConflict(StoreError):
    """``STORE_SESSION_CONFLICT``: the session changed since the turn read it."""

    def __init__(self, session_id: str, head: int) -> None:
        super().__init__(
            f"session {session_id} was appended to by another turn meanwhile",
            code="STORE_SESSION_CONFLICT", details={"session_id": session_id, "head": head})


class SessionMoved(SessionConflict):
    """A :class:`SessionConflict` found by an append's expectation (``expect=True``) when
    its transaction's results came back: that transaction can no longer go on (on
    PostgreSQL it failed), so whoever holds it must not append elsewhere inside it; it is
    done again whole (without ``expect``) or the request judged again. Its ``head`` is -1
    (not read)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id, -1)


@dataclass(frozen=True)
class TurnMark:
    """The latest turn of a session, as a new request is matched against it."""

    id: str
    base: int | None  # the sequence number its history ended at (None: an older record)
    started_at: float
    running: bool  # leased, no record yet


@dataclass(frozen=True)
class Snapshot:
    """A session as one read sees it: its events without superseded attempts, its last
    sequence number, and its latest turn."""

    events: list[Event]
    head: int
    latest: TurnMark | None
    scope: str | None = None  # whose the session is; None: there is no such session
    held: Held | None = None  # not read: judged from what the store held (SessionStore.held)


class _Known:
    """What a :class:`SessionStore` knows of a session: its events (append-only rows) as
    read or as this process appended and committed them, and as of its last read or this
    process's own last write: which turns superseded an attempt and how many rows said
    so, its latest turn, its scope; ``settled``: the last thing known is this process's
    own answer (its turn record written, its lease ended), which a next turn may be
    judged from (:meth:`SessionStore.held`)."""

    __slots__ = ("events", "latest", "retried", "scope", "settled", "superseded")

    def __init__(self, events: list[Event], superseded: frozenset[str], retried: int,
                 latest: TurnMark | None, scope: str | None, settled: bool) -> None:
        self.events, self.superseded, self.retried = events, superseded, retried
        self.latest, self.scope, self.settled = latest, scope, settled


_EVENT_COLUMNS = "session_id, seq, ts, role, turn_id, body_sha256, body"
#: A session's turns that superseded an earlier attempt, after its ``session_id = ?``: the
#: first two conditions are the partial index turns_retried's (migration 15), word for
#: word, so both engines read only the rows that name the key (a session of thousands of
#: turns has a handful), and only those are parsed as JSON. Our details are canonical
#: JSON, whose keys are written as they are: a retry_of key always shows as its text.
_SUPERSEDING = (" AND outcome = 'ok' AND instr(details, '\"retry_of\"') > 0"
                " AND json_extract(details, '$.retry_of') IS NOT NULL")
# Events of attempts a later successful attempt of the same turn superseded are left out.
_EFFECTIVE = (
    " AND (turn_id IS NULL OR turn_id NOT IN (SELECT json_extract(details, '$.retry_of')"  # noqa: S608 - constant fragments
    f" FROM turns WHERE session_id = ?1{_SUPERSEDING}))"
)
# An event since the guard's head that is not an attempt of the same turn (same base).
_FOREIGN = (
    "SELECT 1 FROM events WHERE session_id = ?1 AND seq > ?2 AND (turn_id IS NULL OR ("
    "turn_id NOT IN (SELECT turn_id FROM turn_leases WHERE session_id = ?1 AND base = ?3)"
    " AND turn_id NOT IN (SELECT id FROM turns WHERE session_id = ?1"
    " AND CAST(json_extract(details, '$.base') AS INTEGER) = ?3))) LIMIT 1"
)  # CAST: json_extract is text on PostgreSQL (store/postgres.py), an integer on SQLite


_SEQ = operator.attrgetter("seq")


def _event(r: sqlite3.Row | tuple[Any, ...]) -> Event:
    return Event(r[0], r[1], r[2], r[3], r[4], r[5] or _body_hash(r[6]), json.loads(r[6]))


def _body_hash(body: str) -> str:
    """A message's ``body_sha256``: the SHA-256 of its canonical body (a kept one's row
    stores it as :data:`SAME_AS_BODY`)."""
    return hashlib.sha256(body.encode()).hexdigest()


#: What an event's ``body_sha256`` column holds when it is the SHA-256 of its ``body``
#: as stored (every kept message): the hash only repeats the body, which the chain's
#: digest of the row covers whole; readers (:func:`_event`, :meth:`SessionStore.body_hashes`)
#: compute it. An unkept message's row holds its real hash: its body is not the message.
SAME_AS_BODY = ""


_INSERT_SESSION = ("INSERT OR IGNORE INTO sessions (id, created_at, source, forked_from,"
                   " fork_at) VALUES (?,?,?,?,?)")
_INSERT_MINTED = _INSERT_SESSION.replace("INSERT OR IGNORE", "INSERT", 1)  # see append
_INSERT_EVENT = ("INSERT INTO events (session_id, seq, ts, role, turn_id, body_sha256, body)"
                 " VALUES (?,?,?,?,?,?,?)")
_INSERT_TURN = (
    "INSERT INTO turns (id, session_id, started_at, ended_at, model, path, outcome, code,"
    " details) VALUES (?,?,?,?,?,?,?,?,?)"
)


#: A turn record's details that are left out while they hold these (a turn of the loop,
#: one with ``model_calls``, reads them back): most turns ran no tool and dropped nothing.
_TURN_DEFAULTS: dict[str, Any] = {"evidence": [], "tool_calls": [], "rereads": 0,
                                  "omitted_messages": 0, "forced_final": False}


def _turn_row(turn: TurnRecord) -> tuple[Any, ...]:
    return (
        turn.id, turn.session_id, turn.started_at, turn.ended_at, turn.model, turn.path,
        turn.outcome, turn.code, _canonical(stored_details(turn.details)),
    )


def stored_details(details: Mapping[str, Any]) -> dict[str, Any]:
    """A turn record's details as stored: without what it would only repeat (the defaults
    of :data:`_TURN_DEFAULTS`, a usage's ``total_tokens`` when it is prompt + completion and
    its ``prompt_tokens_details`` when that is ``{"cached_tokens": <cache hits>}``);
    :func:`read_details` puts them back."""
    out = {k: v for k, v in details.items()
           if not (k in _TURN_DEFAULTS and type(v) is type(_TURN_DEFAULTS[k])
                   and v == _TURN_DEFAULTS[k])}
    usage = out.get("usage")
    if isinstance(usage, dict):
        out["usage"] = stored_usage(usage)
    return out


#: A usage stored as a list (:func:`stored_usage`): its numbers in this order.
USAGE_LIST = ("prompt_tokens", "completion_tokens", "reasoning_tokens",
              "prompt_cache_hit_tokens", "prompt_cache_miss_tokens")
#: The keys a usage stored as a list had once its derived fields were left out.
_LISTED = frozenset({"prompt_tokens", "completion_tokens", "completion_tokens_details",
                     "prompt_cache_hit_tokens", "prompt_cache_miss_tokens"})


def stored_usage(usage: Mapping[str, Any]) -> dict[str, Any] | list[int]:
    """A usage (the OpenAI shape, :func:`~deepseek_eyes.runtime.turn.ledger.usage_json`)
    without what it only repeats: ``total_tokens`` when it is prompt + completion, and
    ``prompt_tokens_details`` when that is ``{"cached_tokens": <cache hits>}``. What is
    left, when it is exactly the five counts every call reports (reasoning as
    ``completion_tokens_details``' only key), all integers, is stored as their list in
    :data:`USAGE_LIST`'s order (``[38,12,3,23,15]``: 137 bytes less a turn record and an
    answered call's audit row). :func:`read_usage` puts it back whole. Anything else is
    kept as a dict."""
    out = dict(usage)
    prompt, completion = out.get("prompt_tokens"), out.get("completion_tokens")
    if type(prompt) is int and type(completion) is int \
            and out.get("total_tokens") == prompt + completion \
            and type(out.get("total_tokens")) is int:
        del out["total_tokens"]
    hits = out.get("prompt_cache_hit_tokens")
    if type(hits) is int and out.get("prompt_tokens_details") == {"cached_tokens": hits} \
            and type(out["prompt_tokens_details"]["cached_tokens"]) is int:
        del out["prompt_tokens_details"]
    details = out.get("completion_tokens_details")
    if out.keys() == _LISTED and isinstance(details, dict) \
            and details.keys() == {"reasoning_tokens"}:
        listed = [out["prompt_tokens"], out["completion_tokens"], details["reasoning_tokens"],
                  out["prompt_cache_hit_tokens"], out["prompt_cache_miss_tokens"]]
        if all(type(n) is int for n in listed):
            return listed
    return out


def read_usage(usage: dict[str, Any] | list[Any]) -> dict[str, Any] | list[Any]:
    """A stored usage whole again (see :func:`stored_usage`): a list as the dict it was,
    a dict in place; one stored whole (a row written before usages were stored so), or a
    list that is not five integers, is left as it is."""
    if isinstance(usage, list):
        if len(usage) != len(USAGE_LIST) or not all(type(n) is int for n in usage):
            return usage
        prompt, completion, reasoning, hits, misses = usage
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion, "prompt_cache_hit_tokens": hits,
                "prompt_cache_miss_tokens": misses,
                "prompt_tokens_details": {"cached_tokens": hits},
                "completion_tokens_details": {"reasoning_tokens": reasoning}}
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if "total_tokens" not in usage and type(prompt) is int and type(completion) is int:
        usage["total_tokens"] = prompt + completion
    hits = usage.get("prompt_cache_hit_tokens")
    if "prompt_tokens_details" not in usage and type(hits) is int:
        usage["prompt_tokens_details"] = {"cached_tokens": hits}
    return usage


def read_details(details: dict[str, Any]) -> dict[str, Any]:
    """A stored turn record's details whole again (see :func:`stored_details`); a record
    stored whole, or one that is not a turn of the loop (no ``model_calls``), as it is."""
    if "model_calls" not in details:
        return details
    for key, default in _TURN_DEFAULTS.items():
        if key not in details:
            details[key] = list(default) if isinstance(default, list) else default
    usage = details.get("usage")
    if isinstance(usage, dict | list):
        details["usage"] = read_usage(usage)
    return details


#: A snapshot's reads (:meth:`SessionStore.snapshot`): the events after those kept, the
#: turns a later attempt superseded, the latest finished turn and the latest running one.
_EVENTS_AFTER = (f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq > ?"  # noqa: S608 - constant fragments
                 " ORDER BY seq")
#: The turns of a session that superseded an earlier attempt (:data:`_SUPERSEDING`).
_RETRIED = ("SELECT json_extract(details, '$.retry_of') FROM turns"  # noqa: S608 - constant fragments
            f" WHERE session_id = ?{_SUPERSEDING}")
_LAST_TURN = ("SELECT id, CAST(json_extract(details, '$.base') AS INTEGER), started_at"
              " FROM turns WHERE session_id = ? ORDER BY started_at DESC LIMIT 1")
_LAST_LEASE = ("SELECT turn_id, base, started_at FROM turn_leases WHERE session_id = ?"
               " ORDER BY started_at DESC LIMIT 1")


#: The columns of a snapshot's five reads (:meth:`SessionStore._snapshot_reads`), for
#: :meth:`Database.read_each`: ``t`` text, ``i`` integer, ``f`` real.
_SNAPSHOT_SHAPES = ("tiftttt", "t", "tif", "tif", "tt")


def _prefix_query(count: int) -> str:
    """The longest noted history among ``count`` prefix hashes of a scope's sessions (only
    sessions of the same scope: a noted history never leads elsewhere).

    The scope is checked per noted row found (:data:`_SCOPE_OF`), not joined: with one
    gateway key every session has the same scope, and PostgreSQL's planner, asked for a
    join, read the whole ``session_scopes`` table into a hash every turn while it held a
    few hundred sessions (0.1-0.2 ms of the turn's read)."""
    marks = ",".join("?" * count)
    return ("SELECT p.length, p.session_id FROM session_prefixes p"  # noqa: S608 - only "?" marks are formatted in
            f" WHERE p.scope = ? AND p.prefix_sha256 IN ({marks})"
            f" AND {_SCOPE_OF.format(session='p.session_id')} = p.scope"
            " ORDER BY p.length DESC LIMIT 1")


#: A session's scope as a scalar subquery (``session`` names its id's column): run once per
#: row that names it, by the primary key, whatever the planner estimates of a join.
_SCOPE_OF = "(SELECT o.scope FROM session_scopes o WHERE o.session_id = {session})"


#: That a session's scope (or LEGACY's, ?2, for none) and last event's seq are ?3 ("scope
#: seq") or, without a scope, that its last event's seq is ?2 (Database.expect).
_EXPECT_SCOPE_AND_HEAD = (
    "SELECT eyes_expect((SELECT COALESCE(o.scope, ?2) || ' ' || CAST((SELECT"
    " COALESCE(MAX(e.seq), -1) FROM events e WHERE e.session_id = s.id) AS TEXT)"
    " FROM sessions s LEFT JOIN session_scopes o ON o.session_id = s.id WHERE s.id = ?1),"
    " ?3)")
_EXPECT_HEAD = (
    "SELECT eyes_expect(CAST((SELECT COALESCE(MAX(seq), -1) FROM events"
    " WHERE session_id = ?1) AS TEXT), ?2)")


def _expected_head(session_id: str, scope: str | None, guard: Guard
                   ) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters of :meth:`SessionStore.append`'s expectation."""
    if guard.held is not None:
        text, params = _held_check(session_id, guard)
        return f"SELECT eyes_expect({text}, ?2)", params
    if scope is None:
        return _EXPECT_HEAD, (session_id, str(guard.head))
    return _EXPECT_SCOPE_AND_HEAD, (session_id, scopes.LEGACY, f"{scope} {guard.head}")


@functools.lru_cache(maxsize=64)
def _held_state(lookup: int) -> str:
    """What a held snapshot's append checks (:class:`Held`), as one text: the session's
    last event's seq, its latest turn, how many of its turns are in flight, how many
    superseded an attempt (:data:`_SUPERSEDING`, so its partial index answers)
    and, with ``lookup`` prefix hashes (?4 on; their scope ?3), the session the longest
    noted one is noted for ('' for none). Not its scope: a session's is written with it
    and never changed, so the one held is the one a read gives."""
    found = ""
    if lookup:
        marks = ",".join(f"?{n}" for n in range(4, 4 + lookup))
        found = (" || ' ' || COALESCE((SELECT p.session_id FROM session_prefixes p"  # noqa: S608 - only "?N" marks are formatted in
                 f" WHERE p.scope = ?3 AND p.prefix_sha256 IN ({marks})"
                 " ORDER BY p.length DESC LIMIT 1), '')")
    return ("CAST((SELECT COALESCE(MAX(e.seq), -1) FROM events e WHERE e.session_id = ?1)"  # noqa: S608 - constant fragments
            " AS TEXT) || ' ' || COALESCE((SELECT t.id FROM turns t WHERE t.session_id = ?1"
            " ORDER BY t.started_at DESC LIMIT 1), '') || ' ' || CAST((SELECT COUNT(*)"
            " FROM turn_leases l WHERE l.session_id = ?1) AS TEXT) || ' ' || CAST((SELECT"
            f" COUNT(*) FROM turns WHERE session_id = ?1{_SUPERSEDING}) AS TEXT)" + found)


def _held_check(session_id: str, guard: Guard) -> tuple[str, tuple[Any, ...]]:
    """The text of :func:`_held_state` for ``guard.held`` and its parameters, the value
    it must have (``?2``) among them."""
    held = guard.held
    if held is None:
        raise RuntimeError("a held snapshot's append names its guard's Held")
    expected = f"{guard.head} {held.turn} 0 {held.retried}"
    if held.lookup is None:
        return _held_state(0), (session_id, expected)
    client, hashes = held.lookup
    return _held_state(len(hashes)), (session_id, f"{expected} {session_id}", client, *hashes)


#: A session's scope (as :func:`_scope_in` reads it) and its last event's seq (-1: none).
_SCOPE_AND_HEAD = (
    "SELECT s.id, o.scope, (SELECT COALESCE(MAX(e.seq), -1) FROM events e"
    " WHERE e.session_id = s.id) FROM sessions s LEFT JOIN session_scopes o"
    " ON o.session_id = s.id WHERE s.id = ?")


#: A session's scope, read by :func:`_owner`.
_SCOPE = ("SELECT s.id, o.scope FROM sessions s LEFT JOIN session_scopes o"
          " ON o.session_id = s.id WHERE s.id = ?")


def _owner(row: Sequence[Any] | None) -> str | None:
    """The scope of the session ``_SCOPE`` read (None: no such session)."""
    if row is None:
        return None
    return str(row[1]) if row[1] is not None else scopes.LEGACY


def _scope_in(conn: sqlite3.Connection, session_id: str) -> str | None:
    return _owner(conn.execute(_SCOPE, (session_id,)).fetchone())


def _shown(every: list[Event], superseded: frozenset[str], latest: TurnMark | None,
           scope: str | None, held: Held | None = None) -> Snapshot:
    """The snapshot of a session whose events are ``every``: without the output of the
    attempts ``superseded`` names."""
    head = every[-1].seq if every else -1
    events = [e for e in every if e.turn_id is None or e.turn_id not in superseded] \
        if superseded else list(every)
    return Snapshot(events, head, latest, scope, held)


class SessionStore:
    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock
        self.leases = TurnLeases(db)
        # Events read before, per session (append-only rows: see snapshot).
        self._read: OrderedDict[str, _Known] = OrderedDict()
        self._lock = threading.Lock()
        self._sure = 1.0  # see HOLD_AT

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex

    @staticmethod
    def valid_id(session_id: str) -> bool:
        return bool(SESSION_ID.match(session_id))

    def ensure(self, session_id: str, source: str, *, scope: str = scopes.CLI) -> bool:
        """Create the session (in ``scope``) if it does not exist; True when it was created.

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
        with self._db.transaction() as conn:
            created = chain.insert(
                conn, "session",
                "INSERT OR IGNORE INTO sessions (id, created_at, source) VALUES (?,?,?)",
                (session_id, self._clock(), source), self._clock())
            if created is None:
                return False
            conn.execute("INSERT INTO session_scopes (session_id, scope) VALUES (?,?)",
                         (session_id, scope))
        return True

    def batch(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
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
        guard: Guard | None = None,
        scope: str | None = None,
        unkept: bool = False,
        minted: bool = False,
        expect: bool = False,
    ) -> list[int]:
        """Append messages in order, in one transaction; returns their sequence numbers.

        ``create`` (a source name) creates the session in the same transaction, ``fork``
        records which session it was started from, and ``turn`` records a finished turn
        with its last messages (and ends its lease): one commit per step of a turn keeps
        the gateway's own overhead per turn small. ``guard``: appended only if the session
        did not change since (see the module docstring). ``scope``: the session created
        belongs to it, and an existing one must (checked in the write transaction);
        None: unchecked (a turn appending its own output), and a session created is
        :data:`~deepseek_eyes.store.scopes.LEGACY`'s. ``unkept``: each row keeps the
        message's hash and role, never its content (the module docstring). ``minted``
        (with ``create``): ``session_id`` was just made by :meth:`new_id`, so no one else
        holds it and its row is inserted without asking whether it was (on PostgreSQL no
        round trip of its own); a taken id then fails the transaction
        (``STORE_WRITE_FAILED``) rather than finding that session. ``expect`` (with a
        ``guard``): on PostgreSQL the session is not read before the messages are
        appended; that its last event is still the guard's ``head`` (and its scope
        ``scope``) is checked with the writes (:meth:`~deepseek_eyes.store.db.Database.
        expect`), and when it is not, the whole transaction fails with
        :class:`SessionMoved`, also where the read would have found no conflict (events
        of the guard's ``base``) or another scope's session: a caller passes it only when
        it then does the transaction again without it, or judges the request again.

        Raises:
            SessionConflict: ``STORE_SESSION_CONFLICT`` when ``guard`` fails; nothing is
                written then.
            ForeignSession: ``STORE_SESSION_FOREIGN`` when the session is another
                scope's; nothing is written then.
        """
        if not messages and create is None and turn is None and guard is None:
            return []
        now = self._clock()
        seqs: list[int] = []
        with self._db.transaction() as conn:
            # Before the session is read: appends to it wait for each other (on PostgreSQL;
            # SQLite's write lock serializes every write), appends to others do not.
            self._db.hold(f"session:{session_id}")
            created = checked = False
            if create is not None:
                if not self.valid_id(session_id):
                    raise StoreError(
                        "a session id is 1-128 letters, digits, '.', '_', ':' or '-'",
                        code="STORE_SESSION_INVALID",
                    )
                session = (session_id, now, create, fork.parent if fork else None,
                           fork.at if fork else None)
                if minted:
                    chain.insert_later(conn, "session", _INSERT_MINTED, session, now)
                    created = True
                else:
                    created = chain.insert(conn, "session", _INSERT_SESSION, session,
                                           now) is not None
                if created:
                    conn.execute(
                        "INSERT INTO session_scopes (session_id, scope) VALUES (?,?)",
                        (session_id, scope or scopes.LEGACY))
            if created:
                next_seq = 0  # created just now, in this transaction: no events yet
            elif expect and guard is not None and self._db.expect(
                    *_expected_head(session_id, scope, guard),
                    functools.partial(self._moved, session_id, guard)):
                next_seq = guard.head + 1  # checked with the writes (PostgreSQL only)
                checked = True
            elif scope is not None:  # whose it is, and its last event, in one statement
                row = conn.execute(_SCOPE_AND_HEAD, (session_id,)).fetchone()
                owner = None if row is None else (
                    str(row[1]) if row[1] is not None else scopes.LEGACY)
                if owner is not None and owner != scope:
                    raise ForeignSession(session_id)
                next_seq = (int(row[2]) if row is not None else -1) + 1
            else:
                row = conn.execute(
                    "SELECT COALESCE(MAX(seq), -1) FROM events WHERE session_id = ?",
                    (session_id,)).fetchone()
                next_seq = int(row[0]) + 1
            if guard is not None and next_seq - 1 != guard.head and (
                    guard.base is None or next_seq - 1 < guard.head
                    or conn.execute(_FOREIGN, (session_id, guard.head, guard.base)).fetchone()):
                raise SessionConflict(session_id, next_seq - 1)
            if guard is not None and guard.held is not None and not checked:
                text, params = _held_check(session_id, guard)
                state = conn.execute(f"SELECT {text}, ?2", params).fetchone()
                if state is None or state[0] != state[1]:
                    self._learn(False)
                    raise SessionConflict(session_id, next_seq - 1)
            rows: list[tuple[Any, ...]] = []
            for message in messages:
                body = _canonical(message)
                digest = _body_hash(body)
                if unkept:
                    body = _canonical(unkept_body(message))
                known = (session_id, next_seq, now, str(message.get("role", "")), turn_id,
                         digest, body)
                rows.append(known)  # what the store knows after the commit: the hash too
                row = known if unkept else (*known[:5], SAME_AS_BODY, body)
                call_ids = [] if unkept else _call_ids(message)
                if not call_ids:  # its rowid unread: on PostgreSQL no round trip of its own
                    chain.insert_later(conn, "session.event", _INSERT_EVENT, row, now)
                else:
                    event_id = chain.insert(conn, "session.event", _INSERT_EVENT, row, now)
                    if event_id is not None:
                        conn.executemany(
                            "INSERT INTO event_calls (call_id, event_id) VALUES (?,?)",
                            [(call_id, event_id) for call_id in call_ids],
                        )
                seqs.append(next_seq)
                next_seq += 1
            if turn is not None:
                chain.insert_later(conn, "turn", _INSERT_TURN, _turn_row(turn), now)
                self.leases.close(conn, turn.id)
            self._db.after_commit(functools.partial(
                self._committed, session_id, rows, turn,
                (scope or scopes.LEGACY) if created else None,
                held=guard is not None and guard.held is not None))
        return seqs

    def events(self, session_id: str, *, limit: int = MAX_EVENTS_READ,
               effective: bool = False) -> list[Event]:
        """The session's events in order; ``effective``: without the output of attempts a
        later attempt superseded (what the model and a continuing client see)."""
        where = _EFFECTIVE if effective else ""
        rows = self._db.query(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = ?1{where}"  # noqa: S608 - constant fragments
            " ORDER BY seq LIMIT ?2",
            (session_id, limit),
        )
        return [_event(r) for r in rows]

    def snapshot(self, session_id: str) -> Snapshot:
        """The session as a new request is matched against it, in one read.

        Events are append-only (triggers enforce it), so the ones this store has read
        before are kept (:data:`SNAPSHOT_SESSIONS` sessions, least recently used dropped)
        and a snapshot reads only the events after them: a continued turn decodes its new
        messages, not its whole history again. Which attempts are superseded is read
        each time (a later attempt can supersede an event already kept). The five reads go
        together (on PostgreSQL one statement: :meth:`Database.read_each`)."""
        kept, reads = self._snapshot_reads(session_id)
        return self._snapshot(session_id, kept,
                              self._db.read_each(reads, shapes=_SNAPSHOT_SHAPES))

    def find_with_snapshot(self, scope: str, prefix_sha256s: Sequence[str],
                           guess: str) -> tuple[str | None, Snapshot | None]:
        """:meth:`find_prefix`, and in the same read the :meth:`snapshot` of ``guess``, the
        session the caller expects it to find (one round trip on PostgreSQL where there
        were two): the snapshot when the guess was right, else None (the caller takes the
        snapshot of what was found)."""
        if not 0 < len(prefix_sha256s) <= _IN_BATCH:
            return self.find_prefix(scope, prefix_sha256s), None
        wanted = sorted(set(prefix_sha256s))
        kept, reads = self._snapshot_reads(guess)
        found, *rows = self._db.read_each([(_prefix_query(len(wanted)), (scope, *wanted)),
                                           *reads], shapes=("it", *_SNAPSHOT_SHAPES))
        session = str(found[0][1]) if found else None
        if session != guess:
            return session, None
        return session, self._snapshot(guess, kept, rows)

    def _snapshot_reads(self, session_id: str
                        ) -> tuple[list[Event], list[tuple[str, tuple[Any, ...]]]]:
        """The events of the session this store has kept, and the reads a snapshot of it
        makes (:meth:`snapshot`)."""
        with self._lock:
            known = self._read.get(session_id)
        kept = known.events if known is not None else []
        after = kept[-1].seq if kept else -1
        return kept, [(_EVENTS_AFTER, (session_id, after)), (_RETRIED, (session_id,)),
                      (_LAST_TURN, (session_id,)), (_LAST_LEASE, (session_id,)),
                      (_SCOPE, (session_id,))]

    def _snapshot(self, session_id: str, kept: list[Event],
                  read: Sequence[list[Any]]) -> Snapshot:
        """The snapshot of a session from what :meth:`_snapshot_reads` read."""
        rows, retried, last_done, last_running, scope = read
        superseded = frozenset(str(r[0]) for r in retried)
        done = last_done[0] if last_done else None
        running = last_running[0] if last_running else None
        owner = _owner(scope[0] if scope else None)
        # In seq order whatever the read's plan (a UNION's branches promise no order on
        # PostgreSQL: Database.read_each's shapes); already sorted, this costs one pass.
        every = [*kept, *sorted(map(_event, rows), key=_SEQ)] if rows else kept
        marks = [TurnMark(r[0], r[1] if isinstance(r[1], int) else None, r[2], live)
                 for r, live in ((done, False), (running, True)) if r is not None]
        latest = max(marks, key=lambda m: m.started_at) if marks else None
        with self._lock:
            before = self._read.get(session_id)
        if before is not None and before.settled and before.latest is not None:
            # What holding it would have judged from: still so? (the share HOLD_AT needs)
            self._learn((every[-1].seq if every else -1) == (
                before.events[-1].seq if before.events else -1)
                and latest == before.latest and len(retried) == before.retried)
        if every or owner is not None:
            self._know(session_id, _Known(every, superseded, len(retried), latest, owner,
                                          settled=False))
        return _shown(every, superseded, latest, owner)

    def _learn(self, unchanged: bool) -> None:
        """One more session this store answered last found unchanged, or changed."""
        with self._lock:
            self._sure = self._sure * 0.9 + (0.1 if unchanged else 0.0)

    def _moved(self, session_id: str, guard: Guard) -> SessionMoved:
        """An expected append's failure (:meth:`append`); a held snapshot's is learned."""
        if guard.held is not None:
            self._learn(False)
        return SessionMoved(session_id)

    def _know(self, session_id: str, known: _Known) -> None:
        with self._lock:
            self._read[session_id] = known
            self._read.move_to_end(session_id)
            while len(self._read) > SNAPSHOT_SESSIONS:
                self._read.popitem(last=False)

    def _committed(self, session_id: str, rows: list[tuple[Any, ...]],
                   turn: TurnRecord | None, created: str | None, *, held: bool) -> None:
        """After an :meth:`append` committed (Database.after_commit): what the store knows
        of the session grows by what it wrote (its rows as stored, its turn record; a
        session it created, ``created`` its scope, is known from nothing). Settled when a
        turn record ended the append (the turn's answer: its lease ended with it).
        ``held``: the append was judged from a held snapshot, which proved right."""
        if held:
            self._learn(True)
        with self._lock:
            known = self._read.get(session_id)
        if known is None:
            if created is None:
                return
            known = _Known([], frozenset(), 0, None, created, settled=False)
        head = known.events[-1].seq if known.events else -1
        if rows and rows[0][1] != head + 1:  # others appended between: read next time
            with self._lock:
                known.settled = False
            return
        superseded, retried, latest = known.superseded, known.retried, known.latest
        if turn is not None:
            base = turn.details.get("base")
            latest = TurnMark(turn.id, base if type(base) is int else None, turn.started_at,
                              False)
            retry_of = turn.details.get("retry_of")
            if turn.outcome == "ok" and retry_of is not None:
                superseded, retried = superseded | {str(retry_of)}, retried + 1
        events = [*known.events, *map(_event, rows)] if rows else known.events
        self._know(session_id, _Known(events, superseded, retried, latest, known.scope,
                                      settled=turn is not None))

    def held(self, session_id: str, *, scope: str,
             lookup: tuple[str, Sequence[str]] | None = None) -> Snapshot | None:
        """The session judged from what this store holds, when the last thing it knows of
        it is its own answer (:class:`_Known`), without reading it: the snapshot a read
        would give if nothing changed since, marked :class:`Held` so the append that
        follows checks that nothing did (``Guard.held``). Once: the next turn of the
        session reads, or is judged from its own answer. ``lookup``: a stock client's
        scope and the prefix hashes it would have looked up with the session (checked too;
        only in the session's own scope, where each noted row that names the session
        passes the lookup's scope check of its session as it is: the check can then leave
        that out, and a longer row naming another scope's session fails it, to be read).
        ``scope``: whose request it is; another scope's session is never held for it (it
        is read, and refused as the read finds it, without spending what this store held
        for its own client's next turn). None where nothing is held, on SQLite (a read
        there is no round trip), and while this store does not find such sessions
        unchanged often enough (:data:`HOLD_AT`: replicas dealt one conversation's turns
        in turn).

        Only for a judgement whose write checks it: an append with a guard holding
        ``snapshot.held``, with ``expect`` or not (without, it reads and checks first)."""
        if self._db.url is None or (lookup is not None and not 0 < len(lookup[1]) <= _IN_BATCH):
            return None
        with self._lock:
            known = self._read.get(session_id)
            if known is None or not known.settled or known.latest is None \
                    or known.latest.running or known.scope != scope \
                    or (lookup is not None and lookup[0] != scope):
                return None  # another scope's session, or a lookup in another: read
            if self._sure < HOLD_AT:
                return None  # read (and the read tells whether holding would have done)
            known.settled = False
        return _shown(known.events, known.superseded, known.latest, known.scope,
                      Held(known.latest.id, known.retried,
                           None if lookup is None else (lookup[0], tuple(lookup[1]))))

    def body_hashes(self, session_id: str) -> tuple[list[str], int, str | None]:
        """The SHA-256 of each of the session's messages in order (kept or not), its head
        sequence number and its scope (None: no such session), in one read."""
        with self._db.reading() as conn:
            rows = conn.execute(
                "SELECT body_sha256, CASE WHEN body_sha256 = '' THEN body END FROM events"
                " WHERE session_id = ? ORDER BY seq", (session_id,)).fetchall()
            head = conn.execute("SELECT COALESCE(MAX(seq), -1) FROM events WHERE session_id = ?",
                                (session_id,)).fetchone()[0]
            owner = _scope_in(conn, session_id)
        return [str(r[0]) or _body_hash(r[1]) for r in rows], int(head), owner

    def scope_of(self, session_id: str) -> str | None:
        """Whose the session is (:mod:`~deepseek_eyes.store.scopes`); None when there is
        no such session."""
        with self._db.reading() as conn:
            return _scope_in(conn, session_id)

    def issued_calls(self, call_ids: Sequence[str], *,
                     scope: str) -> dict[str, list[JsonObject]]:
        """The stored assistant messages of ``scope``'s sessions that hold each of
        ``call_ids`` among their tool calls, newest first (ids are the upstream's and
        unique in practice, but nothing here relies on it). Another scope's messages are
        never found: a client that echoes an id it saw elsewhere gets nothing back."""
        wanted = sorted({c for c in call_ids if isinstance(c, str) and c})
        found: dict[str, list[JsonObject]] = {}
        for start in range(0, len(wanted), _IN_BATCH):
            batch = wanted[start:start + _IN_BATCH]
            marks = ",".join("?" * len(batch))
            rows = self._db.query(
                "SELECT c.call_id, e.body FROM event_calls c JOIN events e ON e.id = c.event_id"  # noqa: S608 - only "?" marks are formatted in
                f" WHERE c.call_id IN ({marks})"
                f" AND {_SCOPE_OF.format(session='e.session_id')} = ? ORDER BY e.id DESC",
                (*batch, scope),
            )
            for row in rows:
                found.setdefault(row["call_id"], []).append(json.loads(row["body"]))
        return found

    def messages(self, session_id: str) -> list[JsonObject]:
        """The session's messages as a continuing client and the model see them (without
        superseded attempts), all of them: a history resent from here must be whole, or
        it would read as an edited one and fork."""
        return [event.message for event in self.events(session_id, limit=-1, effective=True)]

    def fork_of(self, session_id: str) -> Fork | None:
        """The session this one was forked from, or None."""
        row = self._db.query_one(
            "SELECT forked_from, fork_at FROM sessions WHERE id = ?", (session_id,)
        )
        if row is None or row["forked_from"] is None:
            return None
        return Fork(str(row["forked_from"]), int(row["fork_at"]))

    def sessions(self, *, limit: int = 100, search: str | None = None) -> list[SessionSummary]:
        """Sessions, most recently active first; ``search``: only those with a message
        holding that text (case-insensitive for ASCII letters)."""
        where, params = "", list[str]()
        if search:
            escaped = search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where = (" WHERE EXISTS (SELECT 1 FROM events f WHERE f.session_id = s.id"
                     " AND f.body LIKE ? ESCAPE '\\')")
            params.append(f"%{escaped}%")
        owner = "'legacy'"
        if self._db.schema_version >= SCOPES_MIGRATION:
            owner = ("COALESCE((SELECT o.scope FROM session_scopes o WHERE o.session_id = s.id),"
                     " 'legacy')")
        rows = self._db.query(
            f"SELECT s.id, s.created_at, s.source, {owner} AS scope,"  # noqa: S608 - constant fragments, values bound
            " s.forked_from, s.fork_at,"
            " COUNT(e.id) AS events, MAX(e.ts) AS last_at,"
            " (SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id) AS turns,"
            " (SELECT model FROM turns t WHERE t.session_id = s.id"
            "  ORDER BY started_at DESC LIMIT 1) AS model,"
            " (SELECT body FROM events u WHERE u.session_id = s.id AND u.role = 'user'"
            "  ORDER BY seq LIMIT 1) AS first_user"
            f" FROM sessions s LEFT JOIN events e ON e.session_id = s.id{where}"
            " GROUP BY s.id ORDER BY COALESCE(MAX(e.ts), s.created_at) DESC LIMIT ?",
            (*params, limit),
        )
        out: list[SessionSummary] = []
        for r in rows:
            row = dict(r)
            first = row.pop("first_user")
            row["title"] = title_of(json.loads(first) if first else None)
            out.append(cast(SessionSummary, row))  # the SELECT's columns and the title
        return out

    def record_turn(self, turn: TurnRecord) -> None:
        """Write a turn's record and end its lease, in one transaction."""
        with self._db.transaction() as conn:
            chain.insert(conn, "turn", _INSERT_TURN, _turn_row(turn), self._clock())
            self.leases.close(conn, turn.id)

    def remember_prefix(self, scope: str, prefix_sha256: str, session_id: str,
                        length: int) -> None:
        """Note that a client-visible history of ``length`` messages, by its chained hash,
        is where ``session_id`` stands now (inside the caller's transaction, the answer's)."""
        self._db.write(
            "INSERT OR REPLACE INTO session_prefixes (scope, prefix_sha256, session_id, length,"
            " ts) VALUES (?,?,?,?,?)", (scope, prefix_sha256, session_id, length, self._clock()))

    def remember_response(self, response_id: str, session_id: str, *, scope: str) -> None:
        """Note that ``response_id`` (a Responses answer kept with ``store``) was answered
        in ``session_id`` for ``scope``, so ``previous_response_id`` continues there."""
        self._db.write(
            "INSERT OR REPLACE INTO stored_responses (id, session_id, scope, ts)"
            " VALUES (?,?,?,?)", (response_id, session_id, scope, self._clock()))

    def response_session(self, response_id: str, *, scope: str) -> str | None:
        """The session a stored response of ``scope`` was answered in, or None (unknown,
        another scope's, or kept with ``store: false``)."""
        row = self._db.query_one(
            "SELECT r.session_id FROM stored_responses r JOIN session_scopes o"
            " ON o.session_id = r.session_id AND o.scope = r.scope"
            " WHERE r.id = ? AND r.scope = ?", (response_id[:256], scope))
        return str(row[0]) if row is not None else None

    def find_prefix(self, scope: str, prefix_sha256s: Sequence[str]) -> str | None:
        """The session whose noted history is the longest of ``prefix_sha256s`` (the chained
        hashes of a request's leading messages), or None."""
        wanted = sorted(set(prefix_sha256s))
        best: tuple[int, str] | None = None
        for start in range(0, len(wanted), _IN_BATCH):
            batch = wanted[start:start + _IN_BATCH]
            row = self._db.query_one(_prefix_query(len(batch)), (scope, *batch))
            if row is not None and (best is None or row[0] > best[0]):
                best = (int(row[0]), str(row[1]))
        return best[1] if best else None

    def queue_turn(self, turn: TurnRecord) -> None:
        """:meth:`record_turn` for when the store cannot write now (a full disk): queued,
        and written by the next write that succeeds (or at close)."""
        self._db.append(_INSERT_TURN, _turn_row(turn), chain="turn", quiet=True)
        self._db.append("DELETE FROM turn_leases WHERE turn_id = ?", (turn.id,), quiet=True)

    def turns(self, session_id: str) -> list[TurnRecord]:
        rows = self._db.query(
            "SELECT * FROM turns WHERE session_id = ? ORDER BY started_at", (session_id,)
        )
        return [
            TurnRecord(
                r["id"], r["session_id"], r["started_at"], r["ended_at"], r["model"], r["path"],
                r["outcome"], r["code"], read_details(json.loads(r["details"])),
            )
            for r in rows
        ]
