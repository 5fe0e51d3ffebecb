"""A client's last request body, kept so that the history it resends is not parsed again.

A stock client (the official ``openai`` and ``anthropic`` clients, Claude Code, Codex)
sends no session id and resends its whole history on every request: the next body is the
last one's bytes up to the end of its last message, then the new messages, then the other
fields. Parsing and checking the whole history again made every turn O(n) in Python, the
largest share of a long conversation's gateway time.

Decisions a newcomer would otherwise undo:

* **Bytes, not meaning, decide a reuse.** A kept body's messages are reused only when the
  new body's text starts with exactly the text they were parsed from (one ``startswith``,
  a memory compare in C) and the ``messages`` value starts at the same offset. The JSON
  grammar is read left to right and a message object ends at its ``}`` whatever follows,
  so the same text parses to the same values: the reuse skips work and never changes a
  result. Anything else (an edited or trimmed history, spacing changed, another field
  first) is parsed whole, as without the memo; JSON that differs only in spacing or key
  order still matches a session later, by its canonical digest (runtime/turn/history.py).
* **Whatever the continuation meets that it does not expect, the whole value is parsed
  again from its start.** A syntax error, a value that is not an object: the full parse
  then raises or returns exactly what it would have without the memo.
* **Per client, bounded.** Entries are keyed by the client's scope (the gateway key's), so
  one client's kept body is never compared with, let alone reused for, another's; at most
  :data:`PER_SCOPE` conversations per scope and :data:`MAX_ENTRIES` in all are kept, and
  the kept text is bounded (:data:`MAX_KEPT_CHARS`), the least recently used dropped
  first. A body that failed any check is never kept.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_ENTRIES", "MAX_KEPT_CHARS", "PER_SCOPE", "Kept", "ResentBodies",
           "continue_messages"]

#: Conversations kept per client scope (a key used by a few clients at once).
PER_SCOPE = 4
#: Entries kept in all.
MAX_ENTRIES = 64
#: Characters of body text kept in all (the parsed messages cost some multiple of it).
MAX_KEPT_CHARS = 8 * 1024 * 1024

_WS = re.compile(r"[ \t\n\r]*")


@dataclass
class Kept:
    """One body's messages: the text up to the end of its last message (``prefix``), where
    the ``messages`` value starts in it (``start``), the parsed messages, and the state of
    the gateway's tool-reply check after them (``replies``: set by ``check_fields``,
    ``None`` until it passed)."""

    scope: str
    front: str
    start: int
    prefix: str
    messages: list[Any]
    replies: tuple[set[str] | bool | None] | None = None


def continue_messages(text: str, pos: int, kept: Kept,
                      decoder: json.JSONDecoder) -> tuple[list[Any], int] | None:
    """The ``messages`` array at ``pos`` of ``text``, its head taken from ``kept`` and the
    rest parsed, and where the value ends; ``None`` when ``text`` does not continue
    ``kept`` (the caller parses the value whole, which also raises whatever error the text
    holds)."""
    if pos != kept.start or not text.startswith(kept.prefix):
        return None
    items = list(kept.messages)  # a new list: the objects in it are shared
    at = len(kept.prefix)
    while True:
        at = _WS.match(text, at).end()  # type: ignore[union-attr]  # matches the empty string
        mark = text[at:at + 1]
        if mark == "]":
            return items, at + 1
        if mark != ",":
            return None
        at = _WS.match(text, at + 1).end()  # type: ignore[union-attr]
        try:
            value, at = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            return None  # parsed whole again: its own error, as without the memo
        items.append(value)


class ResentBodies:
    """The last bodies of each client scope (see the module docstring). Safe to use from
    the threads a large body is parsed in."""

    def __init__(self, *, per_scope: int = PER_SCOPE, entries: int = MAX_ENTRIES,
                 chars: int = MAX_KEPT_CHARS) -> None:
        self._per_scope = per_scope
        self._entries = entries
        self._chars = chars
        self._kept: OrderedDict[int, Kept] = OrderedDict()
        self._lock = threading.Lock()
        self._next = 0

    def candidates(self, scope: str, front: str) -> list[Kept]:
        """The scope's kept bodies of ``front``, most recently used first."""
        with self._lock:
            return [k for k in reversed(self._kept.values())
                    if k.scope == scope and k.front == front]

    def keep(self, kept: Kept, replaces: Kept | None) -> None:
        """Keep ``kept`` (the most recently used), in place of ``replaces`` (the entry the
        body continued), within the bounds."""
        if len(kept.prefix) > self._chars:
            return
        with self._lock:
            if replaces is not None:
                for key, entry in self._kept.items():
                    if entry is replaces:
                        del self._kept[key]
                        break
            self._next += 1
            self._kept[self._next] = kept
            same = [key for key, entry in self._kept.items()
                    if entry.scope == kept.scope and entry.front == kept.front]
            for key in same[:-self._per_scope]:
                del self._kept[key]
            total = sum(len(entry.prefix) for entry in self._kept.values())
            while len(self._kept) > self._entries or total > self._chars:
                _, dropped = self._kept.popitem(last=False)
                total -= len(dropped.prefix)

    def __len__(self) -> int:
        return len(self._kept)
