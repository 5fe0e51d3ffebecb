"""Turns end to end against a loopback upstream that behaves like DeepSeek's text-only API
(it answers any image part with DeepSeek's 400), with the real vision bridge."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.audit.show import show
from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.home import DataHome
from deepseek_eyes.llm.client import ToolCall
from deepseek_eyes.runtime.messages import image_part
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.turn import TurnRequest, deepseekeyes_json
from deepseek_eyes.runtime.turn.relay import ToolRelay
from deepseek_eyes.settings import Settings
from helpers import BLIND, LOCAL_VISION
from runtime.upstream import REASONING_MODEL, LoopbackUpstream

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
RECEIPT = (ROOT / "examples" / "receipt.png").read_bytes()


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


def settings_for(upstream: LoopbackUpstream, **sections: Any) -> Settings:
    llm = {"base_url": upstream.base_url, "api_key": False, "model": "deepseek-v4-pro",
           "timeout": 5.0, **BLIND, **sections.pop("llm", {})}
    vision = {**LOCAL_VISION, **sections.pop("vision", {})}
    return Settings.model_validate({"llm": llm, "vision": vision, **sections})


@pytest.fixture
async def runtime(upstream: LoopbackUpstream) -> AsyncIterator[Runtime]:
    upstream.reset()
    settings = settings_for(upstream)
    home = DataHome.open(settings)
    rt = Runtime(settings, home)
    yield rt
    await rt.aclose()
    home.close()


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


async def image_message(rt: Runtime, question: str, data: bytes = RECEIPT) -> dict[str, Any]:
    meta = await rt.bridge.admit(data)
    return {"role": "user", "content": [image_part(meta), text(question)]}


def all_text(payload: dict[str, Any]) -> str:
    return json.dumps(payload["messages"])


async def test_pure_text_turn_goes_straight_through(
    runtime: Runtime, upstream: LoopbackUpstream
) -> None:
    result = await runtime.run(TurnRequest(messages=[{"role": "user", "content": [text("hi")]}]))
    assert result.content == "echo: hi"
    assert result.path == "text"
    (sent,) = upstream.requests
    assert sent["messages"] == [{"role": "user", "content": "hi"}]
    assert "tools" not in sent
    # No vision work of any kind: no attempt rows, no evidence, no probe.
    assert runtime.home.db.query("SELECT COUNT(*) n FROM attempts")[0]["n"] == 0
    summary = runtime.home.usage.summary()
    assert summary["exact"]["final"]["calls"] == 1
    assert "vision" not in summary["exact"]
    assert "probe" not in summary["exact"]


@pytest.mark.slow
async def test_image_turn_reaches_the_text_model_as_evidence(
    runtime: Runtime, upstream: LoopbackUpstream
) -> None:
    message = await image_message(runtime, "What is the total?")
    result = await runtime.run(TurnRequest(messages=[message]))
    assert result.path == "bridged"
    (sent,) = upstream.requests
    body = all_text(sent)
    assert "image_url" not in body  # the text model never gets an image part
    assert "TOTAL 64.03" in body
    assert "img-1" in body
    assert [t["function"]["name"] for t in sent["tools"]] == ["look"]
    assert result.content.startswith("echo: ")
    assert result.evidence[0]["route"] == "local"
    summary = runtime.home.usage.summary()
    assert summary["estimated"]["bridge_input"]["estimated_tokens"] > 0
    # One turn with one new image: there was nothing to avoid.
    assert "avoided_replay" not in summary["estimated"]
    # The second turn finds the evidence in the cache: no new route call, and no attempt
    # row either (the turn record's evidence list names the hit).
    attempts = runtime.home.db.query("SELECT COUNT(*) n FROM attempts")[0]["n"]
    again = await runtime.run(TurnRequest(messages=[message, {"role": "assistant",
        "content": result.content}, {"role": "user", "content": [text("And the tax?")]}]))
    assert again.evidence[0]["cached"] is True
    assert runtime.home.db.query("SELECT COUNT(*) n FROM attempts")[0]["n"] == attempts
    # `audit show` resolves the hit to the acquisition that made its evidence.
    (shown,) = show(runtime.home.db, again.turn_id)["images"]
    assert shown["acquired_by"] == result.evidence[0]["operation_id"]
    assert {a["record"]["operation_id"] for a in shown["attempts"]} == {shown["acquired_by"]}
    # history_evidence = "full": the evidence stays where it was, so the second request
    # starts with the first one's messages, and nothing was avoided.
    first, second = (r["estimated_tokens"] for r in runtime.home.db.query(
        "SELECT estimated_tokens FROM usage WHERE category = 'bridge_input' ORDER BY id"))
    assert first == second
    assert upstream.requests[1]["messages"][:2] == upstream.requests[0]["messages"]
    avoided = runtime.home.usage.summary()["estimated"].get("avoided_replay", {})
    assert avoided.get("estimated_tokens", 0) == 0  # a local OCR cache hit avoids no tokens


@pytest.mark.slow
async def test_pointer_history_counts_what_pointers_avoided(upstream: LoopbackUpstream) -> None:
    upstream.reset()
    settings = settings_for(upstream, runtime={"history_evidence": "pointer"})
    home = DataHome.open(settings)
    rt = Runtime(settings, home)
    try:
        message = await image_message(rt, "What is the total?")
        result = await rt.run(TurnRequest(messages=[message]))
        await rt.run(TurnRequest(messages=[message, {"role": "assistant",
            "content": result.content}, {"role": "user", "content": [text("And the tax?")]}]))
        # The image is now a pointer; what that avoided is exactly the difference between
        # the evidence the first turn sent and the pointer the second sent, by one estimate.
        first, second = (r["estimated_tokens"] for r in rt.home.db.query(
            "SELECT estimated_tokens FROM usage WHERE category = 'bridge_input' ORDER BY id"))
        avoided = rt.home.db.query(
            "SELECT source, estimated_tokens FROM usage WHERE category = 'avoided_replay'")
        pointers = [r["estimated_tokens"] for r in avoided if r["source"] == "pointers"]
        assert pointers == [first - second]
        assert first - second > 0
    finally:
        await rt.aclose()
        home.close()


@pytest.mark.slow
async def test_the_upstream_really_refuses_images(runtime: Runtime) -> None:
    # What happens without the bridge: DeepSeek's 400, kept with its message.
    message = await image_message(runtime, "What is the total?")
    with pytest.raises(DeepSeekEyesError) as info:
        await runtime.client.complete({
            "model": "deepseek-v4-pro",
            "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}],
        })
    assert info.value.code == "LLM_HTTP_ERROR"
    assert info.value.details["status"] == 400
    assert "image_url" in info.value.details["provider_message"]
    del message


@pytest.mark.slow
async def test_look_rereads_the_original_pixels(
    runtime: Runtime, upstream: LoopbackUpstream
) -> None:
    message = await image_message(runtime, "LOOK[img-1]: What is the TOTAL?")
    result = await runtime.run(TurnRequest(messages=[message]))
    assert result.rereads == 1
    assert result.content.startswith("after look: ")
    assert "64.03" in result.content
    assert len(upstream.requests) == 2
    tool_message = upstream.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "deepseekeyes" not in tool_message["content"]  # rendered, not raw JSON
    events = runtime.sessions.events(result.session_id)
    assert [e.role for e in events] == ["user", "assistant", "tool", "assistant"]
    assert events[1].message["tool_calls"][0]["name"] == "look"


@pytest.mark.slow
async def test_rereads_per_turn_are_bounded(upstream: LoopbackUpstream) -> None:
    upstream.reset()
    settings = settings_for(upstream, runtime={"max_rereads_per_turn": 0})
    with DataHome.open(settings) as home:
        rt = Runtime(settings, home)
        message = await image_message(rt, "LOOK[img-1]: What is the TOTAL?")
        result = await rt.run(TurnRequest(messages=[message]))
        await rt.aclose()
    assert result.rereads == 0
    assert "reread limit" in result.content


async def test_native_vision_model_bypasses_the_bridge(
    runtime: Runtime, upstream: LoopbackUpstream
) -> None:
    message = await image_message(runtime, "Describe it.")
    result = await runtime.run(
        TurnRequest(messages=[message], model="deepseek-v4-flash-vision-exp")
    )
    assert result.path == "native"
    assert result.content == "I see an image of 900x700 pixels."
    assert "image_url" in all_text(upstream.requests[-1])
    assert runtime.home.db.query("SELECT COUNT(*) n FROM attempts")[0]["n"] == 0
    assert runtime.home.usage.summary()["estimated"]["native_visual_turns"]["events"] == 1


async def test_sessions_log_only_new_messages_and_never_change(
    runtime: Runtime, upstream: LoopbackUpstream
) -> None:
    first = [{"role": "user", "content": [text("one")]}]
    result = await runtime.run(TurnRequest(messages=first, session_id="s-1"))
    history = [*first, {"role": "assistant", "content": result.content},
               {"role": "user", "content": [text("two")]}]
    await runtime.run(TurnRequest(messages=history, session_id="s-1"))
    events = runtime.sessions.events("s-1")
    assert [e.role for e in events] == ["user", "assistant", "user", "assistant"]
    assert [t.path for t in runtime.sessions.turns("s-1")] == ["text", "text"]


@pytest.mark.parametrize(
    ("model", "stream", "code", "status"),
    [
        ("fail-500", False, "LLM_HTTP_ERROR", 500),
        ("fail-429", False, "LLM_HTTP_ERROR", 429),
        ("fail-401", False, "LLM_HTTP_ERROR", 401),
        ("cut", True, "LLM_STREAM_INCOMPLETE", None),
        ("nofinish", True, "LLM_STREAM_INCOMPLETE", None),
        ("badjson", True, "LLM_BAD_RESPONSE", None),
    ],
)
async def test_upstream_failures_map_to_codes(
    runtime: Runtime, model: str, stream: bool, code: str, status: int | None
) -> None:
    request = TurnRequest(messages=[{"role": "user", "content": [text("hi")]}], model=model)

    async def run() -> None:
        if stream:
            async for _ in runtime.stream(request):
                pass
        else:
            await runtime.run(request)

    with pytest.raises(DeepSeekEyesError) as info:
        await run()
    assert info.value.code == code
    if status is not None:
        assert info.value.details["status"] == status
    (turn,) = runtime.sessions.turns(runtime.sessions.sessions()[0]["id"])
    assert turn.outcome == "failed"
    assert turn.code == code


async def test_hang_times_out(upstream: LoopbackUpstream) -> None:
    settings = settings_for(upstream, llm={"timeout": 0.5})
    with DataHome.open(settings) as home:
        rt = Runtime(settings, home)
        with pytest.raises(DeepSeekEyesError) as info:
            await rt.run(TurnRequest(messages=[{"role": "user", "content": "x"}], model="hang"))
        await rt.aclose()
    assert info.value.code == "LLM_TIMEOUT"


async def test_missing_key_is_its_own_code(upstream: LoopbackUpstream) -> None:
    settings = Settings.model_validate(
        {"llm": {"base_url": upstream.base_url, "api_key": {"env": "UNSET_TEST_KEY"}}}
    )
    with DataHome.open(settings) as home:
        rt = Runtime(settings, home)
        with pytest.raises(DeepSeekEyesError) as info:
            await rt.run(TurnRequest(messages=[{"role": "user", "content": "x"}]))
        await rt.aclose()
    assert info.value.code == "LLM_CREDENTIAL_MISSING"
    assert "UNSET_TEST_KEY" in info.value.message


async def test_streamed_text_turn_forwards_deltas_and_usage(
    runtime: Runtime, upstream: LoopbackUpstream
) -> None:
    stream = runtime.stream(TurnRequest(
        messages=[{"role": "user", "content": [text("stream me")]}],
        model="deepseek-v4-pro", include_usage=True,
    ))
    chunks = [chunk async for chunk in stream]
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    reasoning = "".join(
        c["choices"][0]["delta"].get("reasoning_content", "") for c in chunks if c["choices"]
    )
    assert content == "echo: stream me"
    assert reasoning
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
    assert stream.result is not None
    assert stream.result.usage.reasoning_tokens > 0


async def test_client_tool_calls_go_back_to_the_client(
    runtime: Runtime, upstream: LoopbackUpstream
) -> None:
    weather = {"type": "function", "function": {
        "name": "weather", "description": "the weather", "parameters": {"type": "object"}}}
    request = TurnRequest(
        messages=[{"role": "user", "content": [text('CALL[weather]: {"city": "Oslo"}')]}],
        client_tools=[weather],
    )
    result = await runtime.run(request)
    assert result.finish_reason == "tool_calls"
    (call,) = result.tool_calls
    assert call.name == "weather"
    assert json.loads(call.arguments) == {"city": "Oslo"}
    assert upstream.requests[-1]["tools"] == [weather]  # no look on a text turn
    streamed = [c async for c in runtime.stream(request)]
    deltas = [c["choices"][0]["delta"] for c in streamed if c["choices"]]
    assert any("tool_calls" in d for d in deltas)
    assert streamed[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_a_refused_vision_turn_is_logged_and_recorded(upstream: LoopbackUpstream) -> None:
    upstream.reset()
    settings = settings_for(upstream, vision={
        "route": "down",
        "routes": [{"name": "down", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                    "connect_timeout": 1, "timeout": 2}],
    })
    with DataHome.open(settings) as home:
        rt = Runtime(settings, home)
        message = await image_message(rt, "What is it?")
        with pytest.raises(DeepSeekEyesError) as info:
            await rt.run(TurnRequest(messages=[message], session_id="v1"))
        await rt.aclose()
        turns = rt.sessions.turns("v1")
        events = rt.sessions.events("v1")
    assert info.value.code == "VISION_ROUTE_UNAVAILABLE"
    assert [(t.outcome, t.code) for t in turns] == [("failed", "VISION_ROUTE_UNAVAILABLE")]
    assert [e.role for e in events] == ["user"]
    assert upstream.requests == []  # the final model was never asked


def test_tool_relay_forwards_client_calls_live_and_holds_back_the_runtimes() -> None:
    relay = ToolRelay({"look"})
    look = {"index": 0, "id": "c0", "type": "function",
            "function": {"name": "look", "arguments": ""}}
    assert relay.take([look]) == []
    assert relay.take([{"index": 0, "function": {"arguments": '{"image": 1}'}}]) == []
    # The name arrives after the id: the early delta is held, then sent with it, in order.
    assert relay.take([{"index": 1, "id": "c1", "type": "function"}]) == []
    opened = relay.take([{"index": 1, "function": {"name": "weather", "arguments": ""}}])
    assert opened == [
        {"index": 0, "id": "c1", "type": "function"},
        {"index": 0, "function": {"name": "weather", "arguments": ""}},
    ]
    assert relay.take([{"index": 1, "function": {"arguments": '{"city"'}}]) == [
        {"index": 0, "function": {"arguments": '{"city"'}}
    ]
    assert relay.take([None, "x", {"index": True}]) == []  # odd entries are skipped
    calls = [ToolCall("c1", "weather", '{"city"')]
    assert relay.unsent(calls) == []
    # A server that sends no index: its calls go out whole at the end.
    blind = ToolRelay(set())
    assert blind.take([{"id": "c9", "function": {"name": "w", "arguments": "{}"}}]) == []
    assert blind.unsent([ToolCall("c9", "w", "{}")]) == [ToolCall("c9", "w", "{}")]


def user_text(value: str) -> dict[str, Any]:
    return {"role": "user", "content": [text(value)]}


async def test_a_history_that_extends_the_session_continues_it(runtime: Runtime) -> None:
    first = await runtime.run(TurnRequest(messages=[user_text("hi")], session_id="s-1"))
    history = [user_text("hi"), {"role": "assistant", "content": first.content},
               user_text("more")]
    second = await runtime.run(TurnRequest(messages=history, session_id="s-1"))
    assert (second.session_id, second.fork) == ("s-1", None)
    roles = [m["role"] for m in runtime.sessions.messages("s-1")]
    assert roles == ["user", "assistant", "user", "assistant"]  # nothing logged twice


async def test_a_history_that_does_not_extend_the_session_starts_a_fork(
    runtime: Runtime,
) -> None:
    first = await runtime.run(TurnRequest(messages=[user_text("hi")], session_id="s-2"))
    edited = [user_text("hi"), {"role": "assistant", "content": "something else"},
              user_text("more")]
    result = await runtime.run(TurnRequest(messages=edited, session_id="s-2"))
    assert result.session_id != "s-2"
    assert result.fork is not None
    assert (result.fork.parent, result.fork.at) == ("s-2", 1)
    assert deepseekeyes_json(result)["fork"] == {"from": "s-2", "at": 1}
    # The original is untouched; the fork holds the whole new history and names its parent.
    assert [m["role"] for m in runtime.sessions.messages("s-2")] == ["user", "assistant"]
    assert runtime.sessions.messages("s-2")[1]["content"] == first.content
    assert [m["role"] for m in runtime.sessions.messages(result.session_id)] == [
        "user", "assistant", "user", "assistant"]
    listed = {s["id"]: s for s in runtime.sessions.sessions()}
    assert (listed[result.session_id]["forked_from"], listed[result.session_id]["fork_at"]) == (
        "s-2", 1)
    assert runtime.sessions.fork_of(result.session_id) == result.fork
    # The history the first turn started from, again ("regenerate"): a new attempt of that
    # turn in the same session, with a fresh answer that supersedes the first.
    again = await runtime.run(TurnRequest(messages=[user_text("hi")], session_id="s-2"))
    assert again.fork is None
    assert (again.session_id, again.retry_of) == ("s-2", first.turn_id)
    assert deepseekeyes_json(again)["retry_of"] == first.turn_id
    assert again.model_calls == 1  # answered again, not replayed
    assert [m["role"] for m in runtime.sessions.messages("s-2")] == ["user", "assistant"]
    raw = runtime.sessions.events("s-2")
    assert [e.turn_id for e in raw] == [None, first.turn_id, again.turn_id]
    (record,) = [t for t in runtime.sessions.turns("s-2") if t.id == again.turn_id]
    assert record.details["retry_of"] == first.turn_id
    # A shorter history that is no turn's start (the first message alone, after a second
    # exchange) forks at the shared part.
    more = await runtime.run(TurnRequest(
        messages=[user_text("hi"), {"role": "assistant", "content": again.content},
                  user_text("and then?")], session_id="s-2"))
    assert (more.session_id, more.fork) == ("s-2", None)
    back = await runtime.run(TurnRequest(messages=[user_text("hi")], session_id="s-2"))
    assert back.fork is not None
    assert back.fork.at == 1
    assert back.session_id != "s-2"


async def test_reasoning_and_internal_tool_messages_do_not_fork_a_continuation(
    upstream: LoopbackUpstream,
) -> None:
    upstream.reset()
    settings = settings_for(upstream, llm={"model": REASONING_MODEL})
    home = DataHome.open(settings)
    rt = Runtime(settings, home)
    try:
        message = await image_message(rt, "LOOK[img-1]: What is the TOTAL?")
        first = await rt.run(TurnRequest(messages=[message], session_id="s-3"))
        assert first.rereads == 1
        assert first.reasoning
        # What an OpenAI client sends back: the answer only, without reasoning and without
        # the runtime's own look exchange.
        history = [message, {"role": "assistant", "content": first.content},
                   user_text("thanks")]
        second = await rt.run(TurnRequest(messages=history, session_id="s-3"))
        assert (second.session_id, second.fork) == ("s-3", None)
        stored = rt.sessions.messages("s-3")
        assert [(m["role"], bool(m.get("internal"))) for m in stored] == [
            ("user", False), ("assistant", True), ("tool", True), ("assistant", False),
            ("user", False), ("assistant", False)]
        # ask --session resends the stored history, internal messages included: no fork.
        third = await rt.run(TurnRequest(messages=[*stored, user_text("bye")],
                                         session_id="s-3", source="cli"))
        assert (third.session_id, third.fork) == ("s-3", None)
        assert len(rt.sessions.messages("s-3")) == 8
    finally:
        await rt.aclose()
        home.close()
