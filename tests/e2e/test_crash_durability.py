"""kill -9 under load loses no committed answer's audit trail.

A real ``deepseek-eyes serve`` answers several clients at once, each continuing its own
session turn after turn (plain and streamed), and is killed with SIGKILL mid-load. After
that, for every answer a client received: its assistant message is in the session log,
its turn record and its ``llm.request`` row are there, the chain entry its seal named
(``provenance.audit``: seq and hash) is in the chain with that hash, and a checkpoint
covers it; ``audit verify`` passes on the data directory, read-only, and after a restart
the gateway answers again and ``audit verify`` still passes.

This is the guarantee the batched writes must keep: the answer, its turn record, the rows
booked during the turn and the checkpoint that signs them commit together, before the
answer is sent.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime.upstream import LoopbackUpstream

CLIENTS = 6
KILL_AFTER_ANSWERS = 40


def _start(config: Path, home: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(home)}
    env.pop("DEEPSEEK_EYES_GATEWAY_KEY", None)
    process = subprocess.Popen(  # noqa: S603 - our own CLI, argv list
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "serve",
         "--port", "0"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in process.stderr or []],
                     daemon=True).start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        match = re.search(r"listening on (http://\S+/v1)", line)
        if match:
            return process, match.group(1)
    process.kill()
    pytest.fail("the gateway did not start")


def _reap(process: subprocess.Popen[str]) -> None:
    process.wait(timeout=10)
    if process.stderr is not None:
        process.stderr.close()


def _client(base: str, index: int, answers: list[dict[str, Any]], stop: threading.Event,
            lock: threading.Lock, kill: Callable[[], None] | None) -> None:
    """One client: its own session, a turn after another, the whole history each time."""
    session = f"crash-{index}"
    history: list[dict[str, Any]] = []
    with httpx.Client(timeout=10) as http:
        turn = 0
        while not stop.is_set():
            turn += 1
            history.append({"role": "user", "content": f"turn {turn} of client {index}\n"
                            f"ANSWER: answer {turn} for {index}"})
            body = {"model": "deepseek-v4-pro", "messages": history,
                    "stream": turn % 2 == 0}
            try:
                answer = _post(http, base, body, session)
            except (httpx.HTTPError, ValueError):
                return  # the server is gone
            if answer is None:
                return
            with lock:
                answers.append({"session": session, **answer})
                if len(answers) == KILL_AFTER_ANSWERS and kill is not None:
                    kill()  # right as an answer arrives: nothing after it can cover for it
            history.append({"role": "assistant", "content": answer["content"]})


def _post(http: httpx.Client, base: str, body: dict[str, Any],
          session: str) -> dict[str, Any] | None:
    headers = {"X-DeepSeekEyes-Session": session}
    if not body["stream"]:
        response = http.post(f"{base}/chat/completions", json=body, headers=headers)
        if response.status_code != 200:
            return None
        data = response.json()
        return {"content": data["choices"][0]["message"]["content"],
                "provenance": data["deepseekeyes"]["provenance"]}
    content, provenance, done = "", None, False
    with http.stream("POST", f"{base}/chat/completions", json=body, headers=headers) as r:
        if r.status_code != 200:
            return None
        for line in r.iter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunk = json.loads(line[6:])
                for choice in chunk.get("choices") or []:
                    content += (choice.get("delta") or {}).get("content") or ""
                extension = chunk.get("deepseekeyes") or {}
                provenance = extension.get("provenance", provenance)
    if not done or provenance is None:
        return None  # cut mid-stream: not a received answer
    return {"content": content, "provenance": provenance}


def _verify(config: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(home)}
    return subprocess.run(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "audit", "verify",
         "--json"], env=env, capture_output=True, text=True, timeout=120, check=False)


def test_kill_9_under_load_loses_no_answered_turn(tmp_path: Path) -> None:
    home = tmp_path / "data"
    with LoopbackUpstream() as upstream:
        config = tmp_path / "eyes.toml"
        config.write_text(
            f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\n'
            'model = "deepseek-v4-pro"\ntimeout = 10\n'
            "[gateway]\nrate_limit_per_minute = 1000000\n", encoding="utf-8")
        process, base = _start(config, home)
        answers: list[dict[str, Any]] = []
        lock = threading.Lock()
        stop = threading.Event()
        pid = process.pid
        threads = [threading.Thread(target=_client, args=(
            base, i, answers, stop, lock, lambda: os.kill(pid, signal.SIGKILL)))
            for i in range(CLIENTS)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if process.poll() is None:
            process.kill()
        _reap(process)
        stop.set()
        for thread in threads:
            thread.join(timeout=20)
        assert len(answers) >= KILL_AFTER_ANSWERS, "the load did not get going"

        verified = _verify(config, home)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert json.loads(verified.stdout)["ok"] is True

        db = sqlite3.connect(f"file:{home / 'eyes.db'}?mode=ro", uri=True)
        try:
            for answer in answers:
                _assert_kept(db, answer)
        finally:
            db.close()

        process, base = _start(config, home)  # a restart recovers and answers again
        try:
            again = httpx.post(f"{base}/chat/completions", timeout=10, json={
                "model": "deepseek-v4-pro",
                "messages": [{"role": "user", "content": "after the crash"}]})
            assert again.status_code == 200
        finally:
            process.terminate()
            _reap(process)
        verified = _verify(config, home)
        assert verified.returncode == 0, verified.stdout + verified.stderr


def _assert_kept(db: sqlite3.Connection, answer: dict[str, Any]) -> None:
    provenance = answer["provenance"]
    turn_id = provenance["turn_id"]
    stored = [json.loads(body)["content"] for (body,) in db.execute(
        "SELECT body FROM events WHERE session_id = ? AND turn_id = ? AND role = 'assistant'",
        (answer["session"], turn_id))]
    assert answer["content"] in stored, f"{turn_id}: the answer is not in its session"
    assert db.execute("SELECT 1 FROM turns WHERE id = ? AND outcome = 'ok'",
                      (turn_id,)).fetchone(), f"{turn_id}: no turn record"
    assert db.execute("SELECT 1 FROM audit WHERE kind = 'llm.request' AND subject = ?",
                      (turn_id,)).fetchone(), f"{turn_id}: no llm.request row"
    seal = provenance["audit"]
    row = db.execute("SELECT hash FROM chain WHERE seq = ?", (seal["seq"],)).fetchone()
    assert row is not None, f"{turn_id}: its sealed entry is not stored"
    assert row[0] == seal["hash"], f"{turn_id}: its sealed entry has another hash"
    covered = db.execute("SELECT MAX(seq) FROM chain_checkpoints").fetchone()[0]
    assert covered is not None, "no checkpoint at all"
    assert covered >= seal["seq"], f"{turn_id}: no checkpoint covers it"
