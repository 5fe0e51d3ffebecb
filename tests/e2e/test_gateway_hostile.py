"""The gateway against a hostile client: every refusal in OpenAI's error shape with our code,
nothing left in the session store, upstream failures under their own codes, and streams
that carry what a whole answer carries.

The app is served for real (uvicorn on loopback, in a thread) in front of the loopback
upstream, and driven with ``httpx``, raw sockets and the official ``openai`` client."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import BLIND, LOCAL_VISION, require_module
from inprocess_gateway import InProcessGateway, serve_in_process
from runtime.upstream import LoopbackUpstream

openai = require_module("openai")

BODY_TIMEOUT_S = 1.0
CHAT = "/v1/chat/completions"
WEATHER = {"type": "function", "function": {
    "name": "weather", "description": "the weather", "parameters": {"type": "object"}}}


Gateway = InProcessGateway


def openai_client(gateway: Gateway) -> Any:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0,
                         timeout=30)


def serve(llm: dict[str, Any], **more: Any) -> contextlib.AbstractContextManager[Gateway]:
    """The gateway app served on loopback; its data lives in the test's own home."""
    return serve_in_process(llm, gateway={"body_timeout": BODY_TIMEOUT_S}, more=more)


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


@pytest.fixture
def gateway(upstream: LoopbackUpstream, isolated_home: Path) -> Iterator[Gateway]:
    upstream.reset()
    # The text-only model said so, and the local route: these tests are about the doors.
    with serve({"base_url": upstream.base_url, "model": "deepseek-v4-pro", **BLIND},
               vision=LOCAL_VISION) as served:
        yield served


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def error_of(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    error: dict[str, Any] = body["error"]
    return error


def chat_body(**extra: Any) -> dict[str, Any]:
    return {"model": "deepseek-v4-pro",
            "messages": [{"role": "user", "content": "hi"}], **extra}


def raw(text: str) -> bytes:
    return text.encode()


HOSTILE: dict[str, tuple[bytes, str, str | None]] = {
    "deep nesting (past the parser's recursion)": (
        b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "GATEWAY_JSON_TOO_DEEP", None,
    ),
    "deep nesting (within the recursion limit)": (
        raw('{"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi"}],'
            ' "metadata": ' + "[" * 100 + "]" * 100 + "}"),
        "GATEWAY_JSON_TOO_DEEP", None,
    ),
    "lone surrogate in content": (
        raw('{"model": "deepseek-v4-pro", "messages": '
            '[{"role": "user", "content": "a\\ud800b"}]}'),
        "GATEWAY_BAD_REQUEST", None,
    ),
    "lone surrogate in a key": (
        raw('{"model": "deepseek-v4-pro", "\\udfff": 1, "messages": '
            '[{"role": "user", "content": "hi"}]}'),
        "GATEWAY_BAD_REQUEST", None,
    ),
    # json decodes bytes with surrogatepass: an encoded surrogate (ED A0 80), not escaped
    "lone surrogate as raw UTF-8 bytes": (
        b'{"model": "deepseek-v4-pro", "messages": '
        b'[{"role": "user", "content": "a\xed\xa0\x80b"}]}',
        "GATEWAY_BAD_REQUEST", None,
    ),
    "lone surrogate in a UTF-16 body": (
        '{"model": "deepseek-v4-pro", "messages": '
        '[{"role": "user", "content": "a\\ud800b"}]}'.encode("utf-16"),
        "GATEWAY_BAD_REQUEST", None,
    ),
    "NaN": (raw(json.dumps(chat_body(temperature=float("nan")))), "GATEWAY_BAD_REQUEST", None),
    "Infinity": (raw(json.dumps(chat_body(top_p=float("inf")))), "GATEWAY_BAD_REQUEST", None),
    "-Infinity in a message": (
        raw('{"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi",'
            ' "x": -Infinity}]}'),
        "GATEWAY_BAD_REQUEST", None,
    ),
    "a float that overflows": (
        raw('{"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi"}],'
            ' "temperature": 1e999}'),
        "GATEWAY_BAD_REQUEST", None,
    ),
    "tools of the wrong type": (
        raw(json.dumps(chat_body(tools=[1, "x", None]))), "GATEWAY_BAD_REQUEST", "tools[0]",
    ),
    "a tool without a name": (
        raw(json.dumps(chat_body(tools=[{"type": "function", "function": {}}]))),
        "GATEWAY_BAD_REQUEST", "tools[0].function.name",
    ),
    "stream as a string": (
        raw(json.dumps(chat_body(stream="yes"))), "GATEWAY_BAD_REQUEST", "stream",
    ),
    "temperature as a string": (
        raw(json.dumps(chat_body(temperature="hot"))), "GATEWAY_BAD_REQUEST", "temperature",
    ),
    "max_tokens as a boolean": (
        raw(json.dumps(chat_body(max_tokens=True))), "GATEWAY_BAD_REQUEST", "max_tokens",
    ),
    "stop as a number": (raw(json.dumps(chat_body(stop=7))), "GATEWAY_BAD_REQUEST", "stop"),
    "stream_options as a list": (
        raw(json.dumps(chat_body(stream=True, stream_options=[1]))),
        "GATEWAY_BAD_REQUEST", "stream_options",
    ),
    "not JSON": (b"{", "GATEWAY_BAD_REQUEST", None),
    "a JSON array": (b"[]", "GATEWAY_BAD_REQUEST", None),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_bodies_are_refused_whole_and_leave_nothing_behind(
    gateway: Gateway, upstream: LoopbackUpstream, case: str
) -> None:
    body, code, param = HOSTILE[case]
    for session in (None, "hostile-1"):
        headers = {"content-type": "application/json"}
        if session is not None:
            headers["X-DeepSeekEyes-Session"] = session
        response = gateway.http.post(CHAT, content=body, headers=headers)
        assert response.status_code == 400, response.text
        error = error_of(response)
        assert error["code"] == code
        assert error["type"] == "invalid_request_error"
        assert error["param"] == param
    assert gateway.sessions() == []
    assert upstream.requests == []  # nothing was forwarded


def test_a_good_request_after_the_hostile_ones_still_works(gateway: Gateway) -> None:
    response = gateway.http.post(CHAT, json=chat_body(temperature=0.5, stop=["x"]))
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "echo: hi"


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/v1/nope", 404, "GATEWAY_NOT_FOUND"),
        ("POST", "/completions", 404, "GATEWAY_NOT_FOUND"),
        ("GET", CHAT, 405, "GATEWAY_METHOD_NOT_ALLOWED"),
        ("DELETE", "/v1/models", 405, "GATEWAY_METHOD_NOT_ALLOWED"),
    ],
)
def test_unknown_paths_and_methods_answer_in_the_same_shape(
    gateway: Gateway, method: str, path: str, status: int, code: str
) -> None:
    response = gateway.http.request(method, path, headers={"Content-Type": "application/json"})
    assert response.status_code == status
    assert error_of(response)["code"] == code
    if status == 405:
        assert "allow" in response.headers


