"""The store on PostgreSQL against the store on SQLite: a gateway text turn, and chain
appends from three writer processes.

    .venv/bin/python bench/store_pg.py [--requests N] [--appends N]

1. A text turn: two ``deepseek-eyes serve`` processes against one loopback upstream, one on
   its SQLite data directory, one with ``[store] database_url`` on a throwaway PostgreSQL
   cluster (tests/services.py, on this machine); requests alternate between them, in
   conversations of :data:`CONVERSATION` turns as a stock client holds them (the whole
   history resent, no session id: the gateway finds the session by the history's hashes),
   so most turns continue a session. p50 of the whole turn (wall), of a conversation's
   first turn and of the turns that continue one, and of the gateway's own
   ``Server-Timing`` total and its ``store`` stage. Ratio = PostgreSQL / SQLite (goal: at
   most 1.3 for the wall time).
2. Chain appends: three processes each append ``--appends`` chained audit records, one
   write transaction each, at once on one database; records per second in total, and the
   chain verified after (one chain, whatever the interleaving). Each transaction is one
   chained record, so on PostgreSQL as on SQLite it is all chain tail (SQLite's write lock;
   PostgreSQL's chain lock, store/postgres.py): the store's chained write throughput, not a
   per-writer one. bench/chain_writers.py compares 1 and 3 writers of whole appends.
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

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
from _serve import export, start_gateway
from conversation import stages_of
from deepseek_eyes.audit.checkpoints import sign_checkpoint
from deepseek_eyes.audit.verify import verify_database
from deepseek_eyes.home import DataHome
from runtime.upstream import LoopbackUpstream
from services import start_postgres

MODEL = "deepseek-v4-pro"
#: Turns of one conversation: a stock client resends the history it holds, with no session
#: id, and the gateway finds the session it continues by the history's hashes.
CONVERSATION = 5
WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from deepseek_eyes.store.db import Database
    path, url, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    db = Database(path, url=url)
    sql = "INSERT INTO audit (ts, kind, subject, details) VALUES (?,?,?,?)"
    for i in range(count):
        db.execute(sql, (time.time(), "bench.append", sys.argv[4], '{"n":%d}' % i),
                   chain="bench.append")
    db.close()
""")


def p50(values: list[float]) -> float:
    return statistics.median(values) * 1000 if values else float("nan")


