"""The shapes of the audit chain's JSON: verify reports, checkpoints, export lines, seals.

``audit verify``, ``audit export`` and the gateway's seal hand these out, and an export's
lines are read back by :mod:`.verify`, so their keys are API (and an export header's are
under its MAC). TypedDicts keep them plain JSON while mypy checks the code that builds them.
A chained record itself is :data:`deepseek_eyes.store.chain.Record`: a row's columns.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from deepseek_eyes.store.chain import Record

__all__ = [
    "AuditRow",
    "ChainEntry",
    "ChainHead",
    "CheckpointView",
    "ExportEntry",
    "ExportHeader",
    "ExportSummary",
    "ProblemView",
    "ReportView",
    "Seal",
    "ShownItem",
    "ShownLink",
]


class ChainHead(TypedDict):
    """The newest entry of a chain: its sequence number and hash."""

    seq: int
    hash: str


class ProblemView(TypedDict):
    code: str
    seq: int | None
    reason: str


class ReportView(TypedDict):
    """``verify.Report.as_json``: what ``audit verify`` prints."""

    ok: bool
    source: str
    entries: int
    records_checked: int
    records_retained: int
    checkpoints: int
    entries_after_last_checkpoint: int
    head: ChainHead | None
    problem: ProblemView | None
    seconds: float
    entries_per_second: int | None
    kinds: dict[str, int]


class CheckpointView(TypedDict):
    """``checkpoints.Checkpoint.as_json``; ``counts`` and ``ordinal`` only from version 2."""

    seq: int
    hash: str
    ts: float
    key_id: str
    mac: str
    counts: NotRequired[dict[str, int]]
    ordinal: NotRequired[int | None]


class ChainEntry(TypedDict):
    """One chain entry as the verifier walks it (a database row or an export line)."""

    seq: int
    ts: float
    kind: str
    ref: str | None
    body: str | None
    digest: str
    prev: str
    hash: str


class ExportHeader(TypedDict):
    """An export's first line; ``key_id`` and ``mac`` sign the rest of it."""

    format: str
    exported_at: float
    entries: int
    head: ChainHead | None
    checkpoints: int
    key_id: NotRequired[str]
    mac: NotRequired[str]


class ExportEntry(TypedDict):
    """An export's entry line: ``body`` for an entry with no row, ``record`` for a row, and
    for a batch entry its body and ``records``, the ones it names in its order."""

    type: str
    seq: int
    ts: float
    kind: str
    ref: str | None
    digest: str
    prev: str
    hash: str
    body: NotRequired[str | None]
    record: NotRequired[Record | None]
    records: NotRequired[list[Record | None]]


class ExportSummary(TypedDict):
    path: str
    entries: int
    checkpoints: int
    head: ChainHead | None


class Seal(TypedDict):
    """``DataHome.seal``: the chain's head, the new checkpoint's pinnable line, or why
    there is none."""

    seq: int
    hash: str
    checkpoint: NotRequired[str]
    checkpoint_error: NotRequired[str]


class AuditRow(TypedDict):
    """``AuditLog.recent``: one audit row, its details parsed (as ``reduce_for_audit``
    wrote them)."""

    ts: float
    kind: str
    subject: str | None
    details: object


class ShownLink(TypedDict):
    seq: int
    kind: str
    hash: str
    intact: bool


class ShownItem(TypedDict):
    """A record ``audit show`` names, its JSON columns parsed, and its chain entry."""

    ref: str
    record: dict[str, object]  # a Record with its JSON columns parsed
    chain: ShownLink | None
