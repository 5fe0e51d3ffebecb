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
* **native** — the final model sees: the images of the current exchange (the latest user
  message and the tool results after it, a client's or the runtime's own) travel as data
  URLs built from the stored original bytes (fitted to the model's limits by the caller);
  earlier images are sent again only up to ``runtime.native_history_images`` (default 0)
  and otherwise become a one-line reference the model can ``look`` at again, so a long
  conversation does not re-send every image each turn. With ``vision.delivery = "both"``
  each image sent as pixels is followed by its validated evidence (full-resolution reading
  beside the model's compressed view).

Images live in two places: content parts (``{"type": "image"}``) of user messages and of a
client's tool messages, and the ``images`` a runtime tool result brought (an MCP image, a
screenshot, a ``look`` crop). Those a result delivered as pixels are marked ``pixels`` and
their evidence is not in the result's text; every path renders them here, so an image is
treated the same wherever it came from.

In every path an image repeated within one message is rendered once; its copies become a
one-line reference (250 copies of one image cost one evidence block, not 250).

The view is not fitted to the history budget: the turn loop fits every request
(:func:`deepseek_eyes.runtime.budget.fit`), its own tool rounds included.

A long conversation is rendered again every turn, so a :class:`ViewMemo` keeps the plain
rendering of each message without images (and its token estimate) by the message's
identity: the session log's messages are the same objects turn after turn (the store's
snapshot shares them, and nobody mutates them), so a continued turn renders only what is
new. An entry holds its message, so an id is never reused while it is kept.
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.llm.thinking import ThinkingMode
from deepseek_eyes.runtime.budget import message_tokens
from deepseek_eyes.runtime.render import render_evidence, render_pointer
from deepseek_eyes.store.events import message_calls
from deepseek_eyes.usage import estimate_tokens

