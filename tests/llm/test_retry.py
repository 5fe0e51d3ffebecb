"""Retries of a busy upstream: the policy alone, ``Retry-After`` in its three spellings, and
:class:`ChatClient` against the loopback DeepSeek (503 "Server is busy") and against
transports that fail before or after the first chunk of a stream."""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest

from deepseek_eyes.errors import LLMError
from deepseek_eyes.llm import ChatClient
from deepseek_eyes.llm.response import retry_after_s
from deepseek_eyes.llm.retry import RetryPolicy
from runtime.upstream import LoopbackUpstream

pytestmark = pytest.mark.anyio
BOUND_S = 20
PAYLOAD = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


@pytest.fixture(autouse=True)
def _not_busy(upstream: LoopbackUpstream) -> Iterator[None]:
    yield
    upstream.busy(0)


def error(code: str, **details: Any) -> LLMError:
    return LLMError("x", code=code, details=details)


# -- the policy -------------------------------------------------------------------------------


@pytest.mark.parametrize(("failure", "retried"), [
    (error("LLM_HTTP_ERROR", status=429), True),
    (error("LLM_HTTP_ERROR", status=500), True),
    (error("LLM_HTTP_ERROR", status=502), True),
    (error("LLM_HTTP_ERROR", status=503), True),
    (error("LLM_HTTP_ERROR", status=504), True),
    (error("LLM_UNAVAILABLE"), True),
    (error("LLM_STREAM_INCOMPLETE", chunks=0), True),
    (error("LLM_HTTP_ERROR", status=400), False),
    (error("LLM_HTTP_ERROR", status=401), False),
    (error("LLM_HTTP_ERROR", status=404), False),
    (error("LLM_TIMEOUT"), False),  # the deadline is spent; the upstream may still bill it
    (error("LLM_STREAM_INCOMPLETE", chunks=2), False),  # part of it reached the caller
    (error("LLM_BAD_RESPONSE"), False),
    (error("LLM_REASONING_MISSING"), False),
])
def test_what_is_retried(failure: LLMError, retried: bool) -> None:
    assert RetryPolicy(max_retries=2).retryable(failure) is retried
    assert (RetryPolicy(max_retries=2).delay(1, failure) is not None) is retried


def test_backoff_doubles_with_jitter_and_stops_at_the_bound() -> None:
    policy = RetryPolicy(max_retries=6)
    busy = error("LLM_HTTP_ERROR", status=503)
    rng = random.Random(7)
    for retry, full in ((1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 8.0), (6, 8.0)):
        for _ in range(50):
            wait = policy.delay(retry, busy, rng)
            assert wait is not None
            assert full * 0.75 <= wait <= full
    assert policy.delay(7, busy, rng) is None


def test_retry_after_is_honoured_up_to_its_cap() -> None:
    policy = RetryPolicy(max_retries=2, max_retry_after=30)
    assert policy.delay(1, error("LLM_HTTP_ERROR", status=429, retry_after_s=3)) == 3.0
    assert policy.delay(1, error("LLM_HTTP_ERROR", status=503, retry_after_s=0)) == 0.0
    # A server that asks for longer than the cap is not kept waiting on: its error goes up.
    assert policy.delay(1, error("LLM_HTTP_ERROR", status=503, retry_after_s=31)) is None
    assert RetryPolicy().delay(1, error("LLM_HTTP_ERROR", status=503)) is None  # 0 retries


def test_retry_after_spellings() -> None:
    assert retry_after_s(httpx.Headers({"retry-after": "7"})) == 7
    assert retry_after_s(httpx.Headers({"retry-after": "1.2"})) == 2
    assert retry_after_s(httpx.Headers({"retry-after-ms": "1500", "retry-after": "9"})) == 2
    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= (retry_after_s(httpx.Headers({"retry-after": soon})) or 0) <= 31
    past = email.utils.formatdate(time.time() - 300, usegmt=True)
    assert retry_after_s(httpx.Headers({"retry-after": past})) == 0
    for junk in ("", "soon", "-1", "1e9", "Wed, 99 Foo 2026", "x" * 500):
        assert retry_after_s(httpx.Headers({"retry-after": junk})) is None


# -- the client against the loopback DeepSeek ---------------------------------------------------


async def call(upstream: LoopbackUpstream, *, stream: bool, **policy: Any) -> Any:
    client = ChatClient(upstream.base_url, timeout=BOUND_S,
                        retry=RetryPolicy(**{"max_retries": 2, **policy}))
    try:
        with anyio.fail_after(BOUND_S):
            return await client.complete(PAYLOAD, stream=stream)
    finally:
        await client.aclose()


