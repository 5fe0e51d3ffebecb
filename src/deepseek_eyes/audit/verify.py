"""Verify the audit chain, in the database or in an export, and stop at the first problem.

One walk serves both sources. Before it, the keys and checkpoints are checked: a chain with
entries needs the audit keyring (``AUDIT_KEY_MISSING``; verify never makes a key) and at
least one stored checkpoint (``AUDIT_CHECKPOINT_MISSING``); the newest checkpoint's key
must be on the ring (``AUDIT_KEY_REPLACED`` otherwise: the keyring file was swapped); every
signature must hold, and the checkpoints' signed ordinals must run 1, 2, 3 … (a gap is a
removed checkpoint).

For each entry in order the walk checks the sequence number (no gap, nothing inserted or
reordered), ``prev`` against the hash before it, the entry's own hash, and the record: a
row's projection (:func:`deepseek_eyes.store.chain.project_row`) or a body must hash to the
entry's ``digest``. A batch entry (``chain.batch``: a body naming many records, see
:mod:`deepseek_eyes.store.chain`) has each record it names checked against the digest the
body holds for it, exactly as a single entry's record; counts, kinds and retention go
record by record, so both forms report alike. A record that is gone passes only when a
``retention`` entry covers it *and* a signed checkpoint at or after that entry vouches for
it: anyone who can write the database can append a well-hashed retention entry, only the
key holder can sign one (the runtime signs a checkpoint in the transaction of every cut).
In the database, every row of an audited table must also be named by an entry, so a record
added behind the chain's back is found too.

After the walk, an export's header must match its lines (entry count, head, checkpoint
count) and carry its signature (``AUDIT_EXPORT_MISMATCH``), and each checkpoint must match
the chain: the entry at its ``seq`` must carry its hash and, for checkpoints with counts,
the entries through it must name each table as often as it signed. A chain that ends
before a checkpoint was cut. A checkpoint pinned outside the database (``--checkpoint``) is
checked the same way, which is what catches a cut tail whose stored checkpoints were
removed with it.

Whoever can write the database *and* the keyring can rewrite both; only a pinned
checkpoint bounds that (docs/audit.md states the whole threat model).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepseek_eyes.audit.checkpoints import BODY, Checkpoint, read_checkpoints
from deepseek_eyes.audit.records import ChainEntry, ChainHead, ProblemView, ReportView
from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import AuditError, DeepSeekEyesError
from deepseek_eyes.store import chain
from deepseek_eyes.store.chain import Record
from deepseek_eyes.store.db import Database, configured_url
from deepseek_eyes.store.keyring import Keyring

__all__ = ["BATCH", "EXPORT_FORMAT", "Problem", "Progress", "Report", "export_header_bytes",
           "read_export", "verify_database", "verify_file", "verify_path"]

EXPORT_FORMAT = "deepseekeyes.audit.v1"
#: Told how far a walk of the database got: ``(entries checked, entries in the chain)``,
#: after each batch of :data:`BATCH` entries and once at the end (the web console's
#: progress bar; never called back from inside a batch).
Progress = Callable[[int, int], None]
#: Entries read and checked together.
BATCH = 2000
_HEADER_FIELDS = ("format", "exported_at", "entries", "head", "checkpoints")


def export_header_bytes(header: Mapping[str, Any]) -> bytes:
    """What an export header's MAC covers: every field but the signature itself."""
    return chain.canonical_bytes({
        "type": "deepseekeyes.audit.export",
        **{name: header.get(name) for name in _HEADER_FIELDS},
    })


@dataclass(frozen=True)
class Problem:
    code: str
    seq: int | None
    reason: str

    def as_json(self) -> ProblemView:
        return {"code": self.code, "seq": self.seq, "reason": self.reason}


