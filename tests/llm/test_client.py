"""ChatClient against real loopback servers (the vision one, and the DeepSeek-like upstream of
:mod:`runtime.upstream`), and httpx.MockTransport for bodies no honest server sends."""

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
from deepseek_eyes.llm import (
    MAX_RESPONSE_BYTES,
    PROVIDER_MESSAGE_CHARS,
    ChatClient,
    ChatResult,
    ChatStream,
)
from deepseek_eyes.settings import LLMSettings
from runtime.upstream import (
    REASONING_MODEL,
    REASONING_TEXT,
    RETRY_AFTER_S,
    VISION_MODEL,
    LoopbackUpstream,
    deepseek_image_error,
    estimate,
)
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
@pytest.mark.parametrize(("in_file", "in_env", "source"), [
    (True, False, "the setting llm.base_url"),
    (False, True, "the variable DEEPSEEK_BASE_URL"),
    (False, False, "the default; set llm.base_url or DEEPSEEK_BASE_URL to change it"),
])
async def test_unavailable_names_the_url_and_what_set_it(
    in_file: bool, in_env: bool, source: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    monkeypatch.delenv("DEEPSEEK_BASE_URL", raising=False)
    if in_env:
        monkeypatch.setenv("DEEPSEEK_BASE_URL", url)
    llm = LLMSettings(base_url=url) if in_file else LLMSettings()
    assert llm.base_url_source == source
    # The default endpoint is never dialled from a test: every case dials the refused port,
    # with the source its settings report.
    client = ChatClient(url, timeout=BOUND_S, base_url_source=llm.base_url_source)
    try:
        with pytest.raises(LLMError) as caught:
            await client.complete(chat_payload())
    finally:
        await client.aclose()
    error = caught.value
    assert error.code == "LLM_UNAVAILABLE"
    assert error.message == f"the model endpoint could not be reached: {url} (set by {source})"
    assert error.details["url"] == url
    assert error.details["source"] == source


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


_ANSWER = {"id": "c1", "object": "chat.completion", "model": "m",
           "choices": [{"index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "ok"}}],
           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_chat_request_is_what_httpx_builds_from_the_same_settings(
        stream: bool) -> None:
    """The request is made from parts merged once at start, not by httpx's build_request
    on every call; what it holds is what that builds: the URL, every header (the
    client's, the body's type and length, a stream's Accept), the JSON bytes as httpx
    encodes them (compact, UTF-8 as it is), the timeouts."""
    client = ChatClient("http://model.test/v1", api_key=API_KEY, headers={"X-Org": "acme"},
                        timeout=12, connect_timeout=3)
    payload = {"model": "m", "messages": [{"role": "user", "content": "héllo ✓"}]}
    try:
        request = client.encode(payload, stream=stream).request
        again = client.encode(payload, stream=stream).request
    finally:
        await client.aclose()
    with httpx.Client(
        headers={"User-Agent": "deepseek-eyes/0.1", "Accept": "application/json",
                 "X-Org": "acme", "Authorization": f"Bearer {API_KEY}"},
        timeout=httpx.Timeout(12, connect=3),
    ) as same_settings:
        reference = same_settings.build_request(
            "POST", "http://model.test/v1/chat/completions", json=request_body(request),
            headers={"Accept": "text/event-stream"} if stream else None)
    assert (request.method, request.url) == (reference.method, reference.url)
    assert sorted(request.headers.multi_items()) == sorted(reference.headers.multi_items())
    assert request.content == reference.content
    assert "héllo ✓".encode() in request.content
    assert request.extensions["timeout"] == reference.extensions["timeout"]
    assert again.headers is not request.headers  # each request its own headers


def request_body(request: httpx.Request) -> Any:
    return json.loads(request.content)


@pytest.mark.anyio
async def test_a_cookie_the_upstream_set_goes_back_with_the_next_call() -> None:
    """As httpx's client does (a balancer's sticky-session cookie, say)."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=_ANSWER, headers={"Set-Cookie": "lb=node-2; Path=/"})

    client = mock_client(handler)
    try:
        with anyio.fail_after(BOUND_S):
            for _ in range(2):
                await client.complete({"model": "m", "messages": [{"role": "user",
                                                                    "content": "hi"}]})
    finally:
        await client.aclose()
    assert "cookie" not in seen[0].headers
    assert seen[1].headers["cookie"] == "lb=node-2"
    assert seen[1].headers["content-type"] == "application/json"


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


# -- against the DeepSeek-like loopback upstream -----------------------------------------------


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as loopback:
        yield loopback


def text_payload(model: str, prompt: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": prompt}], **extra}


async def collect(
    url: str, payload: dict[str, Any], **kwargs: Any
) -> tuple[list[dict[str, Any]], ChatStream]:
    client = ChatClient(url, **{"timeout": BOUND_S, **kwargs})
    try:
        with anyio.fail_after(BOUND_S):
            async with client.stream(payload) as chunks:
                seen = [chunk async for chunk in chunks]
    finally:
        await client.aclose()
    return seen, chunks


TOOLS = [
    {"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}},
]


@pytest.mark.anyio
async def test_stream_yields_each_chunk_and_assembles_the_result(
    upstream: LoopbackUpstream,
) -> None:
    payload = text_payload(
        REASONING_MODEL, "hello there", stream_options={"continuous_usage_stats": False}
    )
    chunks, stream = await collect(upstream.base_url, payload, api_key=API_KEY)

    assert all(isinstance(chunk, dict) for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    pieces = [d["content"] for d in deltas if d.get("content")]
    thoughts = [d["reasoning_content"] for d in deltas if d.get("reasoning_content")]
    assert len(pieces) > 1
    assert len(thoughts) > 1
    assert chunks[-1]["choices"] == []  # the usage chunk, forwarded as sent

    result = stream.result
    assert result.content == "".join(pieces) == "echo: hello there"
    assert result.reasoning == "".join(thoughts) == REASONING_TEXT
    assert (result.finish_reason, result.model, result.streamed) == ("stop", REASONING_MODEL, True)
    assert result.tool_calls == ()
    reasoning = estimate(len(REASONING_TEXT))
    assert result.usage.reasoning_tokens == reasoning
    assert result.usage.completion_tokens == estimate(len("echo: hello there")) + reasoning
    assert result.usage.prompt_tokens == estimate(len("hello there"))
    assert stream.first_chunk_at is not None

    sent = upstream.requests[-1]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"continuous_usage_stats": False, "include_usage": True}
    expected = hashlib.sha256(f"Bearer {API_KEY}".encode()).hexdigest()
    assert upstream.authorizations[-1] == expected


@pytest.mark.anyio
async def test_stream_gathers_tool_calls_split_across_chunks(upstream: LoopbackUpstream) -> None:
    prompt = 'LOOK[img-1]: What is the total?\nCALL[calc]: {"expr": "2+'  # invalid JSON on purpose
    payload = text_payload("deepseek-v4-pro", prompt, tools=TOOLS)
    chunks, stream = await collect(upstream.base_url, payload)

    argument_pieces = [
        call
        for chunk in chunks
        if chunk["choices"]
        for call in chunk["choices"][0]["delta"].get("tool_calls") or ()
        if call["index"] == 0 and call["function"]["arguments"]
    ]
    assert len(argument_pieces) > 1
    result = stream.result
    assert result.finish_reason == "tool_calls"
    look, calc = result.tool_calls
    assert look.name == "look"
    assert json.loads(look.arguments) == {"image": "img-1", "question": "What is the total?"}
    assert (calc.name, calc.arguments) == ("calc", '{"expr": "2+')
    assert look.id
    assert calc.id
    assert look.id != calc.id

    # The same answer, whole, carries the same calls.
    whole = await complete(upstream.base_url, payload)
    # (Their ids are the upstream's, fresh for each answer, as DeepSeek's are.)
    assert [(c.name, c.arguments) for c in whole.tool_calls] == [
        (c.name, c.arguments) for c in result.tool_calls]
    assert whole.finish_reason == "tool_calls"

    # Once the messages end with the tool's result, the model answers from it. In thinking
    # mode the call goes back with the reasoning it came with (DeepSeek's 400 otherwise).
    history = [
        *payload["messages"],
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": result.reasoning,
            "tool_calls": [
                {"id": look.id, "type": "function",
                 "function": {"name": look.name, "arguments": look.arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": look.id, "content": "TOTAL 64.03"},
    ]
    after = await complete(upstream.base_url, {**payload, "messages": history}, stream=True)
    assert after.content == "after look: TOTAL 64.03"


@pytest.mark.anyio
async def test_usage_reports_prompt_cache_hits_like_deepseek(upstream: LoopbackUpstream) -> None:
    system = {"role": "system", "content": "You are a careful assistant. " * 8}
    first_user = {"role": "user", "content": "ANSWER: fine\nHow are you?"}
    tag = {"role": "user", "content": f"unique {id(system)}"}  # no earlier request began so
    first = await complete(
        upstream.base_url, {"model": "deepseek-v4-pro", "messages": [tag, system, first_user]}
    )
    second = await complete(
        upstream.base_url,
        {
            "model": "deepseek-v4-pro",
            "messages": [
                tag, system, first_user,
                {"role": "assistant", "content": first.content},
                {"role": "user", "content": "And now?"},
            ],
        },
        stream=True,
    )

    assert first.content == "fine"
    assert first.usage.cache_hit_tokens == 0
    assert first.usage.cache_miss_tokens == first.usage.prompt_tokens
    prefix = len(str(tag["content"])) + len(str(system["content"])) + len(first_user["content"])
    assert second.usage.cache_hit_tokens == estimate(prefix)
    assert second.usage.cache_hit_tokens + second.usage.cache_miss_tokens == (
        second.usage.prompt_tokens
    )
    assert second.content == "fine"  # ANSWER: in any message decides the reply


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_deepseek_refuses_an_image_part_and_the_reason_is_kept(
    upstream: LoopbackUpstream, stream: bool
) -> None:
    payload = chat_payload()
    payload["model"] = "deepseek-v4-pro"
    payload["messages"] = payload["messages"][1:]  # the image part in messages[0]
    error = await failure(upstream.base_url, payload, stream=stream, api_key=API_KEY)

    assert error.code == "LLM_HTTP_ERROR"
    assert error.details["status"] == 400
    assert error.details["provider_code"] == "invalid_request_error"
    assert error.details["provider_type"] == "invalid_request_error"
    assert error.details["provider_message"] == (
        deepseek_image_error(0)["error"]["message"]
    )
    assert "unknown variant `image_url`, expected `text`" in error.details["provider_message"]
    assert upstream.requests[-1]["messages"][0]["content"][1]["image_url"]["url"] == "<image>"


@pytest.mark.anyio
async def test_the_vision_model_decodes_the_image(upstream: LoopbackUpstream) -> None:
    payload = chat_payload(30, 20)
    payload["model"] = VISION_MODEL
    result = await complete(upstream.base_url, payload, stream=True)
    assert result.content == "I see an image of 30x20 pixels."


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "stream", "code", "status"),
    [
        ("fail-500", False, "LLM_HTTP_ERROR", 500),
        ("fail-500", True, "LLM_HTTP_ERROR", 500),
        ("fail-429", False, "LLM_HTTP_ERROR", 429),
        ("fail-429", True, "LLM_HTTP_ERROR", 429),
        ("fail-401", False, "LLM_HTTP_ERROR", 401),
        ("fail-401", True, "LLM_HTTP_ERROR", 401),
        ("cut", True, "LLM_STREAM_INCOMPLETE", None),
        ("cut", False, "LLM_BAD_RESPONSE", None),
        ("nofinish", True, "LLM_STREAM_INCOMPLETE", None),
        ("badjson", True, "LLM_BAD_RESPONSE", None),
        ("badjson", False, "LLM_BAD_RESPONSE", None),
    ],
)
async def test_upstream_failures_map_to_their_codes(
    upstream: LoopbackUpstream, model: str, stream: bool, code: str, status: int | None
) -> None:
    error = await failure(
        upstream.base_url, text_payload(model, "hi"), stream=stream, api_key=API_KEY
    )

    assert error.code == code
    assert error.details.get("status") == status
    if model == "fail-429":
        assert error.details["retry_after_s"] == RETRY_AFTER_S
    if model == "fail-401":
        assert error.details["provider_type"] == "authentication_error"
        assert "Authentication Fails" in error.details["provider_message"]
    if model == "cut" and stream:
        assert error.details["chunks"] == 2
    assert API_KEY not in json.dumps(error.to_dict()) + str(error)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_hanging_upstream_meets_the_deadline(
    upstream: LoopbackUpstream, stream: bool
) -> None:
    with anyio.fail_after(BOUND_S):
        error = await failure(
            upstream.base_url, text_payload("hang", "hi"), stream=stream, timeout=0.3
        )
    assert error.code == "LLM_TIMEOUT"
    assert error.details["timeout_s"] == 0.3


# -- what an HTTP error keeps ------------------------------------------------------------------


@pytest.mark.anyio
async def test_provider_message_is_short_clean_and_never_holds_the_key() -> None:
    header_secret = "org-secret-value-42"
    message = (
        f"Bad key {API_KEY}\r\nInjected: header\x00 for org {header_secret} "
        + "x" * 1000
    )

    def handler(_: httpx.Request) -> httpx.Response:
        body = {"error": {"message": message, "type": "authentication_error", "code": 401}}
        return httpx.Response(401, json=body)

    client = ChatClient(
        "http://model.test/v1",
        api_key=API_KEY,
        headers={"X-Org": header_secret},
        transport=httpx.MockTransport(handler),
    )
    try:
        with anyio.fail_after(BOUND_S), pytest.raises(LLMError) as caught:
            await client.complete(chat_payload())
    finally:
        await client.aclose()

    details = caught.value.details
    shown = details["provider_message"]
    assert shown.startswith("Bad key [redacted] Injected: header for org [redacted] xxx")
    assert len(shown) == PROVIDER_MESSAGE_CHARS
    assert API_KEY not in json.dumps(caught.value.to_dict())
    assert header_secret not in json.dumps(caught.value.to_dict())
    assert (details["provider_code"], details["provider_type"]) == ("401", "authentication_error")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"error": "plain words"}', "plain words"),
        (b'{"detail": "Not Found"}', "Not Found"),
        (b"<html>bad gateway</html>", None),
    ],
)
async def test_provider_message_in_other_error_shapes(body: bytes, expected: str | None) -> None:
    client = mock_client(lambda _: httpx.Response(502, content=body))
    try:
        with anyio.fail_after(BOUND_S), pytest.raises(LLMError) as caught:
            await client.complete(chat_payload())
    finally:
        await client.aclose()
    assert caught.value.details["provider_message"] == expected
    assert caught.value.details["provider_code"] is None


@pytest.mark.anyio
async def test_a_wrong_key_is_refused_like_deepseek_and_never_shown() -> None:
    with LoopbackUpstream(api_key=API_KEY) as guarded:
        wrong = "sk-wrong-key-9999999999"
        payload = text_payload("deepseek-v4-pro", "hi")
        error = await failure(guarded.base_url, payload, api_key=wrong)
        result = await complete(guarded.base_url, payload, api_key=API_KEY)
        hashes = guarded.authorizations

    assert error.code == "LLM_HTTP_ERROR"
    assert error.details["status"] == 401
    assert error.details["provider_message"] == (
        "Authentication Fails, Your api key: ****9999 is invalid"
    )
    assert wrong not in json.dumps(error.to_dict())
    assert result.content == "echo: hi"
    assert hashes == [
        hashlib.sha256(f"Bearer {key}".encode()).hexdigest() for key in (wrong, API_KEY)
    ]


@pytest.mark.anyio
async def test_deeply_nested_bodies_stay_llm_errors() -> None:
    from deepseek_eyes.llm.response import http_error, parse_json

    with pytest.raises(LLMError) as info:
        parse_json(b"[" * 70_000)
    assert info.value.code == "LLM_BAD_RESPONSE"
    response = httpx.Response(500, content=b"[" * 60_000)
    error = await http_error(response, ())
    assert error.code == "LLM_HTTP_ERROR"
    assert error.details["status"] == 500