def test_a_trickling_body_gets_a_deadline(gateway: Gateway) -> None:
    body = json.dumps(chat_body()).encode()
    head = (
        f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", gateway.server.port), timeout=10) as sock:
        sock.sendall(head)
        received = b""
        sock.settimeout(0.2)
        for byte in body:  # one byte every 0.2 s: the whole body would take minutes
            with contextlib.suppress(OSError):
                sock.sendall(bytes([byte]))
            with contextlib.suppress(TimeoutError):
                piece = sock.recv(65536)
                received += piece
                if not piece or b"\r\n\r\n" in received:
                    break
            if time.monotonic() - started > 10:
                break
        sock.settimeout(5)
        with contextlib.suppress(OSError):
            while b"}}" not in received:
                piece = sock.recv(65536)
                if not piece:
                    break
                received += piece
    elapsed = time.monotonic() - started
    status_line, _, rest = received.partition(b"\r\n")
    assert status_line.split()[1] == b"408", received
    assert elapsed < BODY_TIMEOUT_S + 5
    payload = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert payload["error"]["code"] == "GATEWAY_BODY_TIMEOUT"
    assert gateway.sessions() == []


# -- the upstream down ---------------------------------------------------------------------


def test_models_with_the_upstream_down_is_a_502_not_an_empty_list(isolated_home: Path) -> None:
    with serve({"base_url": f"http://127.0.0.1:{closed_port()}/v1"}) as down:
        response = down.http.get("/v1/models")
        assert response.status_code == 502, response.text
        assert error_of(response)["code"] == "LLM_UNAVAILABLE"
        chat = down.http.post(CHAT, json={"messages": [{"role": "user", "content": "hi"}]})
        assert chat.status_code == 502, chat.text
        assert error_of(chat)["code"] == "LLM_UNAVAILABLE"  # not LLM_MODEL_UNKNOWN (404)


def test_models_with_the_upstream_down_lists_the_declared_ones_and_says_so(
    isolated_home: Path,
) -> None:
    llm = {"base_url": f"http://127.0.0.1:{closed_port()}/v1", "model": "deepseek-flash",
           "models": [{"id": "deepseek-v4-pro"}]}
    with serve(llm) as down:
        response = down.http.get("/v1/models")
    assert response.status_code == 200, response.text
    body = response.json()
    assert [m["id"] for m in body["data"]] == ["deepseek-v4-pro", "deepseek-flash"]
    assert body["deepseekeyes"] == {
        "complete": False, "upstream_error": "LLM_UNAVAILABLE", "sources": ["settings"],
    }


# -- what a client sees ------------------------------------------------------------------------


def test_every_answer_names_its_session(gateway: Gateway) -> None:
    plain = gateway.http.post(CHAT, json=chat_body())
    assert plain.headers["x-deepseekeyes-session"] == plain.json()["deepseekeyes"]["session_id"]
    named = gateway.http.post(CHAT, json=chat_body(), headers={"X-DeepSeekEyes-Session": "s-9"})
    assert named.headers["x-deepseekeyes-session"] == "s-9"


def test_a_failed_turn_names_the_session_that_holds_it(gateway: Gateway) -> None:
    for stream in (False, True):
        failed = gateway.http.post(CHAT, json=chat_body(model="fail-429", stream=stream))
        assert failed.status_code == 429
        assert error_of(failed)["code"] == "LLM_HTTP_ERROR"
        session = failed.headers["x-deepseekeyes-session"]
        turns = gateway.runtime.sessions.turns(session)
        assert [(t.outcome, t.code) for t in turns] == [("failed", "LLM_HTTP_ERROR")]


def test_a_stream_carries_the_session_header_and_a_final_deepseekeyes_chunk(
    gateway: Gateway,
) -> None:
    api = openai_client(gateway)
    try:
        for number, options in enumerate((None, {"include_usage": True})):
            extra: dict[str, Any] = {} if options is None else {"stream_options": options}
            session = f"streamed-{number}"
            with api.chat.completions.with_streaming_response.create(
                model="deepseek-v4-pro", messages=[{"role": "user", "content": "stream"}],
                stream=True, extra_headers={"X-DeepSeekEyes-Session": session}, **extra,
            ) as response:
                assert response.headers["x-deepseekeyes-session"] == session
                chunks = list(response.parse())
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert text == "echo: stream"
            final = chunks[-1].model_extra or {}
            assert final["deepseekeyes"]["session_id"] == session
            assert final["deepseekeyes"]["path"] == "text"
            assert final["deepseekeyes"]["evidence"] == []
            if options is None:  # the finish chunk is the last one
                assert chunks[-1].choices[0].finish_reason == "stop"
            else:  # the usage chunk is the last one, as OpenAI sends it
                assert chunks[-1].choices == []
                assert chunks[-1].usage is not None
            assert all("deepseekeyes" not in (c.model_extra or {}) for c in chunks[:-1])
    finally:
        api.close()


def test_tool_call_deltas_are_forwarded_as_they_arrive(gateway: Gateway) -> None:
    arguments = '{"city": "Oslo", "days": 3, "units": "metric"}'
    api = openai_client(gateway)
    try:
        stream = api.chat.completions.create(
            model="deepseek-v4-pro", tools=[WEATHER], stream=True,
            messages=[{"role": "user", "content": f"CALL[weather]: {arguments}"}],
        )
        chunks = list(stream)
    finally:
        api.close()
    pieces = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or ()]
    assert len(pieces) > 2  # the opening delta and the arguments in pieces, not one lump
    assert {p.index for p in pieces} == {0}
    assert pieces[0].id
    assert pieces[0].function is not None
    assert pieces[0].function.name == "weather"
    assert "".join((p.function.arguments or "") for p in pieces if p.function) == arguments
    assert sum(1 for p in pieces if p.id) == 1
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "tool_calls"


