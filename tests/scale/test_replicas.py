"""Three ``serve`` replicas behind HAProxy behave as one gateway (issue 43's "must show").

Driven through the balancer with the official ``openai`` client, as a team's tools would
be: a conversation continues whichever replica serves each turn; concurrent load on all
three leaves one audit chain that verifies; a replica killed with SIGKILL in the middle of
a stream loses the stream but not the session (the client resends, HAProxy sends it to a
live replica, and the next process to open the store closes the interrupted turn as
aborted), and one killed while computing a whole answer is resent by HAProxy itself; a
replica stopped with SIGTERM under load drains, and no request is lost; a circuit one
replica opens keeps the others off the failing route; one new image sent by ten clients at
once is acquired at most once per replica (once in all needs the shared state:
test_shared_backends.py); an ask-first MCP call waiting on one replica is listed and
approved in another replica's console, and every replica's MCP status is listed there.

The replicas share what ``BACKENDS`` names (tests/scale/conftest.py): here the issue's
topology, one PostgreSQL database and one Redis; test_replicas_sqlite.py runs the same tests
on one SQLite data directory shared by processes on one machine. Nothing here reads the
database directly, only the CLI does (``audit verify``, ``sessions show``), so the tests
hold on either.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

import mcp_peers
from deepseek_eyes.gateway.balancer import BALANCER_ERRORS
from drive import SESSION, Answer, acquisitions, ask, client, image, see, turns, until, verify
from helpers import require_module
from runtime.upstream import LoopbackUpstream
from topology import BACKEND, MODEL, SERVED_BY, SHORT_TIMEOUT, Topology

openai = require_module("openai")

BACKENDS = "shared"
#: Images are read by a route that always fails (HTTP 500: an operational failure, which
#: opens its circuit) and, failing over, by DeepSeek's own eyes on the same upstream.
FLAKY = "fail-500"
ROUTES = f"""
[vision]
route_priority = ["flaky", "deepseek"]

