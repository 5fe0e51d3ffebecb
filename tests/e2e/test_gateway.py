"""``deepseek-eyes serve`` as a real process, driven by the official ``openai`` client."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import require_module
from runtime.upstream import LoopbackUpstream

openai = require_module("openai")

ROOT = Path(__file__).resolve().parents[2]
RECEIPT_URL = "data:image/png;base64," + base64.b64encode(
    (ROOT / "examples" / "receipt.png").read_bytes()
).decode()
KEY = "p3jnIniekq_hk6rd-3hneU9oxmFGojUaljUcyv8PS2M"
START_DEADLINE_S = 30


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def gateway_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gateway")


@pytest.fixture(scope="module")
def gateway(upstream: LoopbackUpstream, gateway_home: Path) -> Iterator[str]:
    home = gateway_home
    config = home / "eyes.toml"
    config.write_text(
        f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\nmodel = "deepseek-v4-pro"\n'
        "timeout = 10\n",
        encoding="utf-8",
    )
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(home),
           "DEEPSEEK_EYES_GATEWAY_KEY": KEY}
    process = subprocess.Popen(  # noqa: S603 - our own CLI, argv list
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "serve",
         "--port", "0"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(
        target=lambda: [lines.put(line) for line in process.stderr or []], daemon=True
    )
    reader.start()
    base = ""
    deadline = time.monotonic() + START_DEADLINE_S
    while not base:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            process.kill()
            pytest.fail("the gateway did not say where it listens in time")
        match = re.search(r"listening on (http://\S+)/v1", line)
        if match:
            base = match.group(1)
    yield f"{base}/v1"
    process.terminate()
    process.wait(timeout=10)
    reader.join(timeout=10)
    if process.stderr is not None:
        process.stderr.close()


_open_clients: list[Any] = []


def client(gateway: str, key: str = KEY) -> Any:
    api = openai.OpenAI(base_url=gateway, api_key=key, max_retries=0, timeout=60)
    _open_clients.append(api)
    return api


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _open_clients:
        _open_clients.pop().close()


def test_models_list_every_model_with_image_input(gateway: str) -> None:
    models = client(gateway).models.list()
    ids = [m.id for m in models.data]
    assert "deepseek-v4-pro" in ids
    assert "deepseek-v4-pro" in ids
    entry = next(m for m in models.data if m.id == "deepseek-v4-pro")
    assert entry.model_extra is not None
    assert "image" in entry.model_extra["input_modalities"]


def test_text_non_streaming(gateway: str) -> None:
    reply = client(gateway).chat.completions.create(
        model="deepseek-v4-pro", messages=[{"role": "user", "content": "hello"}]
    )
    assert reply.choices[0].message.content == "echo: hello"
    assert reply.usage is not None
    assert reply.usage.prompt_tokens > 0


def test_text_streaming_with_usage(gateway: str) -> None:
    stream = client(gateway).chat.completions.create(
        model="deepseek-v4-pro", messages=[{"role": "user", "content": "stream please"}],
        stream=True, stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "echo: stream please"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0


def test_cache_hits_reach_openai_clients_where_they_read_them(gateway: str) -> None:
    """DeepSeek reports ``prompt_cache_hit_tokens``; the openai SDK (and langchain-openai,
    pydantic-ai) read ``prompt_tokens_details.cached_tokens``: both carry the hits."""
    first: list[dict[str, Any]] = [{"role": "user", "content": "a long question " * 40}]
    api = client(gateway)
    answer = api.chat.completions.create(model="deepseek-v4-pro", messages=first)  # type: ignore[arg-type]
    history = [*first, {"role": "assistant", "content": answer.choices[0].message.content}]
    again = api.chat.completions.create(
        model="deepseek-v4-pro", messages=[*history, {"role": "user", "content": "two"}])  # type: ignore[arg-type]
    assert again.usage is not None
    hits = (again.usage.model_extra or {})["prompt_cache_hit_tokens"]
    assert hits > 0
    assert again.usage.prompt_tokens_details is not None
    assert again.usage.prompt_tokens_details.cached_tokens == hits
    streamed = list(api.chat.completions.create(
        model="deepseek-v4-pro", messages=[*history, {"role": "user", "content": "three"}],  # type: ignore[arg-type]
        stream=True, stream_options={"include_usage": True}))
    usage = streamed[-1].usage
    assert usage is not None
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == (usage.model_extra or {})[
        "prompt_cache_hit_tokens"] > 0


@pytest.mark.slow
def test_image_non_streaming_and_streaming(gateway: str) -> None:
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "ANSWER: I read the receipt."},
        {"type": "image_url", "image_url": {"url": RECEIPT_URL}},
    ]}]
    reply = client(gateway).chat.completions.create(model="deepseek-v4-pro", messages=messages)
    assert reply.choices[0].message.content == "I read the receipt."
    extra = reply.model_extra or {}
    assert extra["deepseekeyes"]["path"] == "bridged"
    # Only [llm] is set: DeepSeek's own eyes (deepseek-flash, same upstream and key) read it.
    assert extra["deepseekeyes"]["evidence"][0]["route"] == "deepseek"
    stream = client(gateway).chat.completions.create(
        model="deepseek-v4-pro", messages=messages, stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == (
        "I read the receipt."
    )


@pytest.mark.parametrize("model", ["deepseek-flash", "deepseek-v4-pro"])
def test_an_image_in_a_clients_tool_message_reaches_the_model(
    gateway: str, upstream: LoopbackUpstream, model: str
) -> None:
    """A client's own tool returned a screenshot (DeepSeek takes images inside tool
    results): deepseek-flash gets the pixels there, v4-pro the evidence in their place."""
    tools = [{"type": "function", "function": {
        "name": "take_screenshot", "description": "Capture the screen.",
        "parameters": {"type": "object", "properties": {}}}}]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "What is on my screen?"},
        {"role": "assistant", "content": None, "reasoning_content": "I should look.",
         "tool_calls": [{"id": "call_shot_1", "type": "function",
                         "function": {"name": "take_screenshot", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_shot_1", "content": [
            {"type": "text", "text": "the screen:"},
            {"type": "image_url", "image_url": {"url": RECEIPT_URL}}]},
    ]
    before = len(upstream.decoded)
    reply = client(gateway).chat.completions.create(model=model, messages=messages,
                                                    tools=tools)
    extra = reply.model_extra or {}
    text = reply.choices[0].message.content or ""
    if model == "deepseek-flash":
        assert extra["deepseekeyes"]["path"] == "native"
        assert text == "after take_screenshot: the screen:\nI see an image of 900x700 pixels."
        seen = upstream.decoded[before:]
        assert seen[-1]["model"] == model
        assert seen[-1]["images"][0]["role"] == "tool"
        assert seen[-1]["images"][0]["sha256"] == hashlib.sha256(
            base64.b64decode(RECEIPT_URL.split(",", 1)[1])).hexdigest()
    else:
        assert extra["deepseekeyes"]["path"] == "bridged"
        assert text.startswith("after take_screenshot: the screen:")
        assert "[img-1: sha256:" in text  # the evidence stood where the image was
        assert "evidence from route deepseek" in text
        assert all(d["model"] != model for d in upstream.decoded[before:])


def test_an_answer_carries_provenance_that_audit_show_resolves(
    gateway: str, upstream: LoopbackUpstream, gateway_home: Path
) -> None:
    """image hash -> attempts -> evidence hash -> upstream request hash -> usage, on the
    chain, resolved by `audit show` from the turn id the answer names."""
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "ANSWER: provenance please."},
        {"type": "image_url", "image_url": {"url": RECEIPT_URL}},
    ]}]
    reply = client(gateway).chat.completions.create(model="deepseek-v4-pro", messages=messages)
    provenance = (reply.model_extra or {})["deepseekeyes"]["provenance"]
    image = provenance["images"][0]
    assert image["sha256"] == hashlib.sha256((ROOT / "examples" / "receipt.png").read_bytes(
    )).hexdigest()
    request = provenance["requests"][0]
    assert request["request_sha256"] in upstream.body_hashes  # the exact bytes sent
    assert request["usage"]["prompt_tokens"] > 0
    assert provenance["audit"]["seq"] > 0
    assert provenance["audit"]["checkpoint"].startswith(f"{provenance['audit']['seq']}:")

    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(gateway_home)}
    shown = subprocess.run(  # noqa: S603 - our own CLI, argv list
        [sys.executable, "-m", "deepseek_eyes", "audit", "show", provenance["turn_id"],
         "--json"], env=env, capture_output=True, text=True, timeout=60, check=True)
    view = json.loads(shown.stdout)
    assert view["kind"] == "turn"
    [resolved] = view["images"]
    assert resolved["sha256"] == image["sha256"]
    assert resolved["image"][0]["record"]["sha256"] == image["sha256"]
    assert resolved["attempts"], "the acquisition's attempts"
    # The module's earlier turns acquired this image: this turn's hit wrote no attempts row
    # of its own, and the attempts shown are those of the acquisition that made its evidence.
    acquired = resolved.get("acquired_by", image["operation_id"])
    assert {a["record"]["operation_id"] for a in resolved["attempts"]} == {acquired}
    assert resolved["evidence"][0]["record"]["record_sha256"] == image["record_sha256"]
    # The call was written ahead (pending, before it was sent), then completed with usage.
    ahead, logged = view["requests"]
    assert ahead["record"]["details"]["outcome"] == "pending"
    assert ahead["record"]["details"]["request_sha256"] == request["request_sha256"]
    assert view["outcome_unknown"] == []
    assert logged["record"]["details"]["request_sha256"] == request["request_sha256"]
    assert logged["record"]["details"]["usage"] == request["usage"]
    # The turn record whole too (its usage is stored as the five counts' list).
    assert view["turn"][0]["record"]["details"]["usage"] == request["usage"]
    items = [*view["turn"], *resolved["image"], *resolved["attempts"], *resolved["evidence"],
             ahead, logged]
    assert all(item["chain"]["intact"] for item in items)
    verified = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "deepseek_eyes", "audit", "verify", "--checkpoint",
         provenance["audit"]["checkpoint"], "--json"],
        env=env, capture_output=True, text=True, timeout=60, check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["ok"] is True


def test_errors_use_openai_shape_with_our_code(gateway: str) -> None:
    with pytest.raises(openai.AuthenticationError) as denied:
        client(gateway, key="wrong").models.list()
    assert denied.value.code == "GATEWAY_UNAUTHORIZED"
    broken = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\nxx").decode()
    with pytest.raises(openai.BadRequestError) as bad:
        client(gateway).chat.completions.create(
            model="deepseek-v4-pro",
            messages=[{"role": "user", "content": [{"type": "image_url",
                                                   "image_url": {"url": broken}}]}],
        )
    assert bad.value.code in {"IMAGE_TRUNCATED", "IMAGE_UNSUPPORTED_FORMAT"}
    assert bad.value.param == "messages[0].content[0]"
    assert "- messages[0].content[0]: " in bad.value.message
    with pytest.raises(openai.RateLimitError) as limited:
        client(gateway).chat.completions.create(
            model="fail-429", messages=[{"role": "user", "content": "x"}]
        )
    assert limited.value.code == "LLM_HTTP_ERROR"
    for model in ("fail-500", "fail-401"):
        with pytest.raises(openai.InternalServerError) as failed:
            client(gateway).chat.completions.create(
                model=model, messages=[{"role": "user", "content": "x"}]
            )
        assert failed.value.status_code == 502  # the upstream's fault, not the client's
        assert failed.value.code == "LLM_HTTP_ERROR"
    with pytest.raises(openai.BadRequestError) as malformed:
        client(gateway).chat.completions.create(
            model="deepseek-v4-pro", messages=[{"role": "wizard", "content": "x"}]
        )
    assert malformed.value.code == "RUNTIME_BAD_MESSAGE"


def test_an_error_mid_stream_arrives_as_an_error_event(gateway: str) -> None:
    stream = client(gateway).chat.completions.create(
        model="cut", messages=[{"role": "user", "content": "x"}], stream=True
    )
    with pytest.raises(openai.APIError):
        list(stream)


def test_fifty_concurrent_streams(gateway: str) -> None:
    async def one(index: int, api: openai.AsyncOpenAI) -> str:
        stream = await api.chat.completions.create(
            model="deepseek-v4-pro", messages=[{"role": "user", "content": f"n{index}"}],
            stream=True,
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    async def main() -> list[str]:
        api = openai.AsyncOpenAI(base_url=gateway, api_key=KEY, max_retries=0, timeout=60)
        try:
            return await asyncio.gather(*(one(i, api) for i in range(50)))
        finally:
            await api.close()

    assert asyncio.run(main()) == [f"echo: n{i}" for i in range(50)]


def test_refuses_to_bind_beyond_loopback_without_a_key(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DEEPSEEK_EYES_GATEWAY_KEY"}
    done = subprocess.run(
        [sys.executable, "-m", "deepseek_eyes", "serve", "--host", "0.0.0.0", "--port", "0"],  # noqa: S104 - the point
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )
    assert done.returncode == 1
    assert "GATEWAY_UNSAFE_BIND" in done.stderr


def test_a_header_names_the_session_otherwise_each_request_is_its_own(gateway: str) -> None:
    api = client(gateway)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    first = api.chat.completions.create(
        model="deepseek-v4-pro", messages=messages,  # type: ignore[arg-type]
        extra_headers={"X-DeepSeekEyes-Session": "conv-1"},
    )
    assert (first.model_extra or {})["deepseekeyes"]["session_id"] == "conv-1"
    # A history that extends the stored one continues the session.
    extended = [*messages, {"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": "and then?"}]
    second = api.chat.completions.create(
        model="deepseek-v4-pro", messages=extended,  # type: ignore[arg-type]
        extra_headers={"X-DeepSeekEyes-Session": "conv-1"},
    )
    assert (second.model_extra or {})["deepseekeyes"]["session_id"] == "conv-1"
    assert "fork" not in (second.model_extra or {})["deepseekeyes"]
    # One that does not (the first request again: a regeneration) starts a fork, said so.
    again = api.chat.completions.with_raw_response.create(
        model="deepseek-v4-pro", messages=messages,  # type: ignore[arg-type]
        extra_headers={"X-DeepSeekEyes-Session": "conv-1"},
    )
    ours = (again.parse().model_extra or {})["deepseekeyes"]
    assert ours["session_id"] != "conv-1"
    assert again.headers["x-deepseekeyes-session"] == ours["session_id"]
    assert ours["fork"] == {"from": "conv-1", "at": 1}
    anonymous = [
        (api.chat.completions.create(model="deepseek-v4-pro", messages=messages).model_extra
         or {})["deepseekeyes"]["session_id"]
        for _ in range(2)
    ]
    assert len(set(anonymous)) == 2
    with pytest.raises(openai.BadRequestError) as bad:
        api.chat.completions.create(
            model="deepseek-v4-pro", messages=messages,
            extra_headers={"X-DeepSeekEyes-Session": "../etc"},
        )
    assert bad.value.code == "STORE_SESSION_INVALID"
