"""Prometheus metrics of a gateway: its HTTP traffic, and what its data directory recorded.

Two kinds of series, kept apart on purpose:

* **This process's traffic** (:class:`HttpMetrics`, an ASGI layer): requests by route
  template, method and status, their duration (a stream's until its last byte), and the
  requests in flight. Counted as they happen.
* **This process's calls** (:class:`CallLatencies`): how long upstream model calls,
  vision route calls and MCP calls took, as histograms observed when each call ends
  (:mod:`deepseek_eyes.telemetry.latency`), by model, route or server and an outcome word.
* **The store's totals** (:class:`StoreCollector`): upstream tokens by the usage ledger's
  categories, vision attempts by route, phase and outcome, MCP calls by server and status,
  the audit chain's length, and what waits for a person by kind (the terminal's plans, the
  MCP host's ask-first calls). Read from the stores at scrape time, never from counters kept
  beside them, so a restart does not lose them and what ``/metrics`` says is what ``usage``
  and ``audit`` say. Each scrape asks the store for the sums of what it recorded since the
  previous scrape (each table by its id, summed by SQLite), so a scrape costs what was
  written since, and even the first one reads no row into Python. When replicas share one
  database (issue 43), every replica reports the same store totals: aggregate them with
  ``max``, not ``sum``.

Every series lives in a registry of the app's own (no process-wide default registry), and
no label carries a secret, a content, a session id or a raw path: routes are the route
templates (``/v1/models/{model_id}``), unmatched paths are ``unmatched``, and each label
whose values come from data (route, server) is capped at :data:`MAX_LABEL_VALUES` distinct
values, the rest counted under ``other``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deepseek_eyes.store.db import Database
from deepseek_eyes.telemetry import latency
from deepseek_eyes.usage import UsageCategory

__all__ = [
    "CONTENT_TYPE",
    "MAX_LABEL_VALUES",
    "CallLatencies",
    "GatewayMetrics",
    "HttpMetrics",
    "Increments",
    "RouteNames",
    "SqliteCounts",
    "StoreCollector",
    "StoreCounts",
]

#: The exposition format served (Prometheus text 0.0.4).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Distinct values a data-driven label may take before the rest become ``other``.
MAX_LABEL_VALUES = 100
#: Seconds: a chat turn takes from milliseconds (a replay) to minutes (a long stream).
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                     60.0, 120.0, 300.0)
#: The token columns of a usage row, by the ``kind`` label they are counted under.
_TOKEN_KINDS = (("prompt", "prompt_tokens"), ("completion", "completion_tokens"),
                ("reasoning", "reasoning_tokens"), ("cache_hit", "cache_hit_tokens"),
                ("cache_miss", "cache_miss_tokens"), ("estimated", "estimated_tokens"))


class _Capped:
    """A label's values, at most ``cap`` distinct ones; later new ones become ``other``."""

    def __init__(self, cap: int = MAX_LABEL_VALUES) -> None:
        self._cap = cap
        self._seen: set[str] = set()

    def __call__(self, value: str | None) -> str:
        value = value or "none"
        if value in self._seen:
            return value
        if len(self._seen) >= self._cap:
            return "other"
        self._seen.add(value)
        return value


# -- this process's traffic ------------------------------------------------------------------


class RouteNames:
    """The template of the route a request reaches (``unmatched`` for none): the one name
    metrics and spans give a request, never its raw path."""

    def __init__(self, routes: Sequence[BaseRoute] = ()) -> None:
        self.routes = routes

    def __call__(self, scope: Scope) -> str:
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is not Match.NONE:  # PARTIAL: the path, another method
                return str(getattr(route, "path", "unmatched"))
        return "unmatched"


