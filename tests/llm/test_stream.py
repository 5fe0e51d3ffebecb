"""ChatStream through ChatClient.stream (and ``complete(stream=True)``) on httpx.MockTransport:
bodies no honest server sends, deadlines, reasoning and tool-call deltas, and a plain JSON
answer to a streaming request. Streams from real loopback servers are in test_client.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from deepseek_eyes.errors import LLMError
from deepseek_eyes.llm import MAX_TOOL_CALLS, ChatClient, ChatStream, ToolCall

BOUND_S = 10  # no test waits longer than this on the outside world


def chat_payload() -> dict[str, Any]:
    """A request body; the mock endpoints here answer the same whatever it holds."""
    return {"model": "m", "messages": [{"role": "user", "content": "Say something."}]}


def mock_client(handler: Any) -> ChatClient:
    return ChatClient("http://model.test/v1", transport=httpx.MockTransport(handler))


@pytest.mark.anyio
async def test_reasoning_content_and_json_answer_to_a_stream_request() -> None:
    document = {
        "model": "m",
        "choices": [
            {
                "message": {"content": "answer", "reasoning_content": "thoughts"},
                "finish_reason": "stop",
            }
        ],
    }
    client = mock_client(lambda _: httpx.Response(200, json=document))
    try:
        with anyio.fail_after(BOUND_S):
            result = await client.complete(chat_payload(), stream=True)
    finally:
        await client.aclose()
    assert (result.content, result.reasoning, result.streamed) == ("answer", "thoughts", False)


@pytest.mark.anyio
async def test_stream_reasoning_deltas_and_crlf_lines() -> None:
    def event(delta: dict[str, Any], finish: str | None = None) -> str:
        chunk = {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(chunk)}\r\n\r\n"

    body = (
        ": keep-alive\r\n\r\n"
        + event({"reasoning_content": "hmm "})
        + event({"reasoning_content": "ok"})
        + event({"content": "hel"})
        + event({"content": "lo"}, "stop")
        + "data: [DONE]\r\n\r\n"
    )
    client = mock_client(
        lambda _: httpx.Response(
            200, content=body.encode(), headers={"content-type": "text/event-stream"}
        )
    )
    try:
        with anyio.fail_after(BOUND_S):
            result = await client.complete(chat_payload(), stream=True)
    finally:
        await client.aclose()
    assert (result.content, result.reasoning, result.finish_reason) == ("hello", "hmm ok", "stop")
    assert result.usage.total_tokens == 0


# -- stream edge cases on a mock transport ------------------------------------------------------


def sse_client(*events: str | bytes, stall: anyio.Event | None = None) -> ChatClient:
    """A client whose endpoint streams ``events`` (then waits on ``stall``, if given)."""

    async def body() -> AsyncIterator[bytes]:
        for event in events:
            yield event if isinstance(event, bytes) else event.encode()
        if stall is not None:
            await stall.wait()

    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=body(), headers={"content-type": "text/event-stream"}
        )

    return ChatClient("http://model.test/v1", transport=httpx.MockTransport(handler), timeout=0.5)


def data(chunk: dict[str, Any]) -> str:
    return f"data: {json.dumps(chunk)}\n\n"


def delta_chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return data({"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


async def drain(client: ChatClient) -> ChatStream:
    try:
        with anyio.fail_after(BOUND_S):
            async with client.stream(chat_payload()) as chunks:
                async for _ in chunks:
                    pass
    finally:
        await client.aclose()
    return chunks


async def drain_error(client: ChatClient) -> LLMError:
    with pytest.raises(LLMError) as caught:
        await drain(client)
    return caught.value


@pytest.mark.anyio
async def test_a_trickling_stream_is_bounded_by_the_whole_call_deadline() -> None:
    stall = anyio.Event()  # never set: the endpoint sends one chunk and then nothing
    error = await drain_error(sse_client(delta_chunk({"content": "a"}), stall=stall))
    assert error.code == "LLM_TIMEOUT"
    assert error.details["timeout_s"] == 0.5
    assert error.details["chunks"] == 1


@pytest.mark.anyio
async def test_a_provider_error_inside_the_stream_is_a_bad_response() -> None:
    error = await drain_error(
        sse_client(
            delta_chunk({"content": "a"}),
            data({"error": {"message": "Server\x1b[31m overloaded", "code": "overloaded"}}),
        )
    )
    assert error.code == "LLM_BAD_RESPONSE"
    assert error.details["provider_code"] == "overloaded"
    assert error.details["provider_message"] == "Server [31m overloaded"


@pytest.mark.anyio
async def test_finish_without_done_is_complete_but_no_finish_is_not() -> None:
    stream = await drain(sse_client(delta_chunk({"content": "ok"}, "stop")))
    assert (stream.result.content, stream.result.finish_reason) == ("ok", "stop")

    error = await drain_error(sse_client(delta_chunk({"content": "ok"})))
    assert error.code == "LLM_STREAM_INCOMPLETE"
    assert "end of the stream" in error.message


@pytest.mark.anyio
async def test_tool_call_deltas_without_index_open_a_call_per_id() -> None:
    def call(call_id: str | None, name: str | None, arguments: str) -> dict[str, Any]:
        function: dict[str, Any] = {"arguments": arguments}
        if name:
            function["name"] = name
        return {"id": call_id, "function": function} if call_id else {"function": function}

    stream = await drain(
        sse_client(
            delta_chunk({"tool_calls": [call("a", "look", '{"x":')]}),
            delta_chunk({"tool_calls": [call(None, None, " 1}")]}),
            delta_chunk({"tool_calls": [call("b", "calc", "{}")]}),
            delta_chunk({}, "tool_calls"),
            "data: [DONE]\n\n",
        )
    )
    assert stream.result.tool_calls == (
        ToolCall("a", "look", '{"x": 1}'),
        ToolCall("b", "calc", "{}"),
    )


@pytest.mark.anyio
async def test_too_many_tool_calls_are_a_bad_response() -> None:
    far = {"index": MAX_TOOL_CALLS, "id": "x", "function": {"name": "f", "arguments": ""}}
    error = await drain_error(sse_client(delta_chunk({"tool_calls": [far]})))
    assert error.code == "LLM_BAD_RESPONSE"


@pytest.mark.anyio
async def test_a_json_answer_to_a_stream_request_is_one_synthesized_chunk() -> None:
    document = {
        "id": "cmpl-1",
        "model": "m",
        "choices": [
            {
                "message": {
                    "content": "",
                    "reasoning_content": "hmm",
                    # Ollama sends the arguments as an object; they become JSON text.
                    "tool_calls": [
                        {"id": "c1", "function": {"name": "look", "arguments": {"a": 1}}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }
    client = mock_client(lambda _: httpx.Response(200, json=document))
    try:
        with anyio.fail_after(BOUND_S):
            async with client.stream(chat_payload()) as chunks:
                seen = [chunk async for chunk in chunks]
    finally:
        await client.aclose()

    (chunk,) = seen
    assert chunk["object"] == "chat.completion.chunk"
    assert chunk["id"] == "cmpl-1"
    assert chunk["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'
    assert chunk["usage"] == document["usage"]
    result = chunks.result
    assert result.streamed is False
    assert result.tool_calls == (ToolCall("c1", "look", '{"a": 1}'),)
    assert (result.reasoning, result.usage.total_tokens) == ("hmm", 5)


@pytest.mark.anyio
async def test_result_before_the_end_is_a_programming_error() -> None:
    client = sse_client(delta_chunk({"content": "a"}), delta_chunk({"content": "b"}, "stop"))
    try:
        async with client.stream(chat_payload()) as chunks:
            async for _ in chunks:
                break
            with pytest.raises(RuntimeError):
                _ = chunks.result
    finally:
        await client.aclose()
