"""The client's tool-call deltas of a streamed model call, relayed as they arrive."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypedDict

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.llm.client import MAX_TOOL_CALLS, ToolCall

__all__ = ["ToolCallJson", "ToolRelay", "tool_call_json"]


class FunctionJson(TypedDict):
    name: str
    arguments: str


class ToolCallJson(TypedDict):
    """A tool call in the OpenAI shape (upstream deltas are foreign JSON, this is ours)."""

    id: str
    type: str
    function: FunctionJson


def tool_call_json(calls: Sequence[ToolCall]) -> list[ToolCallJson]:
    """Calls in the OpenAI shape."""
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in calls
    ]


class ToolRelay:
    """Tool-call deltas of one model call, forwarded to the client as they arrive.

    A call is judged by its name, which arrives in its opening delta: the runtime's own
    tools (``look``) are held back, the client's are forwarded at once and renumbered from
    0, so the client sees only its own calls, with dense indices. Deltas that come before
    the name are held until it does. A server that sends no ``index`` cannot be relayed
    piece by piece; its calls are sent whole at the end (:meth:`unsent`).
    """

    def __init__(self, internal: frozenset[str], *, forward: bool = True) -> None:
        self._internal = internal
        self._forward = forward  # False: the call had no tools; nothing is relayed
        self._routes: dict[int, int | None] = {}  # upstream index -> client index, None: ours
        self._waiting: dict[int, list[JsonObject]] = {}  # deltas before the name
        self._sent_ids: set[str] = set()
        self.forwarded = 0  # client indices used

    def take(self, calls: Any) -> list[JsonObject]:
        """The client's deltas among ``calls`` (one upstream chunk's ``tool_calls``)."""
        out: list[JsonObject] = []
        if not isinstance(calls, list) or not self._forward:
            return out
        for call in calls:  # bounded by the stream's byte limit
            if not isinstance(call, dict):
                continue
            index = call.get("index")
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                continue  # sent whole at the end
            if index in self._routes:
                target = self._routes[index]
                if target is not None:
                    out.append(self._delta(call, target))
                continue
            function = call.get("function")
            name = function.get("name") if isinstance(function, dict) else None
            if not isinstance(name, str) or not name:
                if index in self._waiting or len(self._waiting) < MAX_TOOL_CALLS:
                    self._waiting.setdefault(index, []).append(call)
                continue
            early = self._waiting.pop(index, [])
            if name in self._internal:
                self._routes[index] = None
                continue
            target = self._routes[index] = self.forwarded
            self.forwarded += 1
            out.extend(self._delta(piece, target) for piece in [*early, call])
        return out

    def _delta(self, call: JsonObject, target: int) -> JsonObject:
        delta: JsonObject = {"index": target}
        call_id = call.get("id")
        if isinstance(call_id, str) and call_id:
            delta["id"] = call_id
            delta["type"] = "function"
            self._sent_ids.add(call_id)
        function = call.get("function")
        if isinstance(function, dict):
            piece: dict[str, str] = {}
            name = function.get("name")
            if isinstance(name, str) and name:
                piece["name"] = name
            arguments = function.get("arguments")
            if isinstance(arguments, dict):  # Ollama sends an object
                arguments = json.dumps(arguments)
            if isinstance(arguments, str):
                piece["arguments"] = arguments
            if piece:
                delta["function"] = piece
        return delta

    def unsent(self, external: Sequence[ToolCall]) -> list[ToolCall]:
        """The client's calls of the finished answer that were not relayed piece by piece."""
        if self.forwarded == len(external):
            return []
        if self.forwarded == 0:
            return list(external)
        return [c for c in external if not c.id or c.id not in self._sent_ids]
