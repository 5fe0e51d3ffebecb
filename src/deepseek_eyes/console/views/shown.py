"""How stored messages and sessions are shown: every text bounded (``MAX_TEXT``, the rest
said as ``truncated``), message parts, tool calls and ``look`` rereads, the client and the
path a session is listed with. Shared by the conversation, listing and screens views.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "CLIENTS",
    "MAX_EVENTS",
    "MAX_LOOKS",
    "MAX_TEXT",
    "bounded",
    "calls",
    "client_name",
    "looks",
    "parts",
    "path_name",
    "question_marks",
]

#: The longest text of one message part or tool result the console is sent.
MAX_TEXT = 20_000
#: Events of one conversation shown.
MAX_EVENTS = 2_000
#: The client a session's ``source`` names (the gateway's front it came through).
CLIENTS = {"cli": "CLI", "gateway": "OpenAI", "gateway:anthropic": "Claude Code",
           "gateway:responses": "Codex"}
#: ``look`` rereads listed for one turn (the runtime caps them far below this).
MAX_LOOKS = 50


def bounded(text: str) -> dict[str, Any]:
    return {"text": text[:MAX_TEXT], "truncated": len(text) > MAX_TEXT, "length": len(text)}


def client_name(source: object) -> str:
    return CLIENTS.get(str(source), str(source or "-"))


def path_name(paths: set[str], latest: str | None) -> str | None:
    """A conversation's path: ``both`` once it has had bridged and native turns."""
    return "both" if {"bridged", "native"} <= paths else latest


def question_marks(values: list[str]) -> str:
    return ",".join("?" * len(values))


def parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return [{"type": "text", **bounded(str(content or ""))}]
    out: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "image":
            out.append({"type": "image", "sha256": str(part.get("sha256", "")),
                        "width": part.get("width"), "height": part.get("height")})
        else:
            out.append({"type": "text", **bounded(str(part.get("text") or ""))})
    return out


def calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"id": str(call.get("id", "")), "name": str(call.get("name", "")),
             "arguments": bounded(str(call.get("arguments", ""))),
             "internal": key == "internal_calls"}
            for key in ("tool_calls", "internal_calls")
            for call in message.get(key) or () if isinstance(call, Mapping)]


def looks(calls: object) -> list[dict[str, Any]]:
    """The turn's ``look`` rereads as the runtime recorded them: the image, the route that
    read it again (or ``pixels`` for a seeing model), whether it came from the cache, the
    region asked for, the failure's code."""
    if not isinstance(calls, list):
        return []
    out = []
    for call in calls:
        if not isinstance(call, Mapping) or call.get("tool") != "look":
            continue
        region = call.get("region")
        out.append({"image": str(call.get("image") or ""),
                    "route": "pixels" if call.get("pixels") else call.get("route"),
                    "cached": bool(call.get("cached")),
                    "region": list(region) if isinstance(region, list) else None,
                    "code": call.get("code"),
                    "record_sha256": call.get("record_sha256")})
        if len(out) >= MAX_LOOKS:
            break
    return out
