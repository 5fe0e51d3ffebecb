"""The read of a session's retried turns (store/events.py ``_RETRIED``, asked by every
turn's snapshot) in a long session, with the partial index of migration 15 and without.

    .venv/bin/python bench/retried_turns.py [--turns 2000] [--no-postgresql]

A session of ``--turns`` turn records, one of which superseded an earlier attempt (what a
long agent session holds), on SQLite (a data directory) and on PostgreSQL (a throwaway
cluster, tests/services.py). Ours: the read as a snapshot makes it, with the migrated
schema. Baseline: the read as it was before migration 15 (:data:`BEFORE`: every turn's
details parsed as JSON) on the schema before it (``DROP INDEX turns_retried``). Median of 50
reads each, after 10.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.events import _RETRIED

ROWS = ("INSERT INTO turns (id, session_id, started_at, ended_at, model, path, outcome, code,"
        " details) VALUES (?,?,?,?,?,?,?,?,?)")
#: store/events.py's _RETRIED before migration 15.
BEFORE = ("SELECT json_extract(details, '$.retry_of') FROM turns WHERE session_id = ?"
          " AND outcome = 'ok' AND json_extract(details, '$.retry_of') IS NOT NULL")
DETAILS = ('{"base":0,"model_calls":1,"requests":[{"call":1,"usage":{"completion_tokens":20,'
           '"prompt_tokens":100}}],"usage":{"completion_tokens":20,"prompt_tokens":100}}')


def timed(read: Callable[[], object]) -> float:
    for _ in range(10):
        read()
    samples = []
    for _ in range(50):
        started = time.perf_counter()
        read()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e6


def measure(db: Database, turns: int) -> tuple[float, float]:
    db.execute("INSERT INTO sessions (id, created_at, source) VALUES ('s', 0, 'bench')")
    with db.transaction() as conn:
        for n in range(turns):
            conn.execute(ROWS, (f"t{n}", "s", float(n), float(n), "m", "text", "ok", None,
                                DETAILS))
        conn.execute(ROWS, ("r", "s", float(turns), float(turns), "m", "text", "ok", None,
                            '{"base":0,"retry_of":"t7"}'))
    if db.dialect == "postgresql":
        db.execute("ANALYZE turns")

    def read(sql: str) -> object:
        found = db.query(sql, ("s",))
        assert [row[0] for row in found] == ["t7"]
        return found

    ours = timed(lambda: read(_RETRIED))
    db.execute("DROP INDEX turns_retried")
    return ours, timed(lambda: read(BEFORE))


def report(engine: str, db: Database, turns: int) -> None:
    """Measure on ``db`` (closed after) and print the line for ``engine``."""
    try:
        ours, base = measure(db, turns)
    finally:
        db.close()
    print(f"retried_turns.{engine} ({turns} turns): ours={ours:.0f}us baseline={base:.0f}us "
          f"ratio={ours / base:.3f}")


def main(turns: int, postgresql: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        report("sqlite", Database(Path(tmp) / "eyes.db", url=""), turns)
        if not postgresql:
            return
        from services import start_postgres

        with start_postgres() as cluster:
            report("postgresql", Database(Path(tmp) / "unused.db",
                                          url=cluster.new_database("bench")), turns)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--no-postgresql", dest="postgresql", action="store_false")
    args = parser.parse_args()
    main(args.turns, args.postgresql)
