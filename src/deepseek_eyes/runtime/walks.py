"""Walks over a conversation that a continued turn takes only over what is new.

A turn looks at its history several times for a few kinds of message: the ones holding
images, the assistant messages that lack their reasoning, the runtime's internal ones.
Each of those walks is a filter by a test of one message alone, so over a list that starts
with the items of the list walked last time, the answer for those items is the one found
then: only the rest need be tested. A stock client resends its whole history, and the
messages of that history are the same objects turn after turn (the gateway's memo of
resent bodies, the session store's kept events, the view's renderings), so comparing the
lists is a pointer compare in C, and a long conversation's turn tests its new messages
only.

Decisions a newcomer would otherwise undo:

* **Reuse never changes a result.** Leading items are compared with ``==`` (identity
  first, then value: an equal message passes the same test), and a test must be a
  function of the message alone (:meth:`HistoryWalks.where`'s contract). Whatever differs
  is tested again.
* **Bounded and keyed.** One entry per (key, walk), least recently used dropped past
  :data:`WALK_ENTRIES` entries or :data:`WALK_ITEMS` references in all; an entry holds
  references to messages the session memos hold anyway. The
  key says whose list it is (a session, a client's scope): one key's entry is never
  compared with another's list.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["WALK_ENTRIES", "WALK_ITEMS", "HistoryWalks", "leading_equal"]

#: Entries kept in all (each walk of each key is one).
WALK_ENTRIES = 512
#: Items (references to messages) the entries' lists hold in all.
WALK_ITEMS = 1_000_000
#: Lists this short are walked whole and not kept: testing them costs less than the memo.
SHORT = 48

T = TypeVar("T")


def leading_equal(left: Sequence[Any], right: Sequence[Any], limit: int | None = None) -> int:
    """How many leading items two lists have equal (at most ``limit``): compared whole
    first (in C), then by halves to the first difference."""
    n = min(len(left), len(right))
    if limit is not None:
        n = min(n, limit)
    if _part(left, 0, n) == _part(right, 0, n):
        return n
    lo, hi = 0, n  # left[:lo] == right[:lo]; they differ somewhere before hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _part(left, lo, mid) == _part(right, lo, mid):
            lo = mid
        else:
            hi = mid
    return lo


def _part(items: Sequence[Any], start: int, end: int) -> list[Any]:
    part = items[start:end]
    return part if isinstance(part, list) else list(part)


class HistoryWalks:
    """The last list each (key, walk) saw and what the walk found in it (see the module
    docstring)."""

    def __init__(self, *, entries: int = WALK_ENTRIES, items: int = WALK_ITEMS) -> None:
        self._max = entries
        self._max_items = items
        self._items = 0
        self._kept: OrderedDict[tuple[str, str], tuple[list[Any], list[int]]] = OrderedDict()

    def where(self, key: str | None, items: Sequence[T], walk: str,
              test: Callable[[T], Any]) -> list[int]:
        """The indices of the items ``test`` holds for, in order; ``test`` must depend on
        the item alone. ``key`` None, or a list of at most :data:`SHORT` items: walked
        whole, nothing kept."""
        if key is None or len(items) <= SHORT:
            return [i for i, item in enumerate(items) if test(item)]
        kept = self._kept.pop((key, walk), None)
        if kept is not None:
            self._items -= len(kept[0])
        start = 0
        found: list[int] = []
        if kept is not None and items and kept[0] and kept[0][0] is items[0]:
            start = leading_equal(items, kept[0])
            found = kept[1][:bisect.bisect_left(kept[1], start)]
        found.extend(i for i in range(start, len(items)) if test(items[i]))
        if len(items) <= self._max_items:
            self._kept[(key, walk)] = (list(items), found)
            self._items += len(items)
        while len(self._kept) > self._max or self._items > self._max_items:
            _, (dropped, _found) = self._kept.popitem(last=False)
            self._items -= len(dropped)
        return list(found)

    def select(self, key: str | None, items: Sequence[T], walk: str,
               test: Callable[[T], Any]) -> list[T]:
        """The items :meth:`where` finds."""
        return [items[i] for i in self.where(key, items, walk, test)]
