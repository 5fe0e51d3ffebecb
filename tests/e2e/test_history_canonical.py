"""Equal histories compare equal (issue #34 item 6): a client that parses tool-call
arguments and dumps them again (pydantic-ai streamed, LangChain, a hand loop) sends other
bytes for the same conversation; it must stay one session, not split in two.

Real parts: the gateway app on loopback (in this process, so the store can be read), the
loopback DeepSeek (which requires the exact reasoning of every tool-call message back), and
pydantic-ai and the official ``openai`` client as the clients.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from deepseek_eyes.runtime.turn.prepare import prefix_chain
from helpers import require_module
from inprocess_gateway import InProcessGateway, serve_in_process
from runtime.upstream import LoopbackUpstream

MODEL = "deepseek-v4-pro"
ISSUED = '{"days": 2,  "city": "Oslo"}'  # as the model wrote them: spaces, its key order
WEATHER = {"type": "function", "function": {
    "name": "weather", "description": "the weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}}}}


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


@pytest.fixture
def served(upstream: LoopbackUpstream) -> Iterator[InProcessGateway]:
    with serve_in_process({"base_url": upstream.base_url, "model": MODEL},
                          gateway={"rate_limit_per_minute": 1_000_000}) as gateway:
        yield gateway


def test_pydantic_ai_streamed_keeps_one_session(served: InProcessGateway) -> None:
    require_module("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    sent: list[dict[str, Any]] = []

    async def record(request: httpx.Request) -> None:
        sent.append(json.loads(request.content))

    async def converse() -> None:
        async with httpx.AsyncClient(event_hooks={"request": [record]}, timeout=60) as http:
            client = openai.AsyncOpenAI(base_url=served.url + "/v1", api_key="unused",
                                        http_client=http, max_retries=0)
            agent = Agent(OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client)))

            @agent.tool_plain
            def weather(city: str, days: int) -> str:
                return f"sunny in {city} for {days} days"

            async with agent.run_stream(f"CALL[weather]: {ISSUED}") as first:
                await first.get_output()
            async with agent.run_stream("ANSWER: thanks",
                                        message_history=first.all_messages()) as second:
                assert await second.get_output() == "thanks"

    asyncio.run(converse())
    echoed = [c["function"]["arguments"] for body in sent for m in body["messages"]
              for c in m.get("tool_calls") or ()]
    # pydantic-ai sent the arguments back re-serialized (what split the session before).
    assert echoed
    assert all(a != ISSUED and json.loads(a) == json.loads(ISSUED) for a in echoed)
    (session,) = served.sessions()
    assert session["turns"] == 3
    assert session["forked_from"] is None


def test_a_hand_loop_that_reserializes_arguments_keeps_one_session(
    served: InProcessGateway,
) -> None:
    spellings = [
        lambda v: json.dumps(v, separators=(",", ":")),  # compact
        lambda v: json.dumps(dict(reversed(list(v.items()))), indent=2),  # other order
        lambda v: json.dumps(v, sort_keys=True, ensure_ascii=True),  # sorted, escaped
    ]
    cities = ["Oslo", "Zürich", "Kraków"]
    with openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0) as client:
        history: list[Any] = []
        sessions = []
        for city, spell in zip(cities, spellings, strict=True):
            history.append({"role": "user", "content":
                            f'CALL[weather]: {{"days": 2,  "city": "{city}"}}'})
            raw = client.chat.completions.with_raw_response.create(
                model=MODEL, messages=history, tools=[WEATHER])  # type: ignore[list-item]
            sessions.append(raw.headers["x-deepseekeyes-session"])
            message = raw.parse().choices[0].message
            (call,) = message.tool_calls or []
            assert call.type == "function"
            spelled = spell(json.loads(call.function.arguments))
            assert spelled != call.function.arguments
            # Echoed without its reasoning (the gateway restores it) and re-serialized.
            history.append({"role": "assistant", "content": None, "tool_calls": [{
                "id": call.id, "type": "function",
                "function": {"name": "weather", "arguments": spelled}}]})
            history.append({"role": "tool", "tool_call_id": call.id,
                            "content": json.dumps({"sky": "clear", "city": city})})
            raw = client.chat.completions.with_raw_response.create(
                model=MODEL, messages=history, tools=[WEATHER])  # type: ignore[list-item]
            sessions.append(raw.headers["x-deepseekeyes-session"])
            history.append({"role": "assistant",
                            "content": raw.parse().choices[0].message.content})
            # The tool result re-serialized too, from the next request on.
            history[-2]["content"] = json.dumps({"city": city, "sky": "clear"}, indent=1)
    assert len(set(sessions)) == 1, sessions
    (session,) = served.sessions()
    assert session["turns"] == 6
    assert session["forked_from"] is None


def test_histories_noted_before_arguments_were_canonical_are_still_found(
    served: InProcessGateway,
) -> None:
    """A data directory from before (format 1 rows: arguments hashed as sent) keeps its
    conversations: a client continuing one is found by the older chain, and the row noted
    after its answer is in the current format."""
    store = served.runtime.sessions
    db = served.runtime.home.db
    with openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0) as client:
        history: list[Any] = [{"role": "user", "content": f"CALL[weather]: {ISSUED}"}]
        first = client.chat.completions.create(model=MODEL, messages=history,
                                               tools=[WEATHER])  # type: ignore[list-item]
        (call,) = first.choices[0].message.tool_calls or []
        assert call.type == "function"
        assert call.function.arguments == ISSUED
        session = first.model_extra["deepseekeyes"]["session_id"]  # type: ignore[index]
        # As an earlier version noted it: the chain over the arguments as sent.
        (scope,) = {r["scope"] for r in db.query("SELECT scope FROM session_prefixes")}
        older = prefix_chain(store.messages(session), legacy=True)
        assert older[-1] != prefix_chain(store.messages(session))[-1]
        with db.transaction() as conn:
            conn.execute("DELETE FROM session_prefixes")
        store.remember_prefix(scope, older[-1], session, len(older))
        history.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function",
             "function": {"name": "weather", "arguments": ISSUED}}]})
        history.append({"role": "tool", "tool_call_id": call.id, "content": "sunny"})
        again = client.chat.completions.create(model=MODEL, messages=history,
                                               tools=[WEATHER])  # type: ignore[list-item]
    assert again.model_extra["deepseekeyes"]["session_id"] == session  # type: ignore[index]
    noted = {r["prefix_sha256"] for r in db.query("SELECT prefix_sha256 FROM session_prefixes")}
    assert prefix_chain(store.messages(session))[-1] in noted
