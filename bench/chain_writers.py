"""Chained appends by 1 and by 3 writer processes at once, PostgreSQL and SQLite side by
side: what the store's write order lets run in parallel.

    .venv/bin/python bench/chain_writers.py [--records N] [--rounds N] [--before REV]

Each writer appends ``--records`` messages to a session of its own, one compare-and-set
append a transaction (``SessionStore.append`` with a guard: the session's key, the read
of its head, the chained event, the commit), as a turn logs its request. Writers open the
store first and start together; the rate is all records over the time from the first
start to the last finish. Runs alternate (engine, revision, writer count) within each
round; medians over the rounds, with the writers' CPU time per record
(``time.process_time``) beside the wall rate, and the load average. ``--before REV`` runs
REV's sources in the same loop (its write order: one lock for every write on PostgreSQL).
The chain of each database is verified at the end.

The PostgreSQL cluster is tests/services.py's: fsync off, on this machine, so a commit
costs a round trip, not a disk flush (see docs/deployment.md on durability).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
from _serve import export
from deepseek_eyes.home import DataHome
from services import start_postgres
from store_pg import verified

WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from deepseek_eyes.store.db import Database
    from deepseek_eyes.store.events import Guard, SessionStore
    path, url, count, name, go = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), \\
        sys.argv[4], Path(sys.argv[5])
    db = Database(path, url=url)
    sessions = SessionStore(db)
    head = sessions.append(name, [{"role": "user", "content": "start"}], create="bench")[-1]
    Path(str(go) + "." + name).touch()
    while not go.exists():
        time.sleep(0.001)
    started, cpu = time.time(), time.process_time()
    for i in range(count):
        head = sessions.append(name, [{"role": "user", "content": "m%d" % i}],
                               guard=Guard(head))[-1]
    print(started, time.time(), time.process_time() - cpu)
    db.close()
""")


def run(writers: int, count: int, path: Path, url: str, src: Path, tmp: Path,
        tag: str) -> tuple[float, float]:
    """Records per second, and CPU ms per record, of ``writers`` processes at once."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get(
        "PYTHONPATH", "")])}
    env.pop("DEEPSEEK_EYES_DATABASE_URL", None)
    go = tmp / f"go-{tag}"
    names = [f"{tag}-w{n}" for n in range(writers)]
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), url, str(count),
                               name, str(go)], env=env, stdout=subprocess.PIPE, text=True)
             for name in names]
    deadline = time.monotonic() + 120
    while not all(Path(f"{go}.{name}").exists() for name in names):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise SystemExit("a writer did not start")
        time.sleep(0.005)
    go.touch()
    spans = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise SystemExit("a writer failed")
        spans.append([float(x) for x in out.split()])
    wall = max(s[1] for s in spans) - min(s[0] for s in spans)
    cpu = sum(s[2] for s in spans)
    return writers * count / wall, cpu * 1000 / (writers * count)


def main(count: int, rounds: int, before: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp_name, start_postgres() as cluster:
        tmp = Path(tmp_name)
        revisions = {"ours": ROOT / "src"}
        if before:
            revisions[before] = export(before, tmp / "before")
        stores: dict[tuple[str, str], tuple[Path, str]] = {}
        for rev in revisions:
            url = cluster.new_database(f"w_{rev}".replace("-", "_"))
            DataHome(tmp / f"pg-{rev}", database_url=url).db.close()
            stores[(rev, "postgresql")] = (tmp / "unused.db", url)
            root = tmp / f"sqlite-{rev}"
            DataHome(root, database_url="").db.close()
            stores[(rev, "sqlite")] = (root / "eyes.db", "")
        rates: dict[tuple[str, str, int], list[float]] = {}
        cpus: dict[tuple[str, str, int], list[float]] = {}
        n = 0
        for _ in range(rounds):
            for writers in (1, 3):
                for (rev, engine), (path, url) in stores.items():
                    n += 1
                    rate, cpu = run(writers, count, path, url, revisions[rev], tmp, f"r{n}")
                    rates.setdefault((rev, engine, writers), []).append(rate)
                    cpus.setdefault((rev, engine, writers), []).append(cpu)
        load = os.getloadavg()[0]
        for rev in revisions:
            for writers in (1, 3):
                pg = statistics.median(rates[(rev, "postgresql", writers)])
                lite = statistics.median(rates[(rev, "sqlite", writers)])
                pg_cpu = statistics.median(cpus[(rev, "postgresql", writers)])
                lite_cpu = statistics.median(cpus[(rev, "sqlite", writers)])
                print(f"cas_appends_{writers}_writers.records_per_s ({rev}): ours={pg:.0f} "
                      f"baseline={lite:.0f} ratio={pg / lite:.3f} (postgresql vs sqlite; "
                      f"cpu ms/record {pg_cpu:.2f} vs {lite_cpu:.2f})")
        for rev in revisions:
            for engine in ("postgresql", "sqlite"):
                scale = (statistics.median(rates[(rev, engine, 3)])
                         / statistics.median(rates[(rev, engine, 1)]))
                print(f"cas_appends.3_vs_1_writers ({rev}, {engine}): {scale:.2f}x")
        print(f"load_average_1min: {load:.2f}")
        for (rev, engine), (path, url) in stores.items():
            root = tmp / f"verify-{rev}-{engine}"
            if engine == "sqlite":
                root = path.parent
            print(f"verified ({rev}, {engine}): {verified(url, root)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200, help="per writer and run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", metavar="REV")
    args = parser.parse_args()
    main(args.records, args.rounds, args.before)
