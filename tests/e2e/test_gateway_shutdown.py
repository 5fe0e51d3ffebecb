"""Stopping a real ``deepseek-eyes serve``: SIGTERM and SIGINT drain it, and every stream ends
in our shape, an error event and ``data: [DONE]``, whatever ended it.

The gateway runs as its own process against the loopback DeepSeek, whose ``SLOW[s]``
marker holds each content piece of a stream (and a whole answer) for ``s`` seconds, so a
turn is still running when the signal comes. What is checked is what a client and an
operator see: the SSE events each client parsed, the status and headers of whole answers,
the exit status and time of the process, its standard error (never "Task was destroyed but
it is pending"), and ``audit verify`` on the data directory afterwards.

New connections after the first signal are *refused*: the listening socket closes at
once, and so do idle connections. A request that reaches the app on a connection already
open is answered 503 ``GATEWAY_SHUTTING_DOWN``; no client can hold such a connection
across the signal, so that door is tested in-process (tests/gateway/test_drain.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import ServedGateway, serve_gateway
from runtime.upstream import LoopbackUpstream

MODEL = "deepseek-v4-pro"
STREAMS = 5
STOPPING = "deepseek-eyes gateway: stopping"
PENDING = "Task was destroyed but it is pending"
SESSION = "x-deepseekeyes-session"
START_S = 60  # every wait on the gateway or the upstream is bounded
EXIT_MARGIN_S = 5  # the process exits within drain_timeout + this


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


@contextlib.contextmanager
def _gateway(home: Path, upstream: LoopbackUpstream,
             drain_timeout: float) -> Iterator[ServedGateway]:
    home.mkdir(parents=True, exist_ok=True)
    config = home / "eyes.toml"
    config.write_text(
        f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\nmodel = "{MODEL}"\n'
        "timeout = 120\n"
        f"[gateway]\nrate_limit_per_minute = 1000000\ndrain_timeout = {drain_timeout}\n",
        encoding="utf-8")
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(home)}
    with serve_gateway(config, env) as gateway:
        yield gateway


@dataclass
class Streamed:
    """What one streaming client parsed."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    after_done: int = 0  # data events after [DONE]: there must be none
    failure: str | None = None  # the transport's error: a body cut short
    ended_at: float = 0.0

    @property
    def content(self) -> str:
        return "".join((choice.get("delta") or {}).get("content") or ""
                       for chunk in self.chunks for choice in chunk.get("choices") or [])

    @property
    def codes(self) -> list[str]:
        return [error.get("code") for error in self.errors]


async def _stream(http: httpx.AsyncClient, gateway: ServedGateway, text: str,
                  started: asyncio.Event | None = None) -> Streamed:
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}], "stream": True}
    seen = Streamed()
    try:
        async with http.stream("POST", f"{gateway.base}/chat/completions", json=body,
                               headers=gateway.headers) as response:
            seen.status, seen.headers = response.status_code, dict(response.headers)
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line.removeprefix("data: ")
                if seen.done:
                    seen.after_done += 1
                elif data == "[DONE]":
                    seen.done = True
                else:
                    event = json.loads(data)
                    if "error" in event:
                        seen.errors.append(event["error"])
                    else:
                        seen.chunks.append(event)
                if started is not None:
                    started.set()
    except httpx.HTTPError as exc:
        seen.failure = f"{type(exc).__name__}: {exc}"
    seen.ended_at = time.monotonic()
    if started is not None:
        started.set()  # a stream that failed at once must not leave the test waiting
    return seen


async def _open_streams(http: httpx.AsyncClient, gateway: ServedGateway,
                        texts: list[str]) -> list[asyncio.Task[Streamed]]:
    """Streams that have each received their first chunk."""
    started = [asyncio.Event() for _ in texts]
    tasks = [asyncio.create_task(_stream(http, gateway, text, event))
             for text, event in zip(texts, started, strict=True)]
    async with asyncio.timeout(START_S):
        for event in started:
            await event.wait()
    assert not any(task.done() for task in tasks), [t.result() for t in tasks if t.done()]
    return tasks


async def _exit(gateway: ServedGateway, timeout: float) -> tuple[int, float]:
    """The gateway's exit status and when it exited."""
    try:
        code = await asyncio.to_thread(gateway.process.wait, timeout)
    except subprocess.TimeoutExpired:
        gateway.process.kill()
        pytest.fail(f"the gateway did not exit in {timeout}s: {gateway.stderr[-3000:]}")
    return code, time.monotonic()


def _verify(home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(home)}
    return subprocess.run(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "deepseek_eyes", "--config", str(home / "eyes.toml"), "audit",
         "verify", "--json"], env=env, capture_output=True, text=True, timeout=120,
        check=False)


