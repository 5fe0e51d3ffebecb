"""The model-facing view of a conversation, derived at every turn, never stored.

Three shapes, one per turn path:

* **text** — no image anywhere: the messages go to the final model as the client sent them.
* **bridged** — images become validated evidence. Images of the latest user message (the
  turn that brings them) are rendered in full; images of earlier messages become pointers
  (identity, size, one line of summary), since the model can ``look`` again and its own
  earlier answers carry what it already read. That keeps a long conversation about one
  image from paying for its evidence every turn (``history_evidence = "full"`` does pay).
  A system message explains the evidence and the tool.
* **native** — the final model declares image input: user images travel as data URLs built
  from the stored original bytes; images anywhere else are dropped (providers refuse them).

History is bounded by an estimated token budget: the oldest messages go first, an
assistant message with tool calls leaves together with its tool results, the latest user
message and everything after it always stay, and a note says how many were left out.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deepseek_eyes.runtime.render import render_evidence, render_pointer
from deepseek_eyes.usage import estimate_tokens

__all__ = ["BRIDGE_SYSTEM_PROMPT", "EvidenceSlot", "View", "build_view"]

BRIDGE_SYSTEM_PROMPT = (
    "You cannot see images directly. Each image in this conversation is replaced by "
    "validated visual evidence produced by a separate vision system: a header with the "
    "image id (img-1, img-2, …), a summary, the text lines it read with boxes and "
    "confidence, regions, objects, relations, numbers and uncertainties. Treat evidence as "
    "what the image shows, respect its uncertainties, and never claim to see more. If one "
    "fact you need is missing or uncertain, call the look tool with the image id and one "
    "precise question; otherwise answer directly."
)


@dataclass(frozen=True)
class EvidenceSlot:
    """One image of the conversation and the evidence that stands in for it."""

    image_id: str
    image: Mapping[str, Any]
    route: str
    record_sha256: str
    evidence: Mapping[str, Any]


@dataclass(frozen=True)
class View:
    messages: list[dict[str, Any]]
    estimated_tokens: int
    evidence_tokens: int  # the part of the estimate that is rendered evidence
    omitted: int  # messages left out to fit the budget


def _assistant(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    text = content if isinstance(content, str) else _joined_text(content or [])
    out: dict[str, Any] = {"role": "assistant", "content": text}
    calls = message.get("tool_calls") or []
    if calls:
        out["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in calls
        ]
        if not text:
            out["content"] = None
    return out


def _joined_text(parts: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def _plain(message: Mapping[str, Any]) -> dict[str, Any]:
    role = message["role"]
    if role == "assistant":
        return _assistant(message)
    content = message.get("content")
    text = content if isinstance(content, str) else _joined_text(content or [])
    if role == "tool":
        return {"role": "tool", "tool_call_id": message["tool_call_id"], "content": text}
    return {"role": role, "content": text}


def _image_parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [p for p in content if p.get("type") == "image"]


def _tokens(message: Mapping[str, Any]) -> int:
    return estimate_tokens(len(json.dumps(message, ensure_ascii=False)))


def build_view(
    messages: Sequence[Mapping[str, Any]],
    *,
    path: str,
    slots: Mapping[str, EvidenceSlot] | None = None,
    image_bytes: Callable[[str], bytes] | None = None,
    budget_tokens: int | None = None,
    history_evidence: str = "pointer",
) -> View:
    """The upstream ``messages`` for one model call of a turn.

    ``slots`` maps an image's sha256 to its evidence (bridged path); ``image_bytes`` reads
    an original from the blob store (native path).
    """
    slots = slots or {}
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    image_users = [i for i in users if _image_parts(messages[i])]
    if history_evidence == "full":
        full = set(image_users[-1:])
    else:
        full = {users[-1]} if users and users[-1] in image_users else set()
    out: list[dict[str, Any]] = []
    evidence_tokens = 0
    for index, message in enumerate(messages):
        images = _image_parts(message)
        if not images or message.get("role") != "user":
            out.append(_plain(message))
            continue
        if path == "native":
            out.append(_native_user(message, image_bytes))
            continue
        pieces: list[str] = []
        for part in message["content"]:
            if part.get("type") == "text":
                pieces.append(str(part["text"]))
                continue
            slot = slots[part["sha256"]]
            if index in full:
                text = render_evidence(
                    slot.image_id, slot.image, slot.evidence, route=slot.route,
                    record_sha256=slot.record_sha256,
                )
            else:
                text = render_pointer(
                    slot.image_id, slot.image, str(slot.evidence.get("summary", ""))
                )
            evidence_tokens += estimate_tokens(len(text))
            pieces.append(text)
        out.append({"role": "user", "content": "\n\n".join(pieces)})
    if path == "bridged":
        out.insert(0, {"role": "system", "content": BRIDGE_SYSTEM_PROMPT})
    omitted = 0
    if budget_tokens is not None:
        out, omitted = _fit(out, budget_tokens)
    total = sum(_tokens(m) for m in out)
    return View(out, total, evidence_tokens, omitted)


def _native_user(
    message: Mapping[str, Any], image_bytes: Callable[[str], bytes] | None
) -> dict[str, Any]:
    if image_bytes is None:
        raise ValueError("the native path needs image_bytes")
    parts: list[dict[str, Any]] = []
    for part in message["content"]:
        if part.get("type") == "text":
            parts.append({"type": "text", "text": part["text"]})
        else:
            data = base64.b64encode(image_bytes(part["sha256"])).decode("ascii")
            parts.append({
                "type": "image_url",
                "image_url": {
                    "url": f"data:{part['media_type']};base64,{data}",
                    "detail": part.get("detail", "auto"),
                },
            })
    return {"role": "user", "content": parts}


def _fit(messages: list[dict[str, Any]], budget: int) -> tuple[list[dict[str, Any]], int]:
    """Drop the oldest droppable messages until the estimate fits the budget."""
    costs = [_tokens(m) for m in messages]
    total = sum(costs)
    if total <= budget:
        return messages, 0
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=0)
    keep = [True] * len(messages)
    index = 0
    while total > budget and index < last_user:
        message = messages[index]
        if message["role"] == "system":
            index += 1
            continue
        # An assistant message with tool calls leaves together with its tool results.
        group = [index]
        follow = index + 1
        if message.get("tool_calls"):
            while follow < last_user and messages[follow]["role"] == "tool":
                group.append(follow)
                follow += 1
        for member in group:
            keep[member] = False
            total -= costs[member]
        index = follow
    kept = [m for m, k in zip(messages, keep, strict=True) if k]
    # A tool result whose call was dropped would be refused upstream: drop it too.
    dropped = len(messages) - len(kept)
    first_other = next((i for i, m in enumerate(kept) if m["role"] != "system"), len(kept))
    while first_other < len(kept) and kept[first_other]["role"] == "tool":
        kept.pop(first_other)
        dropped += 1
    note = {
        "role": "system",
        "content": f"[{dropped} earlier message(s) were left out to fit the history budget]",
    }
    kept.insert(first_other, note)
    return kept, dropped
