"""The runtime's tool registry: what the final model may call, and the per-turn guard.

One registry per runtime holds every tool the runtime itself executes (today ``look``;
next MCP, terminal and computer-use tools). Tools are registered and withdrawn as a whole
generation can change, and each call checks the generation it was offered under, so a tool
withdrawn mid-turn never runs. A tool decides whether it is offered in a turn
(:meth:`Tool.available`) — ``look`` only for sessions that hold images — so a pure-text
turn carries no tool schema it cannot use.

Tool failures are results, not exceptions: the model reads what went wrong and can answer
without it; only the turn's own limits stop the loop.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Tool", "ToolOutcome", "ToolRegistry", "ToolSpec", "TurnContext"]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: Mapping[str, Any]

    def openai(self) -> dict[str, Any]:
        """The tool as an OpenAI ``tools`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    is_error: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)  # audit-safe: ids, hashes, codes


@dataclass
class TurnContext:
    """What one turn's tools can see and how much they have used."""

    session_id: str
    images: dict[str, dict[str, Any]]  # image id ("img-1") -> image part + "route"
    max_tool_calls: int
    max_rereads: int
    tool_calls: int = 0
    rereads: int = 0
    calls: list[dict[str, Any]] = field(default_factory=list)  # audit rows of this turn

    def image(self, ref: str) -> tuple[str, dict[str, Any]] | None:
        """Resolve ``img-N``, ``sha256:<prefix>`` or a bare hex prefix (≥ 8 chars)."""
        if ref in self.images:
            return ref, self.images[ref]
        prefix = ref.removeprefix("sha256:").lower()
        if len(prefix) >= 8:
            matches = [
                (key, img) for key, img in self.images.items() if img["sha256"].startswith(prefix)
            ]
            if len(matches) == 1:
                return matches[0]
        return None


@runtime_checkable
class Tool(Protocol):
    @property
    def spec(self) -> ToolSpec: ...

    def available(self, context: TurnContext) -> bool: ...

    async def run(self, arguments: Mapping[str, Any], context: TurnContext) -> ToolOutcome: ...


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self.generation = 0

    def register(self, tool: Tool) -> None:
        self._tools[tool.spec.name] = tool
        self.generation += 1

    def unregister(self, name: str) -> None:
        if self._tools.pop(name, None) is not None:
            self.generation += 1

    def names(self) -> list[str]:
        return sorted(self._tools)

    def offered(self, context: TurnContext, *, exclude: set[str] | None = None) -> list[Tool]:
        """The tools offered in this turn (a client's own tool of the same name wins)."""
        return [
            tool for name, tool in self._tools.items()
            if tool.available(context) and name not in (exclude or set())
        ]

    async def call(
        self, name: str, arguments_json: str, context: TurnContext, *, generation: int
    ) -> ToolOutcome:
        """Run one call under the turn's limits; every failure becomes an error outcome."""
        context.tool_calls += 1
        if generation != self.generation:
            return ToolOutcome("the tool set changed during this turn; answer without it", True)
        if context.tool_calls > context.max_tool_calls:
            return ToolOutcome(
                f"tool call limit of {context.max_tool_calls} for this turn reached; "
                "answer with what you have", True, {"code": "RUNTIME_TOOL_LIMIT"},
            )
        tool = self._tools.get(name)
        if tool is None or not tool.available(context):
            return ToolOutcome(f"no tool named {name!r} is available", True)
        try:
            arguments = json.loads(arguments_json or "{}")
        except ValueError:
            return ToolOutcome("the arguments are not valid JSON", True)
        if not isinstance(arguments, dict):
            return ToolOutcome("the arguments must be a JSON object", True)
        return await tool.run(arguments, context)
