"""Latencies as they happen, for whoever listens: the gateway's Prometheus histograms.

The model client (llm/), the vision route guard (vision/) and the MCP host's call audit
(mcp_host/) each time one call and tell :func:`observe` what it was (``upstream``,
``vision``, ``mcp``), with a few bounded labels (a model or route or server name, an
outcome word) and never a content. A gateway's metrics (gateway/metrics.py) listen with
:func:`listen`; without a listener an observation costs one empty loop.

Why a listener here rather than the store's rows at scrape time (as the counters are): a
histogram read from the store would fold every call's latency into buckets on each scrape,
and the upstream chat call has no row with its duration; observed in process, a scrape
costs nothing more. Why a weak set: tests and ``serve`` make a gateway's metrics per app;
one that is gone stops listening without being told.
"""

from __future__ import annotations

import weakref
from typing import Literal, Protocol

__all__ = ["Kind", "LatencySink", "listen", "observe"]

Kind = Literal["upstream", "vision", "mcp"]


class LatencySink(Protocol):
    def observe(self, kind: Kind, name: str, outcome: str, seconds: float) -> None:
        """One call of ``kind`` to ``name`` (model, route, server) ended with ``outcome``
        after ``seconds``."""
        ...


_sinks: weakref.WeakSet[LatencySink] = weakref.WeakSet()


def listen(sink: LatencySink) -> None:
    """Tell ``sink`` every observation from now on, while it lives."""
    _sinks.add(sink)


def observe(kind: Kind, name: str | None, outcome: str, seconds: float) -> None:
    """One finished call (see the module docstring)."""
    if not _sinks:  # a length: iterating a WeakSet, even an empty one, enters a guard
        return
    for sink in list(_sinks):
        sink.observe(kind, name or "none", outcome, seconds)
