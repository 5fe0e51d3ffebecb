"""DeepSeek's thinking mode and a busy upstream, end to end: a real ``serve`` process and
the command line against the loopback DeepSeek, which enforces the thinking-mode contract
as DeepSeek documents it (a tool-call assistant message without its ``reasoning_content``
is a 400, and, as the loopback's own oracle, one with a different reasoning is too).

Tool loops of two kinds, each across two user turns: the runtime's own (the terminal's
``cat``, which runs without approval) and a client's own (a ``weather`` tool the client
runs), from the official ``openai`` client, plain and streamed, and from LangChain's
``ChatOpenAI``, which drops ``reasoning_content`` when it sends a message back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers import GATEWAY_KEY, require_module, serve_gateway
from runtime.upstream import REASONING_TEXT, LoopbackUpstream

openai = require_module("openai")

ROOT = Path(__file__).resolve().parents[2]
MODEL = "deepseek-v4-pro"
SESSION_HEADER = "X-DeepSeekEyes-Session"
WEATHER = {"type": "function", "function": {
    "name": "weather", "description": "the weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


@dataclass
class Setup:
    base: str
    config: Path
    env: dict[str, str]
    work: Path
    upstream: LoopbackUpstream

    def client(self, **headers: str) -> Any:
        return openai.OpenAI(base_url=self.base, api_key=GATEWAY_KEY, max_retries=0, timeout=60,
                             default_headers=headers or None)

    def ask(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603 - our own CLI, argv list
            [sys.executable, "-m", "deepseek_eyes", "--config", str(self.config), *args],
            env=self.env, capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
        )


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("thinking")
    work = root / "work"
    work.mkdir()
    (work / "note.txt").write_text("canary-8812\n", encoding="utf-8")
    (work / "other.txt").write_text("canary-5540\n", encoding="utf-8")
    with LoopbackUpstream() as upstream:
        config = root / "eyes.toml"
        config.write_text(
            f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\nmodel = "{MODEL}"\n'
            "timeout = 20\n\n"
            '[runtime]\ntool_sources = ["terminal"]\n\n'
            f'[terminal]\nworkspaces = ["{work}"]\n',
            encoding="utf-8",
        )
        env = {**os.environ, "DEEPSEEK_EYES_HOME": str(root / "data")}
        with serve_gateway(config, env) as gateway:
            yield Setup(gateway.base, config, env, work, upstream)


@pytest.fixture(autouse=True)
def _idle_upstream(setup: Setup) -> Iterator[None]:
    yield
    setup.upstream.busy(0)


def cat(setup: Setup, name: str) -> str:
    return "CALL[terminal_run]: " + json.dumps({"argv": ["cat", name], "cwd": str(setup.work)})


def tool_call_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "assistant" and m.get("tool_calls")]


def assert_reasoning_went_back(request: dict[str, Any], exchanges: int) -> None:
    """The request's tool-call messages all carry the reasoning issued with them (the
    loopback refuses any other, so reaching here proves exactness; this checks shape)."""
    calls = tool_call_messages(request)
    assert len(calls) >= exchanges
    for message in calls:
        assert message["reasoning_content"].startswith(f"{REASONING_TEXT} plan ")


# -- the runtime's own tool loop --------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_the_runtimes_tool_loop_through_the_gateway_across_two_turns(
    setup: Setup, stream: bool
) -> None:
    session = f"thinking-runtime-{stream}"
    api = setup.client(**{SESSION_HEADER: session})
    try:
        history: list[dict[str, Any]] = []

        def turn(text: str) -> str:
            history.append({"role": "user", "content": text})
            if stream:
                chunks = list(api.chat.completions.create(
                    model=MODEL, messages=history, stream=True))
                answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
                thought = "".join(
                    (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                    for c in chunks if c.choices)
            else:
                reply = api.chat.completions.create(model=MODEL, messages=history)
                answer = reply.choices[0].message.content or ""
                thought = (reply.choices[0].message.model_extra or {})["reasoning_content"]
                assert reply.usage.completion_tokens_details.reasoning_tokens > 0
            assert thought.startswith(REASONING_TEXT)  # the client sees the reasoning
            history.append({"role": "assistant", "content": answer})  # and drops it, as most do
            return answer

        assert turn("hello") == "echo: hello"
        assert "canary-8812" in turn(cat(setup, "note.txt"))
        assert "canary-5540" in turn(cat(setup, "other.txt"))
        last = setup.upstream.requests[-1]
        # Both earlier tool exchanges went back with their reasoning, rendered from the log.
        assert_reasoning_went_back(last, exchanges=2)
        # The greeting's exchange called no tool: its reasoning is not resent.
        greeting = next(m for m in last["messages"]
                        if m["role"] == "assistant" and m.get("content") == "echo: hello")
        assert "reasoning_content" not in greeting
    finally:
        api.close()


def test_ask_continues_a_session_whose_turns_called_tools(setup: Setup) -> None:
    first = setup.ask("ask", "--json", cat(setup, "note.txt"))
    assert first.returncode == 0, first.stdout + first.stderr
    answer = json.loads(first.stdout)
    assert "canary-8812" in answer["answer"]
    second = setup.ask("ask", "--json", "--session", answer["session_id"],
                       cat(setup, "other.txt"))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "canary-5540" in json.loads(second.stdout)["answer"]
    assert_reasoning_went_back(setup.upstream.requests[-1], exchanges=2)


# -- a client's own tool loop ------------------------------------------------------------------


def weather_call(city: str) -> str:
    return "CALL[weather]: " + json.dumps({"city": city})


@pytest.mark.parametrize("stream", [False, True])
def test_an_openai_client_tool_loop_that_drops_reasoning_works(
    setup: Setup, stream: bool
) -> None:
    """No session header: every request is its own session, and the client echoes each
    assistant message without reasoning_content; the gateway puts it back by call id."""
    api = setup.client()
    try:
        history: list[dict[str, Any]] = []

        def call_model() -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
            if not stream:
                reply = api.chat.completions.create(model=MODEL, messages=history,
                                                    tools=[WEATHER])
                message = reply.choices[0].message
                calls = [c.model_dump() for c in message.tool_calls or ()]
                return message.content or "", calls, (reply.model_extra or {})["deepseekeyes"]
            text, calls, ours = "", {}, {}
            for chunk in api.chat.completions.create(
                    model=MODEL, messages=history, tools=[WEATHER], stream=True):
                ours = (chunk.model_extra or {}).get("deepseekeyes") or ours
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                text += delta.content or ""
                for piece in delta.tool_calls or ():
                    slot = calls.setdefault(piece.index, {
                        "id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                    slot["id"] = piece.id or slot["id"]
                    if piece.function is not None:
                        slot["function"]["name"] += piece.function.name or ""
                        slot["function"]["arguments"] += piece.function.arguments or ""
            return text, [calls[i] for i in sorted(calls)], ours

        for city, turn in (("Lima", 1), ("Oslo", 2)):
            history.append({"role": "user", "content": weather_call(city)})
            _, calls, _ = call_model()
            assert [c["function"]["name"] for c in calls] == ["weather"]
            # What frameworks send back: content and tool_calls, no reasoning_content.
            history.append({"role": "assistant", "content": None, "tool_calls": calls})
            history.append({"role": "tool", "tool_call_id": calls[0]["id"],
                            "content": f"sunny in {city}"})
            text, more, ours = call_model()
            assert (text, more) == (f"after weather: sunny in {city}", [])
            assert ours["thinking"] == {"mode": "enabled", "reasoning_restored": turn}
            history.append({"role": "assistant", "content": text})
        assert_reasoning_went_back(setup.upstream.requests[-1], exchanges=2)
    finally:
        api.close()


def test_langchain_chat_openai_tool_loop_works_in_thinking_mode(setup: Setup) -> None:
    require_module("langchain_openai")
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_openai import ChatOpenAI
    from langchain_openai.chat_models.base import _convert_message_to_dict

    model = ChatOpenAI(model=MODEL, base_url=setup.base, api_key=GATEWAY_KEY,  # type: ignore[arg-type]
                       max_retries=0, timeout=60).bind_tools([WEATHER])
    history: list[Any] = []
    for city in ("Lima", "Oslo"):
        history.append(HumanMessage(weather_call(city)))
        called = model.invoke(history)
        assert [c["name"] for c in called.tool_calls] == ["weather"]
        # LangChain drops the reasoning when it sends the message back: the case restored.
        assert "reasoning_content" not in _convert_message_to_dict(called)
        history += [called, ToolMessage(f"sunny in {city}",
                                        tool_call_id=called.tool_calls[0]["id"])]
        answer = model.invoke(history)
        assert answer.content == f"after weather: sunny in {city}"
        history.append(answer)
    assert_reasoning_went_back(setup.upstream.requests[-1], exchanges=2)


def test_a_history_we_never_issued_is_refused_before_any_upstream_call(setup: Setup) -> None:
    made_up = [
        {"role": "user", "content": weather_call("Rome")},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_00_madeup", "type": "function",
             "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_00_madeup", "content": "rainy"},
    ]
    api = setup.client()
    try:
        before = setup.upstream.chat_calls
        with pytest.raises(openai.BadRequestError) as refused:
            api.chat.completions.create(model=MODEL, messages=made_up, tools=[WEATHER])
        error = refused.value.body
        assert error["code"] == "LLM_REASONING_MISSING"
        assert error["param"] == "messages[1].reasoning_content"
        assert "messages[1]" in error["message"]
        assert "reasoning_content" in error["message"]
        assert setup.upstream.chat_calls == before  # nothing reached the model
        # Asking for thinking off, as DeepSeek documents it (the SDK's extra_body), works.
        reply = api.chat.completions.create(
            model=MODEL, messages=made_up, tools=[WEATHER],
            extra_body={"thinking": {"type": "disabled"}})
        assert reply.choices[0].message.content == "after weather: rainy"
        assert setup.upstream.requests[-1]["thinking"] == {"type": "disabled"}
        assert "reasoning_content" not in (reply.choices[0].message.model_extra or {})
    finally:
        api.close()


# -- a busy upstream ---------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_the_gateway_retries_a_busy_upstream(setup: Setup, stream: bool) -> None:
    api = setup.client()
    try:
        setup.upstream.busy(1, retry_after=1)
        before = setup.upstream.chat_calls
        if stream:
            chunks = list(api.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True))
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        else:
            text = api.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}],
            ).choices[0].message.content
        assert text == "echo: hi"
        assert setup.upstream.chat_calls == before + 2
        setup.upstream.busy(10, retry_after=0)
        before = setup.upstream.chat_calls
        with pytest.raises(openai.APIStatusError) as failed:
            api.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=stream)
        assert failed.value.status_code == 502
        assert failed.value.body["code"] == "LLM_HTTP_ERROR"
        assert "busy" in failed.value.body["message"]
        assert setup.upstream.chat_calls == before + 3  # the first try and llm.max_retries
    finally:
        api.close()


def test_ask_retries_a_busy_upstream_and_names_the_bound(setup: Setup) -> None:
    setup.upstream.busy(1, retry_after=1)
    done = setup.ask("ask", "--json", "hello busy")
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert answer["answer"] == "echo: hello busy"
    setup.upstream.busy(10, retry_after=0)
    failed = setup.ask("ask", "--json", "hello again")
    assert failed.returncode == 1
    error = json.loads(failed.stdout)["error"]
    assert error["code"] == "LLM_HTTP_ERROR"
    assert error["details"]["status"] == 503
    assert [a["status"] for a in error["details"]["attempts"]] == [503, 503, 503]
    setup.upstream.busy(0)
    # Every attempt is a chained llm.request row, written ahead before it was sent, then
    # completed: the retried one failed, the second billed.
    shown = setup.ask("audit", "show", answer["turn_id"], "--json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    view = json.loads(shown.stdout)
    requests = [r["record"]["details"] for r in view["requests"]]
    assert [(r.get("outcome", "ok"), r.get("attempt")) for r in requests] == [
        ("pending", 1), ("pending", 2), ("failed", 1), ("ok", 2)]
    assert requests[2]["status"] == 503
    assert len({r["request_sha256"] for r in requests}) == 1
    assert view["outcome_unknown"] == []
    assert all(r["chain"]["intact"] for r in json.loads(shown.stdout)["requests"])
