"""The drain and the gateway app's endings, in-process.

The signals and the process are tested end to end (tests/e2e/test_gateway_shutdown.py);
here are what a process cannot show: a request that reaches the app after the stop began
on a connection already open (503, with the security headers), the order of a cut (the
error event, then ``[DONE]``, then the turn closed), and a stream a bug ends. The runtime
is a stand-in with the two methods the chat handler calls; the app, the security layer
and the drain are the real ones.
"""

from __future__ import annotations

import json
import logging
import signal
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import pytest

from deepseek_eyes.errors import DeepSeekEyesError, LLMError
from deepseek_eyes.gateway.app import create_app
from deepseek_eyes.gateway.drain import Drain
from deepseek_eyes.runtime.turn import TurnRequest
from deepseek_eyes.serving.readiness import Readiness
from deepseek_eyes.settings import GatewaySettings
from deepseek_eyes.store.state import SharedState

pytestmark = pytest.mark.anyio

CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
         "choices": [{"index": 0, "delta": {"content": "half"}, "finish_reason": None}]}


class _Turn:
    """A turn that sends one chunk, then does what ``then`` says: ``"wait"`` (forever),
    ``"bug"`` (a RuntimeError), ``"error"`` (an LLMError)."""

    def __init__(self, then: str) -> None:
        self.then = then
        self.session_id = "stand-in-session"
        self.waiting = anyio.Event()
        self.ended_by: str | None = None  # how the iteration ended, once it did

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[dict[str, Any]]:
        try:
            yield CHUNK
            if self.then == "bug":
                raise RuntimeError("a bug in the turn")
            if self.then == "error":
                raise LLMError("the stream was cut", code="LLM_STREAM_INCOMPLETE")
            self.waiting.set()
            await anyio.sleep_forever()
        except BaseException as exc:
            self.ended_by = type(exc).__name__
            raise
        finally:
            self.ended_by = self.ended_by or "end"


class _Runtime:
    """What the chat handler calls on a runtime, and nothing more."""

    def __init__(self, then: str) -> None:
        self.turn = _Turn(then)
        self.running = anyio.Event()  # set once a whole answer's turn runs
        # create_app counts rate limits in the shared state the runtime's bridge opened.
        self.bridge = SimpleNamespace(state=SharedState())

    async def request_from_openai(self, body: dict[str, Any], **_: Any) -> TurnRequest:
        return TurnRequest(messages=body["messages"])

    def stream(self, _request: TurnRequest) -> _Turn:
        return self.turn

    async def run(self, _request: TurnRequest, *, started: Any = None) -> Any:
        started("stand-in-session")
        self.running.set()
        await anyio.sleep_forever()


def _app(runtime: _Runtime, drain: Drain) -> Any:
    """The gateway app on the stand-in; its ``/readyz`` checks nothing (always ready)."""
    return create_app(runtime, GatewaySettings(), key=None, drain=drain,  # type: ignore[arg-type]
                      readiness=Readiness())


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                             base_url="http://127.0.0.1:8765")


BODY = {"model": "m", "messages": [{"role": "user", "content": "x"}]}


def _events(text: str) -> list[Any]:
    return [line.removeprefix("data: ") if line == "data: [DONE]"
            else json.loads(line.removeprefix("data: "))
            for line in text.split("\n\n") if line.startswith("data: ")]


async def test_a_request_after_the_stop_began_is_503_with_the_security_headers() -> None:
    drain = Drain(30)
    async with _client(_app(_Runtime("wait"), drain)) as http:
        assert (await http.get("/healthz")).status_code == 200
        drain.begin()
        refused = await http.post("/v1/chat/completions", json=BODY)
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "GATEWAY_SHUTTING_DOWN"
    assert refused.headers["x-content-type-options"] == "nosniff"
    assert drain.running == 0


async def test_readiness_fails_once_the_stop_began() -> None:
    """A balancer's probe on a connection still open gets the stop's 503, so it takes the
    process out of rotation (a new connection is refused outright: the e2e tests)."""
    drain = Drain(30)
    async with _client(_app(_Runtime("wait"), drain)) as http:
        drain.begin()
        probe = await http.get("/readyz")
    assert probe.status_code == 503
    assert probe.json()["error"]["code"] == "GATEWAY_SHUTTING_DOWN"


