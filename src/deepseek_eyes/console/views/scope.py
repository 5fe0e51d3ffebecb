"""Which conversations and images a login may see: a person's own login sees every one, a
login made with a gateway key only its client scope's (``session_scopes``); anything else
is answered as if it did not exist.
"""

from __future__ import annotations

from deepseek_eyes.errors import ConsoleError
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.events import SCOPES_MIGRATION

__all__ = ["image_in_scope", "in_scope", "require_scope"]



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
