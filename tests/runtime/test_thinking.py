"""DeepSeek's thinking mode in the turn runner: the mode of a request, reasoning sent back
and restored, refusal and fallback, and the settings that set it per model. The upstream is
the loopback DeepSeek, which refuses a tool-call message without (or with the wrong)
``reasoning_content`` in thinking mode."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.errors import DeepSeekEyesError, TurnError
from deepseek_eyes.home import DataHome
from deepseek_eyes.llm.thinking import reasoning_gaps, thinking_mode
from deepseek_eyes.runtime.messages import parse_messages
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.turn import TurnRequest, deepseekeyes_json
from deepseek_eyes.runtime.view import build_view
from deepseek_eyes.settings import LLMSettings, Settings
from deepseek_eyes.store.db import MIGRATIONS, Database
from deepseek_eyes.store.events import SessionStore
from runtime.upstream import REASONING_TEXT, LoopbackUpstream

pytestmark = pytest.mark.anyio

WEATHER = {"type": "function", "function": {
    "name": "weather", "description": "the weather", "parameters": {"type": "object"}}}
MADE_UP = [
    {"role": "user", "content": 'CALL[weather]: {"city": "Rome"}'},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_00_madeup", "name": "weather", "arguments": "{}"}]},
    {"role": "tool", "tool_call_id": "call_00_madeup", "content": "rainy"},
]


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream(extra_models=[{"id": "other-model", "object": "model"}]) as server:
        yield server


def settings_for(upstream: LoopbackUpstream, **llm: Any) -> Settings:
    return Settings.model_validate({"llm": {
        "base_url": upstream.base_url, "api_key": False, "model": "deepseek-v4-pro",
        "timeout": 10.0, **llm}})


@pytest.fixture
async def runtime(upstream: LoopbackUpstream) -> AsyncIterator[Runtime]:
    settings = settings_for(upstream)
    rt = Runtime(settings, DataHome.open(settings))
    yield rt
    await rt.aclose()
    rt.home.close()


async def own_runtime(upstream: LoopbackUpstream, **llm: Any) -> Runtime:
    settings = settings_for(upstream, **llm)
    return Runtime(settings, DataHome.open(settings))


async def close(rt: Runtime) -> None:
    await rt.aclose()
    rt.home.close()


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# -- the mode ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "params", "configured", "mode"), [
    ("deepseek-v4-pro", {}, None, "enabled"),
    ("deepseek-flash", {}, None, "enabled"),
    ("deepseek-v4-flash-vision-exp", {}, None, "enabled"),
    ("deepseek-reasoner", {}, None, "enabled"),
    ("deepseek-chat", {}, None, "enabled"),
    ("deepseek-v4-pro", {"thinking": {"type": "disabled"}}, None, "disabled"),
    ("deepseek-v4-pro", {}, "disabled", "disabled"),
    ("deepseek-v4-pro", {"thinking": {"type": "enabled"}}, "disabled", "enabled"),
    ("qwen3-max", {}, None, None),  # another provider's: unknown, not "off"
    ("qwen3-max", {}, "enabled", "enabled"),
    ("deepseek-v4-pro", {"thinking": {"type": "maybe"}}, None, "enabled"),
])
def test_the_mode_of_a_request(
    model: str, params: dict[str, Any], configured: str | None, mode: str | None
) -> None:
    models = [{"id": model, "thinking": configured}] if configured else []
    settings = LLMSettings.model_validate({"models": models})
    assert thinking_mode(model, params, settings) == mode


def test_only_exchanges_with_tool_calls_send_their_reasoning() -> None:
    messages = [
        user("hello"),
        {"role": "assistant", "content": "hi", "reasoning": "r0"},
        user("use a tool"),
        {"role": "assistant", "content": "", "reasoning": "r1",
         "tool_calls": [{"id": "c1", "name": "weather", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "assistant", "content": "it is sunny", "reasoning": "r2"},
        user("thanks"),
    ]
    sent = build_view(messages, path="text", thinking="enabled").messages
    assert [m.get("reasoning_content") for m in sent if m["role"] == "assistant"] == [
        None, "r1", "r2"]
    off = build_view(messages, path="text", thinking="disabled").messages
    assert not any("reasoning_content" in m for m in off)
    # Mode unknown: only reasoning the model sent itself goes back, never an empty one.
    empty = [*messages[:3], {**messages[3], "reasoning": ""}, *messages[4:]]
    unknown = build_view(empty, path="text", thinking=None).messages
    assert [m.get("reasoning_content") for m in unknown if m["role"] == "assistant"] == [
        None, None, "r2"]
    assert reasoning_gaps(messages) == []
    assert reasoning_gaps(MADE_UP) == [1]


async def test_a_client_reasoning_content_is_kept_and_checked() -> None:
    async def admit(_: Any, *, sha256s: Any = None) -> list[Any]:
        return []

    parsed = await parse_messages([
        user("x"),
        {"role": "assistant", "content": None, "reasoning_content": "kept exactly  ",
         "tool_calls": [{"id": "c", "type": "function",
                         "function": {"name": "f", "arguments": "{}"}}]},
    ], admit=admit)
    assert parsed[1]["reasoning"] == "kept exactly  "
    with pytest.raises(TurnError) as bad:
        await parse_messages([user("x"), {"role": "assistant", "content": "y",
                                          "reasoning_content": 5}], admit=admit)
    assert bad.value.code == "RUNTIME_BAD_MESSAGE"
    assert bad.value.details["at"] == "messages[1].reasoning_content"


# -- restore, refuse, fall back ----------------------------------------------------------------


async def test_a_dropped_reasoning_is_restored_from_the_message_that_issued_the_calls(
    runtime: Runtime, upstream: LoopbackUpstream
) -> None:
    asked = user('CALL[weather]: {"city": "Lima"}')
    first = await runtime.run(TurnRequest(messages=[asked], client_tools=[WEATHER]))
    (call,) = first.tool_calls
    assert first.reasoning.startswith(f"{REASONING_TEXT} plan ")
    # A framework's echo: the call, its arguments re-serialised, no reasoning.
    echoed = {"role": "assistant", "content": "", "tool_calls": [
        {"id": call.id, "name": call.name, "arguments": json.dumps(json.loads(call.arguments),
                                                                   indent=2)}]}
    history = [asked, echoed, {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    second = await runtime.run(TurnRequest(messages=history, client_tools=[WEATHER]))
    assert second.content == "after weather: sunny"
    assert deepseekeyes_json(second)["thinking"] == {"mode": "enabled", "reasoning_restored": 1}
    sent = [m for m in upstream.requests[-1]["messages"] if m.get("tool_calls")]
    assert sent[0]["reasoning_content"] == first.reasoning
    # The new session keeps the restored text, so its own later turns need no lookup.
    stored = runtime.sessions.messages(second.session_id)
    assert stored[1]["reasoning"] == first.reasoning


async def test_a_call_id_under_another_name_is_not_restored(
    runtime: Runtime, upstream: LoopbackUpstream
) -> None:
    first = await runtime.run(TurnRequest(messages=[user('CALL[weather]: {"city": "Lima"}')],
                                          client_tools=[WEATHER]))
    (call,) = first.tool_calls
    renamed = [user("x"), {"role": "assistant", "content": "", "tool_calls": [
        {"id": call.id, "name": "other_tool", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    before = upstream.chat_calls
    with pytest.raises(DeepSeekEyesError) as refused:
        await runtime.run(TurnRequest(messages=renamed))
    assert refused.value.code == "LLM_REASONING_MISSING"
    assert upstream.chat_calls == before


async def test_an_unknown_history_is_refused_and_nothing_is_logged(
    runtime: Runtime, upstream: LoopbackUpstream
) -> None:
    before = upstream.chat_calls
    with pytest.raises(DeepSeekEyesError) as refused:
        await runtime.run(TurnRequest(messages=MADE_UP, client_tools=[WEATHER]))
    error = refused.value
    assert error.code == "LLM_REASONING_MISSING"
    assert error.details["message_index"] == 1
    assert error.details["tool_call_ids"] == ["call_00_madeup"]
    assert "thinking_fallback" in error.message
    assert upstream.chat_calls == before
    assert runtime.sessions.sessions() == []  # the client's request is all there is


async def test_the_fallback_sends_it_with_thinking_off_and_says_so(
    upstream: LoopbackUpstream,
) -> None:
    rt = await own_runtime(upstream, thinking_fallback="disable")
    try:
        result = await rt.run(TurnRequest(messages=MADE_UP, client_tools=[WEATHER]))
        assert result.content == "after weather: rainy"
        assert result.reasoning == ""
        assert deepseekeyes_json(result)["thinking"] == {
            "mode": "disabled", "reasoning_restored": 0, "fallback": "disabled",
            "reason": "LLM_REASONING_MISSING", "message_index": 1}
        sent = upstream.requests[-1]
        assert sent["thinking"] == {"type": "disabled"}
        assert not any("reasoning_content" in m for m in sent["messages"])
    finally:
        await close(rt)


async def test_another_providers_model_is_never_refused(upstream: LoopbackUpstream) -> None:
    rt = await own_runtime(upstream, model="other-model")
    try:
        result = await rt.run(TurnRequest(messages=MADE_UP, client_tools=[WEATHER]))
        assert result.content == "after weather: rainy"
        assert "thinking" not in deepseekeyes_json(result)
    finally:
        await close(rt)


async def test_model_settings_set_thinking_and_effort_unless_the_request_does(
    upstream: LoopbackUpstream,
) -> None:
    rt = await own_runtime(upstream, model="deepseek-v4-pro", models=[
        {"id": "deepseek-v4-pro", "thinking": "disabled", "reasoning_effort": "max"}])
    try:
        quiet = await rt.run(TurnRequest(messages=[user("hi")]))
        sent = upstream.requests[-1]
        assert (sent["thinking"], sent["reasoning_effort"]) == ({"type": "disabled"}, "max")
        assert quiet.reasoning == ""
        # The model's settings do not make a made-up history acceptable to a thinking model,
        # but with thinking off it needs no reasoning at all.
        assert (await rt.run(TurnRequest(messages=MADE_UP))).content == "after weather: rainy"
        loud = await rt.run(TurnRequest(messages=[user("hi")], params={
            "thinking": {"type": "enabled"}, "reasoning_effort": "low"}))
        sent = upstream.requests[-1]
        assert (sent["thinking"], sent["reasoning_effort"]) == ({"type": "enabled"}, "low")
        assert loud.reasoning == REASONING_TEXT
        assert loud.usage.reasoning_tokens > 0
    finally:
        await close(rt)


async def test_a_streamed_turn_stores_the_exact_reasoning_it_streamed(
    runtime: Runtime, upstream: LoopbackUpstream
) -> None:
    stream = runtime.stream(TurnRequest(messages=[user('CALL[weather]: {"city": "Oslo"}')],
                                        client_tools=[WEATHER]))
    chunks = [chunk async for chunk in stream]
    streamed = "".join(c["choices"][0]["delta"].get("reasoning_content", "")
                       for c in chunks if c.get("choices"))
    assert stream.result is not None
    (stored,) = [m for m in runtime.sessions.messages(stream.result.session_id)
                 if m["role"] == "assistant"]
    assert stored["reasoning"] == streamed == stream.result.reasoning
    assert streamed.startswith(f"{REASONING_TEXT} plan ")


# -- the index of issued calls --------------------------------------------------------------------


def test_migration_6_indexes_the_calls_of_an_existing_database(tmp_path: Path) -> None:
    path = tmp_path / "eyes.db"
    conn = sqlite3.connect(path)
    for script in MIGRATIONS[:5]:
        conn.executescript(script)
    body = {"role": "assistant", "content": "", "reasoning": "old thoughts",
            "tool_calls": [{"id": "call_old", "name": "weather", "arguments": "{}"}],
            "internal_calls": [{"id": "call_inner", "name": "look", "arguments": "{}"}]}
    conn.execute("INSERT INTO sessions (id, created_at, source) VALUES ('s', 0, 'gateway')")
    conn.execute("INSERT INTO events (session_id, seq, ts, role, body_sha256, body) VALUES"
                 " ('s', 0, 0, 'assistant', '', ?)", (json.dumps(body),))
    conn.execute("INSERT INTO events (session_id, seq, ts, role, body_sha256, body) VALUES"
                 " ('s', 1, 0, 'user', '', '{\"role\": \"user\", \"content\": \"call_old\"}')")
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()
    db = Database(path)
    try:
        assert db.schema_version == len(MIGRATIONS)
        # A gateway session from before scopes, with no noted history: nobody's (legacy).
        found = SessionStore(db).issued_calls(["call_old", "call_inner", "call_none"],
                                              scope="legacy")
        assert set(found) == {"call_old", "call_inner"}
        assert SessionStore(db).issued_calls(["call_old"], scope="cli") == {}
        assert found["call_old"][0]["reasoning"] == "old thoughts"
    finally:
        db.close()
