"""Every turn ends in a record, writes its calls ahead, and never interleaves a session."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.audit.show import show
from deepseek_eyes.audit.verify import verify_database
from deepseek_eyes.errors import StoreError
from deepseek_eyes.home import DataHome
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.tools import ProgressEvent
from deepseek_eyes.runtime.turn import TurnRequest
from deepseek_eyes.store import chain
from deepseek_eyes.store.db import MIGRATIONS
from deepseek_eyes.store.events import SessionStore
from helpers import on_postgresql
from runtime.test_turn import image_message, settings_for
from runtime.upstream import LoopbackUpstream

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


@pytest.fixture
async def rt(upstream: LoopbackUpstream) -> AsyncIterator[Runtime]:
    settings = settings_for(upstream)
    home = DataHome.open(settings)
    runtime = Runtime(settings, home)
    yield runtime
    await runtime.aclose()
    home.close()


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _audit(rt: Runtime, kind: str, subject: str) -> list[dict[str, Any]]:
    return [json.loads(r["details"]) for r in rt.home.db.query(
        "SELECT details FROM audit WHERE kind = ? AND subject = ? ORDER BY id", (kind, subject))]


async def test_a_stream_closed_before_its_answer_is_recorded_as_aborted(
    rt: Runtime,
) -> None:
    stream = rt.stream(TurnRequest(messages=[_user("say something long")],
                                   session_id="closed"))
    chunks = aiter(stream)
    await anext(chunks)  # the reader goes away after the first chunk
    await chunks.aclose()  # type: ignore[attr-defined]
    (turn,) = rt.sessions.turns("closed")
    assert (turn.outcome, turn.code) == ("aborted", "RUNTIME_TURN_ABORTED")
    assert turn.details["reason"] == "closed"
    assert rt.sessions.leases.held("closed") == []
    assert _audit(rt, "turn.aborted", turn.id)[0]["reason"] == "closed"
    # Its call was written ahead and never completed: sent, outcome unknown.
    assert [r["outcome"] for r in _audit(rt, "llm.request", turn.id)] == ["pending"]
    summary = rt.home.usage.summary()
    assert summary["outcome_unknown"] == {"calls": 1, "turns": [turn.id]}
    # The same history again is a new attempt of the aborted turn.
    again = await rt.run(TurnRequest(messages=[_user("say something long")],
                                     session_id="closed"))
    assert (again.session_id, again.retry_of) == ("closed", turn.id)


async def test_a_cut_turns_record_names_the_call_it_sent(rt: Runtime) -> None:
    """The call was sent and its answer was streaming when the turn was cut: the record
    counts it and names its request, as unanswered."""
    stream = rt.stream(TurnRequest(messages=[_user("cut me off")], session_id="cut"))
    chunks = aiter(stream)
    await anext(chunks)
    await chunks.aclose()  # type: ignore[attr-defined]
    (turn,) = rt.sessions.turns("cut")
    (pending,) = _audit(rt, "llm.request", turn.id)
    assert turn.details["model_calls"] == 1
    assert turn.details["requests"] == [pending["request_sha256"]]
    assert turn.details["unanswered"] == [pending["request_sha256"]]
    assert _audit(rt, "turn.aborted", turn.id)[0]["model_calls"] == 1
    answered = await rt.run(TurnRequest(messages=[_user("not cut")], session_id="whole"))
    (whole,) = rt.sessions.turns(answered.session_id)
    assert whole.details["model_calls"] == 1
    assert "unanswered" not in whole.details
    assert len(whole.details["requests"]) == 1


async def test_an_answered_calls_row_stores_only_what_its_pending_row_does_not_say(
    rt: Runtime,
) -> None:
    """The answered call's ``llm.request`` row leaves out the request hash and model its
    pending row holds and its usage's derived fields; ``audit show`` (and the console's
    provenance, which reads it) shows it whole, and finds it by the request's hash."""
    result = await rt.run(TurnRequest(messages=[_user("short")], session_id="slim"))
    (turn,) = rt.sessions.turns(result.session_id)
    pending, answered = _audit(rt, "llm.request", turn.id)
    assert pending["outcome"] == "pending"
    assert "request_sha256" not in answered
    assert "model" not in answered
    assert {"total_tokens", "prompt_tokens_details"}.isdisjoint(answered["usage"])
    [request] = result.requests
    view = show(rt.home.db, turn.id)
    shown = [item["record"]["details"] for item in view["requests"]]
    assert shown[0] == pending
    assert shown[1]["request_sha256"] == pending["request_sha256"] == request["request_sha256"]
    assert shown[1]["model"] == pending["model"]
    assert shown[1]["usage"] == request["usage"]  # whole again, as the answer reported it
    assert all(item["chain"]["intact"] for item in view["requests"])
    assert view["outcome_unknown"] == []
    by_hash = show(rt.home.db, request["request_sha256"])
    assert [item["record"]["details"] for item in by_hash["requests"]] == shown


