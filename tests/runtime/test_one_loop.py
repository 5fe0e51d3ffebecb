"""One loop, honest budgets: the plain and the streamed turn make the same upstream requests,
the call bound makes exactly N calls, every request fits the history budget (the turn's
own tool rounds included), MCP offers keep the catalog generation they were made under,
and the counters count what really happened."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from deepseek_eyes.errors import ImageError
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.runtime.budget import message_tokens
from deepseek_eyes.runtime.mcp_tools import McpToolSource
from deepseek_eyes.runtime.messages import image_part
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.tools import ToolHub, TurnContext
from deepseek_eyes.runtime.turn import TurnRequest
from mcp_host.test_mcp_lifecycle import Peer, config, host_of, tool, until
from runtime.test_agent import RECEIPT, close, offered, open_runtime, settings_for, user
from runtime.upstream import VISION_MODEL, LoopbackUpstream

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


def normalized(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A request without what differs by design between two runs: the stream flags, the
    random tool-call ids and the random plan in the reasoning that came with them."""
    out = {k: v for k, v in payload.items() if k not in ("stream", "stream_options")}
    messages = []
    for message in payload["messages"]:
        message = dict(message)
        if "reasoning_content" in message:
            message["reasoning_content"] = "<reasoning>"
        if "tool_call_id" in message:
            message["tool_call_id"] = "<id>"
        if message.get("tool_calls"):
            message["tool_calls"] = [{**c, "id": "<id>"} for c in message["tool_calls"]]
        messages.append(message)
    out["messages"] = messages
    return out


async def test_plain_and_streamed_turns_make_the_same_upstream_requests(
    upstream: LoopbackUpstream,
) -> None:
    runtime = await open_runtime(settings_for(upstream))
    try:
        meta = await runtime.bridge.admit(RECEIPT)
        conversation = [user("LOOK[img-1]: What is the TOTAL?", image_part(meta))]
        upstream.reset()
        plain = await runtime.run(TurnRequest(messages=list(conversation)))
        sent_plain = [normalized(p) for p in upstream.requests]
        upstream.reset()
        stream = runtime.stream(TurnRequest(messages=list(conversation)))
        chunks = [chunk async for chunk in stream]
        sent_streamed = [normalized(p) for p in upstream.requests]
        assert stream.result is not None
        assert len(sent_plain) == 2  # the look call, then the answer
        assert sent_plain == sent_streamed
        assert stream.result.content == plain.content
        assert "".join(
            c["choices"][0]["delta"].get("content", "") for c in chunks if c.get("choices")
        ) == plain.content
    finally:
        await close(runtime)


@pytest.mark.parametrize("bound", [1, 2, 3, 4])
async def test_the_call_bound_makes_exactly_n_upstream_calls(
    upstream: LoopbackUpstream, bound: int
) -> None:
    runtime = await open_runtime(settings_for(
        upstream, runtime={"max_model_calls_per_turn": bound, "max_rereads_per_turn": 8}))
    try:
        meta = await runtime.bridge.admit(RECEIPT)
        upstream.reset()
        # REPEAT: a model that calls look again every time it is offered.
        result = await runtime.run(TurnRequest(messages=[
            user("REPEAT[look]: {\"image\": \"img-1\", \"question\": \"the total?\"}",
                 image_part(meta))]))
        requests = upstream.requests
        assert len(requests) == bound == result.model_calls
        assert all(offered(r) == ["look"] for r in requests[:-1])
        assert "tools" not in requests[-1]  # the N-th call can only answer
        (turn,) = runtime.sessions.turns(result.session_id)
        assert turn.details["forced_final"] is True
    finally:
        await close(runtime)


def _pairs_intact(messages: list[dict[str, Any]]) -> bool:
    """Every tool result follows the assistant message that called it."""
    open_calls: set[str] = set()
    for message in messages:
        if message.get("role") == "assistant":
            open_calls = {c["id"] for c in message.get("tool_calls") or ()}
        elif message.get("role") == "tool":
            if message.get("tool_call_id") not in open_calls:
                return False
        else:
            open_calls = set()
    return True


async def test_a_long_text_history_is_fitted_to_the_budget(upstream: LoopbackUpstream) -> None:
    runtime = await open_runtime(settings_for(upstream, runtime={"history_budget_tokens": 1000}))
    try:
        history: list[dict[str, Any]] = []
        for number in range(40):
            history.append({"role": "user", "content": f"question {number} " + "x" * 400})
            history.append({"role": "assistant", "content": f"answer {number} " + "y" * 400})
        history.append({"role": "user", "content": "the newest task"})
        upstream.reset()
        result = await runtime.run(TurnRequest(messages=history))
        (sent,) = upstream.requests
        assert sum(message_tokens(m) for m in sent["messages"]) <= 1000
        assert sent["messages"][-1]["content"] == "the newest task"
        assert "left out to fit the history budget" in sent["messages"][0]["content"]
        (turn,) = runtime.sessions.turns(result.session_id)
        assert turn.details["omitted_messages"] > 60
    finally:
        await close(runtime)


