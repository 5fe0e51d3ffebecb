"""The audit chain: what verifying costs, and what chaining costs a write.

    .venv/bin/python bench/audit_verify.py [--records 50000] [--rounds 3]

verify: a database with ``--records`` audited records of the common kinds (attempts,
audit rows, usage), written by the real stores. Ours: ``verify_database`` (entry links and
hashes, each record re-read and re-hashed, the unchained-rows check, checkpoints).
Baseline: the least any verifier must do: read every audited row once and SHA-256 its
canonical bytes, with no chain. Prints entries per second for both and ours / baseline in
time (lower is better).

append: ``--records`` audit rows through ``Database.append`` (batched commits), with the
chain entries they get now (one batch entry per 64-row batch: store/chain.py) vs the same
INSERTs without it, interleaved over ``--rounds`` rounds; ratio = the median of the rounds'
chained / plain times, in wall time and in the process's CPU time (on a machine shared
with other work the CPU ratio is the steadier), and the best round's (min chained / min
plain). The floor: the same INSERTs and a chain row each, written straight to SQLite with
no hashing, what one entry row per record alone costs (the form before batch entries).
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from deepseek_eyes.audit.checkpoints import sign_checkpoint
from deepseek_eyes.audit.verify import verify_database
from deepseek_eyes.home import DataHome
from deepseek_eyes.store import chain
from deepseek_eyes.store.db import APPEND_BATCH, Database
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


_AUDIT_SQL = "INSERT INTO audit (ts, kind, subject, details) VALUES (?,?,?,?)"


def _append_once(records: int, path: Path, kind: str | None) -> tuple[float, float]:
    """Wall and CPU seconds of ``records`` appends and their flush."""
    db = Database(path)
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(records):
        db.append(_AUDIT_SQL, (time.time(), "mcp.call", f"s{i}", '{"outcome":"ok"}'), chain=kind)
    db.flush()
    elapsed = time.perf_counter() - started, time.process_time() - cpu
    db.close()
    return elapsed


def _floor_once(records: int, path: Path) -> float:
    """The same rows and one chain row each, in the same batches and statements, with no hashing
    at all (a constant for every digest and hash): what SQLite alone charges for the
    second row, the least any chain stored as a table row can cost."""
    db = Database(path)
    conn = db._conn  # the bench measures below the store on purpose
    fake = "0" * 64
    started = time.perf_counter()
    seq = 0
    for first in range(0, records, APPEND_BATCH):
        conn.execute("BEGIN IMMEDIATE")
        entries = []
        now = time.time()
        for i in range(first, min(records, first + APPEND_BATCH)):
            cur = conn.execute(_AUDIT_SQL, (time.time(), "mcp.call", f"s{i}", '{"outcome":"ok"}'))
            seq += 1
            entries.append((seq, now, "mcp.call", "audit", cur.lastrowid, None, fake, fake, fake))
        chain._insert_entries(conn, entries)  # the statements the writer uses
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    db.close()
    return elapsed


def bench_append(records: int, directory: Path, rounds: int) -> dict[str, list[float]]:
    """Plain, chained and the SQL floor, interleaved round by round (a busy machine slows
    them alike), each into a fresh database; ``*_cpu``: the same rounds' CPU seconds."""
    times: dict[str, list[float]] = {"plain": [], "chained": [], "floor": [],
                                     "plain_cpu": [], "chained_cpu": []}
    for n in range(rounds):
        for name, kind in (("plain", None), ("chained", "mcp.call")):
            wall, cpu = _append_once(records, directory / f"{name}-{n}.db", kind)
            times[name].append(wall)
            times[f"{name}_cpu"].append(cpu)
        times["floor"].append(_floor_once(records, directory / f"floor-{n}.db"))
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = DataHome(Path(tmp) / "home")
        fill(home, args.records)
        sign_checkpoint(home.db, home.audit_keys())
        report = verify_database(home.db, home.audit_keys())
        assert report.ok, report.as_json()
        count, base_s = baseline_read_and_hash(home.db.path)
        ours_rate = report.records / report.seconds
        print(f"verify: {report.records} records under {report.entries} entries in "
              f"{report.seconds:.3f} s ({ours_rate:,.0f} records/s); baseline read+hash "
              f"{count} rows in {base_s:.3f} s ({count / base_s:,.0f} rows/s); ratio "
              f"{report.seconds / base_s:.2f}")
        home.db.close()
        times = bench_append(args.records, Path(tmp), args.rounds)
        plain_s, chained_s, floor_s = (statistics.median(times[k])
                                       for k in ("plain", "chained", "floor"))
        ratios = sorted(c / p for p, c in zip(times["plain"], times["chained"], strict=True))
        cpu = sorted(c / p for p, c in zip(times["plain_cpu"], times["chained_cpu"],
                                           strict=True))
        floors = sorted(f / p for p, f in zip(times["plain"], times["floor"], strict=True))
        print(f"append: {args.records} audit rows, {args.rounds} interleaved rounds, medians: "
              f"plain {plain_s:.3f} s ({args.records / plain_s:,.0f}/s), chained "
              f"{chained_s:.3f} s ({args.records / chained_s:,.0f}/s); ratio (median of the "
              f"rounds') {statistics.median(ratios):.2f} (each: "
              f"{', '.join(f'{r:.2f}' for r in ratios)}); best round "
              f"{min(times['chained']) / min(times['plain']):.2f}; CPU time ratio "
              f"{statistics.median(cpu):.2f} (each: {', '.join(f'{r:.2f}' for r in cpu)})")
        print(f"append floor of one entry row a record (the form before batch entries): the "
              f"same rows + a chain row each, no hashing, {floor_s:.3f} s; ratio "
              f"{statistics.median(floors):.2f} (each: {', '.join(f'{r:.2f}' for r in floors)})")


if __name__ == "__main__":
    main()
