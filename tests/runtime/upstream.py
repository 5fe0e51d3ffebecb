"""A loopback upstream that behaves like DeepSeek's text-only chat API, for runtime tests.

``with LoopbackUpstream() as upstream:`` serves Starlette on ``127.0.0.1`` (an OS-chosen
port) through uvicorn in a background thread; ``upstream.base_url`` is ``http://…/v1``.
It is not a test file: tests of the client, the catalog, the turn runner and the gateway
all point at it.

What it does, so that tests can check what reached the model:

* ``GET /v1/models`` lists ids only, as DeepSeek's does (no field says which model takes
  images): :data:`SEEING_MODELS`, :data:`TEXT_MODELS`, the :data:`BEHAVIOUR_MODELS`, then any
  ``extra_models`` given to the constructor (with whatever metadata they carry).
* **Which model sees, as DeepSeek's contract says (2026-12):** ``deepseek-flash`` and its
  aliases ``deepseek-v4-flash`` and ``deepseek-v4-flash-vision-exp`` (:data:`SEEING_MODELS`)
  decode every ``data:`` URL image they are sent, in user messages and inside tool results,
  with Pillow (400 when one cannot be decoded, or breaks DeepSeek's limits: 32 MiB an image,
  8,192 px a side, 4,096 once a request holds 15 or more, 600 images); an image in a system
  or assistant message is a 400. ``deepseek-v4-pro`` and the behaviour models answer any
  content part whose type is not ``"text"`` with DeepSeek's HTTP 400
  (:func:`deepseek_image_error`). :meth:`LoopbackUpstream.grant_sight` is the switch that
  makes any model see (or stop seeing); an extra model that lists ``"image"`` in
  ``input_modalities`` sees. An unknown model is DeepSeek's 400 "Model Not Exist".
* **What a seeing model answers about pixels:** a request whose text holds ``PROBE:`` (the
  pixel probe) names the colours of the 3x3 grid it was sent, read from the decoded pixels;
  one whose system prompt asks for ``deepseekeyes.evidence.v1`` or ``deepseekeyes.target.v1``
  JSON gets a valid object derived from the pixels (:func:`vision.loopback.evidence_for`);
  otherwise ``"I see an image of WxH pixels."`` (one sentence per image). Faults per model
  (:meth:`LoopbackUpstream.vision_fault`): ``misprobe`` names wrong colours, ``badjson``
  answers evidence requests with prose.
* The reply, in order of precedence: the last user text holds ``REPEAT[<tool>]: <args>``
  and the tool is offered → a call to it with ``<args>``, every time (an agent that never
  stops on its own, for the runtime's call bound); messages that end with tool results →
  ``"after <tool>: <result text>"`` (one line per result); the last user text holds
  ``LOOK[<ref>]: <question>`` and a tool ``look`` is offered → a call to ``look`` with
  ``{"image": ref, "question": question}``, and ``CALL[<tool>]: <args>`` for any other offered
  tool → a call with ``<args>`` verbatim (finish reason ``tool_calls``; a marker's text runs
  to the end of its line or the next marker, and several markers give parallel calls);
  after the N-th round of tool results since the last user text, its N-th
  ``THEN[<tool>]: <args>`` marker, if any, is the next call (a sequential agent), and once
  they are used up a line ``FINALLY: <text>`` of the last user text, if any, is the answer
  instead of the ``"after …"`` echo (a scripted final answer, as a model writes one);
  images sent to the vision model → their sentences; a line starting ``ANSWER:`` in any
  message → the rest of the (last such) line; else
  ``"echo: " + <last user text>`` (its text parts joined with ``"\\n"``).
* **Thinking mode, as DeepSeek's guide documents it.** The V4 names (:data:`THINKING_MODELS`)
  think unless the request says ``thinking: {"type": "disabled"}``: every answer then carries
  ``reasoning_content`` (streamed as deltas before the content), :data:`REASONING_TEXT` for
  an answer and ``REASONING_TEXT + " plan <random>"`` for one that calls tools, and is
  reported in ``completion_tokens_details.reasoning_tokens``. A request in thinking mode
  whose history holds an exchange (the messages between two user messages) in which the
  model called tools, and in it *any* assistant message without ``reasoning_content`` (the
  exchange's final answer too; an empty string is accepted), is refused with DeepSeek's
  HTTP 400 ("Missing `reasoning_content` field in the assistant message at message index
  N"). Beyond DeepSeek, as a test oracle: when the message's calls
  were issued here, its ``reasoning_content`` must be the exact text issued with them, or
  the 400 says it differs (so a test learns that the right reasoning went back, not just
  some). Tool call ids are random, as DeepSeek's are. :data:`REASONING_MODEL` is the pro
  model, kept for tests that name "the model that reasons".
* Usage like DeepSeek's: ``prompt_tokens = ceil(chars / 4)`` where chars counts every
  message's text plus the compact JSON of ``tools`` and of assistant ``tool_calls``, plus
  each image's tokens as DeepSeek's price table gives them (about ``w*h/1568`` within
  187..1,024, 512 px a side first for ``detail: "low"``: :func:`image_tokens`);
  ``prompt_cache_hit_tokens`` = ``ceil(chars of the longest run of leading
  messages equal to a previous served request's leading messages / 4)`` (capped at
  ``prompt_tokens``), the rest are misses; ``completion_tokens = ceil(len(reply) / 4)`` (a
  tool call counts its name and arguments) plus, as DeepSeek counts, the reasoning tokens,
  which ``completion_tokens_details.reasoning_tokens`` also reports for the pro model.
* Streams are proper SSE: a keep-alive comment, the role chunk, reasoning and content in a
  few pieces, tool-call deltas by index with their arguments split over chunks, the finish
  chunk, a usage chunk (``choices: []``) when ``stream_options.include_usage``, ``[DONE]``.
* **Busy**: :meth:`LoopbackUpstream.busy` makes the next N chat requests answer HTTP 503
  "Server is busy" (with ``Retry-After`` when asked), as DeepSeek does at peak load.
* **A hook**: :attr:`LoopbackUpstream.on_chat`, when set, is called with each chat
  payload as it arrives, after it is recorded and before it is answered (in the server's
  thread): a test acts *while* the call is in flight (fills the gateway's disk).
* Behaviour models: ``fail-500``, ``fail-429`` (``Retry-After``), ``fail-401`` (DeepSeek's
  "Authentication Fails"), ``hang`` (answers only when the server stops), ``cut`` (two content
  chunks, then the connection drops; a whole answer is cut half-way), ``nofinish`` (``[DONE]``
  without a finish reason; a whole answer has ``finish_reason: null``), ``badjson`` (a chunk,
  or a whole body, that is not JSON), ``midfail`` (a content chunk, then an ``error`` object
  inside the stream, as OpenAI-compatible servers report a failure after the status was
  sent, then ``[DONE]``; a whole answer is HTTP 500).
* **Slow**: ``SLOW[<seconds>]`` in the last user text makes a stream wait that long before
  each content piece (the role chunk and the reasoning come at once, so a gateway has its
  first chunk), and a whole answer wait that long before it is sent; any wait ends early
  when the server stops.

Recorded, thread-safely: every parsed chat payload with image data replaced by
``"<image>"`` (:attr:`LoopbackUpstream.requests`), what a seeing model decoded in each
request (the SHA-256 of each image's bytes, its message role and size:
:attr:`LoopbackUpstream.decoded`), counters, and the SHA-256 of each
``Authorization`` header (never the header itself), and the streams closed before their
end (the client went away; :meth:`LoopbackUpstream.wait_for_cut_streams`).
:meth:`LoopbackUpstream.wait_for_calls` waits for requests to arrive, so a test can act
while one is in flight without sleeping.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import copy
import hashlib
import hmac
import io
import json
import math
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL import Image, UnidentifiedImageError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from threaded_server import ThreadedServer
from vision.loopback import evidence_for, probe_cells, target_for

__all__ = [
    "BEHAVIOUR_MODELS",
    "IMAGE_PLACEHOLDER",
    "REASONING_MODEL",
    "REASONING_TEXT",
    "RETRY_AFTER_S",
    "SEEING_MODELS",
    "TEXT_MODEL",
    "TEXT_MODELS",
    "THINKING_MODELS",
    "VISION_MODEL",
    "LoopbackUpstream",
    "deepseek_image_error",
    "estimate",
    "image_tokens",
]

#: DeepSeek's models that take images (V4.1-Flash and the aliases it serves).
SEEING_MODELS = ("deepseek-flash", "deepseek-v4-flash", "deepseek-v4-flash-vision-exp")
#: DeepSeek's text-only model.
TEXT_MODELS = ("deepseek-v4-pro",)
TEXT_MODEL = "deepseek-v4-pro"
REASONING_MODEL = "deepseek-v4-pro"
VISION_MODEL = "deepseek-flash"
BEHAVIOUR_MODELS = (
    "fail-500", "fail-429", "fail-401", "hang", "cut", "nofinish", "badjson", "midfail")
THINKING_MODELS = (*SEEING_MODELS, *TEXT_MODELS)  # DeepSeek's models: thinking by default
REASONING_TEXT = "thinking…"
IMAGE_PLACEHOLDER = "<image>"
RETRY_AFTER_S = 2

_DATA_URL = re.compile(r"^data:([\w.+/-]+);base64,(.*)$", re.DOTALL)
# A marker's text runs to the end of its line or to the next marker.
_MARKER = re.compile(
    r"(LOOK|CALL|REPEAT|THEN)\[([^\]\n]{1,500})\]:[ \t]*"
    r"((?:(?!LOOK\[|CALL\[|REPEAT\[|THEN\[)[^\n])*)")
_ANSWER = re.compile(r"^ANSWER:[ \t]*(.*)$", re.MULTILINE)
_FINALLY = re.compile(r"^FINALLY:[ \t]*(.*)$", re.MULTILINE)
_SLOW = re.compile(r"SLOW\[(\d{1,3}(?:\.\d{1,3})?)\]")
_MAX_MESSAGES = 4096
_MAX_MARKERS = 16
_MAX_PIXELS = 40_000_000
_MAX_PREFIXES = 100_000
_DETAILS = (None, "low", "high", "original", "auto")
# DeepSeek's image limits (V4.1-Flash, 2026-12).
_MAX_IMAGE_BYTES = 32 * 1024 * 1024
_MAX_SIDE = 8192
_MAX_SIDE_MANY = 4096
_MANY = 15
_MAX_IMAGES = 600
_WRONG = {"red": "blue", "green": "red", "blue": "green", "yellow": "black", "black": "white",
          "white": "yellow", "cyan": "magenta", "magenta": "cyan"}
_HANG_LIMIT_S = 300.0  # a hung request answers 503 after this even if nobody stops the server


def estimate(chars: int) -> int:
    """The upstream's token count for ``chars`` characters: four a token, rounded up."""
    return math.ceil(chars / 4)