async def test_the_turns_own_tool_rounds_are_refitted(upstream: LoopbackUpstream) -> None:
    runtime = await open_runtime(settings_for(upstream, runtime={
        "history_budget_tokens": 1000, "max_model_calls_per_turn": 8,
        "max_rereads_per_turn": 8, "max_tool_calls_per_turn": 16}))
    try:
        meta = await runtime.bridge.admit(RECEIPT)
        upstream.reset()
        await runtime.run(TurnRequest(messages=[
            user("REPEAT[look]: {\"image\": \"img-1\", \"question\": \"the total?\"}",
                 image_part(meta))]))
        requests = upstream.requests
        assert len(requests) == 8
        rounds = [sum(1 for m in r["messages"] if m["role"] == "tool") for r in requests]
        # The tail grows, then is cut: older exchanges leave, the newest stays.
        assert max(rounds) < 7, rounds
        for sent in requests:
            messages = sent["messages"]
            assert _pairs_intact(messages)
            users = [m for m in messages if m["role"] == "user"]
            assert users
            assert "REPEAT[look]" in users[-1]["content"]
            if sent is not requests[0]:
                assert messages[-1]["role"] == "tool"  # the newest result is there
        assert any("left out to fit the history budget" in str(m.get("content"))
                   for m in requests[-1]["messages"])
    finally:
        await close(runtime)


async def test_native_turns_count_only_when_pixels_are_sent(upstream: LoopbackUpstream) -> None:
    runtime = await open_runtime(settings_for(upstream))
    try:
        meta = await runtime.bridge.admit(RECEIPT)
        first = await runtime.run(TurnRequest(model=VISION_MODEL, messages=[
            user("What is this?", image_part(meta))]))
        assert first.path == "native"
        counted = runtime.home.usage.summary()["estimated"]["native_visual_turns"]["events"]
        assert counted == 1
        # The next instruction has no image: the earlier one is only a reference now.
        later = await runtime.run(TurnRequest(
            model=VISION_MODEL, session_id=first.session_id, messages=[
                user("What is this?", image_part(meta)),
                {"role": "assistant", "content": first.content},
                {"role": "user", "content": "thanks, and what day is it?"}]))
        assert later.path == "native"
        again = runtime.home.usage.summary()["estimated"]["native_visual_turns"]["events"]
        assert again == 1
    finally:
        await close(runtime)


async def test_an_intake_refusal_carries_its_attempts(upstream: LoopbackUpstream) -> None:
    runtime: Runtime = await open_runtime(settings_for(upstream))
    try:
        with pytest.raises(ImageError) as refused:
            await runtime.bridge.see(RECEIPT[: len(RECEIPT) // 2])
        assert refused.value.code == "IMAGE_TRUNCATED"
        attempts = refused.value.details["attempts"]
        assert [(a["phase"], a["outcome"], a["code"]) for a in attempts][-1] == (
            "intake", "refused", "IMAGE_TRUNCATED")
        assert refused.value.details["operation_id"]
    finally:
        await close(runtime)


# -- the MCP catalog race ----------------------------------------------------------------


async def test_concurrent_turns_keep_the_generation_they_were_offered(tmp_path: Path) -> None:
    """Many turns offer and call while the server's list changes. Each call is judged by
    the generation its own offer was made under: one made before a change is refused
    (MCP_GENERATION_STALE) and never reaches the server, whatever other turns were offered
    meanwhile; one made after runs."""
    peer = Peer("t1")
    host: McpHost = host_of(config({"id": "p", "protocol": "legacy"}), {"p": peer}, tmp_path)
    await host.manager.start(wait=10)
    try:
        state = host.manager.servers["p"]
        source = McpToolSource(host, bridge=None)  # type: ignore[arg-type]  # no images here
        hub = ToolHub([source])
        outcomes: list[tuple[int, int, bool, str | None]] = []
        rng = random.Random(7)
        changing = anyio.Lock()

        async def turn(number: int) -> None:
            context = TurnContext(f"s{number}", {}, max_tool_calls=4, max_rereads=0)
            offer = hub.offer(context)
            (spec,) = [s for s in offer.specs if s.name == "mcp__p__t1"]
            await anyio.sleep(rng.random() * 0.2)
            # The generation a call is judged by is the one live while it runs: the change
            # below holds the same lock until the new list is in, so no call straddles it.
            async with changing:
                live = state.generation
                result = await hub.call(offer, "mcp__p__t1", "{}", context)
            outcomes.append((spec.generation or -1, live, result.is_error,
                             result.details.get("code")))

        async def change() -> None:
            await anyio.sleep(0.08)
            async with changing:
                old = state.generation
                peer.tools.append(tool("t2"))
                await peer.announce("legacy")
                await until(lambda: state.generation != old)

        calls_before = peer.calls
        await asyncio.gather(change(), *(turn(n) for n in range(40)))
        stale = [o for o in outcomes if o[0] != o[1]]
        fresh = [o for o in outcomes if o[0] == o[1]]
        assert stale
        assert fresh
        assert all(o[2] and o[3] == "MCP_GENERATION_STALE" for o in stale), stale
        assert not any(o[2] for o in fresh), fresh
        assert peer.calls - calls_before == len(fresh)
    finally:
        await host.manager.stop()
