"""Loopback OpenAI-compatible vision servers for tests: real HTTP, real image decoding.

One Starlette app, served by uvicorn on ``127.0.0.1`` (an OS-chosen port) in a background
thread, plays every kind of endpoint a route meets. The URL path picks the behaviour::

    http://127.0.0.1:PORT/<behaviour>/v1/chat/completions
    http://127.0.0.1:PORT/<behaviour>/v1/models

Every chat behaviour first decodes the ``data:`` URL image it receives with Pillow and
answers 400 when there is none, so a route that drops or mangles the image fails here as it
would against a real model. ``healthy`` then answers *from the pixels* (size, mean colour,
probe grid colours); ``textonly`` ignores them, like a text model behind an image-accepting
proxy.

A path segment may carry a tag after ``~`` (``healthy~t1``): the part before it selects the
behaviour and the whole segment keys the counters and the once-only state, so a test gets
fresh counters from a shared server without resetting anything.

Behaviours: ``healthy``, ``error500``, ``hang``, ``malformed``, ``cut``, ``cut_once``,
``textonly``, ``nomodel``, plus ``nofinish`` (a clean stream with ``[DONE]`` but no finish
reason), ``badchunk`` (a stream with one chunk that is not JSON), ``empty`` (an answer
with empty content) and ``misprobe_once`` (names the wrong probe colours once, then reads
the pixels like ``healthy``), and ``catalog`` (chat like ``healthy``; its ``/models``
lists :data:`CATALOG_ENTRIES`, models that declare their input modalities in the shapes
providers use).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import io
import json
import re
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from PIL import Image, ImageStat, UnidentifiedImageError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from deepseek_eyes.vision.routing.probe import PROBE_COLOURS
from threaded_server import ThreadedServer

__all__ = [
    "BEHAVIOURS",
    "CATALOG_ENTRIES",
    "LOOPBACK_MODEL",
    "PALETTE",
    "USAGE",
    "LoopbackVisionServer",
    "evidence_for",
    "grid_png",
    "probe_cells",
    "solid_png",
    "target_for",
]

LOOPBACK_MODEL = "vision-1"
USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
# The colour names any vision model knows; the server names the nearest one it sees.
PALETTE: dict[str, tuple[int, int, int]] = dict(PROBE_COLOURS)
BEHAVIOURS = (
    "healthy", "error500", "hang", "malformed", "cut", "cut_once", "textonly", "nomodel",
    "nofinish", "badchunk", "empty", "misprobe_once", "catalog",
)
_MODELS = {"textonly": ["text-1"], "nomodel": ["other-model"]}
#: The ``catalog`` behaviour's ``/models`` entries: two declare text and image input.
CATALOG_ENTRIES: list[dict[str, Any]] = [
    {"id": "image-only", "input_modalities": ["image"]},
    {"id": LOOPBACK_MODEL, "input_modalities": ["text", "image"]},
    {"id": "flag-vision", "supports_vision": True, "capabilities": {"vision": True}},
    {"id": "text-1", "input_modalities": ["text"]},
    {"id": "or-vision", "architecture": {"modality": "text+image->text"}},
    {"id": "said-text", "modalities": {"input": ["text", "image"]}},
]
_DATA_URL = re.compile(r"^data:([\w.+/-]+);base64,(.*)$", re.DOTALL)
_HANG_LIMIT_S = 300.0  # a hung request answers 503 after this even if nobody stops the server


# -- images ----------------------------------------------------------------------------------


def solid_png(width: int, height: int, rgb: tuple[int, int, int] = (10, 20, 30)) -> bytes:
    """A flat-colour PNG, for tests that need an image of a known size and mean."""
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), rgb).save(buffer, format="PNG")
    return buffer.getvalue()


def grid_png(cells: list[list[str]], cell_px: int = 16) -> bytes:
    """A probe-style grid: ``cells[row][col]`` names a :data:`PALETTE` colour."""
    rows, cols = len(cells), len(cells[0])
    image = Image.new("RGB", (cols * cell_px, rows * cell_px))
    for r, row in enumerate(cells):
        for c, name in enumerate(row):
            box = (c * cell_px, r * cell_px, (c + 1) * cell_px, (r + 1) * cell_px)
            image.paste(PALETTE[name], box)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _nearest(rgb: tuple[int, ...]) -> str:
    return min(
        PALETTE,
        key=lambda name: sum((a - b) ** 2 for a, b in zip(PALETTE[name], rgb, strict=True)),
    )


def probe_cells(image: Image.Image) -> list[list[str]]:
    """Name the colour at the centre of each cell of a 3×3 grid."""
    width, height = image.size
    return [
        [
            _nearest(image.getpixel((int((c + 0.5) * width / 3), int((r + 0.5) * height / 3))))  # type: ignore[arg-type]
            for c in range(3)
        ]
        for r in range(3)
    ]


def evidence_for(image: Image.Image) -> dict[str, Any]:
    """A valid ``deepseekeyes.evidence.v1`` object derived from the pixels."""
    width, height = image.size
    red, green, blue = (round(v) for v in ImageStat.Stat(image).mean[:3])
    return _evidence(
        f"An image of {width}x{height} pixels whose mean colour is RGB({red}, {green}, {blue}).",
        label=f"the whole {width}x{height} image",
    )


def target_for(image: Image.Image) -> dict[str, Any]:
    """A valid ``deepseekeyes.target.v1`` object stating the decoded size."""
    width, height = image.size
    return _target(f"The image is {width}x{height} pixels.")


def _evidence(summary: str, *, label: str = "the whole image") -> dict[str, Any]:
    return {
        "schema": "deepseekeyes.evidence.v1",
        "summary": summary,
        "ocr": [],
        "regions": [
            {
                "id": "r1",
                "kind": "photo",
                "bbox": [0, 0, 1, 1],
                "label": label,
                "confidence": 0.9,
            }
        ],
        "objects": [],
        "relations": [],
        "quantitative_facts": [],
        "uncertainties": [],
    }


def _target(answer: str) -> dict[str, Any]:
    return {
        "schema": "deepseekeyes.target.v1",
        "answer": answer,
        "confidence": 0.9,
        "observations": [],
        "ocr": [],
        "uncertainties": [],
    }


def _malformed_text() -> str:
    evidence = _evidence("A receipt with one line of text.")
    evidence["ocr"] = [
        {"text": "TOTAL 12.50", "bbox": [0.1, 0.1, 0.5, 0.1], "confidence": 0.9, "font": "x"}
    ]
    return f"<think>let me look</think>Here you go:\n```json\n{json.dumps(evidence)}\n```"


# -- the app ---------------------------------------------------------------------------------


class _BadRequest(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _decode_image(payload: Any) -> Image.Image:
    if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
        raise _BadRequest("the body is not a chat completion request")
    urls = [
        part["image_url"].get("url")
        for message in payload["messages"]
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for part in message["content"]
        if isinstance(part, dict)
        and part.get("type") == "image_url"
        and isinstance(part.get("image_url"), dict)
    ]
    if not urls:
        raise _BadRequest("the request carries no image")
    match = _DATA_URL.match(urls[-1]) if isinstance(urls[-1], str) else None
    if not match:
        raise _BadRequest("the image is not a base64 data URL")
    try:
        raw = base64.b64decode(match.group(2), validate=True)
        with Image.open(io.BytesIO(raw)) as image:
            image.load()
            return image.convert("RGB")
    except (binascii.Error, UnidentifiedImageError, OSError, ValueError) as exc:
        raise _BadRequest(f"the image cannot be decoded: {type(exc).__name__}") from None


def _user_prompt(payload: dict[str, Any]) -> str:
    texts: list[str] = []
    for message in payload["messages"]:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(
                part["text"]
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
    return "\n".join(texts)


def _redacted(payload: dict[str, Any]) -> dict[str, Any]:
    """The request with every image URL replaced, for assertions on the rest."""
    text = json.dumps(payload)
    return json.loads(re.sub(r'"data:[^"]*"', '"<image>"', text))  # type: ignore[no-any-return]


def _error(status: int, message: str, kind: str, code: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": code}}, status_code=status
    )


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": dict(USAGE),
    }


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _event(value: dict[str, Any], *, multiline: bool = False) -> bytes:
    # ``multiline`` spreads one JSON value over several ``data:`` lines, as SSE allows.
    text = json.dumps(value, indent=1) if multiline else json.dumps(value)
    return "".join(f"data: {line}\n" for line in text.split("\n")).encode() + b"\n"


def _pieces(text: str, count: int = 3) -> list[str]:
    step = max(1, -(-len(text) // count))
    return [text[i : i + step] for i in range(0, len(text), step)] or [""]


async def _sse(
    model: str, text: str, *, include_usage: bool, finish: bool = True
) -> AsyncIterator[bytes]:
    yield b": keep-alive\n\n"
    yield _event(_chunk(model, {"role": "assistant", "content": ""}))
    for index, piece in enumerate(_pieces(text)):
        yield _event(_chunk(model, {"content": piece}), multiline=index == 0)
    if finish:
        yield _event(_chunk(model, {}, "stop"))
    if include_usage:
        yield _event({**_chunk(model, {}), "choices": [], "usage": dict(USAGE)})
    yield b"data: [DONE]\n\n"


class _RawSSE(Response):
    """Sends the given body pieces and returns without finishing the response, so uvicorn
    closes the connection mid-body (it logs "ASGI callable returned without completing
    response"): the client sees a cut chunked stream."""

    def __init__(self, pieces: list[bytes]) -> None:
        super().__init__(media_type="text/event-stream")
        self._pieces = pieces

    # The ASGI signature is fixed; this response reads nothing from the request.
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for piece in self._pieces:
            await send({"type": "http.response.body", "body": piece, "more_body": True})


class _App:
    """The request handlers and everything they count."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.model_calls: Counter[str] = Counter()
        self.last_image_size: dict[str, tuple[int, int]] = {}
        self.last_payload: dict[str, dict[str, Any]] = {}
        self.last_authorization_sha256: dict[str, str | None] = {}
        self._cut_done: set[str] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.shutdown: asyncio.Event | None = None
        self.starlette = Starlette(
            routes=[
                Route("/{key}/v1/models", self.models, methods=["GET"]),
                Route("/{key}/v1/chat/completions", self.chat, methods=["POST"]),
            ]
        )

    @staticmethod
    def _behaviour(request: Request) -> tuple[str, str]:
        key: str = request.path_params["key"]
        return key, key.split("~", 1)[0]

    def _record_auth(self, key: str, request: Request) -> None:
        header = request.headers.get("authorization")
        self.last_authorization_sha256[key] = (
            None if header is None else hashlib.sha256(header.encode()).hexdigest()
        )

    async def models(self, request: Request) -> Response:
        key, behaviour = self._behaviour(request)
        if behaviour not in BEHAVIOURS:
            return _error(404, f"no behaviour {behaviour!r}", "invalid_request_error", "not_found")
        self.model_calls[key] += 1
        self._record_auth(key, request)
        if behaviour == "catalog":
            data = [{**entry, "object": "model", "owned_by": "loopback"}
                    for entry in CATALOG_ENTRIES]
            return JSONResponse({"object": "list", "data": data})
        ids = _MODELS.get(behaviour, [LOOPBACK_MODEL])
        data = [{"id": i, "object": "model", "owned_by": "loopback"} for i in ids]
        return JSONResponse({"object": "list", "data": data})

    async def chat(self, request: Request) -> Response:
        key, behaviour = self._behaviour(request)
        if behaviour not in BEHAVIOURS:
            return _error(404, f"no behaviour {behaviour!r}", "invalid_request_error", "not_found")
        self.calls[key] += 1
        self._record_auth(key, request)
        try:
            payload = json.loads(await request.body())
            image = _decode_image(payload)
        except ValueError:
            return _error(400, "the body is not JSON", "invalid_request_error", "invalid_json")
        except _BadRequest as exc:
            return _error(400, exc.message, "invalid_request_error", "invalid_image")
        self.last_image_size[key] = image.size
        self.last_payload[key] = _redacted(payload)
        model = payload.get("model") if isinstance(payload.get("model"), str) else LOOPBACK_MODEL
        stream = payload.get("stream") is True
        options = payload.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        prompt = _user_prompt(payload)

        if behaviour == "error500":
            return _error(500, "the loopback model failed", "server_error", "internal_error")
        if behaviour == "hang":
            assert self.shutdown is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.shutdown.wait(), _HANG_LIMIT_S)
            return _error(503, "the loopback server is shutting down", "server_error", "shutdown")

        if behaviour == "misprobe_once" and "PROBE" in prompt and key not in self._cut_done:
            self._cut_done.add(key)
            behaviour = "textonly"
        text = self._answer_text(behaviour, prompt, image)
        cut = behaviour == "cut" or (behaviour == "cut_once" and key not in self._cut_done)
        if stream and cut:
            self._cut_done.add(key)
            half = len(text) // 2
            return _RawSSE(
                [
                    _event(_chunk(model, {"role": "assistant", "content": text[:half]})),
                    _event(_chunk(model, {"content": text[half:]})),
                ]
            )
        if stream and behaviour == "badchunk":
            first = _event(_chunk(model, {"content": "x"}))
            return _RawSSEComplete([first, b"data: {not json\n\n", b"data: [DONE]\n\n"])
        if stream:
            return StreamingResponse(
                _sse(model, text, include_usage=include_usage, finish=behaviour != "nofinish"),
                media_type="text/event-stream",
            )
        return JSONResponse(_completion(model, text))

    @staticmethod
    def _answer_text(behaviour: str, prompt: str, image: Image.Image) -> str:
        if behaviour == "malformed":
            return _malformed_text()
        if behaviour == "empty":
            return ""
        if behaviour == "textonly":
            if "PROBE" in prompt:
                return json.dumps({"cells": [["red"] * 3 for _ in range(3)]})
            if "deepseekeyes.target.v1" in prompt:
                return json.dumps(_target("A picture."))
            return json.dumps(_evidence("A picture."))
        if "PROBE" in prompt:
            return json.dumps({"cells": probe_cells(image)})
        if "deepseekeyes.target.v1" in prompt:
            return json.dumps(target_for(image))
        return json.dumps(evidence_for(image))


class _RawSSEComplete(_RawSSE):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await super().__call__(scope, receive, send)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


# -- the server ------------------------------------------------------------------------------


class LoopbackVisionServer(ThreadedServer):
    """``with LoopbackVisionServer() as server: server.url("healthy")``.

    Attributes (keyed by the behaviour path segment, tag included):
        calls: chat completion requests received.
        model_calls: ``/models`` requests received.
        last_image_size: ``(width, height)`` of the last decoded image.
        last_payload: the last chat request body with image URLs replaced by ``"<image>"``.
        last_authorization_sha256: SHA-256 of the last ``Authorization`` header, or None.
    """

    thread_name = "loopback-vision"

    def __init__(self) -> None:
        super().__init__(_App())
        self._app: _App = self._app

    @property
    def calls(self) -> Counter[str]:
        return self._app.calls

    @property
    def model_calls(self) -> Counter[str]:
        return self._app.model_calls

    @property
    def last_image_size(self) -> dict[str, tuple[int, int]]:
        return self._app.last_image_size

    @property
    def last_payload(self) -> dict[str, dict[str, Any]]:
        return self._app.last_payload

    @property
    def last_authorization_sha256(self) -> dict[str, str | None]:
        return self._app.last_authorization_sha256

    def url(self, behaviour: str) -> str:
        """Base URL (``.../v1``) of one behaviour; ``behaviour~tag`` gets its own counters."""
        if behaviour.split("~", 1)[0] not in BEHAVIOURS:
            raise ValueError(f"unknown loopback behaviour {behaviour!r}")
        if not self.port:
            raise RuntimeError("the loopback server is not started")
        return f"http://127.0.0.1:{self.port}/{behaviour}/v1"

