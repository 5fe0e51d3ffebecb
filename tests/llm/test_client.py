"""ChatClient against a real loopback server (and httpx.MockTransport for malformed bodies)."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from deepseek_eyes.errors import LLMError
from deepseek_eyes.llm import MAX_RESPONSE_BYTES, ChatClient, ChatResult
from vision.loopback import USAGE, LoopbackVisionServer, solid_png

API_KEY = "sk-loopback-0123456789abcdef"
BOUND_S = 10  # no test waits longer than this on the outside world


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackVisionServer]:
    with LoopbackVisionServer() as loopback:
        yield loopback


def chat_payload(width: int = 12, height: int = 8, prompt: str = "Describe it.") -> dict[str, Any]:
    data = base64.b64encode(solid_png(width, height)).decode("ascii")
    return {
        "model": "vision-1",
        "messages": [
            {"role": "system", "content": "You are a test."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": prompt},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
                ],
            },
        ],
    }


async def complete(url: str, payload: dict[str, Any], **kwargs: Any) -> ChatResult:
    stream = kwargs.pop("stream", False)
    client = ChatClient(url, **kwargs)
    try:
        with anyio.fail_after(BOUND_S):
            return await client.complete(payload, stream=stream)
    finally:
        await client.aclose()


async def failure(url: str, payload: dict[str, Any], **kwargs: Any) -> LLMError:
    with pytest.raises(LLMError) as caught:
        await complete(url, payload, **kwargs)
    return caught.value


@pytest.mark.anyio
async def test_complete_reads_answer_and_usage(server: LoopbackVisionServer) -> None:
    result = await complete(server.url("healthy~plain"), chat_payload(12, 8), api_key=API_KEY)

    evidence = json.loads(result.content)
    assert evidence["schema"] == "deepseekeyes.evidence.v1"
    assert "12x8" in evidence["summary"]
    assert result.finish_reason == "stop"
    assert result.model == "vision-1"
    assert result.streamed is False
    assert result.usage.prompt_tokens == USAGE["prompt_tokens"]
    assert result.usage.completion_tokens == USAGE["completion_tokens"]
    assert server.last_image_size["healthy~plain"] == (12, 8)
    assert server.last_payload["healthy~plain"]["stream"] is False


@pytest.mark.anyio
async def test_stream_assembles_chunks_and_takes_usage(server: LoopbackVisionServer) -> None:
    plain = await complete(server.url("healthy~s1"), chat_payload(30, 20))
    streamed = await complete(server.url("healthy~s2"), chat_payload(30, 20), stream=True)

    assert streamed.streamed is True
    assert streamed.content == plain.content
    assert streamed.finish_reason == "stop"
    assert streamed.model == "vision-1"
    assert streamed.usage.total_tokens == USAGE["total_tokens"]
    sent = server.last_payload["healthy~s2"]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}


@pytest.mark.anyio
async def test_list_models(server: LoopbackVisionServer) -> None:
    client = ChatClient(server.url("healthy~models"), timeout=BOUND_S)
    try:
        models = await client.list_models()
    finally:
        await client.aclose()
    assert [m["id"] for m in models] == ["vision-1"]
    assert server.model_calls["healthy~models"] == 1


@pytest.mark.anyio
async def test_http_500_keeps_status_and_provider_code(server: LoopbackVisionServer) -> None:
    error = await failure(server.url("error500"), chat_payload())

    assert error.code == "LLM_HTTP_ERROR"
    assert error.details["status"] == 500
    assert error.details["provider_code"] == "internal_error"
    assert len(error.details["body_sha256"]) == 64


@pytest.mark.anyio
async def test_request_without_image_is_refused_by_the_server(
    server: LoopbackVisionServer,
) -> None:
    payload = {"model": "vision-1", "messages": [{"role": "user", "content": "no image"}]}
    error = await failure(server.url("healthy~noimage"), payload)

    assert error.code == "LLM_HTTP_ERROR"
    assert error.details["status"] == 400
    assert error.details["provider_code"] == "invalid_image"


@pytest.mark.anyio
async def test_hang_past_the_deadline_is_a_timeout(server: LoopbackVisionServer) -> None:
    with anyio.fail_after(BOUND_S):
        error = await failure(server.url("hang"), chat_payload(), timeout=0.5)

    assert error.code == "LLM_TIMEOUT"
    assert error.details["timeout_s"] == 0.5


@pytest.mark.anyio
async def test_refused_port_is_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = await failure(f"http://127.0.0.1:{port}/v1", chat_payload())

    assert error.code == "LLM_UNAVAILABLE"
    assert error.details["error"] == "ConnectError"


@pytest.mark.anyio
async def test_cut_stream_is_incomplete(server: LoopbackVisionServer) -> None:
    error = await failure(server.url("cut"), chat_payload(), stream=True)

    assert error.code == "LLM_STREAM_INCOMPLETE"
    assert error.details["chunks"] == 2
    assert error.details["bytes"] > 0


@pytest.mark.anyio
async def test_cut_behaviour_answers_non_stream_requests(server: LoopbackVisionServer) -> None:
    result = await complete(server.url("cut"), chat_payload(5, 4))
    assert "5x4" in json.loads(result.content)["summary"]


@pytest.mark.anyio
async def test_cut_once_cuts_only_the_first_stream(server: LoopbackVisionServer) -> None:
    url = server.url("cut_once~client")
    first = await failure(url, chat_payload(), stream=True)
    second = await complete(url, chat_payload(), stream=True)

    assert first.code == "LLM_STREAM_INCOMPLETE"
    assert second.finish_reason == "stop"
    assert server.calls["cut_once~client"] == 2


@pytest.mark.anyio
async def test_stream_without_finish_reason_is_incomplete_even_with_done(
    server: LoopbackVisionServer,
) -> None:
    error = await failure(server.url("nofinish"), chat_payload(), stream=True)

    assert error.code == "LLM_STREAM_INCOMPLETE"
    assert error.details["chunks"] >= 2


@pytest.mark.anyio
async def test_malformed_chunk_is_a_bad_response(server: LoopbackVisionServer) -> None:
    error = await failure(server.url("badchunk"), chat_payload(), stream=True)
    assert error.code == "LLM_BAD_RESPONSE"


@pytest.mark.anyio
async def test_api_key_is_a_bearer_header_and_never_in_errors(
    server: LoopbackVisionServer,
) -> None:
    await complete(server.url("healthy~auth"), chat_payload(), api_key=API_KEY)
    error = await failure(server.url("error500~auth"), chat_payload(), api_key=API_KEY)
    unreachable = socket.socket()
    unreachable.bind(("127.0.0.1", 0))
    port = unreachable.getsockname()[1]
    unreachable.close()
    refused = await failure(f"http://127.0.0.1:{port}/v1", chat_payload(), api_key=API_KEY)

    expected = hashlib.sha256(f"Bearer {API_KEY}".encode()).hexdigest()
    assert server.last_authorization_sha256["healthy~auth"] == expected
    for err in (error, refused):
        shown = " ".join(
            [str(err), repr(err), json.dumps(err.to_dict()), str(err.__cause__ or "")]
        )
        assert API_KEY not in shown


@pytest.mark.anyio
async def test_no_api_key_sends_no_authorization(server: LoopbackVisionServer) -> None:
    await complete(server.url("healthy~anon"), chat_payload())
    assert server.last_authorization_sha256["healthy~anon"] is None


def test_key_that_cannot_be_a_header_is_refused_without_echo() -> None:
    with pytest.raises(ValueError, match="API key") as caught:
        ChatClient("http://127.0.0.1:9/v1", api_key="sk-bad\nInjected: yes")
    assert "sk-bad" not in str(caught.value)


def mock_client(handler: Any) -> ChatClient:
    return ChatClient("http://model.test/v1", transport=httpx.MockTransport(handler))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"not json at all", "application/json"),
        (b'{"id": "x"}', "application/json"),
        (b'{"choices": []}', "application/json"),
        (b'{"choices": [{"finish_reason": "stop"}]}', "application/json"),
        (b"[1, 2]", "application/json"),
    ],
)
async def test_malformed_completion_is_a_bad_response(body: bytes, content_type: str) -> None:
    client = mock_client(
        lambda _: httpx.Response(200, content=body, headers={"content-type": content_type})
    )
    try:
        with anyio.fail_after(BOUND_S), pytest.raises(LLMError) as caught:
            await client.complete(chat_payload())
    finally:
        await client.aclose()
    assert caught.value.code == "LLM_BAD_RESPONSE"


@pytest.mark.anyio
async def test_oversized_body_is_refused() -> None:
    big = b'{"pad": "' + b"x" * (MAX_RESPONSE_BYTES + 10) + b'"}'
    client = mock_client(lambda _: httpx.Response(200, content=big))
    try:
        with anyio.fail_after(BOUND_S), pytest.raises(LLMError) as caught:
            await client.complete(chat_payload())
    finally:
        await client.aclose()
    assert caught.value.code == "LLM_BAD_RESPONSE"
    assert caught.value.details["limit_bytes"] == MAX_RESPONSE_BYTES


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
