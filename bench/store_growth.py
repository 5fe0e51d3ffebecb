"""What a turn costs the store on disk: bytes per short text turn, and by table.

    .venv/bin/python bench/store_growth.py [--turns 40] [--src OTHER/src]

``deepseek-eyes serve`` (a real process) in front of the loopback DeepSeek
(tests/runtime/upstream.py) and a loopback vision route; the official ``openai`` client
holds conversations as a client does (a session header, the whole history resent). After a
warm-up (the database's tables and the first pages exist), ``--turns`` short text turns
(a one-line question, a one-line answer) run in conversations of five turns; then the
serve process stops (it seals and checkpoints the WAL into the file) and SQLite's
``dbstat`` says how many bytes each table and index holds. Reported: bytes per turn in
use (payload and page overhead of the pages the turn's rows fill, free pages not counted)
and by table, chain entries and checkpoints per turn.

The image part: one image turn acquires evidence; ``--turns`` // 5 more turns send the same
image again (its evidence cached): attempt rows they add, per turn (the goal: none).

Statements per turn: the serve process runs with a ``sitecustomize`` this bench writes
(first on its ``PYTHONPATH``) that traces every SQL statement of every SQLite connection
(``set_trace_callback``) into a file; the statements the text turns ran (from the first
measured turn's request to the last one's answer), per turn, with the write transactions
(``BEGIN IMMEDIATE``, each one commit) and the read ones (``BEGIN``) among them.

``--src`` serves from another revision's sources (before/after in one run: a checkout of
the base commit's ``src``). Baseline: the text the client and the model exchanged (bytes of
the messages' JSON), what any store that keeps the conversation must at least hold.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

import openai

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from _serve import start_gateway
from runtime.upstream import LoopbackUpstream
from vision.loopback import LoopbackVisionServer

RECEIPT = ROOT / "examples" / "receipt.png"


#: Written into the serve process's path: every SQLite connection traces its statements.
_TRACER = """
import os, sqlite3
_out = open(os.environ["DEEPSEEK_EYES_BENCH_SQL_TRACE"], "a", buffering=1)
_connect = sqlite3.connect
def _traced(*args, **kwargs):
    conn = _connect(*args, **kwargs)
    conn.set_trace_callback(lambda sql: _out.write(" ".join(sql.split())[:80] + "\\n"))
    return conn
sqlite3.connect = _traced
"""


def _traced(home: Path) -> Path:
    """Make the serve processes started from now on trace their SQL into a file (see the
    module docstring); returns the file."""
    tracer = home / "tracer"
    tracer.mkdir()
    (tracer / "sitecustomize.py").write_text(_TRACER, encoding="utf-8")
    trace = home / "statements.log"
    trace.touch()
    os.environ["DEEPSEEK_EYES_BENCH_SQL_TRACE"] = str(trace)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(tracer), os.environ.get("PYTHONPATH", "")])
    return trace


def statements(lines: list[str]) -> dict[str, int]:
    """Statements, write transactions and read transactions in traced ``lines``."""
    return {"statements": len(lines),
            "writes": sum(1 for line in lines if line.startswith("BEGIN IMMEDIATE")),
            "reads": sum(1 for line in lines if line == "BEGIN")}


def _settings(upstream: str, vision: str) -> str:
    return (f'[llm]\nbase_url = "{upstream}"\napi_key = false\nmodel = "deepseek-v4-pro"\n'
            '[[llm.models]]\nid = "deepseek-v4-pro"\ninput = ["text"]\n'
            '[vision]\nroute_priority = ["loop"]\nprobe = false\n'
            f'[[vision.routes]]\nname = "loop"\nbase_url = "{vision}"\nmodel = "vision-1"\n')


def usage_by_table(path: Path) -> dict[str, int]:
    """Bytes in use per table or index (payload, cell pointers, page headers and the unused
    bytes of its pages that are not free pages)."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT name, SUM(pgsize - unused) FROM dbstat GROUP BY name")
        return {str(name): int(size) for name, size in rows}
    finally:
        conn.close()


def counts(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        return {t: int(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])  # noqa: S608
                for t in ("chain", "chain_checkpoints", "attempts", "turns", "events")}
    finally:
        conn.close()