@pytest.mark.sqlite_only
async def test_a_call_that_cannot_be_written_ahead_is_not_sent(
    upstream: LoopbackUpstream, rt: Runtime,
) -> None:
    calls = upstream.chat_calls
    # The store refuses the pending row (as a full disk would): a real SQLite failure.
    raw: sqlite3.Connection = rt.home.db._conn
    raw.execute("CREATE TEMP TRIGGER refuse_ahead BEFORE INSERT ON audit"
                " WHEN NEW.kind = 'llm.request' BEGIN"
                " SELECT RAISE(ABORT, 'no room for the pending row'); END")
    with pytest.raises(StoreError) as refused:
        await rt.run(TurnRequest(messages=[_user("never sent")], session_id="full"))
    assert refused.value.details["session_id"] == "full"
    assert upstream.chat_calls == calls, "the call was sent without its pending row"
    raw.execute("DROP TRIGGER refuse_ahead")
    (turn,) = rt.sessions.turns("full")
    assert turn.outcome == "failed"
    assert "outcome_unknown" not in rt.home.usage.summary()
    answered = await rt.run(TurnRequest(messages=[_user("never sent")], session_id="full"))
    assert answered.retry_of == turn.id


async def test_a_turn_that_loses_its_session_mid_turn_goes_on_in_a_fork(
    rt: Runtime,
) -> None:
    message = await image_message(rt, "LOOK[img-1]: What is the TOTAL?")
    foreign = _user("another client's continuation, appended while the turn ran")

    def notify(event: ProgressEvent) -> None:
        # While the turn's own tool runs, another turn continues the same session.
        if event["type"] == "tool.started":
            rt.sessions.append("mid", [foreign])

    result = await rt.run(TurnRequest(messages=[message], session_id="mid", notify=notify))
    assert result.fork is not None
    assert (result.fork.parent, result.fork.at) == ("mid", 1)
    assert result.session_id != "mid"
    assert result.rereads == 1
    # The original holds what was appended to it, in order, and nothing of the fork's.
    assert [m["content"] for m in rt.sessions.messages("mid")][-1] == foreign["content"]
    assert [e.role for e in rt.sessions.events("mid")] == ["user", "user"]
    moved = rt.sessions.events(result.session_id)
    assert [e.role for e in moved] == ["user", "assistant", "tool", "assistant"]
    assert {e.turn_id for e in moved[1:]} == {result.turn_id}
    (turn,) = rt.sessions.turns(result.session_id)
    assert turn.outcome == "ok"
    assert rt.sessions.leases.held("mid") == []


