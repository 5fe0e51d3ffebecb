"""Closing turns a dead process left half-written, when a process opens the store.

A turn's request is logged (with its lease, :mod:`deepseek_eyes.store.leases`) before any
upstream call, and its record is written when it ends. A process killed in between (kill
-9, a power cut, the OOM killer) leaves a user message with no answer and no record. The
next runtime to open the data directory (``serve``, ``ask``, ``chat``) closes each such
turn whose owner is gone (:func:`~deepseek_eyes.store.owner.alive`): a turn record with
outcome ``aborted`` (``RUNTIME_TURN_ABORTED``, ``reason: "process ended"``) and a chained
``turn.aborted`` audit row, in one transaction. Turns another live process runs are left
alone. A client that retries such a turn sends the same history again, and its new turn
is an attempt of the aborted one in the same session (``retry_of``).

The calls the dead turn had sent stay as they are: written ahead as pending
``llm.request`` rows, with no completion, they read as "called, outcome unknown".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from deepseek_eyes.audit.log import AuditLog
from deepseek_eyes.errors import StoreError
from deepseek_eyes.runtime.turn.ledger import ABORTED
from deepseek_eyes.store.events import SessionStore, TurnRecord
from deepseek_eyes.store.leases import Lease
from deepseek_eyes.store.owner import alive

__all__ = ["recover"]

_log = logging.getLogger(__name__)


def recover(sessions: SessionStore, audit: AuditLog, *,
            is_alive: Callable[[str], bool] = alive) -> list[Lease]:
    """Close the turns whose process died; returns their leases (empty almost always)."""
    closed: list[Lease] = []
    try:
        orphaned = sessions.leases.orphaned(is_alive)
    except StoreError as exc:
        _log.warning("half-written turns were not looked for: %s (%s)", exc.message, exc.code)
        return closed
    for lease in orphaned:
        details: dict[str, object] = {"stage": "recovery", "reason": "process ended",
                                      "base": lease.base, "owner": lease.owner}
        if lease.retry_of is not None:
            details["retry_of"] = lease.retry_of
        try:
            with sessions.batch():
                audit.write("turn.aborted", lease.turn_id, session_id=lease.session_id,
                            reason="process ended", owner=lease.owner)
                sessions.record_turn(TurnRecord(
                    id=lease.turn_id, session_id=lease.session_id,
                    started_at=lease.started_at, ended_at=time.time(), model=lease.model,
                    path=lease.path or "text", outcome="aborted", code=ABORTED,
                    details=details,
                ))
        except StoreError as exc:  # a full disk: the lease stays, the next open retries
            _log.warning("a half-written turn could not be closed: %s (%s)", exc.message,
                         exc.code)
            break
        closed.append(lease)
    if closed:
        _log.warning("closed %d turn(s) left half-written by a process that ended",
                     len(closed))
    return closed