def _turns(client: openai.OpenAI, session: str, questions: list[str],
           image: str | None = None) -> int:
    """One conversation; returns the bytes of the messages' JSON exchanged (new ones)."""
    history: list[Any] = []
    exchanged = 0
    for n, question in enumerate(questions):
        content: Any = question
        if image is not None:
            content = [{"type": "text", "text": question},
                       {"type": "image_url", "image_url": {"url": image}}]
        message = {"role": "user", "content": content}
        history.append(message)
        answer = client.chat.completions.create(
            model="deepseek-v4-pro", messages=history,
            extra_headers={"X-DeepSeekEyes-Session": f"{session}-{n if image else 0}"})
        reply = {"role": "assistant", "content": answer.choices[0].message.content}
        history.append(reply)
        if image is None:
            exchanged += len(json.dumps(message)) + len(json.dumps(reply))
        else:
            history = []  # each image turn is a new conversation sending the image again
    return exchanged


def run(src: Path | None, turns: int) -> dict[str, Any]:
    questions = [f"Short question number {i}?\nANSWER: Short answer {i}." for i in range(5)]
    image = "data:image/png;base64," + base64.b64encode(RECEIPT.read_bytes()).decode()
    with LoopbackUpstream() as upstream, LoopbackVisionServer() as vision, \
            tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        db = home / "data" / "eyes.db"
        saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "DEEPSEEK_EYES_BENCH_SQL_TRACE")}
        trace = _traced(home)

        def phase(fn: Any) -> tuple[dict[str, int], dict[str, int], Any]:
            process, url = start_gateway(_settings(upstream.base_url, vision.url("healthy")),
                                         home, src=src)
            try:
                result = fn(openai.OpenAI(base_url=url, api_key="bench", max_retries=0))
            finally:
                process.terminate()
                process.wait(timeout=30)
            return usage_by_table(db), counts(db), result

        before, count0, _ = phase(lambda c: [_turns(c, "warm", questions),
                                             _turns(c, "warm-image", ["What shop?"], image)])
        def measured(client: openai.OpenAI) -> tuple[int, list[str]]:
            start = trace.stat().st_size
            exchanged = sum(_turns(client, f"text-{i}", questions) for i in range(turns // 5))
            with trace.open(encoding="utf-8") as lines:
                lines.seek(start)
                return exchanged, lines.read().splitlines()

        try:
            after, count1, (exchanged, traced) = phase(measured)
            _, count2, _ = phase(lambda c: _turns(c, "again", ["What shop?"] * (turns // 5),
                                                  image))
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    done = (turns // 5) * 5
    grown = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    return {
        "turns": done,
        "bytes_per_turn": sum(grown.values()) / done,
        "by_table": {k: v / done for k, v in sorted(grown.items(), key=lambda kv: -kv[1]) if v},
        "chain_entries_per_turn": (count1["chain"] - count0["chain"]) / done,
        "checkpoints_per_turn": (count1["chain_checkpoints"] - count0["chain_checkpoints"]) / done,
        "exchanged_bytes_per_turn": exchanged / done,
        **{f"{k}_per_turn": v / done for k, v in statements(traced).items()},
        "cached_image_turns": turns // 5,
        "attempt_rows_per_cached_image_turn": (count2["attempts"] - count1["attempts"])
        / (turns // 5),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--src", type=Path, default=None,
                        help="serve from these deepseek_eyes sources (a before/after run)")
    args = parser.parse_args()
    result = run(args.src, max(5, args.turns))
    label = str(args.src) if args.src else "this tree"
    print(f"store growth ({label}): {result['turns']} short text turns")
    print(f"store_growth: ours={result['bytes_per_turn']:.0f} B/turn "
          f"baseline={result['exchanged_bytes_per_turn']:.0f} B/turn (the messages' JSON) "
          f"ratio={result['bytes_per_turn'] / result['exchanged_bytes_per_turn']:.1f}")
    print(f"  chain entries/turn {result['chain_entries_per_turn']:.2f}, checkpoints/turn "
          f"{result['checkpoints_per_turn']:.2f}")
    print(f"  statements/turn {result['statements_per_turn']:.1f} (write transactions "
          f"{result['writes_per_turn']:.2f}, read transactions {result['reads_per_turn']:.2f})")
    print("  by table/index (B/turn): " + ", ".join(
        f"{k} {v:.0f}" for k, v in result["by_table"].items()))
    print(f"cached image: {result['cached_image_turns']} turns re-sending a cached image "
          f"added {result['attempt_rows_per_cached_image_turn']:.2f} attempt rows/turn")


if __name__ == "__main__":
    main()