@pytest.mark.sqlite_only
async def test_turns_an_earlier_version_left_half_written_are_closed_after_the_upgrade(
    upstream: LoopbackUpstream, isolated_home: Path,
) -> None:
    isolated_home.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(isolated_home / "eyes.db")
    for script in MIGRATIONS[:7]:
        conn.executescript(script)
    rows = [("open", 0, "user", None), ("done", 0, "user", None),
            ("done", 1, "assistant", "turn-old")]
    for session, seq, role, turn in rows:
        conn.execute("INSERT OR IGNORE INTO sessions (id, created_at, source) VALUES (?,0,'g')",
                     (session,))
        conn.execute("INSERT INTO events (session_id, seq, ts, role, turn_id, body_sha256, body)"
                     " VALUES (?,?,?,?,?,'',?)",
                     (session, seq, 10.0 + seq, role, turn,
                      json.dumps({"role": role, "content": f"{session} {seq}"})))
    conn.execute("INSERT INTO turns (id, session_id, started_at, ended_at, path, outcome,"
                 " details) VALUES ('turn-old', 'done', 9.0, 12.0, 'text', 'ok', '{}')")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    settings = settings_for(upstream)
    home = DataHome.open(settings)
    rt = Runtime(settings, home)  # migrates, then closes what no process holds
    try:
        (closed,) = rt.sessions.turns("open")
        assert (closed.outcome, closed.code) == ("aborted", "RUNTIME_TURN_ABORTED")
        assert closed.details["base"] == 0
        assert [t.id for t in rt.sessions.turns("done")] == ["turn-old"]
        assert home.db.query("SELECT COUNT(*) AS n FROM turn_leases")[0]["n"] == 0
        # Its client's retry is an attempt of it. A session from before scopes is
        # nobody's (migration 10): continued only as itself (what `ask --force` does).
        again = await rt.run(TurnRequest(messages=[{"role": "user", "content": "open 0"}],
                                         session_id="open", scope="legacy"))
        assert again.retry_of == closed.id
    finally:
        await rt.aclose()
        home.close()


def _entry(rt: Runtime, table: str, rowid: int) -> int:
    """The seq of the chain entry that names ``table:rowid``."""
    with rt.home.db.reading() as conn:
        entry = chain.entry_of(conn, table, rowid)
    assert entry is not None, f"{table}:{rowid} is on no chain entry"
    return entry[0]


async def test_a_text_turns_request_is_written_with_its_first_call(rt: Runtime) -> None:
    """The request and its first call's write-ahead row are one transaction: one chain
    entry names both; the answer is written by another."""
    result = await rt.run(TurnRequest(messages=[_user("together")], session_id="together"))
    asked, answered = (int(r["id"]) for r in rt.home.db.query(
        "SELECT id FROM events WHERE session_id = ? ORDER BY seq", ("together",)))
    pending, booked = (int(r["id"]) for r in rt.home.db.query(
        "SELECT id FROM audit WHERE kind = 'llm.request' AND subject = ? ORDER BY id",
        (result.turn_id,)))
    assert _entry(rt, "events", asked) == _entry(rt, "audit", pending)
    assert _entry(rt, "events", answered) == _entry(rt, "audit", booked) \
        > _entry(rt, "audit", pending)
    (turn,) = rt.sessions.turns("together")
    assert (turn.outcome, turn.details["base"]) == ("ok", 0)
    assert rt.sessions.leases.held("together") == []