async def test_the_cut_ends_a_stream_with_the_error_event_then_done_and_closes_the_turn(
) -> None:
    drain = Drain(30)
    runtime = _Runtime("wait")
    async with _client(_app(runtime, drain)) as http, anyio.create_task_group() as group:
        answers: list[httpx.Response] = []

        async def ask() -> None:
            answers.append(await http.post("/v1/chat/completions",
                                           json={**BODY, "stream": True}))

        group.start_soon(ask)
        with anyio.fail_after(10):
            await runtime.turn.waiting.wait()
        assert drain.running == 1
        drain.begin()
        assert runtime.turn.ended_by is None, "the stop's begin lets a stream go on"
        drain.cut()
    [answer] = answers
    assert answer.status_code == 200
    assert answer.headers["x-deepseekeyes-session"] == "stand-in-session"
    events = _events(answer.text)
    assert events[0] == CHUNK
    assert events[1]["error"]["code"] == "GATEWAY_SHUTTING_DOWN"
    assert events[2:] == ["[DONE]"]
    assert runtime.turn.ended_by == "CancelledError"  # cut while it waited on its upstream
    assert drain.running == 0


async def test_the_cut_answers_a_whole_answer_503_with_its_session() -> None:
    drain = Drain(30)
    runtime = _Runtime("wait")
    async with _client(_app(runtime, drain)) as http, anyio.create_task_group() as group:
        answers: list[httpx.Response] = []

        async def ask() -> None:
            answers.append(await http.post("/v1/chat/completions", json=BODY))

        group.start_soon(ask)
        with anyio.fail_after(10):
            await runtime.running.wait()
        drain.cut()
    [answer] = answers
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "GATEWAY_SHUTTING_DOWN"
    assert answer.headers["x-deepseekeyes-session"] == "stand-in-session"


@pytest.mark.parametrize(("then", "code"), [("bug", "GATEWAY_INTERNAL_ERROR"),
                                            ("error", "LLM_STREAM_INCOMPLETE")])
async def test_a_stream_that_fails_after_its_first_chunk_ends_with_its_error_then_done(
        then: str, code: str, caplog: pytest.LogCaptureFixture) -> None:
    runtime = _Runtime(then)
    with caplog.at_level(logging.ERROR, logger="deepseek_eyes.gateway.app"):
        async with _client(_app(runtime, Drain(30))) as http:
            answer = await http.post("/v1/chat/completions", json={**BODY, "stream": True})
    events = _events(answer.text)
    assert events[0] == CHUNK
    assert events[1]["error"]["code"] == code
    assert events[2:] == ["[DONE]"]
    logged = [r for r in caplog.records if "unexpected gateway failure" in r.getMessage()]
    if then == "bug":  # a bug is logged with its traceback; a turn's own error is not a bug
        assert len(logged) == 1
        assert logged[0].exc_info is not None
    else:
        assert logged == []


# -- the drain alone -------------------------------------------------------------------------


async def test_signals_begin_then_cut_then_change_nothing() -> None:
    drain = Drain(30)
    began: list[bool] = []
    drain.on_begin(lambda: began.append(True))
    drain.signal()
    assert (drain.draining, drain.is_cut, began) == (True, False, [True])
    drain.signal()
    assert drain.is_cut
    drain.signal()
    assert began == [True]
    late: list[bool] = []
    drain.on_begin(lambda: late.append(True))  # told at once: it has begun
    assert late == [True]


async def test_a_watched_wait_is_cut_and_says_so() -> None:
    drain = Drain(30)
    reached = anyio.Event()

    async def wait() -> str:
        with drain.watch():
            reached.set()
            await anyio.sleep_forever()
        return "not reached"

    async with anyio.create_task_group() as group:
        failures: list[DeepSeekEyesError] = []

        async def run() -> None:
            try:
                await wait()
            except DeepSeekEyesError as exc:
                failures.append(exc)

        group.start_soon(run)
        await reached.wait()
        drain.cut()
    assert [f.code for f in failures] == ["GATEWAY_SHUTTING_DOWN"]
    with pytest.raises(DeepSeekEyesError) as after:  # a wait begun after the cut
        await wait()
    assert after.value.code == "GATEWAY_SHUTTING_DOWN"


async def test_after_the_cut_a_stream_pulls_nothing_more() -> None:
    pulled: list[int] = []

    async def numbers() -> AsyncIterator[int]:
        for number in range(3):
            pulled.append(number)
            yield number

    drain = Drain(30)
    iterator = numbers()
    assert await drain.pull(iterator) == 0
    drain.cut()
    with pytest.raises(DeepSeekEyesError):
        await drain.pull(iterator)
    assert pulled == [0]
    await iterator.aclose()  # type: ignore[attr-defined]


