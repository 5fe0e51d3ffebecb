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

import itertools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from deepseek_eyes.usage import estimate_tokens

__all__ = ["each_cost", "fit", "message_tokens"]



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


def fit(messages: Sequence[Mapping[str, Any]], budget: int,
        costs_of: Callable[[Sequence[Mapping[str, Any]]], list[int]] = each_cost,
        ) -> tuple[list[Mapping[str, Any]], int]:
    """``messages`` fitted to ``budget`` estimated tokens, and how many were left out;
    ``costs_of`` estimates each message (a memo's, for messages it counted before). The
    list is new; the messages in it are the ones given (never mutate them)."""
    costs = costs_of(messages)
    # The messages themselves, not copies: nothing mutates a message once it is in a
    # request (the view's renderings are shared between turns, and the client encodes
    # the payload as it is); a copy of each was most of the cost of a long history.
    out = list(messages)
    total = sum(costs)
    if total <= budget:
        return out, 0
    last_user = max((i for i, m in enumerate(out) if m.get("role") == "user"), default=0)
    keep = [True] * len(out)
    tail = list(_groups(out, last_user + 1, len(out)))
    # Older history first, then the current instruction's exchanges, oldest first; the
    # newest exchange stays (the model must read what it just asked for).
    candidates = itertools.chain(_groups(out, 0, last_user), tail[:-1])
    for group in candidates:
        if total <= budget:
            break
        for member in group:
            keep[member] = False
            total -= costs[member]
    kept = [m for m, k in zip(out, keep, strict=True) if k]
    dropped = len(out) - len(kept)
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