async def test_a_session_moved_before_the_first_call_prepares_the_turn_again(
    upstream: LoopbackUpstream, rt: Runtime, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between the turn's read of its session and its first call, another turn appends
    to the session: the turn's write fails its compare-and-set, nothing of it is written
    or sent, and it is judged again (now a fork) and sent once."""
    first = await rt.run(TurnRequest(messages=[_user("start")], session_id="moved"))
    history = [_user("start"), {"role": "assistant", "content": first.content}, _user("next")]
    foreign = _user("another client's continuation")
    encode = rt.runner._client.encode
    moves = [foreign]

    def racing(payload: Any, *, stream: bool) -> Any:
        if moves:  # the first encoding only: the other turn gets in just before the write
            rt.sessions.append("moved", [moves.pop()])
        return encode(payload, stream=stream)

    monkeypatch.setattr(rt.runner._client, "encode", racing)
    calls = upstream.chat_calls
    result = await rt.run(TurnRequest(messages=history, session_id="moved"))
    assert upstream.chat_calls == calls + 1
    assert result.fork is not None
    assert (result.fork.parent, result.fork.at) == ("moved", 2)
    assert [e.role for e in rt.sessions.events("moved")] == ["user", "assistant", "user"]
    assert rt.sessions.messages("moved")[-1]["content"] == foreign["content"]
    assert [e.role for e in rt.sessions.events(result.session_id)] == \
        ["user", "assistant", "user", "assistant"]
    rows = _audit(rt, "llm.request", result.turn_id)
    assert [r.get("outcome") for r in rows] == ["pending", None]
    (turn,) = rt.sessions.turns(result.session_id)
    assert (turn.id, turn.outcome) == (result.turn_id, "ok")
    assert rt.sessions.leases.held("moved") == []
    report = verify_database(rt.home.db, rt.home.audit_keys())
    assert report.ok, report.problem


async def test_a_turn_that_fails_before_its_first_call_keeps_its_request(
    upstream: LoopbackUpstream, rt: Runtime, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing is written before the first call, so a turn that fails on the way (here the
    request cannot be encoded) writes its request then, and its record after it."""
    def broken(payload: Any, *, stream: bool) -> Any:
        raise ValueError("Out of range float values are not JSON compliant")

    monkeypatch.setattr(rt.runner._client, "encode", broken)
    calls = upstream.chat_calls
    with pytest.raises(ValueError, match="not JSON compliant"):
        await rt.run(TurnRequest(messages=[_user("unsendable")], session_id="unsent"))
    assert upstream.chat_calls == calls
    assert [m["content"] for m in rt.sessions.messages("unsent")] == \
        [_user("unsendable")["content"]]
    (turn,) = rt.sessions.turns("unsent")
    assert (turn.outcome, turn.code) == ("aborted", "RUNTIME_TURN_ABORTED")
    assert (turn.details["reason"], turn.details["base"]) == ("error: ValueError", 0)
    assert (turn.details["requests"], turn.details["model_calls"]) == ([], 0)
    assert _audit(rt, "llm.request", turn.id) == []
    assert rt.sessions.leases.held("unsent") == []
    monkeypatch.undo()
    again = await rt.run(TurnRequest(messages=[_user("unsendable")], session_id="unsent"))
    assert again.retry_of == turn.id


async def test_a_turn_failing_before_its_first_call_after_its_session_moved_forks(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The request was judged a continuation; before it was written the session moved and
    the turn failed: its request is judged again when written (a fork now), and its
    record follows it there."""
    first = await rt.run(TurnRequest(messages=[_user("start")], session_id="shifted"))
    history = [_user("start"), {"role": "assistant", "content": first.content}, _user("next")]

    def moved_then_broken(payload: Any, *, stream: bool) -> Any:
        rt.sessions.append("shifted", [_user("another client's continuation")])
        raise ValueError("Out of range float values are not JSON compliant")

    monkeypatch.setattr(rt.runner._client, "encode", moved_then_broken)
    with pytest.raises(ValueError, match="not JSON compliant"):
        await rt.run(TurnRequest(messages=history, session_id="shifted"))
    assert [e.role for e in rt.sessions.events("shifted")] == ["user", "assistant", "user"]
    forks = [r["id"] for r in rt.home.db.query(
        "SELECT id FROM sessions WHERE forked_from = ?", ("shifted",))]
    assert len(forks) == 1
    assert [m["content"] for m in rt.sessions.messages(forks[0])][-1] == \
        _user("next")["content"]
    (turn,) = rt.sessions.turns(forks[0])
    assert (turn.outcome, turn.details["base"]) == ("aborted", 2)
    assert rt.sessions.leases.held("shifted") == []
    assert rt.sessions.leases.held(forks[0]) == []


WEATHER = {"type": "function", "function": {
    "name": "weather", "description": "the weather", "parameters": {"type": "object"}}}


@pytest.mark.parametrize("answer", ["text", "client tool call"])
async def test_an_answer_whose_session_moved_during_its_call_goes_on_in_a_fork(
    upstream: LoopbackUpstream, rt: Runtime, monkeypatch: pytest.MonkeyPatch, answer: str,
) -> None:
    """While the model answers, another turn continues the same session. The answer's
    commit does not read the session first (on PostgreSQL its guess is checked with the
    writes, fails, and the commit is made again reading it; an answer with tool calls
    learns it inside the append, where its calls' event id is read): the answer goes on in
    a fork holding the history, the request and the answer once, its record there, sent
    once; the original keeps what was appended to it; the chain verifies."""
    first = await rt.run(TurnRequest(messages=[_user("start")], session_id="during"))
    asked = _user('CALL[weather]: {"city": "Oslo"}' if answer != "text" else "next")
    history = [_user("start"), {"role": "assistant", "content": first.content}, asked]
    foreign = _user("another client's continuation")
    complete = rt.runner._client.complete
    moves = [foreign]

    async def racing(payload: Any, **kwargs: Any) -> Any:
        answered = await complete(payload, **kwargs)
        if moves:  # after the request and its call were written, before the answer's commit
            rt.sessions.append("during", [moves.pop()])
        return answered

    monkeypatch.setattr(rt.runner._client, "complete", racing)
    calls = upstream.chat_calls
    result = await rt.run(TurnRequest(messages=history, session_id="during",
                                      client_tools=[WEATHER] if answer != "text" else []))
    assert upstream.chat_calls == calls + 1
    assert (result.finish_reason == "tool_calls") == (answer != "text")
    assert result.fork is not None
    assert result.fork.parent == "during"
    assert [e.role for e in rt.sessions.events("during")] == \
        ["user", "assistant", "user", "user"]
    assert rt.sessions.messages("during")[-1]["content"] == foreign["content"]
    moved = rt.sessions.events(result.session_id)
    assert [e.role for e in moved] == ["user", "assistant", "user", "assistant"]
    assert [m["content"] for m in rt.sessions.messages(result.session_id)][:3] == \
        [m["content"] for m in history]
    assert moved[-1].turn_id == result.turn_id
    (turn,) = [t for t in rt.sessions.turns(result.session_id) if t.id == result.turn_id]
    assert turn.outcome == "ok"
    assert rt.sessions.leases.held("during") == []
    assert rt.sessions.leases.held(result.session_id) == []
    report = verify_database(rt.home.db, rt.home.audit_keys())
    assert report.ok, report.problem


async def test_a_stock_clients_turns_are_judged_alike_whether_their_session_is_read_or_held(
    upstream: LoopbackUpstream, rt: Runtime, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stock client (no session id: its history finds its session) starts, continues,
    regenerates and continues again, and between the last two another process appends to
    its session. On PostgreSQL a turn after this process's own answer is judged from what
    the store holds, unread, and its write checks that nothing changed; the outcomes are
    the reads': the first request looks nothing up (no answer in it: it can continue
    nothing), the continuation stays in the session, the regeneration is a new attempt of
    the turn before, and after the other process's message the turn forks at the history
    it shares, each sent once."""
    scope = "gateway:held"
    store = rt.sessions
    looked: list[str] = []
    for name in ("find_prefix", "find_with_snapshot", "snapshot"):
        real = getattr(store, name)

        def spy(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            looked.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(store, name, spy)

    def ask(messages: list[dict[str, Any]]) -> Any:
        return rt.run(TurnRequest(messages=messages, client_scope=scope, scope=scope))

    first = await ask([_user("one")])
    assert looked == []
    history = [_user("one"), {"role": "assistant", "content": first.content}, _user("two")]
    second = await ask(history)
    assert (second.session_id, second.fork) == (first.session_id, None)
    if on_postgresql():
        assert looked == []  # judged from this process's own answer, checked by the write
    again = await ask(history)
    assert (again.session_id, again.retry_of) == (first.session_id, second.turn_id)
    SessionStore(rt.home.db).append(first.session_id, [_user("another process's")])
    calls = upstream.chat_calls
    last = await ask([*history, {"role": "assistant", "content": again.content},
                      _user("three")])
    assert upstream.chat_calls == calls + 1
    assert last.fork is not None
    assert (last.fork.parent, last.fork.at) == (first.session_id, 4)
    assert [m["content"] for m in rt.sessions.messages(first.session_id)][-1] == \
        _user("another process's")["content"]
    assert [e.role for e in rt.sessions.events(last.session_id)] == \
        ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert rt.sessions.leases.held(first.session_id) == []
    report = verify_database(rt.home.db, rt.home.audit_keys())
    assert report.ok, report.problem