[[vision.routes]]
name = "flaky"
base_url = "{{upstream}}"
model = "{FLAKY}"
health_check = "none"
probe = false
"""
#: An ask-first MCP tool on every replica (the approvals test; test_replicas_sqlite.py
#: runs with ROUTES alone).
SETTINGS = ROUTES + f"""
[[mcp.servers]]
id = "time"
transport = "stdio"
command = "{mcp_peers.TIME_SERVER}"
allow = {{ tools = ["get_current_time"] }}
ask = ["get_current_time"]
"""
#: The web console's one-time login link, as each replica prints it on stderr.
LOGIN = re.compile(r"web console login \(one use\): \S+#login=(\S+)")
THREADS = 6
TURNS_EACH = 5


def test_a_conversation_continues_on_every_replica(replicas: Topology) -> None:
    """Round robin sends each turn to the next replica; each finds the session by its
    history (no session header is sent), so the three turns are one session."""
    messages: list[dict[str, Any]] = []
    answers: list[Answer] = []
    with client(replicas) as api:
        for text in ("my name is Ada", "what is my name?", "and again?"):
            messages.append({"role": "user", "content": text})
            answer = ask(api, messages)
            assert answer.text == f"echo: {text}"
            messages.append({"role": "assistant", "content": answer.text})
            answers.append(answer)
    assert sorted(a.replica for a in answers) == ["eyes1", "eyes2", "eyes3"]
    assert len({a.session for a in answers}) == 1, answers
    recorded = turns(replicas, answers[0].session)
    assert [t["outcome"] for t in recorded] == ["ok"] * 3


def test_concurrent_load_on_all_replicas_leaves_one_verified_chain(
        replicas: Topology) -> None:
    before = verify(replicas)

    def conversation(index: int) -> list[Answer]:
        messages: list[dict[str, Any]] = []
        answers = []
        with client(replicas) as api:
            for turn in range(TURNS_EACH):
                text = f"load {index}.{turn} {uuid.uuid4().hex[:6]}"
                messages.append({"role": "user", "content": text})
                answer = ask(api, messages)
                assert answer.text == f"echo: {text}"
                messages.append({"role": "assistant", "content": answer.text})
                answers.append(answer)
        return answers

    with ThreadPoolExecutor(THREADS) as pool:
        conversations = list(pool.map(conversation, range(THREADS)))
    served = Counter(a.replica for answers in conversations for a in answers)
    assert sum(served.values()) == THREADS * TURNS_EACH
    assert set(served) == {"eyes1", "eyes2", "eyes3"}, served
    for answers in conversations:
        assert len({a.session for a in answers}) == 1, "a conversation split in two"
    assert len({answers[0].session for answers in conversations}) == THREADS
    after = verify(replicas)
    # Every turn wrote its chained rows, from three processes at once, into the one chain.
    assert after["ok"] is True
    assert after["kinds"]["turn"] - before["kinds"].get("turn", 0) == THREADS * TURNS_EACH
    assert after["entries"] > before["entries"]


def test_kill_9_mid_turn_the_resent_turn_continues_the_session_on_a_live_replica(
        replicas: Topology, upstream: LoopbackUpstream) -> None:
    first = [{"role": "user", "content": "remember: the code is 7"}]
    with client(replicas) as api:
        opened = ask(api, first)
        history = [*first, {"role": "assistant", "content": opened.text},
                   {"role": "user", "content": "SLOW[0.3]\nANSWER: the code was 7"}]
        calls = upstream.calls_for(MODEL)
        pieces: list[str] = []
        with api.chat.completions.with_streaming_response.create(
                model=MODEL, messages=history, stream=True) as response:
            victim = Topology.served_by(response.headers)
            assert response.headers[SESSION] == opened.session
            broken: Exception | None = None
            try:
                for chunk in response.parse():
                    if chunk.choices and chunk.choices[0].delta.content:
                        pieces.append(chunk.choices[0].delta.content)
                        replicas.kill(victim)  # at the first piece of the answer
            except Exception as exc:  # whatever the transport raised
                broken = exc
        assert broken is not None, "the stream ended whole although its replica died"
        assert len(pieces) == 1, pieces
        assert upstream.calls_for(MODEL) == calls + 1
        # The client resends the same history; HAProxy's connection to the dead replica is
        # refused (or the health check has taken it out), so a live one answers.
        stream = api.chat.completions.with_raw_response.create(
            model=MODEL, messages=history, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream.parse() if c.choices)
        assert text == "the code was 7"
        assert stream.headers[SESSION] == opened.session
        assert Topology.served_by(stream.headers) != victim
    # A whole answer a replica is computing when it dies: no byte of it was sent, so
    # HAProxy resends it (retry-on empty-response) and the client sees only the answer.
    whole = [*history, {"role": "assistant", "content": text},
             {"role": "user", "content": "SLOW[0.6]\nANSWER: whole after all"}]
    calls = upstream.calls_for(MODEL)
    with ThreadPoolExecutor(1) as pool, client(replicas) as api:
        pending = pool.submit(ask, api, whole)
        assert upstream.wait_for_calls(MODEL, calls + 1, 30)
        (holder,) = replicas.busy()
        replicas.kill(holder)
        resent = pending.result(timeout=60)
    assert resent.text == "whole after all"
    assert resent.session == opened.session
    assert resent.replica not in (victim, holder)
    assert upstream.calls_for(MODEL) == calls + 2
    # The killed processes left their turns half-written (a logged request, no record):
    # the next process that opens the store (a victim restarted) closes them as aborted.
    replicas.start_replicas(replicas.replica(victim), replicas.replica(holder))
    for name in (victim, holder):
        replicas.wait_up(name)
    recorded = turns(replicas, opened.session)
    # One session: the first turn, then each turn a dead replica held, closed as aborted,
    # answered by its resent attempt (retry_of) on a live replica.
    outcomes = [(t["outcome"], t.get("code")) for t in recorded]
    assert outcomes.count(("ok", None)) == 3, outcomes
    aborted = [t for t in recorded if t["outcome"] == "aborted"]
    assert [t["code"] for t in aborted] == ["RUNTIME_TURN_ABORTED"] * 2, outcomes
    assert {t["details"]["reason"] for t in aborted} == {"process ended"}
    retries = [t["details"].get("retry_of") for t in recorded if t["outcome"] == "ok"]
    assert retries == [None, *(t["id"] for t in aborted)], retries
    verify(replicas)


def test_a_route_that_failed_on_one_replica_is_skipped_by_the_others(
        replicas: Topology, upstream: LoopbackUpstream) -> None:
    """Route state (health, circuits, probe verdicts) lives in the shared store: the circuit
    one replica opened keeps the other two from calling the failing route."""
    before = upstream.calls_for(FLAKY)
    first = see(replicas, image(1)[0], "first")
    assert first.text == "first"
    opened = upstream.calls_for(FLAKY)
    assert opened > before, "the first replica tried the failing route"
    # New images until both other replicas have served one (round robin sends the next
    # two there, unless a replica came back into the rotation just before).
    others: list[Answer] = []
    while {a.replica for a in others} - {first.replica} != \
            {"eyes1", "eyes2", "eyes3"} - {first.replica}:
        assert len(others) < 6, others
        index = len(others) + 2
        others.append(see(replicas, image(index)[0], f"other {index}"))
        assert others[-1].text == f"other {index}"
    assert upstream.calls_for(FLAKY) == opened, "another replica called the open route"


def test_one_new_image_from_ten_clients_is_acquired_at_most_once_per_replica(
        replicas: Topology, upstream: LoopbackUpstream) -> None:
    """Single flight is per process today: ten concurrent requests for one new image on
    three replicas make at most one acquisition on each (the exact one of issue 43 needs
    the shared leases, test_shared_backends.py); once one is stored, every replica reuses
    the evidence from the shared database."""
    url, digest = image(40)

    def ask(index: int) -> Answer:
        return see(replicas, url, f"seen {index}")

    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(ask, range(10)))
    assert [a.text for a in answers] == [f"seen {i}" for i in range(10)]
    assert {a.replica for a in answers} == {"eyes1", "eyes2", "eyes3"}
    acquired = acquisitions(upstream, digest)
    assert 1 <= acquired <= 3, acquired
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(ask, range(3)))
    assert acquisitions(upstream, digest) == acquired, "the stored evidence was reused"


def test_the_balancers_own_503_and_504_reach_the_openai_client_in_our_shape(
        replicas: Topology) -> None:
    """HAProxy's own answers (docs/deployment.md's errorfiles): with every replica out of
    the rotation, a 503 ``GATEWAY_NO_REPLICA`` the client reads as an ``APIStatusError``
    with our code (not an HTML page); a replica slower than ``timeout server``, a 504
    ``GATEWAY_REPLICA_TIMEOUT``."""
    with client(replicas) as api:
        for replica in replicas.replicas:
            replicas.admin(f"disable server {BACKEND}/{replica.name}")
        try:
            with pytest.raises(openai.APIStatusError) as refused:
                api.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": "anyone there?"}])
        finally:
            for replica in replicas.replicas:
                replicas.admin(f"enable server {BACKEND}/{replica.name}")
        response = refused.value.response
        assert (response.status_code, refused.value.code) == (503, "GATEWAY_NO_REPLICA")
        assert response.headers["content-type"] == "application/json"
        assert response.headers["retry-after"] == "1"
        assert SERVED_BY not in response.headers  # HAProxy answered, no replica
        for replica in replicas.replicas:
            replicas.wait_up(replica.name)
        with pytest.raises(openai.APIStatusError) as slow:
            api.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "SLOW[1.5] too slow"}],
                extra_headers={SHORT_TIMEOUT: "1"})
        assert (slow.value.status_code, slow.value.code) == (504, "GATEWAY_REPLICA_TIMEOUT")
        assert slow.value.body == {"message": BALANCER_ERRORS[504][2],
                                   "type": "upstream_error", "param": None,
                                   "code": "GATEWAY_REPLICA_TIMEOUT"}


def _console(replica: Any) -> httpx.Client:
    """A person logged in to ``replica``'s own web console (its newest one-time code), the
    replica addressed directly, not through HAProxy."""
    until(lambda: bool(LOGIN.findall(replica.stderr.text())), f"{replica.name}'s login link")
    code = LOGIN.findall(replica.stderr.text())[-1]
    console = httpx.Client(base_url=replica.url, timeout=30,
                           headers={"origin": replica.url})
    login = console.post("/console/api/login", json={"code": code})
    assert login.status_code == 200, login.text
    console.headers["x-csrf-token"] = login.json()["csrf"]
    return console


def test_an_ask_first_call_waiting_on_one_replica_is_approved_in_another_replicas_console(
        replicas: Topology) -> None:
    """Build item 2's last clause: the call asked through eyes1 waits there; eyes2's console
    lists it (with the replica it waits in) and approves it; the call on eyes1 goes on.
    eyes2's console also lists every replica's MCP status."""
    mcp_peers.need(mcp_peers.TIME_SERVER)
    waiting_in, deciding = replicas.replica("eyes1"), replicas.replica("eyes2")
    result: dict[str, httpx.Response] = {}

    def call() -> None:
        result["answer"] = httpx.post(
            f"{waiting_in.url}/v1/chat/completions", headers=replicas.headers, timeout=120,
            json={"model": MODEL, "messages": [{"role": "user", "content":
                  'CALL[mcp__time__get_current_time]: {"timezone": "UTC"}'}]})

    console = _console(deciding)
    caller = threading.Thread(target=call)
    caller.start()
    try:
        asks: list[dict[str, Any]] = []

        def listed() -> bool:
            asks[:] = [a for a in console.get("/console/api/approvals").json()["asks"]
                       if a["state"] == "waiting" and a["tool"] == "get_current_time"]
            return bool(asks)

        until(listed, "the waiting call in the other replica's console", timeout=30)
        assert asks[0]["arguments"] == '{"timezone":"UTC"}'
        assert asks[0]["replica"].endswith(f":{waiting_in.process.pid}")  # type: ignore[union-attr]
        approved = console.post(f"/console/api/asks/{asks[0]['ask_id']}/approve", json={})
        assert approved.status_code == 200, approved.text
        again = console.post(f"/console/api/asks/{asks[0]['ask_id']}/deny", json={})
        assert again.json()["error"]["code"] in ("MCP_APPROVAL_DECIDED",
                                                 "MCP_APPROVAL_NOT_FOUND"), again.text
        caller.join(timeout=60)
        assert not caller.is_alive()
        answer = result["answer"]
        assert answer.status_code == 200, answer.text
        text = answer.json()["choices"][0]["message"]["content"]
        assert "after mcp__time__get_current_time" in text, text
        assert "UTC" in text, text
        assert "MCP_CALL_DENIED" not in text

        def every_replica_listed() -> bool:
            rows = console.get("/console/api/mcp").json()["replicas"]
            live = {r["replica"] for r in rows if r["server"] == "time" and not r["stale"]}
            return {name.rsplit(":", 1)[1] for name in live} >= {
                str(r.process.pid) for r in replicas.replicas if r.process is not None}

        until(every_replica_listed, "every replica's MCP status", timeout=30)
    finally:
        caller.join(timeout=60)
        console.close()


# Last in the file: the replica it stops is not started again (a test after it would get
# it back from the ``replicas`` fixture).
def test_sigterm_drains_one_replica_under_load_and_no_request_is_lost(
        replicas: Topology) -> None:
    """Readiness first: at SIGTERM the victim fails /readyz at once and serves on for
    ``drain_delay``, HAProxy takes it out, then it stops taking work and finishes what it
    holds; no request is lost, and none is answered 503 or resent."""
    stop = threading.Event()
    signalled = threading.Event()
    results: list[tuple[str, float, bool]] = []  # (replica, ended at, answer right)
    failures: list[str] = []
    lock = threading.Lock()
    victim = "eyes2"

    def load(index: int) -> None:
        with client(replicas) as api:
            turn = 0
            while not stop.is_set():
                text = f"SLOW[0.2] drain {index}.{turn}"
                turn += 1
                try:
                    answer = ask(api, [{"role": "user", "content": text}])
                except Exception as exc:  # a lost request, reported below
                    with lock:
                        failures.append(f"{type(exc).__name__}: {exc}")
                    continue
                with lock:
                    results.append((answer.replica, time.monotonic(),
                                    answer.text == f"echo: {text}"))

    def served(condition: Any) -> int:
        with lock:
            return sum(1 for r in results if condition(r))

    before = replicas.counters()
    with ThreadPoolExecutor(THREADS) as pool:
        running = [pool.submit(load, i) for i in range(THREADS)]
        try:
            until(lambda: served(lambda r: r[0] == victim) >= 3, "load on the victim")
            at = time.monotonic()
            process = replicas.terminate(victim).process
            signalled.set()
            assert process is not None
            # Readiness first: the balancer takes the victim out while it still serves.
            replicas.wait_state(victim, "DOWN", timeout=30)
            assert process.poll() is None, "the victim stopped before the balancer noticed"
            assert process.wait(timeout=30) == 0, replicas.replica(victim).stderr.text()
            gone = time.monotonic()
            until(lambda: served(lambda r: r[1] > gone) >= 2 * THREADS, "load after the exit")
        finally:
            stop.set()
            for future in running:
                future.result(timeout=60)
    assert failures == [], failures
    assert all(right for _, _, right in results)
    # No request met the stop: none was answered 503 or refused by the victim and resent
    # by HAProxy (a retry or a redispatch is how either would show; the client sees only
    # the last answer). HAProxy counts a request when its stream closes, which can be just
    # after the client has read the answer: wait for the count, then compare.
    def since() -> dict[str, int]:
        now = replicas.counters()
        return {name: now[name] - before[name] for name in now}

    until(lambda: since()["hrsp_2xx"] >= len(results), "HAProxy's count of every answer",
          timeout=10)
    assert since() == {"hrsp_2xx": len(results), "hrsp_5xx": 0, "wretr": 0, "wredis": 0,
                       "econ": 0, "eresp": 0}
    # Requests the victim held at the signal finished there; after it exited, the others
    # took everything.
    assert served(lambda r: r[0] == victim and r[1] > at) >= 1
    assert served(lambda r: r[0] == victim and r[1] > gone) == 0
    assert {r[0] for r in results if r[1] > gone} == {"eyes1", "eyes3"}