def image_tokens(width: int, height: int, detail: str | None = None) -> int:
    """Input tokens DeepSeek bills one image (its documented figures, approximated)."""
    if detail == "low":
        width, height = min(width, 512), min(height, 512)
    return max(187, min(1024, math.ceil(width * height / 1568)))


def deepseek_image_error(index: int = 0, variant: str = "image_url") -> dict[str, Any]:
    """DeepSeek's body for a non-text content part sent to a text model."""
    return _error_body(
        "Failed to deserialize the JSON body into the target type: "
        f"messages[{index}]: unknown variant `{variant}`, expected `text`",
        "invalid_request_error",
        "invalid_request_error",
    )


def _error_body(message: str, kind: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class _Refusal(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


def _bad_request(message: str) -> _Refusal:
    return _Refusal(400, _error_body(message, "invalid_request_error", "invalid_request_error"))


# -- reading a request ------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _message_chars(message: dict[str, Any]) -> int:
    chars = len(_text(message.get("content")))
    if isinstance(message.get("reasoning_content"), str):  # billed as input when sent back
        chars += len(message["reasoning_content"])
    if message.get("tool_calls"):
        chars += len(_compact(message["tool_calls"]))
    return chars


def _data_sha256(url: Any) -> str:
    match = _DATA_URL.match(url) if isinstance(url, str) else None
    if not match:
        return ""
    return hashlib.sha256(base64.b64decode(match.group(2))).hexdigest()


def _decode_image(url: Any, where: str) -> Image.Image:
    match = _DATA_URL.match(url) if isinstance(url, str) else None
    if not match:
        raise _bad_request(f"{where}: the image is not a base64 data URL")
    try:
        raw = base64.b64decode(match.group(2), validate=True)
        if len(raw) > _MAX_IMAGE_BYTES:
            raise _bad_request(f"{where}: the image is larger than 32 MiB")
        with Image.open(io.BytesIO(raw)) as image:
            width, height = image.size
            if width * height > _MAX_PIXELS:
                raise _bad_request(f"{where}: the image is too large")
            image.load()
            return image.copy()
    except (
        binascii.Error, UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError
    ):
        raise _bad_request(f"{where}: the image cannot be decoded") from None


@dataclass
class _Seen:
    """An image a seeing model decoded: where it was, what detail it asked for, and the
    SHA-256 of the bytes it decoded."""

    image: Image.Image
    role: str
    detail: str | None
    sha256: str = ""


def _check_parts(messages: list[Any], *, vision: bool) -> list[_Seen]:
    """Refuse what the model cannot take, as DeepSeek does; decode the seeing model's images
    (user and tool messages) under DeepSeek's limits."""
    images: list[_Seen] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _bad_request(f"messages[{index}]: expected a message object")
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                continue
            if not vision:
                raise _Refusal(400, deepseek_image_error(index, str(kind)))
            if kind != "image_url":
                raise _bad_request(
                    f"messages[{index}]: unknown variant `{kind}`, expected `text` or `image_url`"
                )
            role = str(message.get("role"))
            if role not in ("user", "tool"):
                raise _bad_request(
                    f"messages[{index}]: images are not supported in {role} messages")
            image_url = part.get("image_url")
            if not isinstance(image_url, dict) or image_url.get("detail") not in _DETAILS:
                raise _bad_request(f"messages[{index}]: image_url must be {{url, detail?}}")
            decoded = _decode_image(image_url.get("url"), f"messages[{index}]")
            images.append(_Seen(decoded, role, image_url.get("detail"),
                                _data_sha256(image_url.get("url"))))
            if len(images) > _MAX_IMAGES:
                raise _bad_request(f"a request may hold at most {_MAX_IMAGES} images")
    side = _MAX_SIDE_MANY if len(images) >= _MANY else _MAX_SIDE
    for seen in images:
        if max(seen.image.size) > side:
            raise _bad_request(
                f"an image side is longer than {side} px "
                f"({seen.image.width}x{seen.image.height}, {len(images)} images)")
    return images


def _redacted(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload with every ``data:`` image URL replaced by :data:`IMAGE_PLACEHOLDER`."""
    copied = copy.deepcopy(payload)
    for message in copied.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else ():
            image_url = part.get("image_url") if isinstance(part, dict) else None
            if isinstance(image_url, dict) and str(image_url.get("url", "")).startswith("data:"):
                image_url["url"] = IMAGE_PLACEHOLDER
    return copied


# -- deciding the answer ----------------------------------------------------------------------


@dataclass
class _Reply:
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    reasoning: str = ""

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"

    @property
    def completion_chars(self) -> int:
        return len(self.content) + sum(
            len(call["function"]["name"]) + len(call["function"]["arguments"])
            for call in self.tool_calls
        )


def _offered_tools(payload: dict[str, Any]) -> set[str]:
    if payload.get("tool_choice") == "none" or not isinstance(payload.get("tools"), list):
        return set()
    names: set[str] = set()
    for tool in payload["tools"][:128]:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


def _tool_call(name: str, arguments: str, ordinal: int) -> dict[str, Any]:
    return {
        "id": f"call_{ordinal:02d}_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _after_tools(messages: list[dict[str, Any]], seen: Sequence[_Seen] = ()) -> str | None:
    trailing: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") == "system" and not trailing:
            continue  # a system note after the results (Claude Code's) does not hide them
        if message.get("role") != "tool":
            break
        trailing.append(message)
    if not trailing:
        return None
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                names[str(call.get("id"))] = str(call["function"].get("name"))
    lines = [
        f"after {names.get(str(m.get('tool_call_id')), 'tool')}: {_text(m.get('content'))}"
        for m in reversed(trailing)
    ]
    # The images of the trailing tool results, as the model saw them.
    trailing_images = sum(
        1 for m in trailing if isinstance(m.get("content"), list)
        for p in m["content"] if isinstance(p, dict) and p.get("type") == "image_url")
    tool_seen = [s for s in seen if s.role == "tool"][-trailing_images:] if trailing_images else []
    lines += [f"I see an image of {s.image.width}x{s.image.height} pixels." for s in tool_seen]
    return "\n".join(lines)


def _delay(payload: dict[str, Any]) -> float:
    """The ``SLOW[<seconds>]`` of the last user text (0 without one), capped."""
    users = [m for m in payload["messages"] if m.get("role") == "user"]
    match = _SLOW.search(_text(users[-1].get("content"))) if users else None
    return min(float(match.group(1)), _HANG_LIMIT_S) if match else 0.0


def _all_text(messages: list[dict[str, Any]], role: str) -> str:
    return "\n".join(_text(m.get("content")) for m in messages if m.get("role") == role)


def _vision_reply(
    payload: dict[str, Any], seen: Sequence[_Seen], fault: str | None
) -> _Reply | None:
    """The answer to a probe or an evidence request, read from the last image's pixels."""
    if not seen:
        return None
    messages: list[dict[str, Any]] = payload["messages"]
    image = seen[-1].image.convert("RGB")
    if "PROBE:" in _all_text(messages, "user"):
        cells = probe_cells(image)
        if fault == "misprobe":
            cells = [[_WRONG[c] for c in row] for row in cells]
        return _Reply(json.dumps({"cells": cells}))
    system = _all_text(messages, "system")
    for schema, make in (("deepseekeyes.target.v1", target_for),
                         ("deepseekeyes.evidence.v1", evidence_for)):
        if schema in system and "Answer with exactly one JSON object" in system:
            if fault == "badjson":
                return _Reply("Sure! The picture shows something, I think.")
            return _Reply(json.dumps(make(image)))
    return None


def _reply(payload: dict[str, Any], images: Sequence[_Seen], fault: str | None = None) -> _Reply:
    messages: list[dict[str, Any]] = payload["messages"]
    vision = _vision_reply(payload, images, fault)
    if vision is not None:
        return vision
    users = [m for m in messages if m.get("role") == "user"]
    user_text = _text(users[-1].get("content")) if users else ""
    offered = _offered_tools(payload)
    # An agent that never stops: while the tool is offered, call it again.
    for match in _MARKER.finditer(user_text):
        marker, target, rest = match.groups()
        if marker == "REPEAT" and target in offered:
            return _Reply(tool_calls=[_tool_call(target, rest.strip(), 0)])
    after = _after_tools(messages, images)
    if after is not None:
        # A sequential agent: the N-th THEN marker after the N-th round of tool results.
        steps = [(t, r) for m, t, r in _MARKER.findall(user_text) if m == "THEN"]
        last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user") \
            if users else -1
        rounds = sum(1 for m in messages[last_user + 1:] if m.get("tool_calls"))
        if 0 < rounds <= len(steps) and steps[rounds - 1][0] in offered:
            target, rest = steps[rounds - 1]
            return _Reply(tool_calls=[_tool_call(target, rest.strip(), 0)])
        finals = _FINALLY.findall(user_text)
        return _Reply(finals[-1].strip() if finals else after)
    calls: list[dict[str, Any]] = []
    for match in _MARKER.finditer(user_text):
        if len(calls) >= _MAX_MARKERS:
            break
        marker, target, rest = match.groups()
        if marker == "LOOK" and "look" in offered:
            arguments = json.dumps({"image": target, "question": rest.strip()})
            calls.append(_tool_call("look", arguments, len(calls)))
        elif marker == "CALL" and target in offered:
            calls.append(_tool_call(target, rest.strip(), len(calls)))
    if calls:
        return _Reply(tool_calls=calls)
    if images:
        return _Reply(" ".join(
            f"I see an image of {s.image.width}x{s.image.height} pixels." for s in images))
    answers = [a for m in messages for a in _ANSWER.findall(_text(m.get("content")))]
    if answers:
        return _Reply(answers[-1].strip())
    return _Reply("echo: " + user_text)


# -- the app ----------------------------------------------------------------------------------


class _RawResponse(Response):
    """Sends the given body pieces and, unless ``complete``, returns without finishing the
    response, so uvicorn drops the connection mid-body: the client sees a cut stream."""

    def __init__(self, pieces: list[bytes], media_type: str, *, complete: bool) -> None:
        super().__init__(media_type=media_type)
        self._pieces = pieces
        self._complete = complete

    # The ASGI signature is fixed; this response reads nothing from the request.
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", str(self.media_type).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for piece in self._pieces:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        if self._complete:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def _event(value: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(value, ensure_ascii=False).encode() + b"\n\n"


def _pieces(text: str, count: int = 3) -> list[str]:
    step = max(1, -(-len(text) // count))
    return [text[i : i + step] for i in range(0, len(text), step)]


class _App:
    def __init__(self, api_key: str | None, extra_models: Sequence[Mapping[str, Any]]) -> None:
        self.lock = threading.Lock()
        self.received = threading.Condition(self.lock)  # notified at every chat request
        self.requests: list[dict[str, Any]] = []
        self.body_hashes: list[str] = []  # SHA-256 of each chat request's exact body bytes
        self.authorizations: list[str | None] = []
        self.last_authorization_sha256: str | None = None
        self.counts: Counter[str] = Counter()
        self.models_failure: int | None = None
        self.busy_left = 0  # chat requests still to answer 503 "Server is busy"
        self.busy_retry_after: int | None = None
        self.issued: dict[str, str] = {}  # tool call id -> the reasoning issued with it
        self.on_chat: Callable[[Any], None] | None = None  # see the module docstring
        self._prefixes: set[str] = set()
        self._expected_auth = (
            None if api_key is None else hashlib.sha256(f"Bearer {api_key}".encode()).digest()
        )
        # DeepSeek's /models: ids only; nothing says which model takes images.
        listing: list[dict[str, Any]] = [
            {"id": model, "object": "model", "owned_by": "deepseek"}
            for model in (*SEEING_MODELS, *TEXT_MODELS)
        ]
        listing += [{"id": m, "object": "model", "owned_by": "loopback"} for m in BEHAVIOUR_MODELS]
        listing += [dict(entry) for entry in extra_models]
        self.listing = listing
        self.vision_models = set(SEEING_MODELS) | {
            str(entry.get("id"))
            for entry in listing
            if "image" in (entry.get("input_modalities") or ())
        }
        self.faults: dict[str, str] = {}  # model -> "misprobe" | "badjson"
        self.decoded: list[dict[str, Any]] = []  # per request that carried images
        self.known_models = {str(entry.get("id")) for entry in listing}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.shutdown: asyncio.Event | None = None
        routes = []
        for prefix in ("/v1", ""):
            routes += [
                Route(f"{prefix}/models", self.models, methods=["GET"]),
                Route(f"{prefix}/chat/completions", self.chat, methods=["POST"]),
            ]
        self.starlette = Starlette(routes=routes)

    def reset(self, *, cache: bool) -> None:
        with self.lock:
            self.requests.clear()
            self.decoded.clear()
            self.authorizations.clear()
            self.last_authorization_sha256 = None
            self.counts.clear()
            self.busy_left = 0
            if cache:
                self._prefixes.clear()

    # -- auth and bookkeeping ------------------------------------------------------------

    def _authorized(self, request: Request) -> tuple[bool, str | None]:
        header = request.headers.get("authorization")
        digest = None if header is None else hashlib.sha256(header.encode()).digest()
        with self.lock:
            self.last_authorization_sha256 = None if digest is None else digest.hex()
        if self._expected_auth is None:
            return True, None if digest is None else digest.hex()
        ok = digest is not None and hmac.compare_digest(digest, self._expected_auth)
        return ok, None if digest is None else digest.hex()

    @staticmethod
    def _auth_failure(request: Request) -> JSONResponse:
        header = request.headers.get("authorization", "")
        tail = header[-4:] if header.lower().startswith("bearer ") and len(header) > 11 else ""
        message = (
            f"Authentication Fails, Your api key: ****{tail} is invalid"
            if tail
            else "Authentication Fails (no such user)"
        )
        return JSONResponse(
            _error_body(message, "authentication_error", "invalid_request_error"), status_code=401
        )

    def _cache_hit_chars(self, messages: list[dict[str, Any]]) -> int:
        """Characters of the longest run of leading messages some earlier served request
        also began with; this request's prefixes are remembered afterwards."""
        digest = hashlib.sha256()
        hit = chars = 0
        keys: list[str] = []
        with self.lock:
            for message in messages:
                digest.update(_compact(message).encode())
                digest.update(b"\x00")
                key = digest.hexdigest()
                keys.append(key)
                chars += _message_chars(message)
                if key in self._prefixes:
                    hit = chars
            if len(self._prefixes) + len(keys) > _MAX_PREFIXES:
                self._prefixes.clear()
            self._prefixes.update(keys)
        return hit

    # -- handlers ------------------------------------------------------------------------

    async def models(self, request: Request) -> Response:
        with self.lock:
            self.counts["models"] += 1
            failure = self.models_failure
        ok, _ = self._authorized(request)
        if not ok:
            return self._auth_failure(request)
        if failure is not None:
            body = _error_body("the model list is unavailable", "server_error", "unavailable")
            return JSONResponse(body, status_code=failure)
        return JSONResponse({"object": "list", "data": copy.deepcopy(self.listing)})

    async def chat(self, request: Request) -> Response:
        ok, auth = self._authorized(request)
        try:
            raw = await request.body()
            payload = json.loads(raw)
        except ValueError:
            payload = None
        model = payload.get("model") if isinstance(payload, dict) else None
        with self.lock:
            self.counts["chat"] += 1
            if isinstance(model, str):
                self.counts[f"chat:{model}"] += 1
            self.received.notify_all()
            if isinstance(payload, dict):
                self.requests.append(_redacted(payload))
                self.body_hashes.append(hashlib.sha256(raw).hexdigest())
                self.authorizations.append(auth)
        hook = self.on_chat
        if hook is not None:
            hook(payload)
        if not ok:
            return self._auth_failure(request)
        with self.lock:
            busy = self.busy_left > 0
            if busy:
                self.busy_left -= 1
            retry_after = self.busy_retry_after
        if busy:
            headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
            return JSONResponse(
                _error_body("Server is busy, please try again later", "server_error",
                            "server_busy"),
                status_code=503, headers=headers,
            )
        try:
            return await self._answer(request, payload)
        except _Refusal as refusal:
            return JSONResponse(refusal.body, status_code=refusal.status)

    async def _answer(self, request: Request, payload: Any) -> Response:
        if not isinstance(payload, dict):
            raise _bad_request("Failed to deserialize the JSON body into the target type")
        model = payload.get("model")
        messages = payload.get("messages")
        if not isinstance(messages, list) or not 0 < len(messages) <= _MAX_MESSAGES:
            raise _bad_request(
                "Failed to deserialize the JSON body into the target type: missing field "
                "`messages`"
            )
        if not isinstance(model, str) or model not in self.known_models:
            raise _bad_request("Model Not Exist")
        if model == "fail-401":
            return self._auth_failure(request)
        if model == "fail-429":
            return JSONResponse(
                _error_body("Rate Limit Reached", "rate_limit_error", "rate_limit_exceeded"),
                status_code=429,
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        if model == "fail-500" or (model == "midfail" and payload.get("stream") is not True):
            return JSONResponse(
                _error_body("the loopback upstream failed", "server_error", "internal_error"),
                status_code=500,
            )
        if model == "hang":
            assert self.shutdown is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.shutdown.wait(), _HANG_LIMIT_S)
            body = _error_body("the loopback upstream is shutting down", "server_error", None)
            return JSONResponse(body, status_code=503)
        with self.lock:
            sees = model in self.vision_models
            fault = self.faults.get(model)
        images = _check_parts(messages, vision=sees)
        if images:
            with self.lock:
                self.decoded.append({"model": model, "images": [
                    {"sha256": i.sha256, "role": i.role, "width": i.image.width,
                     "height": i.image.height} for i in images]})
        thinking = _thinking(model, payload)
        if thinking:
            self._check_reasoning(messages)
        reply = _reply(payload, images, fault)
        if thinking:
            reply.reasoning = REASONING_TEXT
            if reply.tool_calls:
                reply.reasoning = f"{REASONING_TEXT} plan {uuid.uuid4().hex[:12]}"
                with self.lock:
                    self.issued.update((c["id"], reply.reasoning) for c in reply.tool_calls)
        usage = self._usage(payload, reply, images)
        stream = payload.get("stream") is True
        options = payload.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        identity = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": "fp_loopback",
        }
        if model == "cut":
            return self._cut(identity, reply, stream=stream)
        if model == "midfail":
            failure = _error_body("the loopback upstream failed mid-stream", "server_error",
                                  "internal_error")
            pieces = [_event(_chunk(identity, {"role": "assistant", "content": "half"})),
                      _event(failure), b"data: [DONE]\n\n"]
            return _RawResponse(pieces, "text/event-stream", complete=True)
        delay = _delay(payload)
        if model == "badjson":
            if stream:
                first = _event(_chunk(identity, {"role": "assistant", "content": "x"}))
                pieces = [first, b"data: {not json\n\n", b"data: [DONE]\n\n"]
                return _RawResponse(pieces, "text/event-stream", complete=True)
            return Response(b'{"id": "x", "choices": [', media_type="application/json")
        finish = None if model == "nofinish" else reply.finish_reason
        if stream:
            events = _sse(identity, reply, finish, usage if include_usage else None,
                          pause=lambda: self._pause(delay), ended=self._stream_ended)
            return StreamingResponse(events, media_type="text/event-stream")
        await self._pause(delay)
        return JSONResponse(_completion(identity, reply, finish, usage))

    def _stream_ended(self, whole: bool) -> None:
        with self.received:
            self.counts["streams_whole" if whole else "streams_cut"] += 1
            self.received.notify_all()

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` (``SLOW``), or until the server stops."""
        if seconds <= 0:
            return
        assert self.shutdown is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.shutdown.wait(), seconds)

    def _check_reasoning(self, messages: list[Any]) -> None:
        """DeepSeek's thinking-mode rule for histories, and the loopback's exactness check:
        in an exchange (between two user messages) where the model called tools, every
        assistant message carries ``reasoning_content`` (an empty string is accepted)."""
        exchange: list[int] = []
        called = False
        for index, message in enumerate([*messages, {"role": "user"}]):
            role = message.get("role") if isinstance(message, dict) else None
            if role == "user":
                if called:
                    for at in exchange:
                        self._check_one(at, messages[at])
                exchange, called = [], False
            elif role == "assistant":
                exchange.append(index)
                called = called or bool(message.get("tool_calls"))

    def _check_one(self, index: int, message: dict[str, Any]) -> None:
        reasoning = message.get("reasoning_content")
        if not isinstance(reasoning, str):
            raise _bad_request(
                "Missing `reasoning_content` field in the assistant message at message "
                f"index {index}. The `reasoning_content` in the thinking mode must be "
                "passed back to the API."
            )
        with self.lock:
            issued = {
                self.issued.get(str(c.get("id"))) for c in message.get("tool_calls") or ()
                if isinstance(c, dict)
            }
        if issued and None not in issued and issued != {reasoning}:
            raise _bad_request(
                f"(loopback check) the `reasoning_content` of the assistant message at "
                f"message index {index} is not the one issued with its tool calls"
            )

    def _usage(self, payload: dict[str, Any], reply: _Reply,
               images: Sequence[_Seen] = ()) -> dict[str, Any]:
        messages: list[dict[str, Any]] = payload["messages"]
        chars = sum(_message_chars(m) for m in messages)
        if isinstance(payload.get("tools"), list):
            chars += len(_compact(payload["tools"]))
        prompt = estimate(chars) + sum(
            image_tokens(s.image.width, s.image.height, s.detail) for s in images)
        hit = min(prompt, estimate(self._cache_hit_chars(messages)))
        reasoning = estimate(len(reply.reasoning))
        completion = estimate(reply.completion_chars) + reasoning
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_cache_hit_tokens": hit,
            "prompt_cache_miss_tokens": prompt - hit,
        }
        if reply.reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return usage

    @staticmethod
    def _cut(identity: dict[str, Any], reply: _Reply, *, stream: bool) -> Response:
        if stream:
            text = reply.content or "cut"
            half = max(1, len(text) // 2)
            pieces = [
                _event(_chunk(identity, {"role": "assistant", "content": text[:half]})),
                _event(_chunk(identity, {"content": text[half:]})),
            ]
            return _RawResponse(pieces, "text/event-stream", complete=False)
        body = json.dumps(_completion(identity, reply, "stop", None)).encode()
        return _RawResponse([body[: len(body) // 2]], "application/json", complete=False)


def _thinking(model: str, payload: dict[str, Any]) -> bool:
    """Whether a request runs in thinking mode: on for the V4 names unless disabled."""
    requested = payload.get("thinking")
    if isinstance(requested, dict) and requested.get("type") == "disabled":
        return False
    return model in THINKING_MODELS


def _chunk(
    identity: dict[str, Any], delta: dict[str, Any], finish: str | None = None
) -> dict[str, Any]:
    return {
        **identity,
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def _completion(
    identity: dict[str, Any], reply: _Reply, finish: str | None, usage: dict[str, Any] | None
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = reply.tool_calls
    document: dict[str, Any] = {
        **identity,
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
    }
    if usage is not None:
        document["usage"] = usage
    return document


async def _sse(
    identity: dict[str, Any], reply: _Reply, finish: str | None, usage: dict[str, Any] | None,
    *, pause: Callable[[], Awaitable[None]], ended: Callable[[bool], None],
) -> AsyncIterator[bytes]:
    """The stream; ``ended`` is told whether it was sent whole or closed early (the client
    went away)."""
    whole = False
    try:
        yield b": keep-alive\n\n"
        yield _event(_chunk(identity, {"role": "assistant", "content": ""}))
        for piece in _pieces(reply.reasoning, 2):
            yield _event(_chunk(identity, {"content": None, "reasoning_content": piece}))
        for piece in _pieces(reply.content):
            await pause()
            yield _event(_chunk(identity, {"content": piece}))
        for index, call in enumerate(reply.tool_calls):
            opening = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
            yield _event(_chunk(identity, {"tool_calls": [opening]}))
            for piece in _pieces(call["function"]["arguments"]):
                more = {"index": index, "function": {"arguments": piece}}
                yield _event(_chunk(identity, {"tool_calls": [more]}))
        if finish is not None:
            yield _event(_chunk(identity, {"content": ""}, finish))
        if usage is not None:
            yield _event({**identity, "object": "chat.completion.chunk", "choices": [],
                          "usage": usage})
        yield b"data: [DONE]\n\n"
        whole = True
    finally:
        ended(whole)


# -- the server -------------------------------------------------------------------------------


class LoopbackUpstream(ThreadedServer):
    """``with LoopbackUpstream() as upstream: ChatClient(upstream.base_url)``.

    Args:
        api_key: when given, every request must carry ``Authorization: Bearer <api_key>``
            or gets DeepSeek's 401 (only its SHA-256 is kept).
        extra_models: more ``/models`` entries, listed after the built-in ones; an entry whose
            ``input_modalities`` holds ``"image"`` is served like the vision model, any other
            like a text model.
    """

    thread_name = "loopback-upstream"

    def __init__(
        self, *, api_key: str | None = None, extra_models: Sequence[Mapping[str, Any]] = ()
    ) -> None:
        super().__init__(_App(api_key, extra_models))
        self._app: _App = self._app

    @property
    def base_url(self) -> str:
        if not self.port:
            raise RuntimeError("the loopback upstream is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat payload received (refused ones too), images as ``"<image>"``; a copy."""
        with self._app.lock:
            return list(self._app.requests)

    @property
    def decoded(self) -> list[dict[str, Any]]:
        """Per request a seeing model decoded images in: ``{"model", "images": [{"sha256"
        (of the bytes decoded), "role", "width", "height"}]}``; a copy."""
        with self._app.lock:
            return copy.deepcopy(self._app.decoded)

    def requests_for(self, model: str) -> list[dict[str, Any]]:
        """The chat payloads received for ``model`` (images as ``"<image>"``)."""
        return [r for r in self.requests if r.get("model") == model]

    @property
    def body_hashes(self) -> list[str]:
        """SHA-256 of each chat request body as received, byte for byte; a copy."""
        with self._app.lock:
            return list(self._app.body_hashes)

    @property
    def authorizations(self) -> list[str | None]:
        """SHA-256 of each chat request's ``Authorization`` header (None: none), in the order
        of :attr:`requests`."""
        with self._app.lock:
            return list(self._app.authorizations)

    @property
    def last_authorization_sha256(self) -> str | None:
        """SHA-256 of the last request's ``Authorization`` header (chat or models)."""
        with self._app.lock:
            return self._app.last_authorization_sha256

    @property
    def chat_calls(self) -> int:
        with self._app.lock:
            return self._app.counts["chat"]

    @property
    def models_calls(self) -> int:
        with self._app.lock:
            return self._app.counts["models"]

    def calls_for(self, model: str) -> int:
        """Chat requests received for ``model``."""
        with self._app.lock:
            return self._app.counts[f"chat:{model}"]

    def wait_for_calls(self, model: str, count: int, timeout: float) -> bool:
        """Wait until ``count`` chat requests for ``model`` have arrived (a ``hang`` request
        counts on arrival); False when ``timeout`` seconds passed first."""
        with self._app.received:
            return self._app.received.wait_for(
                lambda: self._app.counts[f"chat:{model}"] >= count, timeout)

    def wait_for_cut_streams(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` streams were closed before their end (the client went away);
        False when ``timeout`` seconds passed first."""
        with self._app.received:
            return self._app.received.wait_for(
                lambda: self._app.counts["streams_cut"] >= count, timeout)

    @property
    def cut_streams(self) -> int:
        """Streams closed before their end."""
        with self._app.lock:
            return self._app.counts["streams_cut"]

    @property
    def on_chat(self) -> Callable[[Any], None] | None:
        """Called with each chat payload as it arrives, before it is answered; None: none."""
        return self._app.on_chat

    @on_chat.setter
    def on_chat(self, hook: Callable[[Any], None] | None) -> None:
        self._app.on_chat = hook

    def busy(self, count: int = 1, *, retry_after: int | None = 1) -> None:
        """Answer the next ``count`` chat requests with HTTP 503 "Server is busy" (and
        ``Retry-After: retry_after`` unless None)."""
        with self._app.lock:
            self._app.busy_left = count
            self._app.busy_retry_after = retry_after

    def grant_sight(self, model: str, sees: bool = True) -> None:
        """The switch: make ``model`` take images from now on (or, ``sees=False``, refuse
        them with DeepSeek's 400), as when DeepSeek re-points a name."""
        with self._app.lock:
            if sees:
                self._app.vision_models.add(model)
            else:
                self._app.vision_models.discard(model)

    def vision_fault(self, model: str, fault: str | None) -> None:
        """``misprobe``: ``model`` names wrong probe colours; ``badjson``: it answers evidence
        requests with prose; None: it reads pixels correctly again."""
        with self._app.lock:
            if fault is None:
                self._app.faults.pop(model, None)
            else:
                self._app.faults[model] = fault

    def fail_models(self, status: int | None = 503) -> None:
        """Make ``/models`` answer ``status`` from now on (None: list models again)."""
        with self._app.lock:
            self._app.models_failure = status

    def reset(self, *, cache: bool = True) -> None:
        """Forget recorded requests and counters (and, with ``cache``, the prompt cache)."""
        self._app.reset(cache=cache)

