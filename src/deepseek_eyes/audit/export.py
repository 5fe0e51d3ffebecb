"""``audit export``: the chain as JSON lines that ``audit verify --file`` checks alone.

The first line names the format, the head, how many entries and checkpoints follow, and
carries an HMAC over those fields under the audit key, so a cut or padded export does not
verify (``AUDIT_EXPORT_MISMATCH``); then one line per entry, in order, each with the
projected record it names (content columns as hashes, see
:func:`deepseek_eyes.store.chain.project_row`) or ``"record": null`` when retention removed
it; then the stored checkpoints. Everything comes from one read snapshot. The file holds no
message text, evidence text or key.

Why exporting writes nothing to the data directory: the header's HMAC signs the head and the
counts of everything exported, the entries after the newest checkpoint included, so a seal
first would add no protection to the file; it only covers those entries in the *database*
too. ``audit export`` therefore reads the database and the keyring read-only (it works on a
read-only copy, a backup or a forensic one) and seals only when asked (``--seal``, which
needs a writable data directory).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path

from deepseek_eyes import canonical_json
from deepseek_eyes.audit.checkpoints import Checkpoint, read_checkpoints
from deepseek_eyes.audit.records import ChainHead, ExportEntry, ExportHeader, ExportSummary
from deepseek_eyes.audit.verify import EXPORT_FORMAT, export_header_bytes
from deepseek_eyes.errors import AuditError, StoreError
from deepseek_eyes.store import chain
from deepseek_eyes.store.db import Database, configured_url
from deepseek_eyes.store.failures import store_error
from deepseek_eyes.store.keyring import Keyring

__all__ = ["export_chain", "export_path"]


def _line(value: ExportHeader | ExportEntry | Mapping[str, object]) -> str:
    return canonical_json.LENIENT.dumps(value) + "\n"


def _batch_records(conn: sqlite3.Connection, body: str) -> list[chain.Record | None]:
    """The projected records a batch entry names, None for one that is gone; an entry
    whose body names none carries none (verify reports it)."""
    try:
        members = chain.batch_members(body)
    except ValueError:
        return []
    found: dict[tuple[str, int], chain.Record] = {}
    wanted: dict[str, list[int]] = {}
    for table, rowid, _kind, _digest in members:
        wanted.setdefault(table, []).append(rowid)
    for table, rowids in wanted.items():
        for rowid, record in chain.read_records(conn, table, rowids).items():
            found[(table, rowid)] = record
    return [found.get((table, rowid)) for table, rowid, _kind, _digest in members]


def export_chain(db: Database, path: Path, keyring: Keyring) -> ExportSummary:
    """Write the export to ``path`` (atomically), its header signed with ``keyring``;
    returns its summary.

    Raises:
        StoreError: ``STORE_FULL`` or ``STORE_WRITE_FAILED`` when the file cannot be
            written (nothing is left at ``path``), ``STORE_READ_FAILED`` when the database
            cannot be read.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    entries = 0
    head: ChainHead | None = None
    checkpoints: list[Checkpoint] = []
    try:
        with db.reading() as conn, tmp.open("w", encoding="utf-8") as out:
            checkpoints = read_checkpoints(conn)
            row = conn.execute("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1").fetchone()
            head = {"seq": int(row[0]), "hash": row[1]} if row else None
            total = conn.execute("SELECT COUNT(*) FROM chain").fetchone()[0]
            header: ExportHeader = {"format": EXPORT_FORMAT, "exported_at": time.time(),
                                    "entries": int(total), "head": head,
                                    "checkpoints": len(checkpoints)}
            header["key_id"], header["mac"] = keyring.sign(export_header_bytes(header))
            out.write(_line(header))
            for entry in chain.iter_entries(conn):
                item: ExportEntry = {
                    "type": "entry", "seq": int(entry["seq"]), "ts": entry["ts"],
                    "kind": entry["kind"],
                    "ref": chain.ref_text(entry["ref_table"], entry["ref_id"]),
                    "digest": entry["digest"], "prev": entry["prev"], "hash": entry["hash"],
                }
                if entry["ref_table"] is None:
                    item["body"] = entry["body"]
                    if entry["kind"] == chain.BATCH:  # the records it names, in its order
                        item["records"] = _batch_records(conn, entry["body"])
                elif entry["ref_table"] in chain.CHAINED_TABLES:
                    item["record"] = chain.read_record(
                        conn, entry["ref_table"], int(entry["ref_id"]))
                out.write(_line(item))
                entries += 1
            for checkpoint in checkpoints:
                out.write(_line({"type": "checkpoint", **checkpoint.as_json()}))
        os.replace(tmp, path)
    except OSError as exc:  # a StoreError too: the database could not be read
        tmp.unlink(missing_ok=True)
        if isinstance(exc, StoreError):
            raise
        raise store_error(exc, f"cannot write the export {path}", path) from exc
    return {"path": str(path), "entries": entries, "checkpoints": len(checkpoints),
            "head": head}


def export_path(db_path: Path, path: Path, keyring: Keyring | None, *,
                url: str | None = None, password: str | None = None) -> ExportSummary:
    """:func:`export_chain` of the database file at ``db_path``, opened read-only (never
    migrated or created; read again when a writer checkpointed into it meanwhile, as
    :func:`~deepseek_eyes.audit.verify.verify_path` does): nothing in the data directory is
    written.

    Raises:
        AuditError: ``AUDIT_NOT_FOUND`` when nothing is stored; ``AUDIT_KEY_MISSING`` when
            there is no keyring to sign the header with (none is made).
        StoreError: as :func:`export_chain`, and ``STORE_READ_FAILED`` when the database
            cannot be opened read-only.
    """
    if not db_path.exists() and (url or configured_url()) is None:  # on PostgreSQL it is there
        raise AuditError(f"nothing is stored yet ({db_path} does not exist)",
                         code="AUDIT_NOT_FOUND", details={"path": str(db_path)})
    if keyring is None:
        raise AuditError(
            "there is no audit keyring to sign the export with (and an export never makes "
            "one); `audit export --seal` creates it in a writable data directory",
            code="AUDIT_KEY_MISSING", details={"path": str(db_path.parent / "audit")})
    for _ in range(3):
        db = Database.open_read_only(db_path, url=url, password=password)
        try:
            summary = export_chain(db, path, keyring)
            if not db.changed_since_open():
                return summary
        finally:
            db.close()
    return summary  # a writer checkpointed into the file during each of three reads