def _assert_clean_exit(gateway: ServedGateway, home: Path, code: int) -> None:
    assert code == 0, gateway.stderr[-3000:]
    assert PENDING not in gateway.stderr, gateway.stderr[-3000:]
    assert "Traceback" not in gateway.stderr, gateway.stderr[-3000:]
    verified = _verify(home)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def _assert_cut(seen: Streamed) -> None:
    """A stream the stop ended: its chunks so far, one error event, then [DONE]."""
    assert seen.failure is None, seen.failure
    assert seen.status == 200
    assert seen.chunks, "its first chunk came before the stop"
    assert seen.codes == ["GATEWAY_SHUTTING_DOWN"], seen.errors
    assert seen.errors[0]["type"] == "upstream_error"
    assert isinstance(seen.errors[0]["message"], str)
    assert seen.done
    assert seen.after_done == 0


def _session_exists(home: Path, session_id: str) -> bool:
    db = sqlite3.connect(f"file:{home / 'eyes.db'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT 1 FROM sessions WHERE id = ?",
                          (session_id,)).fetchone() is not None
    finally:
        db.close()


def test_sigterm_cuts_what_outlives_the_drain_and_exits_cleanly(
        tmp_path: Path, upstream: LoopbackUpstream) -> None:
    drain = 2.0
    home = tmp_path / "data"
    with _gateway(home, upstream, drain) as gateway:

        async def main() -> tuple[list[Streamed], httpx.Response, float, int, float]:
            before = upstream.calls_for(MODEL)
            async with httpx.AsyncClient(timeout=START_S) as http:
                streams = await _open_streams(
                    http, gateway, [f"SLOW[60] stream {i}" for i in range(STREAMS)])
                whole = asyncio.create_task(http.post(
                    f"{gateway.base}/chat/completions", headers=gateway.headers,
                    json={"model": MODEL,
                          "messages": [{"role": "user", "content": "SLOW[60] whole"}]}))
                arrived = await asyncio.to_thread(
                    upstream.wait_for_calls, MODEL, before + STREAMS + 1, START_S)
                assert arrived, "the whole answer's request did not reach the upstream"
                signalled = time.monotonic()
                gateway.process.send_signal(signal.SIGTERM)
                seen = await asyncio.gather(*streams)
                answer = await whole
                code, exited = await _exit(gateway, drain + EXIT_MARGIN_S + 5)
            return seen, answer, signalled, code, exited

        seen, answer, signalled, code, exited = asyncio.run(main())
        assert exited - signalled <= drain + EXIT_MARGIN_S
        for stream in seen:
            _assert_cut(stream)
            assert stream.ended_at - signalled >= drain - 0.2, "cut before the deadline"
        assert answer.status_code == 503
        assert answer.json()["error"]["code"] == "GATEWAY_SHUTTING_DOWN"
        session = answer.headers.get(SESSION)
        assert session, "the cut whole answer names its session"
        _assert_clean_exit(gateway, home, code)
    assert _session_exists(home, session)
    # Every turn the cut ended is closed as aborted (none is left half-written for the next
    # start to find), each with its chained turn.aborted row.
    db = sqlite3.connect(f"file:{home / 'eyes.db'}?mode=ro", uri=True)
    try:
        assert db.execute("SELECT COUNT(*) FROM turn_leases").fetchone() == (0,)
        aborted = db.execute("SELECT id, details FROM turns WHERE outcome = 'aborted'"
                             " AND code = 'RUNTIME_TURN_ABORTED'").fetchall()
        assert len(aborted) == STREAMS + 1
        assert {json.loads(d)["reason"] for _, d in aborted} <= {"cancelled", "closed"}
        rows = {r[0] for r in db.execute("SELECT subject FROM audit WHERE kind = 'turn.aborted'")}
        assert rows == {turn for turn, _ in aborted}
    finally:
        db.close()


