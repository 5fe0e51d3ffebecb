"""The model-facing view of a conversation, derived at every turn, never stored.

Three shapes, one per turn path:

* **text** — no image anywhere: the messages go to the final model as the client sent them.
* **bridged** — images become validated evidence, and a system message explains the
  evidence and the ``look`` tool. With ``history_evidence = "full"`` (the default) every
  image keeps its full evidence in the message that brought it, turn after turn, so each
  request starts with the exact bytes of the one before: DeepSeek bills that cached prefix
  at a fraction of the price. With ``"pointer"`` only the latest user message's images are
  rendered in full and earlier ones become pointers (identity, size, one line of summary;
  the model can ``look`` again): fewer tokens, but the prefix changes every turn.
* **native** — the final model declares image input: the latest user message's images
  travel as data URLs built from the stored original bytes; earlier images are sent again
  only up to ``runtime.native_history_images`` (default 0) and otherwise become a one-line
  reference, so a long conversation does not re-send every image each turn. Images
  anywhere but user messages are dropped (providers refuse them).

In every path an image repeated within one message is rendered once; its copies become a
one-line reference (250 copies of one image cost one evidence block, not 250).

The view is not fitted to the history budget: the turn loop fits every request
(:func:`deepseek_eyes.runtime.budget.fit`), its own tool rounds included.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.llm.thinking import ThinkingMode
from deepseek_eyes.runtime.render import render_evidence, render_pointer
from deepseek_eyes.store.events import message_calls
from deepseek_eyes.usage import estimate_tokens

__all__ = [
    "BRIDGE_SYSTEM_PROMPT", "EvidenceSlot", "View", "build_view", "image_ids", "native_pixels",
    "reasoning_sent", "render_assistant", "render_reference", "sends_reasoning",
]

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
    messages: list[JsonObject]  # upstream (OpenAI wire) messages
    evidence_tokens: int  # estimated tokens of the rendered evidence
    # What the real alternative (earlier images' evidence in full) would have added, by
    # the same estimate as evidence_tokens; 0 with history_evidence = "full".
    avoided_tokens: int = 0


def sends_reasoning(message: Mapping[str, Any], thinking: ThinkingMode) -> bool:
    """Whether an assistant message of an exchange with tool calls goes upstream with its
    reasoning: always in thinking mode (DeepSeek refuses a tool-call message without it,
    even an empty one), never with thinking off, and when it is not known whether the
    model thinks, only when it sent reasoning text itself."""
    reasoning = message.get("reasoning")
    if thinking == "disabled" or not isinstance(reasoning, str):
        return False
    return thinking == "enabled" or bool(reasoning)


def render_assistant(message: Mapping[str, Any], *, reasoning: bool = False) -> JsonObject:
    """A runtime-format assistant message as the upstream gets it; ``reasoning`` adds its
    ``reasoning_content``. The one rendering for history and for a turn's own tool rounds,
    so that a later request starts with the same bytes (DeepSeek's prefix cache)."""
    content = message.get("content")
    text = content if isinstance(content, str) else _joined_text(content or [])
    out: JsonObject = {"role": "assistant", "content": text}
    if reasoning:
        out["reasoning_content"] = message["reasoning"]
    # Calls the runtime ran itself beside the client's (their results follow, logged).
    calls = message_calls(message)
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


def _plain(message: Mapping[str, Any], reasoning: bool = False) -> JsonObject:
    role = message["role"]
    if role == "assistant":
        return render_assistant(message, reasoning=reasoning)
    content = message.get("content")
    text = content if isinstance(content, str) else _joined_text(content or [])
    if role == "tool":
        return {"role": "tool", "tool_call_id": message["tool_call_id"], "content": text}
    return {"role": role, "content": text}


def reasoning_sent(messages: Sequence[Mapping[str, Any]], thinking: ThinkingMode) -> set[int]:
    """Indices of the assistant messages whose reasoning goes upstream: those of an
    exchange (the messages between two user messages) in which the model called tools,
    as DeepSeek's thinking mode asks. Reasoning of an exchange without tool calls is
    ignored upstream, so it is not sent (it would only cost prefix bytes)."""
    out: set[int] = set()
    exchange: list[int] = []
    called = False
    for index, message in enumerate([*messages, {"role": "user"}]):
        if message.get("role") == "user":
            if called:
                out.update(i for i in exchange if sends_reasoning(messages[i], thinking))
            exchange, called = [], False
        elif message.get("role") == "assistant":
            exchange.append(index)
            called = called or bool(message_calls(message))
    return out


def _image_parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [p for p in content if p.get("type") == "image"]


def image_ids(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """``img-1``, ``img-2``, … by first appearance: the ids the model reads and ``look``
    takes, the same for every path."""
    ids: dict[str, str] = {}
    for message in messages:
        for part in _image_parts(message):
            ids.setdefault(str(part["sha256"]), f"img-{len(ids) + 1}")
    return ids


def native_pixels(
    messages: Sequence[Mapping[str, Any]], history_images: int = 0
) -> dict[str, tuple[int, int]]:
    """Where a native turn sends pixels: image sha256 → (message, part) index.

    The images of the latest user message are sent there; of the earlier ones, the
    ``history_images`` most recently shown are sent once, where they were last shown.
    Every other occurrence becomes a reference (:func:`render_reference`), so a long
    conversation does not re-send every earlier image in full each turn.
    """
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    at: dict[str, tuple[int, int]] = {}
    if not users:
        return at
    last = users[-1]
    for index, part in enumerate(messages[last].get("content") or []):
        if isinstance(part, Mapping) and part.get("type") == "image":
            at.setdefault(str(part["sha256"]), (last, index))
    earlier = 0
    for message_index in reversed(users[:-1]):
        if earlier >= history_images:
            break
        content = messages[message_index].get("content")
        if not isinstance(content, list):
            continue
        for index in range(len(content) - 1, -1, -1):
            part = content[index]
            if part.get("type") != "image" or str(part["sha256"]) in at:
                continue
            if earlier >= history_images:
                break
            at[str(part["sha256"])] = (message_index, index)
            earlier += 1
    return at


def render_reference(image_id: str, image: Mapping[str, Any]) -> str:
    """An image whose pixels a native turn does not send again."""
    return (
        f"[{image_id}: sha256:{str(image['sha256'])[:16]} {image['width']}x{image['height']} "
        f"{image['media_type']}; shown earlier in this conversation, its pixels are not "
        "sent again]"
    )


def build_view(
    messages: Sequence[Mapping[str, Any]],
    *,
    path: str,
    slots: Mapping[str, EvidenceSlot] | None = None,
    image_bytes: Mapping[str, bytes] | None = None,
    history_evidence: str = "full",
    native_history_images: int = 0,
    thinking: ThinkingMode = None,
) -> View:
    """The upstream ``messages`` for one model call of a turn.

    ``thinking`` is the request's thinking mode: which assistant messages carry their
    reasoning back follows from it (:func:`reasoning_sent`).

    ``slots`` maps an image's sha256 to its evidence (bridged path); ``image_bytes`` holds
    the original bytes of every image :func:`native_pixels` names (native path), read by
    the caller off the event loop.

    An image repeated within one message is rendered (or sent) once; its other copies
    become a one-line reference to it.
    """
    slots = slots or {}
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    image_users = [i for i in users if _image_parts(messages[i])]
    if history_evidence == "full":
        # Every image keeps its full evidence where it first appeared, turn after turn:
        # a later request starts with the bytes of the earlier one (a cached prefix).
        full = set(image_users)
    else:
        full = {users[-1]} if users and users[-1] in image_users else set()
    rendered: set[str] = set()  # images whose full evidence an earlier message holds
    ids = image_ids(messages)
    pixels = native_pixels(messages, native_history_images) if path == "native" else {}
    out: list[JsonObject] = []
    evidence_tokens = 0
    avoided_tokens = 0
    with_reasoning = reasoning_sent(messages, thinking)
    for index, message in enumerate(messages):
        images = _image_parts(message)
        if not images or message.get("role") != "user":
            out.append(_plain(message, index in with_reasoning))
            continue
        if path == "native":
            out.append(_native_user(index, message, ids, pixels, image_bytes or {}))
            continue
        pieces: list[str] = []
        shown: set[str] = set()
        for part in message["content"]:
            if part.get("type") == "text":
                pieces.append(str(part["text"]))
                continue
            slot = slots[part["sha256"]]
            if part["sha256"] in shown:
                text = _again(slot.image_id)
            elif index in full and history_evidence == "full" and part["sha256"] in rendered:
                text = _earlier(slot.image_id)
            elif index in full:
                text = render_evidence(
                    slot.image_id, slot.image, slot.evidence, route=slot.route,
                    record_sha256=slot.record_sha256,
                )
            else:
                text = render_pointer(
                    slot.image_id, slot.image, str(slot.evidence.get("summary", ""))
                )
                # What rendering it in full (history_evidence = "full") would have cost.
                whole = render_evidence(
                    slot.image_id, slot.image, slot.evidence, route=slot.route,
                    record_sha256=slot.record_sha256,
                )
                avoided_tokens += max(0, estimate_tokens(len(whole)) - estimate_tokens(len(text)))
            shown.add(part["sha256"])
            if index in full:
                rendered.add(part["sha256"])
            evidence_tokens += estimate_tokens(len(text))
            pieces.append(text)
        out.append({"role": "user", "content": "\n\n".join(pieces)})
    if path == "bridged":
        out.insert(0, {"role": "system", "content": BRIDGE_SYSTEM_PROMPT})
    return View(out, evidence_tokens, avoided_tokens)


def _again(image_id: str) -> str:
    return f"[{image_id} again: the same image as above]"


def _earlier(image_id: str) -> str:
    return f"[{image_id} again: its evidence is in an earlier message]"


def _native_user(
    index: int,
    message: Mapping[str, Any],
    ids: Mapping[str, str],
    pixels: Mapping[str, tuple[int, int]],
    image_bytes: Mapping[str, bytes],
) -> JsonObject:
    parts: list[JsonObject] = []
    for position, part in enumerate(message["content"]):
        if part.get("type") == "text":
            parts.append({"type": "text", "text": part["text"]})
            continue
        sha = str(part["sha256"])
        if pixels.get(sha) != (index, position):
            here = pixels.get(sha, (-1, -1))[0] == index
            text = _again(ids[sha]) if here else render_reference(ids[sha], part)
            parts.append({"type": "text", "text": text})
            continue
        if sha not in image_bytes:
            raise ValueError(f"the native view needs the bytes of image {sha[:16]}")
        data = base64.b64encode(image_bytes[sha]).decode("ascii")
        parts.append({
            "type": "image_url",
            "image_url": {
                "url": f"data:{part['media_type']};base64,{data}",
                "detail": part.get("detail", "auto"),
            },
        })
    return {"role": "user", "content": parts}
