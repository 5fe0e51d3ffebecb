"""A real ``deepseek-eyes serve`` whose data directory is on a tmpfs that fills up (#22).

* **Before** a request (the disk already full): 507 ``STORE_FULL`` in OpenAI's error shape,
  streamed or not, no traceback of a raw ``sqlite3.OperationalError`` in the log, and no
  upstream call (the request could not be logged, so it is not sent).
* **After** the space is freed: the next request succeeds without a restart, and
  ``audit verify`` passes.
* **During** the upstream call (the loopback upstream fills the disk as it handles it):
  the answer cannot be stored; the client gets 507 ``STORE_FULL`` naming its session, a
  stream that began ends with the error event and ``[DONE]``; once there is room, the call
  is in ``usage`` and under ``audit show TURN`` (the rows booked for it were queued, and the
  next write that succeeds takes them) and ``audit verify`` passes.

A call whose queued rows are *lost* (the gateway killed before space was freed) still shows
in ``usage`` and ``audit show TURN`` as "called, outcome unknown": its ``llm.request`` row
was written ahead, committed before the call was sent
(:func:`test_a_call_lost_with_its_process_is_still_on_the_chain`).
"""

from __future__ import annotations

import json
import signal
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import ServedGateway, SmallDisk, open_gateway_env, run_cli, serve_gateway
from runtime.upstream import LoopbackUpstream

MODEL = "deepseek-v4-pro"
SESSION_HEADER = "X-DeepSeekEyes-Session"


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


def _config(tmp_path: Path, upstream: LoopbackUpstream) -> Path:
    config = tmp_path / "eyes.toml"
    config.write_text(
        f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\nmodel = "{MODEL}"\n'
        "timeout = 10\n[gateway]\nrate_limit_per_minute = 1000000\n", encoding="utf-8")
    return config




def _chat(served: ServedGateway, text: str, *, stream: bool = False,
          session: str | None = None) -> httpx.Response:
    headers = {SESSION_HEADER: session} if session else {}
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}], "stream": stream}
    return httpx.post(f"{served.base}/chat/completions", json=body, headers=headers,
                      timeout=30)


def _events(response: httpx.Response) -> list[Any]:
    """A stream's ``data:`` payloads in order, ``[DONE]`` as the string."""
    out: list[Any] = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            data = line[len("data: "):]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def _assert_store_full(response: httpx.Response) -> None:
    assert response.status_code == 507, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}  # OpenAI's shape
    assert error["code"] == "STORE_FULL"
    assert error["type"] == "server_error"
    assert "free space" in error["message"]


