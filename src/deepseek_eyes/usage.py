"""One usage tracker with separate categories, persisted in the runtime database.

Exact categories hold what a provider reported; estimated categories hold our own
attribution (characters / 4) of parts of requests that are already counted exactly
elsewhere. Estimates are subsets, never added to the exact totals a second time, which is
why :meth:`UsageTracker.summary` reports them apart. Counters count events that cost no
provider tokens at all (a native visual turn, a run of the embedded local OCR engine), so
they never appear among exact provider usage.

Why :meth:`UsageTracker.add_estimate` sums in memory: an MCP call's result estimate was a
row of its own, a queued INSERT and a chain digest on every call for a figure only ever read
summed. Summed events of one category and source become one row (``calls`` events, their
tokens) handed to the log queue at its next flush (:meth:`Database.on_flush
<deepseek_eyes.store.db.Database.on_flush>`), so they are written, seen by every reader and
lost in a crash exactly as a queued row of their own would have been; the totals
:meth:`UsageTracker.summary` reports are the same.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, NotRequired, TypedDict, cast

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.store.db import Database

__all__ = ["ProviderUsage", "UsageCategory", "UsageTracker", "estimate_tokens"]


class UsageCategory(StrEnum):
    # exact provider usage
    VISION = "vision"  # evidence and targeted reread calls to a vision route
    PROBE = "probe"  # pixel probes
    FINAL = "final"  # final-answer model calls (incl. native visual turns)
    MCP_CONTINUATION = "mcp_continuation"  # final-model calls that read MCP results
    COMPUTER_USE = "computer_use"  # final-model calls that read browser/desktop results
    # estimated attribution (subsets of exact requests)
    BRIDGE_INPUT = "bridge_input"  # evidence text handed to the final model
    # images sent to a seeing final model as pixels: the table's estimate per image, or
    # the upstream's own count when it reports one (prompt_tokens_details.image_tokens)
    NATIVE_IMAGE_INPUT = "native_image_input"
    MCP_SCHEMA = "mcp_schema"
    MCP_RESULT = "mcp_result"
    # avoided: what we did not send or pay for
    AVOIDED_REPLAY = "avoided_replay"  # cache hits, pointers instead of pixels
    # counters: events, no tokens
    NATIVE_VISUAL_TURNS = "native_visual_turns"
    LOCAL_OCR = "local_ocr"  # evidence and rereads read by the embedded local engine

    @property
    def exact(self) -> bool:
        return self in _EXACT

    @property
    def counter(self) -> bool:
        """Counts events only: no provider was involved, so there are no tokens."""
        return self in _COUNTERS


# Built once: a set written in the properties was built again on every row recorded.
_EXACT = frozenset({UsageCategory.VISION, UsageCategory.PROBE, UsageCategory.FINAL,
                    UsageCategory.MCP_CONTINUATION, UsageCategory.COMPUTER_USE})
_COUNTERS = frozenset({UsageCategory.NATIVE_VISUAL_TURNS, UsageCategory.LOCAL_OCR})


class ExactTotals(TypedDict):
    """One exact category's totals: provider calls and the tokens they reported."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    cache_hit_tokens: int
    cache_miss_tokens: int


class EstimatedTotals(TypedDict):
    events: int
    estimated_tokens: int


class UnknownCalls(TypedDict):
    """Upstream calls written ahead and never completed: sent, and whether (and what) they
    were billed is unknown (the process died, or the disk filled, after sending)."""

    calls: int
    turns: list[str]  # the newest 20 turns holding one, for ``audit show``


class UsageSummary(TypedDict):
    """``UsageTracker.summary``: what ``deepseek-eyes usage`` prints."""

    exact: dict[str, ExactTotals]
    estimated: dict[str, EstimatedTotals]
    outcome_unknown: NotRequired[UnknownCalls]


# A pending llm.request row (runtime/turn/ledger.py writes one ahead of each attempt) that
# no later row of the same turn, call and attempt completed. The CASTs: json_extract is text
# on PostgreSQL (store/postgres.py), a number on SQLite; both compare integers so.
_UNRESOLVED = (
    "SELECT p.subject FROM audit p WHERE p.kind = 'llm.request'"
    " AND json_extract(p.details, '$.outcome') = 'pending' AND NOT EXISTS ("
    "SELECT 1 FROM audit d WHERE d.kind = 'llm.request' AND d.subject = p.subject"
    " AND d.id > p.id AND json_extract(d.details, '$.call') = json_extract(p.details, '$.call')"
    " AND COALESCE(CAST(json_extract(d.details, '$.attempt') AS INTEGER), 1)"
    " = CAST(json_extract(p.details, '$.attempt') AS INTEGER)"
    " AND COALESCE(json_extract(d.details, '$.outcome'), 'ok') != 'pending')"
    " ORDER BY p.id DESC"
)


