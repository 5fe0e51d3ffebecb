"""Verify the audit chain, in the database or in an export, and stop at the first bad entry.

One walk serves both sources. For each entry in order it checks the sequence number (no
gap, nothing inserted or reordered), ``prev`` against the hash before it, the entry's own
hash, and the record: a row's projection (:func:`deepseek_eyes.store.chain.project_row`)
or a body must hash to the entry's ``digest``. A record that is gone passes only when a
``retention`` entry covers it (the attempts log's trim, an evidence quarantine). In the
database, every row of an audited table must also be named by an entry, so a record added
behind the chain's back is found too.

Checkpoints are checked last: each signature under the audit keyring, and the chain's
entry at each checkpoint's ``seq`` must carry the checkpoint's hash. A chain that ends
before a checkpoint was cut. A checkpoint pinned outside the database (``--checkpoint``)
is checked the same way, which is what catches a cut tail whose stored checkpoints were
removed with it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepseek_eyes.audit.checkpoints import Checkpoint, stored_checkpoints
from deepseek_eyes.errors import AuditError, DeepSeekEyesError
from deepseek_eyes.store import chain
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.keyring import Keyring

__all__ = ["EXPORT_FORMAT", "Problem", "Report", "read_export", "verify_database",
           "verify_file"]

EXPORT_FORMAT = "deepseekeyes.audit.v1"


@dataclass(frozen=True)
class Problem:
    code: str
    seq: int | None
    reason: str

    def as_json(self) -> dict[str, Any]:
        return {"code": self.code, "seq": self.seq, "reason": self.reason}


@dataclass
class Report:
    source: str
    entries: int = 0
    records: int = 0  # records whose digest was checked
    retained: int = 0  # records gone under a retention entry
    checkpoints: int = 0
    head: dict[str, Any] | None = None
    problem: Problem | None = None
    seconds: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.problem is None

    def as_json(self) -> dict[str, Any]:
        rate = self.entries / self.seconds if self.seconds > 0 else None
        return {
            "ok": self.ok, "source": self.source, "entries": self.entries,
            "records_checked": self.records, "records_retained": self.retained,
            "checkpoints": self.checkpoints, "head": self.head,
            "problem": None if self.problem is None else self.problem.as_json(),
            "seconds": round(self.seconds, 4),
            "entries_per_second": None if rate is None else round(rate),
            "kinds": dict(sorted(self.kinds.items())),
        }


class _Retention:
    """Which records of which tables retention entries allow to be gone."""

    def __init__(self) -> None:
        self._through: dict[str, int] = {}
        self._rowids: dict[str, set[int]] = {}

    def add(self, body_text: str | None) -> None:
        try:
            body = json.loads(body_text or "")
            table = str(body["table"])
        except (ValueError, KeyError, TypeError):
            return  # the walk reports the entry itself
        if isinstance(body.get("through_rowid"), int):
            self._through[table] = max(self._through.get(table, 0), body["through_rowid"])
        for rowid in body.get("rowids") or ():
            if isinstance(rowid, int):
                self._rowids.setdefault(table, set()).add(rowid)

    def covers(self, table: str, rowid: int) -> bool:
        return rowid <= self._through.get(table, 0) or rowid in self._rowids.get(table, ())


_GONE = object()


class _Walk:
    def __init__(self, report: Report, retention: _Retention, wanted: set[int]) -> None:
        self.report = report
        self.retention = retention
        self.wanted = wanted  # seqs whose hash a checkpoint names
        self.hashes: dict[int, str] = {}
        self.prev = chain.GENESIS
        self.expected = 1

    def step(self, entry: Mapping[str, Any], record: Any) -> Problem | None:
        try:
            return self._step(entry, record)
        except (TypeError, ValueError):  # fields of the wrong type in an edited export
            return Problem("AUDIT_ENTRY_TAMPERED", None,
                           f"an entry after {self.expected - 1} has fields that are not an"
                           " entry's")

    def _step(self, entry: Mapping[str, Any], record: Any) -> Problem | None:
        seq = entry["seq"]
        if seq != self.expected:
            return Problem("AUDIT_CHAIN_BROKEN", seq,
                           f"expected entry {self.expected}, found {seq}: entries are missing,"
                           " inserted or reordered")
        if entry["prev"] != self.prev:
            return Problem("AUDIT_CHAIN_BROKEN", seq,
                           "prev does not match the hash of the entry before it")
        ref = entry.get("ref")
        if chain.entry_hash(seq, entry["ts"], entry["kind"], ref, entry["digest"],
                            entry["prev"]) != entry["hash"]:
            return Problem("AUDIT_ENTRY_TAMPERED", seq,
                           "the entry's fields no longer hash to its hash")
        if ref is None:
            body = entry.get("body")
            if not isinstance(body, str) or (
                    hashlib.sha256(body.encode("utf-8")).hexdigest() != entry["digest"]):
                return Problem("AUDIT_ENTRY_TAMPERED", seq,
                               "the entry's body no longer hashes to its digest")
        else:
            table, _, rowid = str(ref).partition(":")
            if record is _GONE or record is None:
                if not rowid.isdigit() or not self.retention.covers(table, int(rowid)):
                    return Problem("AUDIT_RECORD_MISSING", seq,
                                   f"{ref} is gone and no retention entry covers it")
                self.report.retained += 1
            elif chain.record_digest(record) != entry["digest"]:
                return Problem("AUDIT_RECORD_TAMPERED", seq,
                               f"{ref} no longer matches the digest its entry holds")
            else:
                self.report.records += 1
        self.report.entries += 1
        kind = str(entry["kind"])
        self.report.kinds[kind] = self.report.kinds.get(kind, 0) + 1
        if seq in self.wanted:
            self.hashes[seq] = entry["hash"]
        self.prev = entry["hash"]
        self.expected = seq + 1
        return None

    def check_checkpoints(
        self, checkpoints: Iterable[Checkpoint], keyring: Keyring, *, pinned: bool = False
    ) -> Problem | None:
        last = self.expected - 1
        for checkpoint in checkpoints:
            what = "the pinned checkpoint" if pinned else f"checkpoint at {checkpoint.seq}"
            try:
                if not checkpoint.check_signature(keyring):
                    return Problem("AUDIT_CHECKPOINT_INVALID", checkpoint.seq,
                                   f"{what}: the signature does not match")
            except DeepSeekEyesError as exc:
                return Problem(exc.code, checkpoint.seq, f"{what}: {exc.message}")
            if checkpoint.seq > last:
                return Problem("AUDIT_CHAIN_BROKEN", last + 1,
                               f"the chain ends at entry {last}, but {what} was signed at "
                               f"entry {checkpoint.seq}: the tail was cut")
            if self.hashes.get(checkpoint.seq) != checkpoint.hash:
                return Problem("AUDIT_CHECKPOINT_INVALID", checkpoint.seq,
                               f"{what}: the chain's entry {checkpoint.seq} has another hash"
                               " (the chain was rewritten)")
            if not pinned:
                self.report.checkpoints += 1
        return None


def _entry_from_row(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "seq": int(row["seq"]), "ts": row["ts"], "kind": row["kind"],
        "ref": chain.ref_text(row["ref_table"], row["ref_id"]), "body": row["body"],
        "digest": row["digest"], "prev": row["prev"], "hash": row["hash"],
    }


def _finish(report: Report, walk: _Walk, started: float) -> Report:
    if walk.expected > 1:
        report.head = {"seq": walk.expected - 1, "hash": walk.prev}
    report.seconds = time.perf_counter() - started
    return report


def _batches(rows: Iterator[sqlite3.Row], size: int) -> Iterator[list[sqlite3.Row]]:
    batch: list[sqlite3.Row] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _records_of(
    conn: sqlite3.Connection, batch: list[sqlite3.Row]
) -> dict[tuple[str, int], dict[str, Any]]:
    """The records a batch of entries names, read one query per table."""
    wanted: dict[str, list[int]] = {}
    for row in batch:
        table = row["ref_table"]
        if table in chain.CHAINED_TABLES and isinstance(row["ref_id"], int):
            wanted.setdefault(table, []).append(row["ref_id"])
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for table, rowids in wanted.items():
        for rowid, record in chain.read_records(conn, table, rowids).items():
            out[(table, rowid)] = record
    return out


def verify_database(
    db: Database, keyring: Keyring, *, pinned: Checkpoint | None = None
) -> Report:
    """Walk the whole chain in ``db``; the report names the first problem, if any."""
    started = time.perf_counter()
    report = Report("database")
    checkpoints = stored_checkpoints(db)
    wanted = {c.seq for c in checkpoints} | ({pinned.seq} if pinned else set())
    with db.reading() as conn:
        retention = _Retention()
        for (body,) in conn.execute("SELECT body FROM chain WHERE kind = 'retention'"):
            retention.add(body)
        walk = _Walk(report, retention, wanted)
        for batch in _batches(chain.iter_entries(conn), 2000):
            records = _records_of(conn, batch)
            for row in batch:
                entry = _entry_from_row(row)
                record: Any = None
                if row["ref_table"] is not None:
                    if row["ref_table"] not in chain.CHAINED_TABLES:
                        report.problem = Problem(
                            "AUDIT_ENTRY_TAMPERED", entry["seq"],
                            f"names a table that is not audited: {entry['ref']}")
                        return _finish(report, walk, started)
                    record = records.get((row["ref_table"], row["ref_id"]))
                report.problem = walk.step(entry, record)
                if report.problem is not None:
                    return _finish(report, walk, started)
        for table in chain.CHAINED_TABLES:
            stray = conn.execute(
                f"SELECT rowid FROM {table} WHERE rowid NOT IN"  # noqa: S608
                " (SELECT ref_id FROM chain WHERE ref_table = ?) LIMIT 1", (table,),
            ).fetchone()
            if stray is not None:
                report.problem = Problem(
                    "AUDIT_RECORD_UNCHAINED", None,
                    f"{table}:{stray[0]} is in the database but no chain entry names it")
                return _finish(report, walk, started)
    report.problem = walk.check_checkpoints(checkpoints, keyring) or (
        walk.check_checkpoints([pinned], keyring, pinned=True) if pinned else None)
    return _finish(report, walk, started)


def read_export(path: Path) -> Iterator[dict[str, Any]]:
    """The objects of an export file, the header first.

    Raises:
        AuditError: ``AUDIT_EXPORT_INVALID`` for anything that is not an export.
    """
    def fail(reason: str) -> AuditError:
        return AuditError(f"{path} is not an audit export: {reason}",
                          code="AUDIT_EXPORT_INVALID", details={"path": str(path)})

    try:
        handle = path.open("r", encoding="utf-8")
    except OSError as exc:
        raise fail(exc.strerror or str(exc)) from exc
    with handle:
        for number, line in enumerate(handle, start=1):
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise fail(f"line {number} is not JSON") from exc
            if not isinstance(item, dict):
                raise fail(f"line {number} is not an object")
            if number == 1 and item.get("format") != EXPORT_FORMAT:
                raise fail(f"the first line does not name {EXPORT_FORMAT}")
            yield item


_ENTRY_FIELDS = ("seq", "ts", "kind", "digest", "prev", "hash")


def verify_file(
    path: Path, keyring: Keyring, *, pinned: Checkpoint | None = None
) -> Report:
    """Walk an export (``audit export``); records it carries are checked against digests."""
    started = time.perf_counter()
    report = Report(str(path))
    retention = _Retention()
    checkpoints: list[Checkpoint] = []
    for item in read_export(path):
        if item.get("type") == "entry" and item.get("kind") == "retention":
            retention.add(item.get("body"))
        elif item.get("type") == "checkpoint":
            try:
                checkpoints.append(Checkpoint(int(item["seq"]), str(item["hash"]),
                                              float(item["ts"]), str(item["key_id"]),
                                              str(item["mac"])))
            except (KeyError, TypeError, ValueError) as exc:
                raise AuditError(f"{path}: a checkpoint line is malformed",
                                 code="AUDIT_EXPORT_INVALID") from exc
    wanted = {c.seq for c in checkpoints} | ({pinned.seq} if pinned else set())
    walk = _Walk(report, retention, wanted)
    for item in read_export(path):
        if item.get("type") != "entry":
            continue
        if (any(name not in item for name in _ENTRY_FIELDS) or type(item["seq"]) is not int):
            report.problem = Problem("AUDIT_EXPORT_INVALID", item.get("seq"),
                                     "an entry line lacks a field")
            return _finish(report, walk, started)
        record = item.get("record", _GONE) if item.get("ref") is not None else None
        report.problem = walk.step(item, record)
        if report.problem is not None:
            return _finish(report, walk, started)
    report.problem = walk.check_checkpoints(checkpoints, keyring) or (
        walk.check_checkpoints([pinned], keyring, pinned=True) if pinned else None)
    return _finish(report, walk, started)

