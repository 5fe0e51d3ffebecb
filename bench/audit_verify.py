"""The audit chain: what verifying costs, and what chaining costs a write.

    .venv/bin/python bench/audit_verify.py [--records 50000]

verify: a database with ``--records`` audited records of the common kinds (attempts,
audit rows, usage), written by the real stores. Ours: ``verify_database`` (entry links and
hashes, each record re-read and re-hashed, the unchained-rows check, checkpoints).
Baseline: the least any verifier must do: read every audited row once and SHA-256 its
canonical bytes, with no chain. Prints entries per second for both and ours / baseline in
time (lower is better).

append: ``--records`` audit rows through ``AuditLog.append`` (batched commits), with the
chain entry each row gets now vs the same INSERTs without it. Ratio = chained / plain time.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import tempfile
import time
from pathlib import Path

from deepseek_eyes.audit.checkpoints import sign_checkpoint
from deepseek_eyes.audit.verify import verify_database
from deepseek_eyes.home import DataHome
from deepseek_eyes.store import chain
from deepseek_eyes.store.db import Database
from deepseek_eyes.usage import ProviderUsage, UsageCategory
from deepseek_eyes.vision.routing.attempts import AttemptLog


def fill(home: DataHome, records: int) -> None:
    attempts = AttemptLog(home.db, max_rows=records * 2)
    for i in range(records // 3):
        op = attempts.operation("see")
        op.record("route", "ok", route="local", latency_ms=3.2, image_sha256=f"{i:064x}")
        home.audit.append("mcp.call", f"srv.tool{i % 7}", outcome="ok", ms=i % 100)
        home.usage.record_exact(UsageCategory.FINAL, ProviderUsage(100, 20), source="t",
                                model="m")
    home.db.flush()


def baseline_read_and_hash(path: Path) -> tuple[int, float]:
    started = time.perf_counter()
    conn = sqlite3.connect(path)
    count = 0
    for table in chain.CHAINED_TABLES:
        cur = conn.execute(f"SELECT * FROM {table}")  # noqa: S608
        names = [d[0] for d in cur.description]
        for row in cur:
            record = chain.project_row(table, dict(zip(names, row, strict=True)))
            hashlib.sha256(chain.canonical_bytes(record)).hexdigest()
            count += 1
    conn.close()
    return count, time.perf_counter() - started


def bench_append(records: int, directory: Path) -> tuple[float, float]:
    sql = "INSERT INTO audit (ts, kind, subject, details) VALUES (?,?,?,?)"
    timings = []
    for kind in (None, "mcp.call"):
        db = Database(directory / f"append-{kind}.db")
        started = time.perf_counter()
        for i in range(records):
            db.append(sql, (time.time(), "mcp.call", f"s{i}", '{"outcome":"ok"}'), chain=kind)
        db.flush()
        timings.append(time.perf_counter() - started)
        db.close()
    return timings[0], timings[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=50_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = DataHome(Path(tmp) / "home")
        fill(home, args.records)
        sign_checkpoint(home.db, home.audit_keys())
        report = verify_database(home.db, home.audit_keys())
        assert report.ok, report.as_json()
        count, base_s = baseline_read_and_hash(home.db.path)
        ours_rate = report.entries / report.seconds
        print(f"verify: {report.entries} entries in {report.seconds:.3f} s "
              f"({ours_rate:,.0f} entries/s); baseline read+hash {count} rows in "
              f"{base_s:.3f} s ({count / base_s:,.0f} rows/s); ratio "
              f"{report.seconds / base_s:.2f}")
        home.db.close()
        plain_s, chained_s = bench_append(args.records, Path(tmp))
        print(f"append: {args.records} audit rows plain {plain_s:.3f} s "
              f"({args.records / plain_s:,.0f}/s), chained {chained_s:.3f} s "
              f"({args.records / chained_s:,.0f}/s); ratio {chained_s / plain_s:.2f}")


if __name__ == "__main__":
    main()
