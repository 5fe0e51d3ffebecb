"""What OpenAI's API refuses, the gateway refuses at the door: a real ``serve`` process,
the official ``openai`` client, and a loopback upstream that must receive no call.

Each refusal is ``GATEWAY_BAD_REQUEST`` with ``error.param`` naming the field, so a client
library reports it the way OpenAI's own 400 would be reported."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import GATEWAY_KEY, require_module, serve_gateway
from runtime.upstream import LoopbackUpstream

openai = require_module("openai")

MODEL = "deepseek-v4-pro"
WEATHER = {"type": "function", "function": {
    "name": "weather", "description": "the weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, LoopbackUpstream]]:
    root = tmp_path_factory.mktemp("refusals")
    with LoopbackUpstream() as upstream:
        config = root / "eyes.toml"
        config.write_text(f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\n'
                          f'model = "{MODEL}"\ntimeout = 20\n[image]\nmax_bytes = 4096\n',
                          encoding="utf-8")
        env = {**os.environ, "DEEPSEEK_EYES_HOME": str(root / "data")}
        with serve_gateway(Path(config), env) as gateway:
            client = openai.OpenAI(base_url=gateway.base, api_key=GATEWAY_KEY, max_retries=0,
                                   timeout=60)
            try:
                yield client, upstream
            finally:
                client.close()


CASES: dict[str, tuple[dict[str, Any], str]] = {
    "negative max_tokens": (
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": -1}, "max_tokens"),
    "zero max_completion_tokens": (
        {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 0},
        "max_completion_tokens"),
    "tool_choice naming no offered function": (
        {"messages": [{"role": "user", "content": "weather?"}], "tools": [WEATHER],
         "tool_choice": {"type": "function", "function": {"name": "stocks"}}},
        "tool_choice.function.name"),
    "tool_choice with no tools at all": (
        {"messages": [{"role": "user", "content": "weather?"}],
         "tool_choice": {"type": "function", "function": {"name": "weather"}}},
        "tool_choice.function.name"),
    "a tool message that answers no call": (
        {"messages": [{"role": "user", "content": "weather?"},
                      {"role": "assistant", "content": None, "tool_calls": [CALL]},
                      {"role": "tool", "tool_call_id": "call_9", "content": "sunny"}],
         "tools": [WEATHER]},
        "messages[2].tool_call_id"),
    "a tool message with no assistant call before it": (
        {"messages": [{"role": "user", "content": "weather?"},
                      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
         "tools": [WEATHER]},
        "messages[1].tool_call_id"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refused_before_any_upstream_call(served: tuple[Any, LoopbackUpstream],
                                          case: str) -> None:
    client, upstream = served
    body, param = CASES[case]
    before = upstream.chat_calls
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=MODEL, **body)
    assert refused.value.code == "GATEWAY_BAD_REQUEST"
    assert refused.value.param == param
    assert param.split(".")[0].split("[")[0] in refused.value.message
    assert upstream.chat_calls == before


def test_a_matched_tool_reply_still_goes_through(served: tuple[Any, LoopbackUpstream]) -> None:
    client, upstream = served
    before = upstream.chat_calls
    answer = client.chat.completions.create(
        model=MODEL, tools=[WEATHER], max_tokens=64,
        # The call was the client's own, so it has no reasoning for thinking mode to replay.
        extra_body={"thinking": {"type": "disabled"}},
        tool_choice={"type": "function", "function": {"name": "weather"}},
        messages=[{"role": "user", "content": "weather?"},
                  {"role": "assistant", "content": None, "tool_calls": [CALL]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
    )
    assert answer.choices[0].message is not None
    assert upstream.chat_calls == before + 1


def test_our_own_refusals_name_their_param_and_code(served: tuple[Any, LoopbackUpstream]) -> None:
    """An empty conversation, an image over image.max_bytes and an integer too long to
    convert are each refused with the code that says what is wrong and, where a field is to
    blame, its ``param``; the upstream sees none of them."""
    client, upstream = served
    before = upstream.chat_calls
    with pytest.raises(openai.BadRequestError) as empty:
        client.chat.completions.create(model=MODEL, messages=[])
    assert (empty.value.code, empty.value.param) == ("RUNTIME_BAD_MESSAGE", "messages")
    big = "data:image/png;base64," + base64.b64encode(b"\x89PNG" + b"x" * 8000).decode()
    with pytest.raises(openai.BadRequestError) as large:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": big}}]}])
    assert (large.value.code, large.value.param) == ("IMAGE_TOO_LARGE", "messages[0].content[1]")
    assert "image.max_bytes" in large.value.message
    # No JSON library of Python writes such a number, so the body is written by hand.
    raw = (f'{{"model": "{MODEL}", "max_tokens": {"9" * 5000}, '
           '"messages": [{"role": "user", "content": "hi"}]}').encode()
    digits = httpx.post(f"{client.base_url}chat/completions", content=raw, timeout=60,
                        headers={"Authorization": f"Bearer {GATEWAY_KEY}",
                                 "Content-Type": "application/json"})
    assert digits.status_code == 400
    error = digits.json()["error"]
    assert error["code"] == "GATEWAY_BAD_REQUEST"
    assert "5000 digits" in error["message"]
    assert "not JSON" not in error["message"]
    assert upstream.chat_calls == before
