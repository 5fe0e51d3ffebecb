"""``audit export``: the chain as JSON lines that ``audit verify --file`` checks alone.

The first line names the format and the head; then one line per entry, in order, each with
the projected record it names (content columns as hashes, see
:func:`deepseek_eyes.store.chain.project_row`) or ``"record": null`` when retention removed
it; then the stored checkpoints. The file holds no message text, evidence text or key.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from deepseek_eyes.audit.checkpoints import stored_checkpoints
from deepseek_eyes.audit.verify import EXPORT_FORMAT
from deepseek_eyes.errors import StoreError
from deepseek_eyes.store import chain
from deepseek_eyes.store.db import Database

__all__ = ["export_chain"]


def _line(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def export_chain(db: Database, path: Path) -> dict[str, Any]:
    """Write the export to ``path`` (atomically); returns its summary.

    Raises:
        StoreError: ``STORE_WRITE_FAILED`` when the file cannot be written.
    """
    checkpoints = stored_checkpoints(db)
    tmp = path.with_name(f".{path.name}.tmp")
    entries = 0
    head: dict[str, Any] | None = None
    try:
        with db.reading() as conn, tmp.open("w", encoding="utf-8") as out:
            row = conn.execute("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1").fetchone()
            head = {"seq": int(row[0]), "hash": row[1]} if row else None
            total = conn.execute("SELECT COUNT(*) FROM chain").fetchone()[0]
            out.write(_line({"format": EXPORT_FORMAT, "exported_at": time.time(),
                             "entries": int(total), "head": head}))
            for entry in chain.iter_entries(conn):
                item: dict[str, Any] = {
                    "type": "entry", "seq": int(entry["seq"]), "ts": entry["ts"],
                    "kind": entry["kind"],
                    "ref": chain.ref_text(entry["ref_table"], entry["ref_id"]),
                    "digest": entry["digest"], "prev": entry["prev"], "hash": entry["hash"],
                }
                if entry["ref_table"] is None:
                    item["body"] = entry["body"]
                elif entry["ref_table"] in chain.CHAINED_TABLES:
                    item["record"] = chain.read_record(
                        conn, entry["ref_table"], int(entry["ref_id"]))
                out.write(_line(item))
                entries += 1
            for checkpoint in checkpoints:
                out.write(_line({"type": "checkpoint", "seq": checkpoint.seq,
                                 "hash": checkpoint.hash, "ts": checkpoint.ts,
                                 "key_id": checkpoint.key_id, "mac": checkpoint.mac}))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot write the export {path}: {exc.strerror or exc}",
                         code="STORE_WRITE_FAILED", details={"path": str(path)}) from exc
    return {"path": str(path), "entries": entries, "checkpoints": len(checkpoints),
            "head": head}