@dataclass
class Report:
    source: str
    entries: int = 0
    records: int = 0  # records whose digest was checked
    retained: int = 0  # records gone under a retention entry
    checkpoints: int = 0
    unsigned: int = 0  # entries after the newest stored checkpoint
    head: ChainHead | None = None
    problem: Problem | None = None
    seconds: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.problem is None

    def as_json(self) -> ReportView:
        rate = self.entries / self.seconds if self.seconds > 0 else None
        return {
            "ok": self.ok, "source": self.source, "entries": self.entries,
            "records_checked": self.records, "records_retained": self.retained,
            "checkpoints": self.checkpoints, "entries_after_last_checkpoint": self.unsigned,
            "head": self.head,
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
        self.counts: dict[str, int] = {}
        self.counts_at: dict[int, dict[str, int]] = {}
        self.prev = chain.GENESIS
        self.expected = 1
        self.members: dict[str, set[int]] = {}  # rowids batch entries named, by table

    def step(self, entry: Mapping[str, Any], record: Any,
             members: list[tuple[str, int, str, str]] | None = None) -> Problem | None:
        """Check one entry (and what it names: ``record``, a batch's records in order).
        ``members``: a batch entry's records, when the caller has read them from this
        entry's body already (``chain.batch_members``); else the body is read here."""
        try:
            return self._step(entry, record, members)
        except (TypeError, ValueError):  # fields of the wrong type in an edited export
            return Problem("AUDIT_ENTRY_TAMPERED", None,
                           f"an entry after {self.expected - 1} has fields that are not an"
                           " entry's")

    def _step(self, entry: Mapping[str, Any], record: Any,
              members: list[tuple[str, int, str, str]] | None) -> Problem | None:
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
            if entry["kind"] == chain.BATCH:
                problem = self._batch(seq, body, record, members)
                if problem is not None:
                    return problem
            else:
                self.counts[BODY] = self.counts.get(BODY, 0) + 1
        else:
            table, _, rowid = str(ref).partition(":")
            self.counts[table] = self.counts.get(table, 0) + 1
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
        if kind != chain.BATCH:  # a batch's records were counted by their own kinds
            self.report.kinds[kind] = self.report.kinds.get(kind, 0) + 1
        if seq in self.wanted:
            self.hashes[seq] = entry["hash"]
            self.counts_at[seq] = dict(self.counts)
        self.prev = entry["hash"]
        self.expected = seq + 1
        return None

    def _batch(self, seq: int, body: str, records: Any,
               members: list[tuple[str, int, str, str]] | None) -> Problem | None:
        """The records a batch entry names, each against its own digest; ``records`` are
        theirs in the body's order (None for one that is gone)."""
        try:
            if members is None:
                members = chain.batch_members(body)
        except ValueError:
            return Problem("AUDIT_ENTRY_TAMPERED", seq,
                           "the batch entry's body does not name records")
        if not isinstance(records, list) or len(records) != len(members):
            return Problem("AUDIT_RECORD_MISSING", seq,
                           "the records the batch entry names are not all there to check")
        kinds = self.report.kinds
        for (table, rowid, kind, digest), record in zip(members, records, strict=True):
            self.counts[table] = self.counts.get(table, 0) + 1
            kinds[kind] = kinds.get(kind, 0) + 1
            self.members.setdefault(table, set()).add(rowid)
            if record is None:
                if not self.retention.covers(table, rowid):
                    return Problem("AUDIT_RECORD_MISSING", seq,
                                   f"{table}:{rowid} is gone and no retention entry covers it")
                self.report.retained += 1
            elif not isinstance(record, dict) or chain.record_digest(record) != digest:
                return Problem("AUDIT_RECORD_TAMPERED", seq,  # as for a single entry
                               f"{table}:{rowid} no longer matches the digest its entry holds")
            else:
                self.report.records += 1
        return None

    def check_checkpoints(
        self, checkpoints: Iterable[Checkpoint], *, pinned: bool = False
    ) -> Problem | None:
        """Each checkpoint (its signature already checked) against the chain walked."""
        last = self.expected - 1
        for checkpoint in checkpoints:
            what = "the pinned checkpoint" if pinned else f"checkpoint at {checkpoint.seq}"
            if checkpoint.seq > last:
                return Problem("AUDIT_CHAIN_BROKEN", last + 1,
                               f"the chain ends at entry {last}, but {what} was signed at "
                               f"entry {checkpoint.seq}: the tail was cut")
            if checkpoint.counts is not None:
                now = self.counts_at.get(checkpoint.seq, {})
                for name in sorted(set(now) | set(checkpoint.counts)):
                    signed, found = checkpoint.counts.get(name, 0), now.get(name, 0)
                    if signed != found:
                        return Problem(
                            "AUDIT_CHECKPOINT_INVALID", checkpoint.seq,
                            f"{what} signed {signed} entries naming {name} through entry "
                            f"{checkpoint.seq}, the chain has {found} (the chain was"
                            " rewritten)")
            if self.hashes.get(checkpoint.seq) != checkpoint.hash:
                return Problem("AUDIT_CHECKPOINT_INVALID", checkpoint.seq,
                               f"{what}: the chain's entry {checkpoint.seq} has another hash"
                               " (the chain was rewritten)")
            if not pinned:
                self.report.checkpoints += 1
        return None


def _preflight(
    has_entries: bool, checkpoints: list[Checkpoint], keyring: Keyring | None,
    pinned: Checkpoint | None,
) -> Problem | None:
    """The keys and the stored checkpoints, before any entry is read: what must hold for
    the walk's answer to mean anything."""
    if keyring is None:
        if has_entries or checkpoints or pinned is not None:
            return Problem("AUDIT_KEY_MISSING", None,
                           "the audit keyring is missing: nothing can vouch for the chain's "
                           "checkpoints (verify never creates a key)")
        return None
    if has_entries and not checkpoints:
        return Problem("AUDIT_CHECKPOINT_MISSING", None,
                       "the chain has entries but no signed checkpoint: they were never "
                       "sealed, or every checkpoint was removed")
    ids = set(keyring.ids())
    newest = checkpoints[-1] if checkpoints else None
    for which, checkpoint in (("the newest checkpoint", newest), ("the pinned checkpoint",
                                                                   pinned)):
        if checkpoint is not None and checkpoint.key_id not in ids:
            return Problem("AUDIT_KEY_REPLACED", checkpoint.seq,
                           f"{which} was signed with {checkpoint.key_id}, which is not on the"
                           " audit keyring: the keyring was replaced since")
    for position, checkpoint in enumerate(
            [*checkpoints, *([pinned] if pinned is not None else [])], start=1):
        is_pinned = position > len(checkpoints)
        what = "the pinned checkpoint" if is_pinned else f"checkpoint at {checkpoint.seq}"
        try:
            if not checkpoint.check_signature(keyring):
                return Problem("AUDIT_CHECKPOINT_INVALID", checkpoint.seq,
                               f"{what}: the signature does not match")
        except DeepSeekEyesError as exc:
            return Problem(exc.code, checkpoint.seq, f"{what}: {exc.message}")
        if is_pinned or checkpoint.ordinal is None or checkpoint.ordinal == position:
            continue
        if checkpoint.ordinal > position:
            return Problem("AUDIT_CHECKPOINT_MISSING", checkpoint.seq,
                           f"{what} is checkpoint number {checkpoint.ordinal} but only the "
                           f"{position}th stored: {checkpoint.ordinal - position} checkpoint(s)"
                           " before it were removed")
        return Problem("AUDIT_CHECKPOINT_INVALID", checkpoint.seq,
                       f"{what} is checkpoint number {checkpoint.ordinal} but stored "
                       f"{position}th: a checkpoint was copied or reordered")
    return None


def _retention_under(rows: Iterable[tuple[Any, Any]], signed_through: int) -> _Retention:
    """The retention entries a signed checkpoint vouches for (those at or before it)."""
    retention = _Retention()
    for seq, body in rows:
        if isinstance(seq, int) and seq <= signed_through:
            retention.add(body)
    return retention


def _signed_through(checkpoints: list[Checkpoint], pinned: Checkpoint | None) -> int:
    return max([c.seq for c in checkpoints] + ([pinned.seq] if pinned else []), default=0)


def _entry_from_row(row: Mapping[str, Any]) -> ChainEntry:
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


def _batches(rows: Iterator[Mapping[str, Any]], size: int) -> Iterator[list[Mapping[str, Any]]]:
    batch: list[Mapping[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _members_of(row: Mapping[str, Any]) -> list[tuple[str, int, str, str]] | None:
    """The records a batch entry's row names (None for any other entry, or a body that
    names none: the walk reports it)."""
    if row["kind"] != chain.BATCH or row["ref_table"] is not None:
        return None
    try:
        return chain.batch_members(row["body"])
    except ValueError:
        return None


def _records_of(
    conn: sqlite3.Connection, batch: list[Mapping[str, Any]],
    members: dict[int, list[tuple[str, int, str, str]]],
) -> dict[tuple[str, int], Record]:
    """The records a batch of entries names, read one query per table; ``members`` gets
    each batch entry's records by seq."""
    wanted: dict[str, list[int]] = {}
    for row in batch:
        table = row["ref_table"]
        if table in chain.CHAINED_TABLES and isinstance(row["ref_id"], int):
            wanted.setdefault(table, []).append(row["ref_id"])
        named = _members_of(row)
        if named is not None:
            members[int(row["seq"])] = named
            for member_table, rowid, _kind, _digest in named:
                wanted.setdefault(member_table, []).append(rowid)
    out: dict[tuple[str, int], Record] = {}
    for table, rowids in wanted.items():
        for rowid, record in chain.read_records(conn, table, rowids).items():
            out[(table, rowid)] = record
    return out


def verify_database(
    db: Database, keyring: Keyring | None, *, pinned: Checkpoint | None = None,
    progress: Progress | None = None, batch: int = BATCH,
) -> Report:
    """Walk the whole chain in ``db``; the report names the first problem, if any.

    ``keyring`` is None when the data home has none (the report then says
    ``AUDIT_KEY_MISSING`` for any chain with entries). Only reads. ``progress`` is told
    the entries checked so far and the chain's length after each ``batch`` of entries.
    """
    started = time.perf_counter()
    report = Report("database")
    with db.reading() as conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chain'"
                        ).fetchone() is None:
            walk = _Walk(report, _Retention(), set())  # before the chain existed: empty
            report.problem = _preflight(False, [], keyring, pinned) or (
                walk.check_checkpoints([pinned], pinned=True) if pinned else None)
            return _finish(report, walk, started)
        checkpoints = read_checkpoints(conn)
        tip = conn.execute("SELECT MAX(seq) FROM chain").fetchone()[0]
        walk = _Walk(report, _Retention(),
                     {c.seq for c in checkpoints} | ({pinned.seq} if pinned else set()))
        report.problem = _preflight(tip is not None, checkpoints, keyring, pinned)
        if report.problem is not None:
            return _finish(report, walk, started)
        if checkpoints and tip is not None:
            report.unsigned = max(0, int(tip) - max(c.seq for c in checkpoints))
        walk.retention = _retention_under(
            conn.execute("SELECT seq, body FROM chain WHERE kind = 'retention'"),
            _signed_through(checkpoints, pinned))
        total = int(tip or 0)
        checked = 0
        for rows in _batches(chain.iter_entries(conn), batch):
            members: dict[int, list[tuple[str, int, str, str]]] = {}
            records = _records_of(conn, rows, members)
            for row in rows:
                entry = _entry_from_row(row)
                record: Any = None
                named = members.get(int(row["seq"]))
                if named is not None:
                    record = [records.get((t, r)) for t, r, _k, _d in named]
                elif row["ref_table"] is not None:
                    if row["ref_table"] not in chain.CHAINED_TABLES:
                        report.problem = Problem(
                            "AUDIT_ENTRY_TAMPERED", entry["seq"],
                            f"names a table that is not audited: {entry['ref']}")
                        return _finish(report, walk, started)
                    record = records.get((row["ref_table"], row["ref_id"]))
                # The body's records were read for the query above: not parsed again.
                report.problem = walk.step(entry, record, named)
                if report.problem is not None:
                    return _finish(report, walk, started)
            checked += len(rows)
            if progress is not None:
                progress(checked, max(total, checked))
        if progress is not None and checked == 0:
            progress(0, 0)
        for table in chain.CHAINED_TABLES:
            covered = walk.members.get(table)
            cur = conn.execute(
                f"SELECT rowid FROM {table} WHERE rowid NOT IN"  # noqa: S608
                " (SELECT ref_id FROM chain WHERE ref_table = ?)", (table,))
            # Rows a batch entry names are not in the index of single entries: the walk
            # collected them.
            stray = next((row for row in cur if covered is None or row[0] not in covered),
                         None)
            if stray is not None:
                report.problem = Problem(
                    "AUDIT_RECORD_UNCHAINED", None,
                    f"{table}:{stray[0]} is in the database but no chain entry names it")
                return _finish(report, walk, started)
    report.problem = walk.check_checkpoints(checkpoints) or (
        walk.check_checkpoints([pinned], pinned=True) if pinned else None)
    return _finish(report, walk, started)


def verify_path(
    path: Path, keyring: Keyring | None, *, pinned: Checkpoint | None = None,
    progress: Progress | None = None, url: str | None = None, password: str | None = None,
) -> Report:
    """Verify the database file at ``path`` without writing anything: opened read-only,
    never migrated, never created (a missing file is an empty chain, which only a pinned
    checkpoint can say was cut). ``progress`` as :func:`verify_database` (a walk read
    again, because a writer checkpointed into the file meanwhile, counts from 0 again).

    Raises:
        StoreError: ``STORE_READ_FAILED`` when the file cannot be opened read-only.
    """
    if not path.exists() and (url or configured_url()) is None:  # on PostgreSQL it is there
        report = Report("database")
        walk = _Walk(report, _Retention(), set())
        report.problem = _preflight(False, [], keyring, pinned) or (
            walk.check_checkpoints([pinned], pinned=True) if pinned else None)
        return _finish(report, walk, time.perf_counter())
    for _ in range(3):
        db = Database.open_read_only(path, url=url, password=password)
        try:
            report = verify_database(db, keyring, pinned=pinned, progress=progress)
            if not db.changed_since_open():
                return report
        finally:
            db.close()
    return report  # a writer checkpointed into the file during each of three reads


def read_export(path: Path) -> Iterator[JsonObject]:
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


def _header_problem(
    header: Mapping[str, Any], keyring: Keyring | None, entries: int,
    last: Mapping[str, object] | None, checkpoints: int,
) -> Problem | None:
    """Whether the export's first line says what its other lines are, and (with a keyring)
    under its MAC."""
    def mismatch(reason: str) -> Problem:
        return Problem("AUDIT_EXPORT_MISMATCH", None, f"the export's header {reason}")

    if header.get("entries") != entries:
        return mismatch(f"claims {header.get('entries')!r} entries, the file holds {entries}")
    if header.get("head") != last:
        return mismatch(f"names the head {header.get('head')!r}, the last entry is {last!r}")
    if header.get("checkpoints") != checkpoints:
        return mismatch(f"claims {header.get('checkpoints')!r} checkpoints, the file holds "
                        f"{checkpoints}")
    if keyring is None:
        return None
    kid, mac = header.get("key_id"), header.get("mac")
    if not isinstance(kid, str) or not isinstance(mac, str):
        return mismatch("is not signed (an export from before signed headers: export again)")
    try:
        if not keyring.verify(export_header_bytes(header), kid, mac):
            return mismatch("does not match its signature")
    except DeepSeekEyesError as exc:
        return Problem(exc.code, None, f"the export's header: {exc.message}")
    return None


def verify_file(
    path: Path, keyring: Keyring | None, *, pinned: Checkpoint | None = None
) -> Report:
    """Walk an export (``audit export``); records it carries are checked against digests,
    and its header against its lines.

    Raises:
        AuditError: ``AUDIT_EXPORT_INVALID`` for a file that is not an export.
    """
    started = time.perf_counter()
    report = Report(str(path))
    header: JsonObject = {}  # a file's: checked against its lines and its MAC below
    retention_rows: list[tuple[Any, Any]] = []
    checkpoints: list[Checkpoint] = []
    entries = 0
    last: dict[str, object] | None = None  # what the file's last entry claims
    for number, item in enumerate(read_export(path), start=1):
        if number == 1:
            header = item
        elif item.get("type") == "entry":
            entries += 1
            last = {"seq": item.get("seq"), "hash": item.get("hash")}
            if item.get("kind") == "retention":
                retention_rows.append((item.get("seq"), item.get("body")))
        elif item.get("type") == "checkpoint":
            try:
                checkpoints.append(Checkpoint.from_json(item))
            except (KeyError, TypeError, ValueError) as exc:
                raise AuditError(f"{path}: a checkpoint line is malformed",
                                 code="AUDIT_EXPORT_INVALID") from exc
    walk = _Walk(report, _Retention(),
                 {c.seq for c in checkpoints} | ({pinned.seq} if pinned else set()))
    if keyring is None:  # the header is signed: an export always needs the key
        report.problem = _header_problem(header, None, entries, last, len(checkpoints)) or \
            Problem("AUDIT_KEY_MISSING", None,
                    "the audit keyring is missing: the export's signatures cannot be checked")
        return _finish(report, walk, started)
    report.problem = _preflight(entries > 0, checkpoints, keyring, pinned)
    if report.problem is not None:
        return _finish(report, walk, started)
    last_seq = last.get("seq") if last is not None else None
    if checkpoints and isinstance(last_seq, int):
        report.unsigned = max(0, last_seq - max(c.seq for c in checkpoints))
    walk.retention = _retention_under(retention_rows, _signed_through(checkpoints, pinned))
    for item in read_export(path):
        if item.get("type") != "entry":
            continue
        if (any(name not in item for name in _ENTRY_FIELDS) or type(item["seq"]) is not int):
            report.problem = Problem("AUDIT_EXPORT_INVALID", item.get("seq"),
                                     "an entry line lacks a field")
            return _finish(report, walk, started)
        record = (item.get("record", _GONE) if item.get("ref") is not None
                  else item.get("records") if item.get("kind") == chain.BATCH else None)
        report.problem = walk.step(item, record)
        if report.problem is not None:
            return _finish(report, walk, started)
    report.problem = (
        _header_problem(header, keyring, entries, last, len(checkpoints))
        or walk.check_checkpoints(checkpoints)
        or (walk.check_checkpoints([pinned], pinned=True) if pinned else None))
    return _finish(report, walk, started)