def test_streams_that_finish_in_time_end_whole_and_the_gateway_exits_after_them(
        tmp_path: Path, upstream: LoopbackUpstream) -> None:
    drain = 30.0
    home = tmp_path / "data"
    with _gateway(home, upstream, drain) as gateway:

        async def main() -> tuple[list[Streamed], float, int, float]:
            async with httpx.AsyncClient(timeout=START_S) as http:
                streams = await _open_streams(
                    http, gateway,
                    [f"SLOW[0.4]\nANSWER: whole answer {i}" for i in range(STREAMS)])
                signalled = time.monotonic()
                gateway.process.send_signal(signal.SIGTERM)
                seen = await asyncio.gather(*streams)
                code, exited = await _exit(gateway, drain + EXIT_MARGIN_S)
            return seen, signalled, code, exited

        seen, signalled, code, exited = asyncio.run(main())
        for index, stream in enumerate(seen):
            assert stream.failure is None, stream.failure
            assert stream.errors == []
            assert stream.content == f"whole answer {index}"
            assert stream.done
            assert stream.after_done == 0
            assert stream.ended_at > signalled, "it was still running at the signal"
        last = max(stream.ended_at for stream in seen)
        assert exited - last < EXIT_MARGIN_S, "the gateway waited past the last stream"
        assert exited - signalled < drain / 2, "the gateway waited for the deadline"
        _assert_clean_exit(gateway, home, code)


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_second_signal_ends_the_streams_at_once(
        tmp_path: Path, upstream: LoopbackUpstream, second: signal.Signals) -> None:
    drain = 120.0  # far beyond the test: only the second signal can end the streams
    home = tmp_path / "data"
    with _gateway(home, upstream, drain) as gateway:

        async def main() -> tuple[list[Streamed], float, int, float]:
            async with httpx.AsyncClient(timeout=START_S) as http:
                streams = await _open_streams(
                    http, gateway, [f"SLOW[60] stream {i}" for i in range(3)])
                gateway.process.send_signal(signal.SIGTERM)
                stopping = await asyncio.to_thread(gateway.wait_for_stderr, STOPPING, START_S)
                assert stopping, gateway.stderr
                # New connections are refused from the first signal on.
                with pytest.raises(httpx.ConnectError):
                    async with httpx.AsyncClient(timeout=5) as fresh:
                        await fresh.get(f"{gateway.base}/models", headers=gateway.headers)
                assert not any(task.done() for task in streams), "the drain did not wait"
                signalled = time.monotonic()
                gateway.process.send_signal(second)
                seen = await asyncio.gather(*streams)
                code, exited = await _exit(gateway, EXIT_MARGIN_S + 5)
            return seen, signalled, code, exited

        seen, signalled, code, exited = asyncio.run(main())
        for stream in seen:
            _assert_cut(stream)
            assert stream.ended_at - signalled < 3
        assert exited - signalled <= EXIT_MARGIN_S
        _assert_clean_exit(gateway, home, code)


