"""Scopes: whose a stored thing is, so that one client reaches back only to its own.

Several clients share one data directory: each gateway key's clients, the local user's
CLI (``ask``, ``chat``, ``see``), a vision server's clients. Everything stored that a
client can reach back to later (a session by its id or by its history's hash, the
reasoning of a tool call it echoes, an answer kept under an Idempotency-Key, the evidence
cache's ``cached`` flag) is stored with the scope that made it, and looked up only within
the asking scope (docs/security.md, "Scopes").

Decisions a newcomer would otherwise undo:

* **A scope names a credential by a stable id derived from it, never the credential.**
  ``gateway:<32 hex>`` is a hash of the gateway key (the same id idempotency keys and
  noted histories always used), so a key's conversations survive a restart with the same
  key and are out of reach of any other key; rotating the key starts a new scope.
* **``legacy`` belongs to nobody.** A session stored before scopes whose owner cannot be
  told (migration 10) is reachable by no gateway key; the CLI continues it only with
  ``--force``.

Stdlib only: it sits in the store, which knows nothing above it.
"""

from __future__ import annotations

import hashlib

__all__ = ["CLI", "GATEWAY_OPEN", "LEGACY", "gateway", "label", "vision"]

#: The local user's command line (``ask``, ``chat``, ``see``) and in-process callers.
CLI = "cli"
#: Stored before scopes, owner unknown: reachable by no gateway key.
LEGACY = "legacy"
#: A gateway served without a key (loopback only): all its clients share this scope.
GATEWAY_OPEN = "gateway:open"
_ID_CHARS = 32


def _key_id(secret: str) -> str:
    return hashlib.sha256(("key:" + secret).encode()).hexdigest()[:_ID_CHARS]


def gateway(key: str | None) -> str:
    """The scope of a gateway key's clients (:data:`GATEWAY_OPEN` without a key)."""
    return GATEWAY_OPEN if key is None else "gateway:" + _key_id(key)


def vision(token: str | None) -> str:
    """The scope of a vision server's clients: its bearer token's id, or the local user's
    (:data:`CLI`) for a server on stdio, which only the user's own MCP host can reach."""
    return CLI if token is None else "vision:" + _key_id(token)


def label(scope: str) -> str:
    """A scope as ``sessions list`` shows it: a key's id shortened to 12 hex digits."""
    kind, _, ident = scope.partition(":")
    if kind in ("gateway", "vision") and len(ident) == _ID_CHARS:
        return f"{kind}:{ident[:12]}"
    return scope