__all__ = [
    "BRIDGE_SYSTEM_PROMPT", "EvidenceSlot", "SentImage", "View", "ViewMemo", "attached_pixels",
    "build_view", "image_ids", "native_pixels", "reasoning_sent", "render_assistant",
    "render_reference", "sends_reasoning",
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
class SentImage:
    """An image a view sends as pixels: what its input tokens are estimated from."""

    sha256: str
    width: int
    height: int
    detail: str


@dataclass(frozen=True)
class View:
    messages: list[JsonObject]  # upstream (OpenAI wire) messages
    evidence_tokens: int  # estimated tokens of the rendered evidence
    # What the real alternative (earlier images' evidence in full) would have added, by
    # the same estimate as evidence_tokens; 0 with history_evidence = "full".
    avoided_tokens: int = 0
    pixels: tuple[SentImage, ...] = ()  # the images sent as pixels


def sends_reasoning(message: Mapping[str, Any], thinking: ThinkingMode) -> bool:
    """Whether an assistant message of an exchange with tool calls goes upstream with its
    reasoning: always in thinking mode (DeepSeek refuses any assistant message of such an
    exchange without it, the final answer included; an empty string is accepted, and is
    what a message whose reasoning nobody kept gets), never with thinking off, and when it
    is not known whether the model thinks, only when it sent reasoning text itself."""
    if thinking == "disabled":
        return False
    if thinking == "enabled":
        return True
    reasoning = message.get("reasoning")
    return isinstance(reasoning, str) and bool(reasoning)


def render_assistant(message: Mapping[str, Any], *, reasoning: bool = False) -> JsonObject:
    """A runtime-format assistant message as the upstream gets it; ``reasoning`` adds its
    ``reasoning_content``. The one rendering for history and for a turn's own tool rounds,
    so that a later request starts with the same bytes (DeepSeek's prefix cache)."""
    content = message.get("content")
    text = content if isinstance(content, str) else _joined_text(content or [])
    out: JsonObject = {"role": "assistant", "content": text}
    if reasoning:
        kept = message.get("reasoning")
        out["reasoning_content"] = kept if isinstance(kept, str) else ""
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


#: Rendered messages a :class:`ViewMemo` keeps before it starts again (a bound, not a
#: policy: the next turn fills it again).
VIEW_MEMO_MESSAGES = 200_000


#: Conversations whose text view a :class:`ViewMemo` keeps (least recently used dropped).
_TEXT_VIEWS = 64


@dataclass
class _TextView:
    messages: list[Mapping[str, Any]]
    thinking: ThinkingMode
    closed: int  # the last user message's index: the exchanges before it are closed
    rendered: list[JsonObject]  # the view of messages[:closed]


class ViewMemo:
    """Each plain message's rendering, and its estimated tokens, by the message's identity
    (see the module docstring). Renderings are shared between turns: never mutate one
    (the budget copies what it sends)."""

    def __init__(self, *, limit: int = VIEW_MEMO_MESSAGES) -> None:
        self._limit = limit
        self._plain: dict[tuple[int, bool], tuple[Mapping[str, Any], JsonObject]] = {}
        self._tokens: dict[int, tuple[JsonObject, int]] = {}
        # Text views by their first message's identity: the messages, the thinking mode,
        # and the rendering of every message before the last user message (the exchanges
        # a later message can no longer change).
        self._texts: OrderedDict[int, _TextView] = OrderedDict()
        self._last_costs: tuple[list[Mapping[str, Any]], list[int]] | None = None

    def text_view(self, messages: Sequence[Mapping[str, Any]],
                  thinking: ThinkingMode) -> list[JsonObject] | None:
        """The text path's view of ``messages`` (no image in them), rendering only what
        follows the closed exchanges of an earlier view of the same messages; None when
        an image is among the messages it would have to look at (the caller renders
        the whole view then)."""
        if not messages:
            return None
        key = id(messages[0])
        kept = self._texts.pop(key, None)
        start = 0
        head: list[JsonObject] = []
        if (kept is not None and kept.messages[0] is messages[0]
                and kept.thinking == thinking and kept.closed <= len(messages)
                and kept.messages[:kept.closed] == messages[:kept.closed]):  # in C
            start, head = kept.closed, kept.rendered
        tail = messages[start:]
        if any(carries_images(m) for m in tail):
            return None
        # ``start`` is a user message (or 0): the tail's exchanges are its own.
        with_reasoning = reasoning_sent(tail, thinking)
        out = head + [self.plain(m, i in with_reasoning) for i, m in enumerate(tail)]
        closed = next((i for i in range(len(messages) - 1, start - 1, -1)
                       if messages[i].get("role") == "user"), start)
        self._texts[key] = _TextView(list(messages), thinking, closed, out[:closed])
        while len(self._texts) > _TEXT_VIEWS:
            self._texts.popitem(last=False)
        return out

    def plain(self, message: Mapping[str, Any], reasoning: bool) -> JsonObject:
        """:func:`_plain` of ``message``, rendered once while it is kept."""
        key = (id(message), reasoning)
        hit = self._plain.get(key)
        if hit is not None and hit[0] is message:
            return hit[1]
        out = _plain(message, reasoning)
        if len(self._plain) >= self._limit:
            self._plain.clear()
            self._tokens.clear()
        self._plain[key] = (message, out)
        self._tokens[id(out)] = (out, -1)
        return out

    def costs(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """:meth:`cost` of each message; the costs of the leading messages the last list
        it was asked about shares with this one (compared in C) are taken from it."""
        kept = self._last_costs
        start = 0
        if kept is not None and messages and kept[0] and kept[0][0] is messages[0]:
            start = min(len(kept[0]), len(messages))
            if kept[0][:start] != list(messages[:start]):
                start = 0
        out = (kept[1][:start] if kept is not None and start else []) + [
            self.cost(m) for m in messages[start:]]
        self._last_costs = (list(messages), out)
        return out

    def cost(self, message: Mapping[str, Any]) -> int:
        """Estimated tokens of an upstream message; counted once for a rendering of this
        memo's, every time for any other."""
        hit = self._tokens.get(id(message))
        if hit is None or hit[0] is not message:
            return message_tokens(message)
        if hit[1] < 0:
            hit = self._tokens[id(message)] = (hit[0], message_tokens(message))
        return hit[1]


def carries_images(message: Mapping[str, Any]) -> bool:
    """Whether a message holds an image: an image part of a user or tool message, or an
    image a runtime tool result delivered as pixels (cheap for a text message)."""
    content = message.get("content")
    if content.__class__ is str and "images" not in message:  # a text message: most are
        return False
    role = message.get("role")
    if role not in ("user", "tool"):
        return False
    if isinstance(content, list) and any(p.get("type") == "image" for p in content):
        return True
    return role == "tool" and any(i.get("pixels") for i in message.get("images") or ())


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
        role = message.get("role")
        if role == "user":
            if called:
                out.update(i for i in exchange if sends_reasoning(messages[i], thinking))
            exchange, called = [], False
        elif role == "assistant":
            exchange.append(index)
            called = called or bool(
                (message.get("tool_calls") or message.get("internal_calls"))
                and message_calls(message))
    return out


def _image_parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The image content parts of a user message or a client's tool message."""
    if message.get("role") not in ("user", "tool"):
        return []
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [p for p in content if p.get("type") == "image"]


def attached_pixels(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The images a runtime tool result delivered as pixels (their evidence is not in its
    text): ``images`` entries marked ``pixels``."""
    if message.get("role") != "tool":
        return []
    return [i for i in message.get("images") or () if i.get("pixels")]


#: Where an attached image sits in :func:`native_pixels`' map: after every content part.
_ATTACHED = 100_000


def _positions(message: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(position, sha256) of every image of a message, content parts then attached ones."""
    out: list[tuple[int, str]] = []
    content = message.get("content")
    if message.get("role") in ("user", "tool") and isinstance(content, list):
        out += [(i, str(p["sha256"])) for i, p in enumerate(content) if p.get("type") == "image"]
    out += [(_ATTACHED + k, str(i["sha256"])) for k, i in enumerate(attached_pixels(message))]
    return out


def image_ids(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """``img-1``, ``img-2``, … by first appearance: the ids the model reads and ``look``
    takes, the same for every path. Images a runtime tool brought keep their own ids
    (``tool-img-N``)."""
    ids: dict[str, str] = {}
    numbered = 0
    for message in messages:
        if not carries_images(message):
            continue
        for part in attached_pixels(message):
            ids.setdefault(str(part["sha256"]), str(part.get("id") or ""))
        for part in _image_parts(message):
            if str(part["sha256"]) not in ids:
                numbered += 1
                ids[str(part["sha256"])] = f"img-{numbered}"
    return ids


def native_pixels(
    messages: Sequence[Mapping[str, Any]], history_images: int = 0
) -> dict[str, tuple[int, int]]:
    """Where a native turn sends pixels: image sha256 → (message, position).

    The images of the current exchange (the latest user message and the tool results
    after it) are sent there; of the earlier ones, the ``history_images`` most recently
    shown are sent once, where they were last shown. Every other occurrence becomes a
    reference (:func:`render_reference`), so a long conversation does not re-send every
    earlier image in full each turn.
    """
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    at: dict[str, tuple[int, int]] = {}
    if not users:
        return at
    last = users[-1]
    for index in range(last, len(messages)):
        for position, sha in _positions(messages[index]):
            at.setdefault(sha, (index, position))
    earlier = 0
    for message_index in range(last - 1, -1, -1):
        if earlier >= history_images:
            break
        for position, sha in reversed(_positions(messages[message_index])):
            if sha in at:
                continue
            if earlier >= history_images:
                break
            at[sha] = (message_index, position)
            earlier += 1
    return at


def render_reference(image_id: str, image: Mapping[str, Any]) -> str:
    """An image whose pixels a native turn does not send again."""
    return (
        f"[{image_id}: sha256:{str(image['sha256'])[:16]} {image['width']}x{image['height']} "
        f"{image['media_type']}; shown earlier in this conversation, its pixels are not "
        f"sent again; call look with image {image_id} to see it again]"
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
    both: bool = False,
    memo: ViewMemo | None = None,
) -> View:
    """The upstream ``messages`` for one model call of a turn.

    ``thinking`` is the request's thinking mode: which assistant messages carry their
    reasoning back follows from it (:func:`reasoning_sent`).

    ``slots`` maps an image's sha256 to its evidence (bridged path, and the native path
    with ``both``); ``image_bytes`` holds the bytes to send of every image
    :func:`native_pixels` names (native path), read and fitted by the caller off the event
    loop. ``both``: each image sent as pixels is followed by its evidence.

    An image repeated within one message is rendered (or sent) once; its other copies
    become a one-line reference to it. ``memo`` keeps plain renderings between turns.
    """
    if memo is not None and path == "text":
        texts = memo.text_view(messages, thinking)
        if texts is not None:  # no image anywhere: the plain renderings, nothing more
            return View(texts, 0)
    slots = slots or {}
    plain = _plain if memo is None else memo.plain
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    image_users = [i for i, m in enumerate(messages) if carries_images(m)]
    if history_evidence == "full":
        # Every image keeps its full evidence where it first appeared, turn after turn:
        # a later request starts with the bytes of the earlier one (a cached prefix).
        full = set(image_users)
    else:
        current = users[-1] if users else len(messages)
        full = {i for i in image_users if i >= current}
    rendered: set[str] = set()  # images whose full evidence an earlier message holds
    ids = image_ids([messages[i] for i in image_users])
    pixels = native_pixels(messages, native_history_images) if path == "native" else {}
    out: list[JsonObject] = []
    evidence_tokens = 0
    avoided_tokens = 0
    sent: list[SentImage] = []
    with_reasoning = reasoning_sent(messages, thinking)
    with_images = set(image_users)
    for index, message in enumerate(messages):
        if index not in with_images:
            out.append(plain(message, index in with_reasoning))
            continue
        if path == "native":
            parts, tokens = _native_parts(index, message, ids, pixels, image_bytes or {},
                                          slots if both else {}, sent)
            evidence_tokens += tokens
            out.append(_with_content(message, parts))
            continue
        pieces: list[str] = []
        shown: set[str] = set()
        for part in _bridged_items(message):
            if part.get("type") == "text":
                pieces.append(str(part["text"]))
                continue
            slot = slots.get(part["sha256"])
            if slot is None:
                # An image a tool delivered as pixels in an earlier turn, in a turn that
                # has no evidence for it (a text turn): a reference look can follow.
                image_id = ids.get(str(part["sha256"])) or str(part.get("id") or "image")
                pieces.append(render_reference(image_id, part))
                continue
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
        out.append(_with_content(message, "\n\n".join(pieces)))
    if path == "bridged":
        out.insert(0, {"role": "system", "content": BRIDGE_SYSTEM_PROMPT})
    return View(out, evidence_tokens, avoided_tokens, tuple(sent))


def _bridged_items(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A message's text and image parts in order, attached pixel images after them."""
    content = message.get("content")
    items: list[Mapping[str, Any]] = (
        list(content) if isinstance(content, list)
        else [{"type": "text", "text": str(content or "")}])
    # An image whose evidence the result's text already holds (delivery "both") adds none.
    return [*items, *({**i, "type": "image"} for i in attached_pixels(message)
                      if not i.get("evidence"))]


def _with_content(message: Mapping[str, Any], content: str | list[JsonObject]) -> JsonObject:
    if message.get("role") == "tool":
        return {"role": "tool", "tool_call_id": message["tool_call_id"], "content": content}
    return {"role": str(message.get("role")), "content": content}


def _again(image_id: str) -> str:
    return f"[{image_id} again: the same image as above]"


def _earlier(image_id: str) -> str:
    return f"[{image_id} again: its evidence is in an earlier message]"


def image_url(data: bytes, media_type: str, detail: str = "auto") -> JsonObject:
    """An OpenAI ``image_url`` content part carrying ``data`` as a base64 data URL; the
    media type is read from the bytes' signature when it is one a model takes (an image
    re-encoded to fit the model is no longer of its stored type)."""
    encoded = base64.b64encode(data).decode("ascii")
    kind = _signature_type(data) or media_type
    return {"type": "image_url",
            "image_url": {"url": f"data:{kind};base64,{encoded}", "detail": detail}}


def _signature_type(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _native_parts(
    index: int,
    message: Mapping[str, Any],
    ids: Mapping[str, str],
    pixels: Mapping[str, tuple[int, int]],
    image_bytes: Mapping[str, bytes],
    slots: Mapping[str, EvidenceSlot],
    sent: list[SentImage],
) -> tuple[list[JsonObject], int]:
    """A user or tool message's parts for a seeing model, and the estimated tokens of the
    evidence added beside its pixels (``both``)."""
    parts: list[JsonObject] = []
    tokens = 0
    content = message.get("content")
    items: list[tuple[int, Mapping[str, Any]]] = (
        list(enumerate(content)) if isinstance(content, list)
        else [(-1, {"type": "text", "text": str(content or "")})])
    items += [(_ATTACHED + k, {**i, "type": "image"})
              for k, i in enumerate(attached_pixels(message))]
    for position, part in items:
        if part.get("type") == "text":
            parts.append({"type": "text", "text": str(part["text"])})
            continue
        sha = str(part["sha256"])
        image_id = ids.get(sha) or str(part.get("id") or "image")
        if pixels.get(sha) != (index, position):
            here = pixels.get(sha, (-1, -1))[0] == index
            text = _again(image_id) if here else render_reference(image_id, part)
            parts.append({"type": "text", "text": text})
            continue
        if sha not in image_bytes:
            raise ValueError(f"the native view needs the bytes of image {sha[:16]}")
        detail = str(part.get("detail") or "auto")
        parts.append(image_url(image_bytes[sha], str(part["media_type"]), detail))
        sent.append(SentImage(sha, int(part["width"]), int(part["height"]), detail))
        slot = None if part.get("evidence") else slots.get(sha)
        if slot is not None:
            text = render_evidence(slot.image_id, slot.image, slot.evidence, route=slot.route,
                                   record_sha256=slot.record_sha256)
            tokens += estimate_tokens(len(text))
            parts.append({"type": "text", "text": text})
    return parts, tokens