@dataclass(frozen=True)
class ProviderUsage:
    """Token usage as a provider reported it (zeros where it reported nothing)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cache_hit_tokens: int = 0
    cache_miss_tokens: int = 0
    #: Input tokens the provider says its images cost (prompt_tokens_details.image_tokens),
    #: when it says; part of prompt_tokens, not added to it.
    image_tokens: int = 0

    @classmethod
    def from_openai(cls, usage: JsonObject | None) -> ProviderUsage:
        """Read an OpenAI-style ``usage`` object, including DeepSeek's cache fields."""
        if not isinstance(usage, dict):
            return cls()

        def num(value: Any) -> int:
            return value if isinstance(value, int) and value >= 0 else 0

        details = usage.get("completion_tokens_details")
        reasoning = num(details.get("reasoning_tokens")) if isinstance(details, dict) else 0
        prompt_details = usage.get("prompt_tokens_details")
        images = (num(prompt_details.get("image_tokens"))
                  if isinstance(prompt_details, dict) else 0)
        return cls(
            prompt_tokens=num(usage.get("prompt_tokens")),
            completion_tokens=num(usage.get("completion_tokens")),
            reasoning_tokens=reasoning,
            cache_hit_tokens=num(usage.get("prompt_cache_hit_tokens")),
            cache_miss_tokens=num(usage.get("prompt_cache_miss_tokens")),
            image_tokens=images,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


#: The provider usage of a row that has none (an estimate or a counter); it is frozen, so
#: one instance serves every such row.
_NO_TOKENS = ProviderUsage()


def estimate_tokens(text_chars: int) -> int:
    """Our estimate for attribution categories: four characters a token, rounded up."""
    return (text_chars + 3) // 4


_INSERT = (
    "INSERT INTO usage (ts, category, exact, source, model, calls, prompt_tokens,"
    " completion_tokens, reasoning_tokens, cache_hit_tokens, cache_miss_tokens,"
    " estimated_tokens) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)


class UsageTracker:
    def __init__(self, db: Database, *, clock: Any = time.time) -> None:
        self._db = db
        self._clock = clock
        #: add_estimate's sums until the next flush: (category, source) -> [events,
        #: tokens, time of the latest]; its own lock, as the flush hook runs under the
        #: database's and add_estimate must not wait for a flush.
        self._sums: dict[tuple[UsageCategory, str | None], list[Any]] = {}
        self._sums_lock = threading.Lock()
        self._hooked = False

    def record_exact(
        self,
        category: UsageCategory,
        usage: ProviderUsage,
        *,
        source: str | None = None,
        model: str | None = None,
        calls: int = 1,
    ) -> None:
        if not category.exact:
            raise ValueError(f"{category} is not an exact category")
        self._insert(category, usage, source=source, model=model, calls=calls, estimated=0)

    def record_estimate(
        self, category: UsageCategory, tokens: int, *, source: str | None = None, calls: int = 0
    ) -> None:
        if category.exact:
            raise ValueError(f"{category} is an exact category")
        self._insert(
            category, _NO_TOKENS, source=source, model=None, calls=calls, estimated=tokens
        )

    def add_estimate(self, category: UsageCategory, tokens: int, *,
                     source: str | None = None) -> None:
        """One event of ``tokens`` estimated tokens, summed with the others of its category
        and source into one row at the next flush of the log queue (see the module
        docstring): :meth:`record_estimate` with ``calls=1``, for an event on a hot path
        that queues a row of its own as well (an MCP call's audit row). The sums do not
        count toward the queue's batch size or age: they are written by the flush that
        writes that row, or an earlier one."""
        if category.exact:
            raise ValueError(f"{category} is an exact category")
        now = self._clock()
        with self._sums_lock:
            entry = self._sums.get((category, source))
            if entry is None:
                self._sums[(category, source)] = [1, tokens, now]
            else:
                entry[0] += 1
                entry[1] += tokens
                entry[2] = now
            hooked, self._hooked = self._hooked, True
        if not hooked:
            self._db.on_flush(self._summed_rows)

    def _summed_rows(self) -> list[tuple[str, Sequence[Any], str | None]]:
        """The summed events as rows, handed to the flush (and forgotten here)."""
        with self._sums_lock:
            if not self._sums:
                return []
            sums, self._sums = self._sums, {}
        return [(_INSERT, (ts, category.value, 0, source, None, events, 0, 0, 0, 0, 0, tokens),
                 "usage")
                for (category, source), (events, tokens, ts) in sums.items()]

    def count(self, category: UsageCategory, *, source: str | None = None) -> None:
        self._insert(category, _NO_TOKENS, source=source, model=None, calls=1, estimated=0)

    def _insert(
        self,
        category: UsageCategory,
        usage: ProviderUsage,
        *,
        source: str | None,
        model: str | None,
        calls: int,
        estimated: int,
    ) -> None:
        self._db.append(
            _INSERT,
            (
                self._clock(), category.value, int(category.exact), source, model, calls,
                usage.prompt_tokens, usage.completion_tokens, usage.reasoning_tokens,
                usage.cache_hit_tokens, usage.cache_miss_tokens, estimated,
            ),
            chain="usage",
        )

    def summary(self) -> UsageSummary:
        """Totals per category, exact and estimated kept apart."""
        rows = self._db.query(
            "SELECT category, SUM(calls) calls, SUM(prompt_tokens) p, SUM(completion_tokens) c,"
            " SUM(reasoning_tokens) r, SUM(cache_hit_tokens) h, SUM(cache_miss_tokens) m,"
            " SUM(estimated_tokens) e FROM usage GROUP BY category ORDER BY category"
        )
        exact: dict[str, ExactTotals] = {}
        other: dict[str, EstimatedTotals] = {}
        for row in rows:
            category = UsageCategory(row["category"])
            if category.exact:
                exact[category.value] = cast(ExactTotals, {  # ProviderUsage's fields
                    "calls": row["calls"],
                    **{k: v for k, v in asdict(
                        ProviderUsage(row["p"], row["c"], row["r"], row["h"], row["m"])
                    ).items() if k != "image_tokens"},
                })
            else:
                other[category.value] = {"events": row["calls"], "estimated_tokens": row["e"]}
        summary: UsageSummary = {"exact": exact, "estimated": other}
        unknown = [str(r[0]) for r in self._db.query(_UNRESOLVED)]
        if unknown:
            summary["outcome_unknown"] = {"calls": len(unknown),
                                          "turns": list(dict.fromkeys(unknown))[:20]}
        return summary