async def _abandon(http: httpx.AsyncClient, gateway: ServedGateway, text: str) -> None:
    """A client that goes away at its first chunk (its connection closed)."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}], "stream": True}
    async with http.stream("POST", f"{gateway.base}/chat/completions", json=body,
                           headers=gateway.headers) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                return


def test_many_abandoned_streams_leave_no_pending_task(
        tmp_path: Path, upstream: LoopbackUpstream) -> None:
    """Clients that go away mid-stream are no error to log, and leave nothing pending: not
    while the turn waits on the upstream (``SLOW``), nor while it ends (the turn's own
    progress queue once left a getter task waiting, collected pending)."""
    home = tmp_path / "data"
    with _gateway(home, upstream, 5.0) as gateway:

        async def main() -> tuple[int, float, float]:
            limits = httpx.Limits(max_connections=100)
            for batch in range(4):
                async with httpx.AsyncClient(timeout=START_S, limits=limits) as http:
                    await asyncio.gather(*(
                        _abandon(http, gateway, f"{'SLOW[60] ' if i % 4 == 0 else ''}gone "
                                 f"{batch}.{i}") for i in range(50)))
            signalled = time.monotonic()
            gateway.process.send_signal(signal.SIGTERM)
            code, exited = await _exit(gateway, 5.0 + EXIT_MARGIN_S + 5)
            return code, signalled, exited

        code, signalled, exited = asyncio.run(main())
        assert exited - signalled <= 5.0 + EXIT_MARGIN_S
        _assert_clean_exit(gateway, home, code)
        assert "unexpected gateway failure" not in gateway.stderr


# -- failures while the gateway runs ---------------------------------------------------------


@pytest.fixture(scope="module")
def steady(upstream: LoopbackUpstream,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServedGateway, Path]]:
    home = tmp_path_factory.mktemp("steady")
    with _gateway(home, upstream, 5.0) as gateway:
        yield gateway, home


@pytest.mark.parametrize(("model", "code"), [("cut", "LLM_STREAM_INCOMPLETE"),
                                              ("midfail", "LLM_BAD_RESPONSE")])
def test_a_stream_whose_upstream_fails_mid_way_ends_with_an_error_event_and_done(
        steady: tuple[ServedGateway, Path], model: str, code: str) -> None:
    gateway, _ = steady
    body = {"model": model, "messages": [{"role": "user", "content": "x"}], "stream": True}

    async def main() -> Streamed:
        async with httpx.AsyncClient(timeout=START_S) as http:
            seen = Streamed()
            async with http.stream("POST", f"{gateway.base}/chat/completions", json=body,
                                   headers=gateway.headers) as response:
                seen.status, seen.headers = response.status_code, dict(response.headers)
                async for line in response.aiter_lines():
                    if line == "data: [DONE]":
                        seen.done = True
                    elif line.startswith("data: ") and seen.done:
                        seen.after_done += 1
                    elif line.startswith("data: "):
                        event = json.loads(line.removeprefix("data: "))
                        (seen.errors if "error" in event else seen.chunks).append(
                            event.get("error", event))
            return seen

    seen = asyncio.run(main())
    assert seen.status == 200
    assert seen.headers.get(SESSION)
    assert seen.content, "the chunks before the failure were forwarded"
    assert seen.codes == [code]
    assert seen.done
    assert seen.after_done == 0


@contextlib.contextmanager
def _refusing_turn_records(home: Path) -> Iterator[None]:
    """Every write of a turn record fails (a trigger in the gateway's own database), so a
    turn fails at its very end, when its answer and record are committed."""
    db = sqlite3.connect(home / "eyes.db", timeout=30)
    try:
        db.execute("CREATE TRIGGER refuse_turns BEFORE INSERT ON turns "
                   "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
        db.commit()
        yield
    finally:
        db.execute("DROP TRIGGER IF EXISTS refuse_turns")
        db.commit()
        db.close()


def test_a_turn_that_fails_at_its_end_names_its_session(
        steady: tuple[ServedGateway, Path]) -> None:
    gateway, home = steady
    messages = [{"role": "user", "content": "ANSWER: never stored"}]
    with _refusing_turn_records(home), httpx.Client(timeout=START_S) as http:
        whole = http.post(f"{gateway.base}/chat/completions", headers=gateway.headers,
                          json={"model": MODEL, "messages": messages})

        async def streamed() -> Streamed:
            async with httpx.AsyncClient(timeout=START_S) as client:
                return await _stream(client, gateway, "ANSWER: never stored either")

        seen = asyncio.run(streamed())
    assert whole.status_code == 500
    assert whole.json()["error"]["code"] == "STORE_WRITE_FAILED"
    session = whole.headers.get(SESSION)
    assert session, "the error names the session"
    assert _session_exists(home, session)
    assert seen.status == 200
    assert seen.headers.get(SESSION)
    assert len(seen.errors) == 1
    assert seen.errors[0]["code"] == "STORE_WRITE_FAILED"
    assert seen.done
    assert seen.after_done == 0
    # And once the store takes writes again, the gateway answers as before.
    again = httpx.post(f"{gateway.base}/chat/completions", headers=gateway.headers,
                       timeout=START_S, json={"model": MODEL, "messages": messages})
    assert again.status_code == 200


def test_an_upstream_refusal_after_the_request_was_logged_names_its_session(
        steady: tuple[ServedGateway, Path]) -> None:
    gateway, home = steady
    refused = httpx.post(f"{gateway.base}/chat/completions", headers=gateway.headers,
                         timeout=START_S, json={
                             "model": "fail-429",
                             "messages": [{"role": "user", "content": "x"}], "stream": True})
    assert refused.status_code == 429
    session = refused.headers.get(SESSION)
    assert session
    assert _session_exists(home, session)


def test_a_gateway_whose_standard_error_nobody_reads_still_stops_on_sigterm(
        tmp_path: Path, upstream: LoopbackUpstream) -> None:
    """Its notices ("stopping; …") go to standard error. When nobody reads that any more
    (the log collector died, ``serve 2>&1 | tee log`` lost its ``tee``), writing there
    fails (EPIPE): the stop must not. SIGTERM drains and the process exits 0 as ever; a
    notice that failed used to end the begin of the stop before it told the server, so
    the gateway served on and every later signal changed nothing."""
    home = tmp_path / "data"
    home.mkdir()
    config = home / "eyes.toml"
    config.write_text(
        f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\nmodel = "{MODEL}"\n'
        "[gateway]\ndrain_timeout = 2\n", encoding="utf-8")
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(home)}
    env.pop("DEEPSEEK_EYES_GATEWAY_KEY", None)  # an open loopback gateway
    process = subprocess.Popen(  # noqa: S603 - our own CLI, argv list
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "serve",
         "--port", "0", "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stderr is not None
    try:
        listening: list[str] = []
        reader = threading.Thread(target=lambda: listening.append(process.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(START_S)
        assert listening, "the gateway did not start"
        url = json.loads(listening[0])["listening"]["url"].rstrip("/").removesuffix("/v1")
        assert httpx.get(f"{url}/healthz", timeout=START_S).status_code == 200
        process.stderr.close()  # nobody reads its standard error from now on
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=2 + EXIT_MARGIN_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=20)
        process.stdout.close()
    assert code == 0
