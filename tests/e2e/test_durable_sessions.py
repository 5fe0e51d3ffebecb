"""Sessions stay whole across processes, crashes and retries (real ``serve`` processes).

* Two ``serve`` processes on one data directory, sent two different continuations of one
  session at the same moment: always one continues it and the other forks, never both
  appended (before compare-and-set appends, 10 pairs in 20 interleaved).
* kill -9 mid-turn, then a restart: the half-written turn is closed as aborted with a
  chained ``turn.aborted`` row, its written-ahead call reads as "called, outcome unknown",
  and the client's retry is a new attempt of that turn in the same session; an answer
  stored under an ``Idempotency-Key`` before the crash is replayed by the new process, and
  a key the dead process held is taken over by its retry.
* ``Idempotency-Key``: the same request again is answered from the store, not the upstream.

``audit verify`` passes after each.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from deepseek_eyes.store import chain
from helpers import ServedGateway, open_gateway_env, run_cli, serve_gateway
from runtime.upstream import LoopbackUpstream

MODEL = "deepseek-v4-pro"
PAIRS = 20


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


def _config(tmp_path: Path, upstream: LoopbackUpstream, *, timeout: float = 10) -> Path:
    config = tmp_path / "eyes.toml"
    config.write_text(
        f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\nmodel = "{MODEL}"\n'
        f"timeout = {timeout}\nmax_retries = 0\n"
        "[gateway]\nrate_limit_per_minute = 1000000\n", encoding="utf-8")
    return config




def _verified(config: Path, home: Path) -> None:
    done = run_cli(config, home, "audit", "verify", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["ok"] is True


def _chat(gateway: ServedGateway, messages: list[Any], *, session: str | None = None,
          model: str = MODEL, headers: dict[str, str] | None = None,
          timeout: float = 30, **extra: Any) -> httpx.Response:
    sent = dict(headers or {})
    if session is not None:
        sent["X-DeepSeekEyes-Session"] = session
    return httpx.post(f"{gateway.base}/chat/completions", timeout=timeout, headers=sent,
                      json={"model": model, "messages": messages, **extra})


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_two_processes_racing_continuations_give_one_continue_and_one_fork(
    tmp_path: Path, upstream: LoopbackUpstream,
) -> None:
    home = tmp_path / "data"
    config = _config(tmp_path, upstream)
    env = open_gateway_env(home)
    with serve_gateway(config, env) as first, serve_gateway(config, env) as second, \
            concurrent.futures.ThreadPoolExecutor(2) as pool:
        for pair in range(PAIRS):
            session = f"race-{pair}"
            opening = [_user(f"start {pair}\nANSWER: opened {pair}")]
            answered = _chat(first, opening, session=session)
            assert answered.status_code == 200, answered.text
            history = [*opening, {"role": "assistant", "content": f"opened {pair}"}]
            barrier = threading.Barrier(2)

            def send(gateway: ServedGateway, text: str, history: list[dict[str, Any]] = history,
                     session: str = session, barrier: threading.Barrier = barrier,
                     ) -> dict[str, Any]:
                barrier.wait()
                response = _chat(gateway, [*history, _user(text)], session=session)
                assert response.status_code == 200, response.text
                body: dict[str, Any] = response.json()
                return body

            results = list(pool.map(lambda args: send(*args),
                                    [(first, f"left {pair}\nANSWER: L{pair}"),
                                     (second, f"right {pair}\nANSWER: R{pair}")]))
            kept = [r for r in results if r["deepseekeyes"]["session_id"] == session]
            forked = [r for r in results if r["deepseekeyes"]["session_id"] != session]
            assert len(kept) == 1, [r["deepseekeyes"] for r in results]
            assert len(forked) == 1, [r["deepseekeyes"] for r in results]
            assert "fork" not in kept[0]["deepseekeyes"]
            assert forked[0]["deepseekeyes"]["fork"] == {"from": session, "at": 2}
            winner = kept[0]["choices"][0]["message"]["content"]
            loser = forked[0]["choices"][0]["message"]["content"]
            db = sqlite3.connect(f"file:{home / 'eyes.db'}?mode=ro", uri=True)
            try:
                for sid, answer in ((session, winner),
                                    (forked[0]["deepseekeyes"]["session_id"], loser)):
                    rows = db.execute("SELECT role, body FROM events WHERE session_id = ?"
                                      " ORDER BY seq", (sid,)).fetchall()
                    assert [r[0] for r in rows] == ["user", "assistant", "user", "assistant"]
                    assert json.loads(rows[-1][1])["content"] == answer
            finally:
                db.close()
    _verified(config, home)


def test_kill_9_mid_turn_is_closed_on_restart_and_its_retry_is_an_attempt(
    tmp_path: Path, upstream: LoopbackUpstream,
) -> None:
    home = tmp_path / "data"
    config = _config(tmp_path, upstream, timeout=60)
    env = open_gateway_env(home)
    question = [_user("a question the first process never answers")]
    hung_before = upstream.calls_for("hang")
    answered_key = {"Idempotency-Key": "paid-before-the-crash"}
    held_key = {"Idempotency-Key": "held-by-the-killed-process"}
    paid = [_user("answered before the crash\nANSWER: kept")]
    held = [_user("SLOW[2] in flight at the crash\nANSWER: taken over")]
    with serve_gateway(config, env) as gateway:
        stored = _chat(gateway, paid, headers=answered_key)
        assert stored.status_code == 200, stored.text
        errors: list[BaseException] = []

        def ask(messages: list[Any], **options: Any) -> None:
            try:
                _chat(gateway, messages, timeout=60, **options)
            except httpx.HTTPError as exc:  # the server dies under it
                errors.append(exc)

        flash_before = upstream.calls_for(MODEL)
        threads = [threading.Thread(target=ask, args=(question,),
                                    kwargs={"session": "k9", "model": "hang"}),
                   threading.Thread(target=ask, args=(held,), kwargs={"headers": held_key})]
        for thread in threads:
            thread.start()
        assert upstream.wait_for_calls("hang", hung_before + 1, timeout=30), "never called"
        assert upstream.wait_for_calls(MODEL, flash_before + 1, timeout=30), "never called"
        os.kill(gateway.process.pid, signal.SIGKILL)
        gateway.process.wait(timeout=10)
        for thread in threads:
            thread.join(timeout=30)
    assert len(errors) == 2, "a client got an answer from a killed process"
    db_path = home / "eyes.db"
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        (turn_id,) = db.execute("SELECT turn_id FROM turn_leases WHERE session_id = 'k9'"
                                ).fetchone()
        assert db.execute("SELECT COUNT(*) FROM turn_leases").fetchone() == (2,)
        assert db.execute("SELECT COUNT(*) FROM turns WHERE id = ?", (turn_id,)
                          ).fetchone() == (0,)
    finally:
        db.close()
    # The call was written ahead: read-only commands show it as sent, outcome unknown.
    usage = run_cli(config, home, "usage", "--json")
    assert usage.returncode == 0, usage.stderr
    unknown = json.loads(usage.stdout)["outcome_unknown"]
    assert unknown["calls"] == 2
    assert turn_id in unknown["turns"]
    assert "called, outcome unknown: 2" in run_cli(config, home, "usage").stdout
    shown = json.loads(run_cli(config, home, "audit", "show", turn_id, "--json").stdout)
    assert [u["status"] for u in shown["outcome_unknown"]] == ["called, outcome unknown"]

    with serve_gateway(config, env) as gateway:  # opening the store closes the turn
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            outcome, code, details = db.execute(
                "SELECT outcome, code, details FROM turns WHERE id = ?", (turn_id,)).fetchone()
            assert (outcome, code) == ("aborted", "RUNTIME_TURN_ABORTED")
            assert json.loads(details)["reason"] == "process ended"
            rowid, aborted = db.execute("SELECT id, details FROM audit WHERE kind ="
                                        " 'turn.aborted' AND subject = ?", (turn_id,)).fetchone()
            assert json.loads(aborted)["session_id"] == "k9"
            assert db.execute("SELECT COUNT(*) FROM turn_leases").fetchone() == (0,)
            # Chained (its own entry, or its transaction's batch entry naming it as such).
            entry = chain.entry_of(db, "audit", rowid)
            assert entry is not None
            body = db.execute("SELECT body FROM chain WHERE seq = ?", (entry[0],)).fetchone()[0]
            assert entry[1] == "turn.aborted" or ("audit", rowid, "turn.aborted") in [
                (t, r, k) for t, r, k, _d in chain.batch_members(body)]
        finally:
            db.close()
        # A key answered before the crash is replayed by the new process, not billed again.
        calls = upstream.calls_for(MODEL)
        replayed = _chat(gateway, paid, headers=answered_key)
        assert replayed.status_code == 200
        assert replayed.headers["idempotent-replayed"] == "true"
        assert replayed.json()["choices"] == stored.json()["choices"]
        assert upstream.calls_for(MODEL) == calls
        # A key whose holder died is taken over by the retry (not busy), and answered.
        taken = _chat(gateway, held, headers=held_key)
        assert taken.status_code == 200, taken.text
        assert taken.json()["choices"][0]["message"]["content"] == "taken over"
        assert upstream.calls_for(MODEL) == calls + 1
        # The client retries the same history: an attempt of the aborted turn, same session.
        retried = _chat(gateway, question, session="k9")
        assert retried.status_code == 200, retried.text
        extension = retried.json()["deepseekeyes"]
        assert extension["session_id"] == "k9"
        assert extension["retry_of"] == turn_id
        assert "fork" not in extension
    # What the killed call was billed stays unknown; everything else is accounted for.
    assert json.loads(run_cli(config, home, "usage", "--json").stdout)["outcome_unknown"][
        "calls"] == 2
    _verified(config, home)


def test_an_idempotency_key_replays_the_stored_answer_without_calling_again(
    tmp_path: Path, upstream: LoopbackUpstream,
) -> None:
    home = tmp_path / "data"
    config = _config(tmp_path, upstream, timeout=3)
    with serve_gateway(config, open_gateway_env(home)) as gateway, \
            openai.OpenAI(base_url=gateway.base, api_key="unused", max_retries=0) as client:
        key = {"Idempotency-Key": "order-7d3f-retry-safe"}
        messages: list[Any] = [_user("what was billed?\nANSWER: thirty-two")]
        calls = upstream.calls_for(MODEL)
        first = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, extra_headers=key)
        answer = first.parse()
        assert upstream.calls_for(MODEL) == calls + 1
        again = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, extra_headers=key)
        replay = again.parse()
        assert again.headers["idempotent-replayed"] == "true"
        assert replay.id == answer.id
        assert replay.choices[0].message.content == "thirty-two"
        assert replay.model_extra is not None
        assert replay.model_extra["deepseekeyes"]["replayed"] is True
        assert again.headers["x-deepseekeyes-session"] == answer.model_extra["deepseekeyes"][
            "session_id"]  # type: ignore[index]
        # Streamed, as a client retrying a cut stream asks: the same answer as chunks.
        stream = client.chat.completions.create(model=MODEL, messages=messages,
                                                extra_headers=key, stream=True,
                                                stream_options={"include_usage": True})
        chunks = list(stream)
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == \
            "thirty-two"
        assert chunks[-1].usage is not None
        assert chunks[-1].usage.total_tokens == answer.usage.total_tokens  # type: ignore[union-attr]
        assert upstream.calls_for(MODEL) == calls + 1, "a replay called the upstream"

        # The same key for another request is refused; a key in use is busy.
        with pytest.raises(openai.UnprocessableEntityError) as reused:
            client.chat.completions.create(model=MODEL, messages=[_user("other")],
                                           extra_headers=key)
        assert reused.value.code == "GATEWAY_IDEMPOTENCY_KEY_REUSED"
        busy_key = {"Idempotency-Key": "slow-one"}
        hung = upstream.calls_for("hang")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            slow = pool.submit(_chat, gateway, [_user("slow")], model="hang",
                               headers=busy_key)
            assert upstream.wait_for_calls("hang", hung + 1, timeout=30)
            refused = _chat(gateway, [_user("slow")], model="hang", headers=busy_key)
            assert refused.status_code == 409
            assert refused.json()["error"]["code"] == "GATEWAY_IDEMPOTENCY_IN_PROGRESS"
            failed = slow.result(timeout=60)  # the upstream never answers: LLM_TIMEOUT
        assert failed.status_code == 504, failed.text
        # A request that failed frees its key: the retry runs (and calls) again.
        retried = _chat(gateway, [_user("slow")], model="hang", headers=busy_key)
        assert retried.status_code == 504
        assert upstream.calls_for("hang") == hung + 2
        for value in ("é".encode() * 3, b"k" * 256, b"tab\there"):
            bad = httpx.post(f"{gateway.base}/chat/completions", timeout=30,
                             headers=[(b"Idempotency-Key", value)],
                             json={"model": MODEL, "messages": messages})
            assert bad.status_code == 400, value
            assert bad.json()["error"]["code"] == "GATEWAY_IDEMPOTENCY_KEY_INVALID"
    _verified(config, home)


def test_a_retried_stream_is_an_attempt_of_its_turn_in_the_same_session(
    tmp_path: Path, upstream: LoopbackUpstream,
) -> None:
    home = tmp_path / "data"
    config = _config(tmp_path, upstream)
    with serve_gateway(config, open_gateway_env(home)) as gateway, \
            openai.OpenAI(base_url=gateway.base, api_key="unused", max_retries=0) as client:
        messages: list[Any] = [_user("tell me once")]
        session = {"X-DeepSeekEyes-Session": "regen"}
        first = client.chat.completions.create(model=MODEL, messages=messages, stream=True,
                                               extra_headers=session)
        extension = [c.model_extra["deepseekeyes"] for c in first
                     if c.model_extra and "deepseekeyes" in c.model_extra][-1]
        calls = upstream.calls_for(MODEL)
        again = client.chat.completions.create(model=MODEL, messages=messages,
                                               extra_headers=session)
        assert again.model_extra is not None
        retried = again.model_extra["deepseekeyes"]
        assert retried["session_id"] == "regen"
        assert retried["retry_of"] == extension["provenance"]["turn_id"]
        assert upstream.calls_for(MODEL) == calls + 1  # a fresh answer, not a replay
        shown = json.loads(run_cli(config, home, "sessions", "show", "regen", "--json").stdout)
        assert [(e["role"], e["superseded"]) for e in shown["events"]] == [
            ("user", False), ("assistant", True), ("assistant", False)]
        text = run_cli(config, home, "sessions", "show", "regen").stdout
        assert "(superseded)" in text
        assert f"retry of {extension['provenance']['turn_id']}" in text
    _verified(config, home)