@pytest.mark.parametrize("stream", [False, True])
async def test_a_busy_answer_is_retried_after_its_retry_after(
    upstream: LoopbackUpstream, stream: bool
) -> None:
    upstream.busy(1, retry_after=1)
    before = upstream.chat_calls
    started = time.monotonic()
    result = await call(upstream, stream=stream)
    assert time.monotonic() - started >= 0.9  # the server's Retry-After, honoured
    assert result.content == "echo: hi"
    assert upstream.chat_calls == before + 2
    (retried,) = result.retries
    assert (retried.code, retried.status, retried.waited_s) == ("LLM_HTTP_ERROR", 503, 1.0)
    # The same bytes went out twice: the retried attempt and the answered one.
    assert retried.request_sha256 == result.request_sha256 == upstream.body_hashes[-1]
    assert upstream.body_hashes[-2] == upstream.body_hashes[-1]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_server_that_stays_busy_fails_after_the_bound(
    upstream: LoopbackUpstream, stream: bool
) -> None:
    upstream.busy(10, retry_after=None)  # no Retry-After: backoff with jitter
    before = upstream.chat_calls
    with pytest.raises(LLMError) as failed:
        await call(upstream, stream=stream, base_delay=0.05)
    assert failed.value.code == "LLM_HTTP_ERROR"
    assert failed.value.details["status"] == 503
    attempts = failed.value.details["attempts"]
    assert [a["status"] for a in attempts] == [503, 503, 503]
    assert attempts[-1]["waited_s"] == 0  # the last one was not followed by a wait
    assert upstream.chat_calls == before + 3


async def test_a_retry_after_beyond_the_cap_is_not_waited_for(upstream: LoopbackUpstream) -> None:
    upstream.busy(1, retry_after=5)
    before = upstream.chat_calls
    with pytest.raises(LLMError) as failed:
        await call(upstream, stream=False, max_retry_after=2)
    assert failed.value.details["retry_after_s"] == 5
    assert "attempts" not in failed.value.details  # nothing was retried
    assert upstream.chat_calls == before + 1


async def test_a_refusal_is_not_retried(upstream: LoopbackUpstream) -> None:
    before = upstream.chat_calls
    client = ChatClient(upstream.base_url, retry=RetryPolicy(max_retries=2))
    try:
        with pytest.raises(LLMError) as failed:
            await client.complete({**PAYLOAD, "model": "no-such-model"})
    finally:
        await client.aclose()
    assert failed.value.details["status"] == 400
    assert upstream.chat_calls == before + 1


async def test_a_stream_cut_after_its_first_chunk_is_not_retried(
    upstream: LoopbackUpstream,
) -> None:
    before = upstream.calls_for("cut")
    client = ChatClient(upstream.base_url, timeout=BOUND_S, retry=RetryPolicy(max_retries=2))
    seen: list[dict[str, Any]] = []

    async def read() -> None:
        async with client.stream({**PAYLOAD, "model": "cut"}) as chunks:
            async for chunk in chunks:
                seen.append(chunk)  # noqa: PERF401 - what arrived before the cut is the point

    try:
        with pytest.raises(LLMError) as failed:
            await read()
    finally:
        await client.aclose()
    assert failed.value.code == "LLM_STREAM_INCOMPLETE"
    assert seen  # content reached the caller: a retry would repeat it
    assert upstream.calls_for("cut") == before + 1


# -- failures only a transport can stage --------------------------------------------------------


class _CutAtOnce(httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise httpx.ReadError("connection reset by peer")
        yield b""  # pragma: no cover - makes this an async generator


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + \
        b"data: [DONE]\n\n"


async def test_a_stream_cut_before_its_first_chunk_is_retried() -> None:
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        if len(sent) == 1:
            raise httpx.ConnectError("connection refused")
        if len(sent) == 2:
            return httpx.Response(200, headers={"content-type": "text/event-stream"},
                                  stream=_CutAtOnce())
        body = _sse({"choices": [{"index": 0, "delta": {"content": "fine"},
                                  "finish_reason": "stop"}]})
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = ChatClient("http://model.test/v1", transport=httpx.MockTransport(handler),
                        retry=RetryPolicy(max_retries=2, base_delay=0.01))
    try:
        with anyio.fail_after(BOUND_S):
            async with client.stream(PAYLOAD) as chunks:
                seen = [chunk async for chunk in chunks]
    finally:
        await client.aclose()
    assert len(sent) == 3
    assert [c["choices"][0]["delta"]["content"] for c in seen] == ["fine"]
    assert [a.code for a in chunks.result.retries] == ["LLM_UNAVAILABLE",
                                                       "LLM_STREAM_INCOMPLETE"]
