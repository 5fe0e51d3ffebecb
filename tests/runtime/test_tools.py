from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from deepseek_eyes.runtime.tools import ToolOutcome, ToolRegistry, ToolSpec, TurnContext

pytestmark = pytest.mark.anyio


class Echo:
    spec = ToolSpec("echo", "echo", {"type": "object"})

    def __init__(self) -> None:
        self.calls = 0

    def available(self, context: TurnContext) -> bool:
        return True

    async def run(self, arguments: Mapping[str, Any], context: TurnContext) -> ToolOutcome:
        self.calls += 1
        return ToolOutcome(str(arguments.get("x")))


def context(max_calls: int = 2) -> TurnContext:
    return TurnContext("s", {"img-1": {"sha256": "abcdef0123456789" + "0" * 48}}, max_calls, 1)


async def test_calls_are_bounded_and_errors_are_results() -> None:
    registry = ToolRegistry()
    echo = Echo()
    registry.register(echo)
    ctx = context()
    generation = registry.generation
    assert (await registry.call("echo", '{"x": 1}', ctx, generation=generation)).content == "1"
    bad = await registry.call("echo", "{not json", ctx, generation=generation)
    assert bad.is_error
    over = await registry.call("echo", "{}", ctx, generation=generation)
    assert over.is_error
    assert over.details["code"] == "RUNTIME_TOOL_LIMIT"
    assert echo.calls == 1
    unknown = await registry.call("nope", "{}", context(), generation=generation)
    assert unknown.is_error


async def test_a_changed_generation_never_runs_a_stale_tool() -> None:
    registry = ToolRegistry()
    echo = Echo()
    registry.register(echo)
    generation = registry.generation
    registry.unregister("echo")
    registry.register(echo)
    outcome = await registry.call("echo", "{}", context(), generation=generation)
    assert outcome.is_error
    assert echo.calls == 0


def test_offered_respects_client_names_and_image_refs() -> None:
    registry = ToolRegistry()
    registry.register(Echo())
    assert [t.spec.name for t in registry.offered(context())] == ["echo"]
    assert registry.offered(context(), exclude={"echo"}) == []
    ctx = context()
    assert ctx.image("img-1") is not None
    assert ctx.image("sha256:abcdef01") is not None
    assert ctx.image("abc") is None  # too short a prefix
    assert ctx.image("img-9") is None
