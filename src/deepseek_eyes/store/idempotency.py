"""Answers kept under a client's ``Idempotency-Key``, so a retry is not billed twice.

A client that lost an answer (a cut connection, a timeout on its side) sends the same
request again under the same key; the gateway answers it from here, marked as replayed,
without calling the upstream. One row per (scope, key), where the scope is the gateway key
the request came with (one client's keys never meet another's) and the key is kept as its
SHA-256:

* ``running``: a request holds the key (its owner process, :mod:`deepseek_eyes.store.owner`);
  the same key meanwhile is ``busy`` (409). A holder that died is taken over.
* ``done``: the answer, written in the transaction that stores the turn's answer
  (:meth:`IdempotencyStore.complete`), so an answer that was stored can always be replayed.
* a request that failed releases its key: a retry runs again.

The same key with a different request (body, session) is ``mismatch`` (422): a key names
one request. Rows older than ``gateway.idempotency_ttl`` are removed when keys are claimed.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from deepseek_eyes import canonical_json
from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.owner import alive, owner

__all__ = ["Claim", "IdempotencyStore", "KeyRef"]


@dataclass(frozen=True)
class KeyRef:
    """A claimed key: where the answer goes when the turn stores it."""

    scope: str
    key_sha256: str
    request_sha256: str


@dataclass(frozen=True)
class Claim:
    state: Literal["new", "replay", "busy", "mismatch"]
    ref: KeyRef
    response: JsonObject | None = None  # for "replay": the stored answer
    session_id: str | None = None


class IdempotencyStore:
    def __init__(self, db: Database, *, ttl_s: float = 86400.0,
                 clock: Callable[[], float] = time.time,
                 is_alive: Callable[[str], bool] = alive) -> None:
        self._db = db
        self._ttl = ttl_s
        self._clock = clock
        self._alive = is_alive

    def claim(self, ref: KeyRef) -> Claim:
        """Hold ``ref`` for a request about to run, or say why it must not run."""
        now = self._clock()
        with self._db.transaction() as conn:
            # Claims of one key wait for each other (read, then written), others do not.
            self._db.hold(f"idempotency:{ref.scope}:{ref.key_sha256}")
            conn.execute("DELETE FROM idempotency_keys WHERE created_at < ?", (now - self._ttl,))
            row = conn.execute(
                "SELECT request_sha256, state, owner, response, session_id FROM idempotency_keys"
                " WHERE scope = ? AND key_sha256 = ?", (ref.scope, ref.key_sha256)).fetchone()
            if row is None:
                self._hold(conn, ref, now)
                return Claim("new", ref)
            held_for, state, holder, response, session_id = row
            if held_for != ref.request_sha256:
                return Claim("mismatch", ref)
            if state == "done" and response is not None:
                return Claim("replay", ref, json.loads(response), session_id)
            if holder == owner() or self._alive(holder):
                return Claim("busy", ref)
            # Its holder died mid-request: this request takes the key over.
            self._hold(conn, ref, now)
            return Claim("new", ref)

    @staticmethod
    def _hold(conn: sqlite3.Connection, ref: KeyRef, now: float) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO idempotency_keys (scope, key_sha256, request_sha256, state,"
            " owner, created_at) VALUES (?,?,?,'running',?,?)",
            (ref.scope, ref.key_sha256, ref.request_sha256, owner(), now))

    def complete(self, ref: KeyRef, *, turn_id: str, session_id: str,
                 response: JsonObject) -> None:
        """Keep the answer for replay; call it inside the transaction storing the turn."""
        self._db.write(
            "UPDATE idempotency_keys SET state = 'done', turn_id = ?, session_id = ?,"
            " response = ? WHERE scope = ? AND key_sha256 = ?",
            (turn_id, session_id, canonical_json.LENIENT.dumps(response), ref.scope,
             ref.key_sha256))

    def release(self, ref: KeyRef) -> None:
        """The request ended without a stored answer: a retry may run again."""
        self._db.execute(
            "DELETE FROM idempotency_keys WHERE scope = ? AND key_sha256 = ?"
            " AND state = 'running' AND owner = ?", (ref.scope, ref.key_sha256, owner()))