def _assert_verifies(config: Path, home: Path) -> None:
    verified = run_cli(config, home, "audit", "verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["ok"] is True


def _exact_calls(config: Path, home: Path) -> int:
    usage = run_cli(config, home, "usage", "--json")
    assert usage.returncode == 0, usage.stderr
    return int(json.loads(usage.stdout)["exact"]["final"]["calls"])


def test_a_full_disk_before_the_request_is_507_and_recovers_without_restart(
    tmp_path: Path, small_disk: SmallDisk, upstream: LoopbackUpstream,
) -> None:
    config, home = _config(tmp_path, upstream), small_disk.root / "home"
    with serve_gateway(config, open_gateway_env(home)) as served:
        assert _chat(served, "warm up").status_code == 200
        calls = upstream.chat_calls
        small_disk.fill()
        _assert_store_full(_chat(served, "no room"))
        _assert_store_full(_chat(served, "no room, streamed", stream=True))
        _assert_store_full(_chat(served, "no room, named", session="full-before"))
        assert upstream.chat_calls == calls  # nothing was sent upstream
        log = served.stderr
        assert "Traceback" not in log, log
        assert "OperationalError" not in log, log

        small_disk.free()
        again = _chat(served, "room again")
        assert again.status_code == 200, again.text
        streamed = _chat(served, "room again, streamed", stream=True)
        assert streamed.status_code == 200
        assert _events(streamed)[-1] == "[DONE]"
        assert upstream.chat_calls == calls + 2
        _assert_verifies(config, home)


def test_a_disk_filled_during_the_upstream_call_is_507_and_loses_nothing(
    tmp_path: Path, small_disk: SmallDisk, upstream: LoopbackUpstream,
) -> None:
    config, home = _config(tmp_path, upstream), small_disk.root / "home"
    fills = threading.Semaphore(0)  # one fill per release: the calls that should fill

    def fill_while_called(_payload: Any) -> None:
        if fills.acquire(blocking=False):
            small_disk.fill()

    upstream.on_chat = fill_while_called
    start = upstream.chat_calls  # the upstream serves the whole module
    try:
        with serve_gateway(config, open_gateway_env(home)) as served:
            assert _chat(served, "warm up").status_code == 200
            calls = upstream.chat_calls

            fills.release()
            whole = _chat(served, "filled while answered", session="full-during")
            _assert_store_full(whole)
            assert whole.headers[SESSION_HEADER] == "full-during"
            small_disk.free()

            fills.release()
            streamed = _chat(served, "filled while streamed", stream=True,
                             session="full-during-stream")
            # The first chunk had gone out: the failure is the stream's last event.
            assert streamed.status_code == 200
            assert streamed.headers[SESSION_HEADER] == "full-during-stream"
            events = _events(streamed)
            assert events[-1] == "[DONE]"
            assert events[-2]["error"]["code"] == "STORE_FULL"
            assert upstream.chat_calls == calls + 2  # both calls were made
            small_disk.free()

            # Room again: the next request succeeds, and its write takes the rows the
            # failed turns booked (usage, llm.request, their failed turn records).
            recovered = _chat(served, "room again")
            assert recovered.status_code == 200, recovered.text
            # Every call made is billed: the warm-up, both failed turns', this one.
            assert _exact_calls(config, home) == upstream.chat_calls - start == 4

            for session in ("full-during", "full-during-stream"):
                shown = run_cli(config, home, "audit", "show", session, "--json")
                assert shown.returncode == 0, shown.stderr
                turns = [t["record"] for t in json.loads(shown.stdout)["turns"]]
                failed = [t for t in turns if t["outcome"] == "failed"]
                assert [t["code"] for t in failed] == ["STORE_FULL"], turns
                turn = run_cli(config, home, "audit", "show", failed[0]["id"], "--json")
                assert turn.returncode == 0, turn.stderr
                requests = [r["record"]["details"] for r in json.loads(turn.stdout)["requests"]]
                # Completed (its queued row was written once there was room). With the
                # write-ahead change a pending row comes first; either way the call is there.
                assert any("usage" in r for r in requests), requests
            _assert_verifies(config, home)
            log = served.stderr
            assert "Traceback" not in log, log
    finally:
        upstream.on_chat = None


def test_a_call_lost_with_its_process_is_still_on_the_chain(
    tmp_path: Path, small_disk: SmallDisk, upstream: LoopbackUpstream,
) -> None:
    config, home = _config(tmp_path, upstream), small_disk.root / "home"
    try:
        with serve_gateway(config, open_gateway_env(home)) as served:
            assert _chat(served, "warm up").status_code == 200  # sealed: the keyring is made
            upstream.on_chat = lambda _payload: small_disk.fill()
            _assert_store_full(_chat(served, "filled while answered", session="lost"))
            served.process.send_signal(signal.SIGKILL)  # its queued rows die with it
            served.process.wait(timeout=10)
    finally:
        upstream.on_chat = None
    small_disk.free()
    _assert_verifies(config, home)
    db = sqlite3.connect(f"file:{home / 'eyes.db'}?mode=ro", uri=True)
    try:
        unanswered = [r[0] for r in db.execute(
            "SELECT subject FROM audit WHERE kind = 'llm.request'"
            " AND subject NOT IN (SELECT id FROM turns WHERE outcome = 'ok')")]
    finally:
        db.close()
    assert unanswered, "the call that was made is nowhere on the chain"
    shown = run_cli(config, home, "audit", "show", unanswered[0], "--json")
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert [r["record"]["details"]["outcome"] for r in view["requests"]] == ["pending"]
    assert [u["status"] for u in view["outcome_unknown"]] == ["called, outcome unknown"]
    usage = json.loads(run_cli(config, home, "usage", "--json").stdout)
    assert usage["outcome_unknown"]["turns"] == [unanswered[0]]