async def test_settle_returns_when_nothing_runs_and_cuts_at_the_deadline() -> None:
    with anyio.fail_after(5):
        await Drain(60).settle()  # nothing runs: at once
    drain = Drain(0.2)
    runtime = _Runtime("wait")  # a stream that never ends on its own
    async with _client(_app(runtime, drain)) as http, anyio.create_task_group() as group:
        answers: list[httpx.Response] = []

        async def ask() -> None:
            answers.append(await http.post("/v1/chat/completions",
                                           json={**BODY, "stream": True}))

        group.start_soon(ask)
        with anyio.fail_after(10):
            await runtime.turn.waiting.wait()
        with anyio.fail_after(5):
            await drain.settle()
    assert drain.is_cut
    assert drain.running == 0
    assert _events(answers[0].text)[-2:][0]["error"]["code"] == "GATEWAY_SHUTTING_DOWN"


# -- readiness first -------------------------------------------------------------------------


async def test_sigterm_fails_readyz_at_once_serves_on_for_the_delay_then_stops() -> None:
    """A balancer that probes ``/readyz`` takes the gateway out during ``drain_delay``,
    while every other request is still served; then the stop begins as before."""
    drain = Drain(30, delay=0.3)
    began = anyio.Event()
    drain.on_begin(began.set)
    async with _client(_app(_Runtime("wait"), drain)) as http:
        assert (await http.get("/readyz")).status_code == 200  # a balancer watches
        assert drain.watched()
        drain.signal(signal.SIGTERM)
        assert (drain.leaving, drain.draining) == (True, False)
        probe = await http.get("/readyz")
        assert probe.status_code == 503
        assert probe.json()["error"]["code"] == "GATEWAY_SHUTTING_DOWN"
        assert (await http.get("/healthz")).status_code == 200  # served meanwhile
        assert (await http.get("/v1/models/none")).json()["error"]["code"] != \
            "GATEWAY_SHUTTING_DOWN"
        with anyio.fail_after(10):
            await began.wait()
        assert drain.draining
        refused = await http.get("/healthz")
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "GATEWAY_SHUTTING_DOWN"


async def test_no_delay_without_a_balancer_on_sigint_or_when_it_is_zero() -> None:
    """Nobody asked ``/readyz``: nothing to wait for. SIGINT is a person at a terminal.
    ``drain_delay = 0`` stops taking work at once."""
    unwatched = Drain(30, delay=60)
    unwatched.signal(signal.SIGTERM)
    assert unwatched.draining
    for drain, number in ((Drain(30, delay=60), signal.SIGINT),
                          (Drain(30, delay=0), signal.SIGTERM)):
        async with _client(_app(_Runtime("wait"), drain)) as http:
            await http.get("/readyz")  # the probe is noted before the app answers it
            assert drain.watched()
            drain.signal(number)
            assert drain.draining, number


async def test_a_second_signal_during_the_delay_stops_and_cuts_at_once() -> None:
    drain = Drain(30, delay=60)
    async with _client(_app(_Runtime("wait"), drain)) as http:
        await http.get("/readyz")
        drain.signal(signal.SIGTERM)
        assert (drain.leaving, drain.draining) == (True, False)
        drain.signal(signal.SIGTERM)
    assert (drain.draining, drain.is_cut) == (True, True)
    with anyio.fail_after(5):
        await drain.settle()  # the pending begin was dropped: nothing waits on it


@pytest.mark.parametrize("failure", [BrokenPipeError(32, "Broken pipe"),
                                     ValueError("I/O operation on closed file")])
async def test_a_notice_that_cannot_be_written_does_not_stop_the_stop(
        failure: Exception) -> None:
    """Standard error gone (EPIPE, or closed): the begin still tells the server, and the
    cut still cuts (tests/e2e/test_gateway_shutdown.py runs it on a real process)."""
    def notice(_sentence: str) -> None:
        raise failure

    drain = Drain(30, notice=notice)
    began: list[bool] = []
    drain.on_begin(lambda: began.append(True))
    drain.signal(signal.SIGTERM)
    assert (drain.draining, began) == (True, [True])
    drain.signal(signal.SIGTERM)
    assert drain.is_cut
