from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from deepseek_eyes.errors import McpError
from deepseek_eyes.runtime.tools import ToolHub, ToolOutcome, ToolSpec, TurnContext

pytestmark = pytest.mark.anyio

OBJECT = {"type": "object"}


class Source:
    """A source of fixed tools that records what ran."""

    def __init__(self, name: str, prefix: str, specs: Sequence[ToolSpec]) -> None:
        self.name = name
        self.prefix = prefix
        self.specs = list(specs)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.closed = False

    def tools(self, context: TurnContext) -> list[ToolSpec]:
        return list(self.specs)

    async def call(
        self, spec: ToolSpec, arguments: Mapping[str, Any], context: TurnContext
    ) -> ToolOutcome:
        name = spec.name
        self.calls.append((name, dict(arguments)))
        if name.endswith("boom"):
            raise McpError("the server broke", code="MCP_CONNECTION_LOST")
        return ToolOutcome(str(arguments.get("x")))

    async def close(self) -> None:
        self.closed = True


def context(max_calls: int = 3) -> TurnContext:
    return TurnContext("s", {"img-1": {"sha256": "abcdef0123456789" + "0" * 48}}, max_calls, 1)


def echo_source() -> Source:
    return Source("echo", "echo", [ToolSpec("echo", "echo", OBJECT),
                                   ToolSpec("echo_boom", "fails", OBJECT, risk="write")])


async def test_calls_are_bounded_and_every_failure_is_a_result() -> None:
    source = echo_source()
    hub = ToolHub([source])
    ctx = context()
    offer = hub.offer(ctx)
    assert (await hub.call(offer, "echo", '{"x": 1}', ctx)).content == "1"
    bad = await hub.call(offer, "echo", "{not json", ctx)
    assert (bad.is_error, bad.details["code"]) == (True, "RUNTIME_TOOL_ARGUMENTS")
    broke = await hub.call(offer, "echo_boom", "{}", ctx)
    assert broke.is_error
    assert broke.details["code"] == "MCP_CONNECTION_LOST"
    assert "MCP_CONNECTION_LOST" in broke.content
    over = await hub.call(offer, "echo", "{}", ctx)
    assert over.details["code"] == "RUNTIME_TOOL_LIMIT"
    assert [name for name, _ in source.calls] == ["echo", "echo_boom"]


async def test_only_what_the_chain_offered_can_run() -> None:
    source = echo_source()
    hub = ToolHub([source], read_only=True)
    ctx = context()
    offer = hub.offer(ctx)
    assert [s.name for s in offer.specs] == ["echo"]  # the write tool is gated
    gated = await hub.call(offer, "echo_boom", "{}", ctx)
    assert gated.details["code"] == "RUNTIME_TOOL_UNKNOWN"
    assert source.calls == []
    # A client's tool of the same name wins: ours is neither offered nor run.
    offer = hub.offer(ctx, exclude=frozenset({"echo"}))
    assert offer.specs == ()
    assert (await hub.call(offer, "echo", "{}", ctx)).is_error
    assert source.calls == []


def test_prefix_keeps_each_source_in_its_namespace_and_first_wins() -> None:
    first = Source("a", "a_", [ToolSpec("a_one", "", OBJECT), ToolSpec("b_two", "", OBJECT)])
    second = Source("b", "b_", [ToolSpec("b_two", "", OBJECT), ToolSpec("a_one", "", OBJECT)])
    offer = ToolHub([first, second]).offer(context())
    assert [(s.name, offer.routes[s.name].name) for s in offer.specs] == [
        ("a_one", "a"), ("b_two", "b")]


def test_budget_counts_tools_and_schema_tokens_in_source_order() -> None:
    specs = [ToolSpec(f"t_{i}", "x" * 400, OBJECT) for i in range(10)]
    one = specs[0].schema_tokens
    hub = ToolHub([Source("t", "t_", specs)], max_tools=4)
    assert [s.name for s in hub.offer(context()).specs] == ["t_0", "t_1", "t_2", "t_3"]
    hub = ToolHub([Source("t", "t_", specs)], max_schema_tokens=one * 3 + 1)
    offer = hub.offer(context())
    assert len(offer.specs) == 3
    assert offer.schema_tokens("t") == one * 3


async def test_events_and_close() -> None:
    source = echo_source()
    hub = ToolHub([source])
    events: list[dict[str, Any]] = []
    ctx = context()
    ctx.notify = events.append
    await hub.call(hub.offer(ctx), "echo", '{"x": 2}', ctx)
    assert [e["type"] for e in events] == ["tool.started", "tool.finished"]
    assert events[1]["is_error"] is False
    await hub.close()
    assert source.closed


def test_image_refs_resolve_and_new_images_get_the_next_id() -> None:
    ctx = context()
    assert ctx.image("img-1") is not None
    assert ctx.image("sha256:abcdef01") is not None
    assert ctx.image("abc") is None  # too short a prefix
    assert ctx.image("img-9") is None
    assert ctx.add_image({"sha256": "ff" * 32}) == "tool-img-1"
    assert ctx.add_image({"sha256": "ff" * 32}) == "tool-img-1"  # the same image, same id