def test_content_is_null_beside_tool_calls(gateway: Gateway) -> None:
    response = gateway.http.post(CHAT, json=chat_body(
        tools=[WEATHER], messages=[{"role": "user", "content": 'CALL[weather]: {"city": "X"}'}],
    ))
    message = response.json()["choices"][0]["message"]
    assert message["content"] is None
    assert message["tool_calls"][0]["function"]["name"] == "weather"
    api = openai_client(gateway)
    try:
        reply = api.chat.completions.create(
            model="deepseek-v4-pro", tools=[WEATHER],
            messages=[{"role": "user", "content": 'CALL[weather]: {"city": "X"}'}],
        )
    finally:
        api.close()
    assert reply.choices[0].message.content is None
    assert reply.choices[0].message.tool_calls


def _png(seed: int, size: tuple[int, int] = (4, 3)) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, (seed % 256, seed // 256 % 256, 7)).save(buffer, format="PNG")
    return buffer.getvalue()


def _url(data: bytes) -> str:
    import base64

    return "data:image/png;base64," + base64.b64encode(data).decode()


def _stored_images(gateway: Gateway) -> tuple[int, int]:
    blobs = [p for p in gateway.runtime.home.blobs.root.rglob("*") if p.is_file()]
    rows = gateway.runtime.home.db.query("SELECT COUNT(*) n FROM images")[0]["n"]
    return len(blobs), rows


def test_too_many_images_are_refused_before_anything_is_decoded_or_stored(
    gateway: Gateway, upstream: LoopbackUpstream
) -> None:
    # 10,000 distinct tiny images over 40 messages (as reported: 40 s and 10,012 blobs).
    urls = [_url(_png(i)) for i in range(10_000)]
    messages = [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": u}}
                                     for u in urls[m * 250:(m + 1) * 250]]}
        for m in range(40)
    ]
    started = time.perf_counter()
    response = gateway.http.post(CHAT, json={"model": "deepseek-v4-pro",
                                             "messages": messages})
    elapsed = time.perf_counter() - started
    assert response.status_code == 400, response.text
    assert error_of(response)["code"] == "RUNTIME_TOO_MANY_IMAGES"
    assert _stored_images(gateway) == (0, 0)
    assert gateway.sessions() == []
    assert upstream.requests == []
    print(f"refused 10,000 images in {elapsed:.2f}s")