class HttpMetrics:
    """The requests of one app: counted by route template, method and status, timed to
    their last byte."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "deepseek_eyes_http_requests", "HTTP requests answered, by route template, "
            "method and status.", ("route", "method", "status"), registry=registry)
        self.duration = Histogram(
            "deepseek_eyes_http_request_duration_seconds", "Time from a request's arrival to "
            "its last byte (a stream's whole length), by route template and method.",
            ("route", "method"), buckets=_DURATION_BUCKETS, registry=registry)
        self.in_flight = Gauge(
            "deepseek_eyes_http_requests_in_flight", "HTTP requests running now.",
            registry=registry)
        self.route_of = RouteNames()

    def middleware(self, app: ASGIApp) -> ASGIApp:
        """``app`` with each HTTP request counted and timed."""

        async def measured(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            started = time.perf_counter()
            status = 500  # what a request that failed before its answer started counts as

            async def send_status(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                await send(message)

            self.in_flight.inc()
            try:
                await app(scope, receive, send_status)
            finally:
                self.in_flight.dec()
                route = self.route_of(scope)
                method = _method(scope.get("method"))
                self.requests.labels(route, method, str(status)).inc()
                self.duration.labels(route, method).observe(time.perf_counter() - started)

        return measured


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _method(value: object) -> str:
    return value if isinstance(value, str) and value in _METHODS else "other"


# -- the store's totals ----------------------------------------------------------------------


@dataclass(frozen=True)
class Increments:
    """What a store recorded after the cursors a scrape holds, summed by label values,
    and the cursors (each table's last id) they reach."""

    usage_through: int
    #: ``(category, calls, tokens)``, tokens in :data:`_TOKEN_KINDS` order
    usage: list[tuple[str, int, tuple[int, ...]]]
    attempts_through: int
    #: ``(route, phase, outcome, count)``
    attempts: list[tuple[str | None, str, str, int]]
    mcp_through: int
    #: ``(server, status, count)``
    mcp_calls: list[tuple[str | None, str, int]]
    chain_length: int


class StoreCounts(Protocol):
    """What a store tells the metrics: sums of what it recorded after each cursor (a
    table's id), read in one snapshot. SQLite's is :class:`SqliteCounts`; a PostgreSQL
    store answers the same."""

    def increments(self, usage_after: int, attempts_after: int,
                   mcp_after: int) -> Increments: ...


class SqliteCounts:
    """:class:`StoreCounts` of the SQLite data directory: the sums are SQLite's (GROUP BY
    over an id range), so a first scrape of a large database reads no row into Python."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def increments(self, usage_after: int, attempts_after: int,
                   mcp_after: int) -> Increments:
        sums = ", ".join(f"SUM({column})" for _, column in _TOKEN_KINDS)
        with self._db.reading() as conn:  # one snapshot: the cursors match the sums
            usage_to, attempts_to, mcp_to, chain = conn.execute(
                "SELECT (SELECT COALESCE(MAX(id), 0) FROM usage),"
                " (SELECT COALESCE(MAX(id), 0) FROM attempts),"
                " (SELECT COALESCE(MAX(id), 0) FROM audit),"
                " (SELECT COALESCE(MAX(seq), 0) FROM chain)").fetchone()
            usage = conn.execute(
                f"SELECT category, SUM(calls), {sums} FROM usage "  # noqa: S608 - constant columns
                "WHERE id > ? AND id <= ? GROUP BY category",
                (usage_after, usage_to)).fetchall()
            attempts = conn.execute(
                "SELECT route, phase, outcome, COUNT(*) FROM attempts "
                "WHERE id > ? AND id <= ? GROUP BY route, phase, outcome",
                (attempts_after, attempts_to)).fetchall()
            mcp = conn.execute(
                "SELECT subject, json_extract(details, '$.status'), COUNT(*) FROM audit "
                "WHERE id > ? AND id <= ? AND kind = 'mcp.call' GROUP BY 1, 2",
                (mcp_after, mcp_to)).fetchall()
        return Increments(
            usage_through=int(usage_to),
            usage=[(str(r[0]), int(r[1] or 0), tuple(int(v or 0) for v in tuple(r)[2:]))
                   for r in usage],
            attempts_through=int(attempts_to),
            attempts=[(r[0], str(r[1]), str(r[2]), int(r[3])) for r in attempts],
            mcp_through=int(mcp_to),
            mcp_calls=[(r[0], str(r[1] or "unknown"), int(r[2])) for r in mcp],
            chain_length=int(chain))


@dataclass
class _Totals:
    """Running totals of one table, and the id they were read up to."""

    after: int = 0
    values: dict[tuple[str, ...], float] = field(default_factory=dict)

    def add(self, labels: tuple[str, ...], amount: float) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + amount


class StoreCollector(Collector):
    """The store's totals at scrape time (see the module docstring)."""

    def __init__(self, counts: StoreCounts | Callable[[], StoreCounts]) -> None:
        self._counts_of = counts if callable(counts) else (lambda: counts)
        self._counts: StoreCounts | None = None
        #: What waits for a person, by kind (``terminal`` plans, ``mcp`` ask-first calls), set
        #: on the event loop before each scrape (neither queue is read from a worker thread);
        #: a kind is absent when nothing of it runs.
        self.waiting: dict[str, int] = {}
        self._lock = threading.Lock()  # scrapes run in worker threads
        self._usage = _Totals()
        self._calls = _Totals()
        self._attempts = _Totals()
        self._mcp = _Totals()
        self._routes = _Capped()
        self._servers = _Capped()
        for category in UsageCategory:  # every category shows, at zero until it is used
            self._calls.values[(category.value,)] = 0.0

    def _read(self) -> int:
        """Fold what was recorded since the last scrape in; returns the chain's length."""
        if self._counts is None:
            self._counts = self._counts_of()
        new = self._counts.increments(self._usage.after, self._attempts.after,
                                      self._mcp.after)
        for category, calls, tokens in new.usage:
            self._calls.add((category,), calls)
            for (kind, _), amount in zip(_TOKEN_KINDS, tokens, strict=True):
                if amount:
                    self._usage.add((category, kind), amount)
        for route, phase, outcome, count in new.attempts:
            self._attempts.add((self._routes(route), phase, outcome), count)
        for server, status, count in new.mcp_calls:
            self._mcp.add((self._servers(server), status), count)
        self._usage.after = new.usage_through
        self._attempts.after = new.attempts_through
        self._mcp.after = new.mcp_through
        return new.chain_length

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            chain = self._read()
            yield from _counter(
                "deepseek_eyes_upstream_tokens", "Upstream tokens recorded in the usage "
                "ledger, by category and kind (exact provider counts, estimates apart).",
                ("category", "kind"), self._usage)
            yield from _counter(
                "deepseek_eyes_upstream_calls", "Calls recorded in the usage ledger, by "
                "category (counter categories count events that cost no tokens).",
                ("category",), self._calls)
            yield from _counter(
                "deepseek_eyes_vision_attempts", "Steps of image acquisitions in the "
                "attempts log, by route, phase and outcome.",
                ("route", "phase", "outcome"), self._attempts)
            yield from _counter(
                "deepseek_eyes_mcp_calls", "MCP tool, resource and prompt calls in the "
                "audit, by server and status (ok, tool-error, failed).",
                ("server", "status"), self._mcp)
        yield GaugeMetricFamily("deepseek_eyes_audit_chain_length",
                                "Entries on the audit hash chain.", value=chain)
        if self.waiting:
            waiting = GaugeMetricFamily(
                "deepseek_eyes_approvals_waiting", "What waits for a person's approval now: "
                "terminal plans and MCP calls to ask-first tools, by kind.", labels=["kind"])
            for kind, count in sorted(self.waiting.items()):
                waiting.add_metric([kind], count)
            yield waiting


def _counter(name: str, documentation: str, labels: Sequence[str],
             totals: _Totals) -> Iterator[Metric]:
    family = CounterMetricFamily(name, documentation, labels=list(labels))
    for values, amount in sorted(totals.values.items()):
        family.add_metric(list(values), amount)
    yield family


class CallLatencies:
    """This process's calls, timed as they end (:mod:`deepseek_eyes.telemetry.latency`):
    upstream model calls by model and outcome, vision route calls by route and outcome,
    MCP calls by server and status. Names are capped like every data-driven label; the
    outcomes are a few fixed words."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._histograms: dict[str, tuple[Histogram, _Capped]] = {
            "upstream": (Histogram(
                "deepseek_eyes_upstream_call_duration_seconds", "Upstream model calls "
                "(chat, whole streams; retries inside one call), by model and outcome "
                "(ok, error).", ("model", "outcome"), buckets=_DURATION_BUCKETS,
                registry=registry), _Capped()),
            "vision": (Histogram(
                "deepseek_eyes_vision_attempt_duration_seconds", "Vision route calls "
                "(evidence and pixel probes), by route and outcome (ok, fail, probe_ok, "
                "probe_error).", ("route", "outcome"), buckets=_DURATION_BUCKETS,
                registry=registry), _Capped()),
            "mcp": (Histogram(
                "deepseek_eyes_mcp_call_duration_seconds", "MCP tool, resource and prompt "
                "calls, by server and status (ok, tool-error, failed).",
                ("server", "outcome"), buckets=_DURATION_BUCKETS, registry=registry),
                _Capped()),
        }
        self._lock = threading.Lock()  # the capped sets; observed from worker threads too
        latency.listen(self)

    def observe(self, kind: latency.Kind, name: str, outcome: str, seconds: float) -> None:
        histogram, names = self._histograms[kind]
        with self._lock:
            label = names(name)
        histogram.labels(label, outcome if len(outcome) <= 32 else "other").observe(
            max(0.0, seconds))


class GatewayMetrics:
    """One gateway's registry: its traffic, its calls' latencies and its store's totals."""

    def __init__(self, counts: StoreCounts | Callable[[], StoreCounts]) -> None:
        """``counts``: the store's, or what makes it at the first scrape."""
        self.registry = CollectorRegistry(auto_describe=False)
        self.http = HttpMetrics(self.registry)
        self.calls = CallLatencies(self.registry)
        self.store = StoreCollector(counts)
        self.registry.register(self.store)

    def exposition(self) -> bytes:
        """The text a scrape gets (blocking: the store is read; run it in a thread)."""
        return generate_latest(self.registry)
