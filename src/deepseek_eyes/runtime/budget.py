"""The history budget: what one model call may carry, on every path.

A request is fitted to ``runtime.history_budget_tokens`` (an estimate) before *every*
model call of a turn: the text, bridged and native paths alike, and again after each of
the turn's own tool rounds, whose results would otherwise grow the request without bound
(a browser agent reading page after page is a text turn). What goes first:

1. the oldest messages before the newest user message (an assistant message with tool
   calls leaves together with its results, so no result is ever sent without its call);
2. then, inside the current instruction, the oldest tool exchanges (a call message and all
   its results, atomically), the newest one always kept;

and always kept: system messages, the newest user message (the task), the newest exchange.
A note in place of what was left out says how many messages it was. A request that still
does not fit goes as it is: the upstream's own limit then decides.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deepseek_eyes.runtime.walks import leading_equal
from deepseek_eyes.usage import estimate_tokens

__all__ = ["FitMemo", "each_cost", "fit", "message_tokens"]



def message_tokens(message: Mapping[str, Any]) -> int:
    """Estimated tokens of one message as it is sent."""
    return estimate_tokens(len(json.dumps(message, ensure_ascii=False)))


def _groups(messages: Sequence[Mapping[str, Any]], start: int, end: int) -> Iterator[list[int]]:
    """Indices in ``[start, end)`` as droppable groups, oldest first: an assistant message
    with tool calls together with the tool results that follow it; any other message alone
    (system messages are never grouped: they are not dropped). Lazily: the fitting stops
    at the first group that makes it fit."""
    index = start
    while index < end:
        message = messages[index]
        if message.get("role") == "system":
            index += 1
            continue
        group = [index]
        index += 1
        if message.get("tool_calls"):
            while index < end and messages[index].get("role") == "tool":
                group.append(index)
                index += 1
        yield group


def each_cost(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """:func:`message_tokens` of each message."""
    return [message_tokens(m) for m in messages]


@dataclass
class _Fitted:
    """Where the oldest-first walk of a fitted list stood: every message before
    ``boundary`` (a group's start) left out but the system messages among them
    (``systems``); ``previous``: the start of the last group it left out before that."""

    messages: list[Mapping[str, Any]]
    boundary: int
    previous: int
    systems: list[int]


class FitMemo:
    """Per key (a session), where the last fitting of its history stood, so that the
    next one, of a history that starts with the same messages, walks on from there
    instead of from the oldest message: a long conversation is fitted in time that grows
    with what is kept and what is new, not with all that was ever left out. The result
    is the one the whole walk gives (see :func:`fit`). Bounded: :attr:`entries` keys and
    :attr:`items` messages referenced in all, least recently used dropped."""

    def __init__(self, *, entries: int = 256, items: int = 500_000) -> None:
        self.entries = entries
        self.items = items
        self._held = 0
        self._kept: OrderedDict[str, _Fitted] = OrderedDict()

    def get(self, key: str) -> _Fitted | None:
        found = self._kept.pop(key, None)
        if found is not None:
            self._held -= len(found.messages)
        return found

    def put(self, key: str, fitted: _Fitted) -> None:
        if len(fitted.messages) > self.items:
            return
        self._kept[key] = fitted
        self._held += len(fitted.messages)
        while len(self._kept) > self.entries or self._held > self.items:
            _, dropped = self._kept.popitem(last=False)
            self._held -= len(dropped.messages)


def _resume(out: list[Mapping[str, Any]], costs: list[int], total: int, budget: int,
            last_user: int, kept: _Fitted | None) -> _Fitted | None:
    """``kept`` when the walk over ``out`` would pass its boundary: the messages up to it
    (and the one at it: a group's end depends on it) are equal, so the groups before it
    are the same, and the walk does not stop before it (it stops before a group only once
    the total fits, and the total after the last group before the boundary does not)."""
    if kept is None or not 0 < kept.boundary <= last_user or kept.boundary >= len(out) \
            or kept.messages[0] is not out[0] \
            or leading_equal(out, kept.messages, kept.boundary + 1) <= kept.boundary:
        return None
    # The costs are this list's own: equal messages, and costs summed again in C.
    before = sum(costs[:kept.previous]) - sum(costs[i] for i in kept.systems
                                               if i < kept.previous)
    return kept if total - before > budget else None


def fit(messages: Sequence[Mapping[str, Any]], budget: int,
        costs_of: Callable[[Sequence[Mapping[str, Any]]], list[int]] = each_cost,
        *, memo: FitMemo | None = None, key: str | None = None,
        ) -> tuple[list[Mapping[str, Any]], int]:
    """``messages`` fitted to ``budget`` estimated tokens, and how many were left out;
    ``costs_of`` estimates each message (a memo's, for messages it counted before);
    ``memo`` and ``key``: the walk goes on from where the last one of ``key`` stood when
    it would pass there (:class:`FitMemo`). The list is new; the messages in it are the
    ones given (never mutate them)."""
    costs = costs_of(messages)
    # The messages themselves, not copies: nothing mutates a message once it is in a
    # request (the view's renderings are shared between turns, and the client encodes
    # the payload as it is); a copy of each was most of the cost of a long history.
    out = list(messages)
    total = sum(costs)
    if total <= budget:
        return out, 0
    n = len(out)
    last_user = next((i for i in range(n - 1, -1, -1) if out[i].get("role") == "user"), 0)
    resumed = _resume(out, costs, total, budget, last_user,
                      memo.get(key) if memo is not None and key is not None else None)
    start, previous, systems = 0, 0, []
    if resumed is not None:
        start, previous, systems = resumed.boundary, resumed.previous, list(resumed.systems)
        total -= sum(costs[:start]) - sum(costs[i] for i in systems)
    keep = [True] * (n - start)  # of out[start:]
    tail = list(_groups(out, last_user + 1, n))
    # Older history first, then the current instruction's exchanges, oldest first; the
    # newest exchange stays (the model must read what it just asked for).
    boundary = last_user
    for group in _groups(out, start, last_user):
        if total <= budget:
            boundary = group[0]
            break
        previous = group[0]
        for member in group:
            keep[member - start] = False
            total -= costs[member]
    else:
        for group in tail[:-1]:
            if total <= budget:
                break
            for member in group:
                keep[member - start] = False
                total -= costs[member]
    systems.extend(i for i in range(start, boundary) if out[i].get("role") == "system")
    if memo is not None and key is not None and boundary > 0:
        memo.put(key, _Fitted(out, boundary, previous, systems))
    kept = [out[i] for i in systems if i < start] + [
        m for m, k in zip(out[start:], keep, strict=True) if k]
    dropped = n - len(kept)
    # A tool result whose call was dropped would be refused upstream: drop it too.
    first_other = next((i for i, m in enumerate(kept) if m.get("role") != "system"), len(kept))
    while first_other < len(kept) and kept[first_other].get("role") == "tool":
        kept.pop(first_other)
        dropped += 1
    if dropped:
        kept.insert(first_other, {
            "role": "system",
            "content": f"[{dropped} earlier message(s) were left out to fit the history budget]",
        })
    return kept, dropped