def test_a_refused_image_leaves_none_of_the_others_behind(
    gateway: Gateway, upstream: LoopbackUpstream
) -> None:
    good = [_url(_png(i, (40, 30))) for i in range(4)]
    broken = _url(_png(99, (40, 30))[:-30])  # truncated: the header passes, the pixels not
    parts = [{"type": "image_url", "image_url": {"url": u}} for u in [*good, broken]]
    response = gateway.http.post(CHAT, json={
        "model": "deepseek-v4-pro", "messages": [{"role": "user", "content": parts}]})
    assert response.status_code == 400, response.text
    assert error_of(response)["code"].startswith("IMAGE_")
    assert _stored_images(gateway) == (0, 0)
    assert gateway.sessions() == []
    assert upstream.requests == []


@pytest.mark.slow
def test_an_image_repeated_in_one_message_is_decoded_stored_and_rendered_once(
    gateway: Gateway, upstream: LoopbackUpstream
) -> None:
    receipt = _url((Path(__file__).resolve().parents[2] / "examples" / "receipt.png")
                   .read_bytes())
    parts: list[dict[str, Any]] = [{"type": "text", "text": "What is the total?"}]
    parts += [{"type": "image_url", "image_url": {"url": receipt}}] * 250
    response = gateway.http.post(CHAT, json={
        "model": "deepseek-v4-pro", "messages": [{"role": "user", "content": parts}]})
    assert response.status_code == 200, response.text
    assert _stored_images(gateway) == (1, 1)
    (sent,) = upstream.requests
    body = json.dumps(sent["messages"])
    assert body.count("TOTAL 64.03") == 1
    assert body.count("[img-1 again: the same image as above]") == 249
    assert response.json()["usage"]["prompt_tokens"] < 6000  # was ~80k with 250 renders
