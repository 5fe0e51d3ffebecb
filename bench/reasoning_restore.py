"""What restoring a client's dropped reasoning costs a gateway request.

    .venv/bin/python bench/reasoning_restore.py [--sessions 2000] [--exchanges 20]

A data directory holds ``--sessions`` stored conversations, each with ``--exchanges``
assistant tool-call messages (their reasoning and call ids, indexed as the turn runner
stores them). The request is one conversation's history as a framework echoes it back:
every tool-call message without ``reasoning_content``.

Ours: ``restore_reasoning`` on that history (one indexed query for all its call ids, the
matching, the copies). Baseline: the same call on the same history sent back *with* its
reasoning, which finds nothing to restore and reads nothing: what a request costs when
the client keeps the reasoning. Prints microseconds per request for both and the ratio.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from deepseek_eyes.runtime.reasoning import restore_reasoning
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.events import SessionStore


def conversation(exchanges: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for turn in range(exchanges):
        call = f"call_00_{uuid.uuid4().hex[:24]}"
        out += [
            {"role": "user", "content": f"question {turn}"},
            {"role": "assistant", "content": "", "reasoning": "thinking " * 40,
             "tool_calls": [{"id": call, "name": "weather", "arguments": '{"city": "Lima"}'}]},
            {"role": "tool", "tool_call_id": call, "content": "sunny"},
            {"role": "assistant", "content": "It is sunny.", "reasoning": "done"},
        ]
    return out


def timed(history: list[dict[str, Any]], sessions: SessionStore, rounds: int) -> float:
    started = time.perf_counter()
    for _ in range(rounds):
        restore_reasoning(history, sessions)
    return (time.perf_counter() - started) / rounds * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--exchanges", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "eyes.db")
        sessions = SessionStore(db)
        stored: list[dict[str, Any]] = []
        for _ in range(args.sessions):
            stored = conversation(args.exchanges)
            sessions.append(sessions.new_id(), stored, create="gateway")
        dropped = [{k: v for k, v in m.items() if k != "reasoning"} for m in stored]
        restored, count = restore_reasoning(dropped, sessions)
        assert count == args.exchanges
        assert [m.get("reasoning") for m in restored if m.get("tool_calls")] == [
            m["reasoning"] for m in stored if m.get("tool_calls")]
        ours = timed(dropped, sessions, args.rounds)
        baseline = timed(stored, sessions, args.rounds)
        db.close()
    events = args.sessions * args.exchanges * 4
    print(f"restore ({args.exchanges} tool-call messages, {events} stored events): "
          f"ours={ours:.0f}us baseline={baseline:.0f}us ratio={ours / baseline:.1f}")


if __name__ == "__main__":
    main()