def turns(requests: int, url: str, tmp: Path, before: str | None = None,
          before_url: str = "") -> None:
    settings = "[llm]\nbase_url = \"{up}\"\napi_key = false\nmodel = \"" + MODEL + "\"\n"
    with LoopbackUpstream() as upstream:
        text = settings.format(up=upstream.base_url)
        servers = {}
        runs = [("sqlite", "", None), ("postgresql", f'[store]\ndatabase_url = "{url}"\n', None)]
        if before:  # the same two on another revision's sources, asked in the same loop
            src = export(before, tmp / "before")
            runs += [("sqlite-before", "", src),
                     ("postgresql-before", f'[store]\ndatabase_url = "{before_url}"\n', src)]
        for name, extra, sources in runs:
            home = tmp / f"home-{name}"
            home.mkdir()
            servers[name] = start_gateway(text + extra, home, gateway="server_timing = true",
                                          src=sources)
        wall: dict[str, list[float]] = {n: [] for n in servers}
        own: dict[str, list[float]] = {n: [] for n in servers}
        store: dict[str, list[float]] = {n: [] for n in servers}
        first: dict[str, list[float]] = {n: [] for n in servers}  # wall, a conversation's first
        later: dict[str, list[float]] = {n: [] for n in servers}  # wall, the turns after
        histories: dict[str, list[dict[str, str]]] = {n: [] for n in servers}
        try:
            with httpx.Client(timeout=30) as client:
                for index in range(requests + 30):
                    turn = index % CONVERSATION
                    for name, (_process, base) in servers.items():
                        history = histories[name]
                        if turn == 0:
                            history.clear()
                        question = f"question {turn} of conversation {index // CONVERSATION}"
                        history.append({"role": "user", "content": question})
                        started = time.perf_counter()
                        answer = client.post(f"{base}/chat/completions",
                                             json={"model": MODEL, "messages": history})
                        elapsed = time.perf_counter() - started
                        answer.raise_for_status()
                        history.append({"role": "assistant", "content":
                                        answer.json()["choices"][0]["message"]["content"]})
                        if index >= 30:  # warm-up excluded
                            stages = stages_of(answer.headers.get("server-timing"))
                            wall[name].append(elapsed)
                            (first if turn == 0 else later)[name].append(elapsed)
                            own[name].append(stages.get("total", float("nan")) / 1000)
                            store[name].append(stages.get("store", 0.0) / 1000)
        finally:
            for process, _base in servers.values():
                process.terminate()
                process.wait(timeout=30)
    for what, series in (("wall_p50_ms", wall), ("own_p50_ms", own),
                         ("store_stage_p50_ms", store), ("first_turn_wall_p50_ms", first),
                         ("continued_turn_wall_p50_ms", later)):
        a, b = p50(series["postgresql"]), p50(series["sqlite"])
        print(f"text_turn.{what}: ours={a:.2f} baseline={b:.2f} ratio={a / b:.3f}")
        if before:
            a, b = p50(series["postgresql-before"]), p50(series["sqlite-before"])
            print(f"text_turn.{what} ({before}): ours={a:.2f} baseline={b:.2f} "
                  f"ratio={a / b:.3f}")


def appends(count: int, url: str, path: Path, tmp: Path) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    env.pop("DEEPSEEK_EYES_DATABASE_URL", None)
    if url:  # created and migrated first: the measurement is of appends, not of a start
        DataHome(tmp / "chain-home", database_url=url).db.close()
    started = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), url, str(count),
                               f"w{n}"], env=env) for n in range(3)]
    for proc in procs:
        if proc.wait(timeout=600) != 0:
            raise SystemExit("a writer failed")
    return 3 * count / (time.perf_counter() - started)


def verified(url: str, home_root: Path) -> bool:
    home = DataHome(home_root, database_url=url)
    try:
        sign_checkpoint(home.db, home.audit_keys())
        return verify_database(home.db, home.audit_keys()).ok
    finally:
        home.db.close()


def main(requests: int, count: int, socket: bool, before: str | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp_name, start_postgres() as cluster:
        tmp = Path(tmp_name)
        url = cluster.new_database("bench")
        if socket:  # the server's Unix socket instead of TCP on loopback
            url = url.replace("@127.0.0.1:", "@:") + f"?host={cluster.root}"
            url = url.replace(f"@:{cluster.port}/", "@/") + f"&port={cluster.port}"
        turns(requests, url, tmp, before, cluster.new_database("before") if before else "")
        url = cluster.new_database("chain")
        pg_rate = appends(count, url, tmp / "unused.db", tmp)
        sqlite_home = tmp / "sqlite-chain"
        DataHome(sqlite_home, database_url="").db.close()
        sqlite_rate = appends(count, "", sqlite_home / "eyes.db", tmp)
        print(f"chain_appends_3_writers.records_per_s: ours={pg_rate:.0f} "
              f"baseline={sqlite_rate:.0f} ratio={pg_rate / sqlite_rate:.3f}")
        print(f"chain_appends_3_writers.verified: postgresql={verified(url, tmp / 'v-pg')} "
              f"sqlite={verified('', sqlite_home)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--socket", action="store_true",
                        help="reach PostgreSQL over its Unix socket (a replica on its host)")
    parser.add_argument("--before", metavar="REV",
                        help="also serve REV's sources (both engines) in the same loop")
    args = parser.parse_args()
    main(args.requests, args.appends, args.socket, args.before)
