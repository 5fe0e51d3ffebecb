"""The exposure policy as small wrappers, each with one job, that compose.

What a model is offered is decided twice in this project — by the runtime's
:class:`~deepseek_eyes.runtime.tools.ToolHub` over its sources' tools, and by the MCP host
over the connected servers' catalogs — and both decide it the same way: a *filter*, a *risk
gate*, a *namespace prefix* and a *budget*, in a fixed order. Each is a :data:`Stage`, a
function from the candidates to those that pass, generic over what a candidate is (a
``(ToolSpec, ToolSource)`` pair, an MCP catalog entry): the caller says how to read a
candidate's name, risk, namespace or cost. :func:`chained` applies stages in order.

Every stage keeps the candidates' order, so "first wins" and "in source order" mean the
same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

__all__ = ["READ_RISKS", "Stage", "budgeted", "chained", "filtered", "namespaced",
           "risk_gated"]

T = TypeVar("T")
Stage = Callable[[list[T]], list[T]]

READ_RISKS = frozenset({"read"})


def filtered(keep: Callable[[T], bool]) -> Stage[T]:
    """Filter: only the candidates ``keep`` says yes to."""
    return lambda items: [item for item in items if keep(item)]


def risk_gated(read_only: bool, risk: Callable[[T], str],
               allowed: Collection[str] = READ_RISKS) -> Stage[T]:
    """Risk gate: with ``read_only`` only candidates whose risk is in ``allowed`` pass;
    otherwise everything does."""
    if not read_only:
        return lambda items: items
    return filtered(lambda item: risk(item) in allowed)


def namespaced(name: Callable[[T], str], prefix: Callable[[T], str]) -> Stage[T]:
    """Prefix: a name only inside its owner's namespace, and each name once (the first
    candidate wins), so no owner can shadow another's tool."""

    def stage(items: list[T]) -> list[T]:
        seen: set[str] = set()
        out: list[T] = []
        for item in items:
            named = name(item)
            if not named.startswith(prefix(item)) or named in seen:
                continue
            seen.add(named)
            out.append(item)
        return out

    return stage


def budgeted(max_count: int, max_cost: int, cost: Callable[[T], int]) -> Stage[T]:
    """Budget: candidates in order while both their count and their summed cost fit; one
    that does not fit is skipped and a cheaper one after it may still pass."""

    def stage(items: list[T]) -> list[T]:
        out: list[T] = []
        spent = 0
        for item in items:
            price = cost(item)
            if len(out) >= max_count or spent + price > max_cost:
                continue
            spent += price
            out.append(item)
        return out

    return stage


def chained(stages: Sequence[Stage[T]]) -> Stage[T]:
    """The stages applied in order."""

    def stage(items: list[T]) -> list[T]:
        for each in stages:
            items = each(items)
        return items

    return stage
