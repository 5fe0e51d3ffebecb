"""OpenAI-format chat messages in, the runtime's own messages out (images as blob refs).

The runtime's message is what the session log stores::

    {"role": "user", "content": [{"type": "text", "text": "..."},
                                 {"type": "image", "sha256": "...", "media_type": "image/png",
                                  "width": 900, "height": 700, "size": 45144,
                                  "detail": "auto"}]}
    {"role": "assistant", "content": "...", "reasoning": "...",
     "tool_calls": [{"id", "name", "arguments"}]}
    {"role": "tool", "tool_call_id": "...", "name": "look", "content": "..."}
    {"role": "system", "content": "..."}

Parsing runs in phases, cheapest first, so that a request refused for any reason costs
little and leaves nothing behind:

1. **structure** — roles, parts, types and sizes; a ``data:`` URL's size is checked before
   its base64 is decoded, and its bytes are hashed to find repeats;
2. **counts** — distinct images (data by hash, URLs by address) over ``max_images`` are
   refused (``RUNTIME_TOO_MANY_IMAGES``) before any URL is fetched or any image decoded,
   and as soon as the limit is passed: 10,000 tiny images cost nine hashes;
3. **fetch** — distinct http(s) URLs, a few at a time, under the fetcher's own limits;
4. **admission** — every distinct image in one all-or-nothing call (decode, then store):
   a refused image stores nothing, and an image repeated 250 times is admitted once.

So nothing downstream ever holds image bytes it has not checked. How many messages a
request holds is not capped: a long agent session grows without end, and what bounds a
request is its size (the gateway's body limits: ``GATEWAY_BODY_TOO_LARGE``,
``GATEWAY_BODY_TEXT_TOO_LARGE``, ``GATEWAY_JSON_TOO_MANY_NODES``) and what reaches the
model its tokens (the history budget, ``runtime.history_budget_tokens``). Parsing is strict: an
unknown role or content part is a ``RUNTIME_BAD_MESSAGE`` naming where it is, never
silently dropped, because a dropped part changes what the model is asked.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

import anyio

from deepseek_eyes.errors import ImageError, TurnError
from deepseek_eyes.runtime.walks import leading_equal
from deepseek_eyes.vision.evidence.cache import ImageMeta

__all__ = [
    "Admit",
    "Fetch",
    "ImagePart",
    "ImageUrlPart",
    "ParsedHistories",
    "StoredCall",
    "has_images",
    "image_part",
    "image_refs",
    "image_url_part",
    "parse_messages",
    "text_of",
]

#: All-or-nothing admission of distinct images; the result follows the input order.
class Admit(Protocol):
    """Admission of a request's distinct images, all or nothing (``VisionBridge.admit_all``);
    ``sha256s`` are their hashes where already taken (None: not known)."""

    def __call__(self, images: Sequence[bytes], *,
                 sha256s: Sequence[str | None] | None = None) -> Awaitable[Sequence[ImageMeta]]:
        ...


class StoredCall(TypedDict):
    """A tool call as the session log stores it (an assistant message's ``tool_calls``)."""

    id: str
    name: str
    arguments: str
Fetch = Callable[[str], Awaitable[bytes]]

MAX_PARTS = 256
MAX_TEXT_CHARS = 4 * 1024 * 1024
MAX_TOOL_CALLS = 128
#: Distinct image URLs fetched at the same time.
FETCH_CONCURRENCY = 4
_DATA_URL = re.compile(r"^data:(?P<type>[\w.+-]+/[\w.+-]+)?(?P<params>(;[^,;]*)*?),", re.I)
_ROLES = {"system", "developer", "user", "assistant", "tool"}


def _bad(message: str, where: str) -> TurnError:
    return TurnError(f"{where}: {message}", code="RUNTIME_BAD_MESSAGE",
                     details={"at": where, "param": where})


class ImagePart(TypedDict):
    """An image in a runtime message: a reference to the blob store, never bytes."""

    type: str  # "image"
    sha256: str
    media_type: str
    width: int
    height: int
    size: int
    detail: str


class ImageUrlPart(TypedDict):
    type: str  # "image_url"
    image_url: dict[str, str]


def image_part(meta: ImageMeta, detail: str = "auto") -> ImagePart:
    return {
        "type": "image",
        "sha256": meta.sha256,
        "media_type": meta.media_type,
        "width": meta.width,
        "height": meta.height,
        "size": meta.size,
        "detail": detail,
    }


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _bad("text must be a string", where)
    if len(value) > MAX_TEXT_CHARS:
        raise _bad(f"text longer than {MAX_TEXT_CHARS} characters", where)
    return value


def image_url_part(data: bytes) -> ImageUrlPart:
    """Image bytes as an OpenAI ``image_url`` part (a base64 data URL): how ``ask`` and
    ``chat`` hand a file to the one admission path the gateway's clients take."""
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "image_url",
            "image_url": {"url": f"data:application/octet-stream;base64,{encoded}"}}


def decode_data_url(url: str, max_bytes: int, where: str) -> bytes:
    """The bytes of a base64 ``data:`` URL, refused before decoding when too large."""
    match = _DATA_URL.match(url)
    if match is None or ";base64" not in match.group("params").lower():
        raise _bad("an image data URL must be data:<type>;base64,<data>", where)
    payload = url[match.end() :]
    if len(payload) > (max_bytes // 3 + 1) * 4 + 8:
        raise ImageError(
            f"{where}: the image is larger than image.max_bytes ({max_bytes} bytes); "
            "nothing was decoded or stored",
            code="IMAGE_TOO_LARGE",
            details={"at": where, "param": where, "limit": max_bytes},
        )
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _bad("the image data URL is not valid base64", where) from exc


@dataclass
class _Images:
    """The images of one request while it is parsed: distinct sources, in order."""

    max_images: int | None
    fetch_enabled: bool
    data: dict[str, bytes]  # sha256 -> bytes, for data URLs
    urls: dict[str, str]  # url -> where it first appears
    parts: list[tuple[dict[str, Any], str, str]]  # (placeholder part, kind, key)
    first_at: dict[str, str] = field(default_factory=dict)  # key -> where it first appears

    def add(self, part: dict[str, Any], kind: str, key: str, where: str) -> None:
        self.parts.append((part, kind, key))
        self.first_at.setdefault(key, where)
        count = len(self.data) + len(self.urls)
        if self.max_images is not None and count > self.max_images:
            raise TurnError(
                f"{where}: the conversation holds more than {self.max_images} distinct "
                "images; nothing was fetched, decoded or stored",
                code="RUNTIME_TOO_MANY_IMAGES",
                details={"at": where, "limit": self.max_images},
            )


def _content(
    content: Any,
    where: str,
    *,
    images: _Images,
    max_image_bytes: int,
    allow_images: bool,
) -> str | list[dict[str, Any]]:
    if content is None:
        return ""
    if isinstance(content, str):
        return _text(content, where)
    if not isinstance(content, list):
        raise _bad("content must be a string or a list of parts", where)
    if len(content) > MAX_PARTS:
        raise _bad(f"more than {MAX_PARTS} content parts", where)
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(content):
        at = f"{where}.content[{index}]"
        if not isinstance(part, Mapping):
            raise _bad("a content part must be an object", at)
        kind = part.get("type")
        if kind in ("text", "input_text"):
            parts.append({"type": "text", "text": _text(part.get("text"), at)})
        elif kind == "image_url":
            if not allow_images:
                raise _bad("only user and tool messages may carry images", at)
            spec = part.get("image_url")
            url = spec.get("url") if isinstance(spec, Mapping) else spec
            detail = spec.get("detail", "auto") if isinstance(spec, Mapping) else "auto"
            if not isinstance(url, str) or not url:
                raise _bad("image_url needs a url", at)
            placeholder: dict[str, Any] = {"detail": detail if isinstance(detail, str) else "auto"}
            scheme = url[:8].lower()  # URL schemes are case-insensitive (RFC 3986 3.1)
            if scheme.startswith("data:"):
                data = decode_data_url(url, max_image_bytes, at)
                key = hashlib.sha256(data).hexdigest()
                images.data.setdefault(key, data)
                images.add(placeholder, "data", key, at)
            elif scheme.startswith(("http://", "https://")):
                if not images.fetch_enabled:
                    raise TurnError(
                        f"{at}: http(s) image URLs are off (gateway.allow_image_urls)",
                        code="RUNTIME_IMAGE_URL_DISABLED",
                        details={"at": at},
                    )
                images.urls.setdefault(url, at)
                images.add(placeholder, "url", url, at)
            else:
                raise _bad("image_url must be a data: or http(s) URL", at)
            parts.append(placeholder)
        else:
            raise _bad(f"unsupported content part type {str(kind)[:40]!r}", at)
    return parts


def _tool_calls(value: Any, where: str) -> list[StoredCall]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_TOOL_CALLS:
        raise _bad("tool_calls must be a list", where)
    calls: list[StoredCall] = []
    for index, call in enumerate(value):
        at = f"{where}.tool_calls[{index}]"
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            raise _bad("a tool call needs a function", at)
        name, arguments = function.get("name"), function.get("arguments", "")
        call_id = call.get("id")
        if not isinstance(name, str) or not isinstance(arguments, str):
            raise _bad("a tool call needs a name and string arguments", at)
        calls.append({
            "id": call_id if isinstance(call_id, str) else f"call_{index}",
            "name": name,
            "arguments": arguments,
        })
    return calls


@dataclass
class _Parsed:
    """One client's last ``messages``: the array as sent, its runtime form, and how many
    leading messages hold no image (their runtime form is a function of the message and
    its index alone)."""

    raw: list[Any]
    out: list[dict[str, Any]]
    plain: int


class ParsedHistories:
    """The last ``messages`` each client scope sent, with their runtime form, so that the
    history a client resends is structured once (a text message's runtime form is a pure
    function of the message as sent and its place, so an equal message at the same place
    has an equal form; equal is ``==`` on the parsed JSON, in C, and the identity the
    gateway's own memo gives the resent messages makes it cheap). Messages from the first
    one with an image on are structured again: their image parts are filled in by
    admission. Bounded: :attr:`per_scope` arrays per scope, :attr:`scopes` scopes, the
    least recently used dropped; the runtime forms are the ones the turns hold anyway.
    The forms given out are shared between requests: nothing mutates a message once it is
    in a request (``budget.fit`` and the view rely on it too)."""

    def __init__(self, *, per_scope: int = 4, scopes: int = 64) -> None:
        self.per_scope = per_scope
        self.scopes = scopes
        self._by_scope: OrderedDict[str, list[_Parsed]] = OrderedDict()

    def head(self, scope: str, raw: list[Any]) -> list[dict[str, Any]]:
        """The runtime form of the longest run of leading messages of ``raw`` the scope's
        last arrays share with it, up to their first image (empty: none)."""
        best: _Parsed | None = None
        shared = 0
        for parsed in self._by_scope.get(scope, ()):
            n = leading_equal(raw, parsed.raw, parsed.plain)
            if n > shared:
                best, shared = parsed, n
        return best.out[:shared] if best is not None else []

    def note(self, scope: str, raw: list[Any], out: list[dict[str, Any]], plain: int) -> None:
        kept = self._by_scope.pop(scope, [])
        kept = [p for p in kept if p.raw[:1] != raw[:1]][: self.per_scope - 1]
        self._by_scope[scope] = [_Parsed(list(raw), out, plain), *kept]
        while len(self._by_scope) > self.scopes:
            self._by_scope.popitem(last=False)


async def parse_messages(
    raw: Any,
    *,
    admit: Admit,
    fetch: Fetch | None = None,
    max_image_bytes: int = 20 * 1024 * 1024,
    max_images: int | None = None,
    memo: ParsedHistories | None = None,
    scope: str | None = None,
) -> list[dict[str, Any]]:
    """Parse an OpenAI ``messages`` array (see the module's phases). ``memo`` and
    ``scope``: the client's history, structured once (:class:`ParsedHistories`).

    Raises:
        TurnError: ``RUNTIME_BAD_MESSAGE`` (with ``details['at']``),
            ``RUNTIME_IMAGE_URL_DISABLED``, ``RUNTIME_TOO_MANY_IMAGES``; fetching raises
            ``RUNTIME_IMAGE_FETCH_FAILED``, admission ImageError or StoreError.
    """
    images = _Images(max_images, fetch is not None, {}, {}, [])
    kept = (memo, scope) if memo is not None and scope is not None \
        and isinstance(raw, list) else None
    head = kept[0].head(kept[1], raw) if kept is not None else []
    out, plain = _structure(raw, images, max_image_bytes, head)
    if images.parts:
        await _resolve(images, admit, fetch)
    if kept is not None:
        kept[0].note(kept[1], raw, out, plain)
    return out


async def _resolve(images: _Images, admit: Admit, fetch: Fetch | None) -> None:
    """Fetch the distinct URLs, admit the distinct images, fill in the image parts."""
    fetched: dict[str, bytes] = {}
    if images.urls:
        assert fetch is not None  # URLs are refused at parse time without a fetcher
        limiter = anyio.Semaphore(FETCH_CONCURRENCY)

        async def one(url: str) -> None:
            async with limiter:
                fetched[url] = await fetch(url)

        # The first failure cancels the other fetches; its own error is what the client
        # gets (a task group wraps it, so it is unwrapped here).
        try:
            async with anyio.create_task_group() as group:
                for url in images.urls:
                    group.start_soon(one, url)
        except BaseExceptionGroup as grouped:
            first = grouped.exceptions[0]
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            raise first from None
    sources = [*images.data.values(), *(fetched[url] for url in images.urls)]
    known: list[str | None] = [*images.data, *(None for _ in images.urls)]  # data by hash
    try:
        metas = list(await admit(sources, sha256s=known))
    except ImageError as exc:
        raise _placed(exc, images) from None
    by_data = dict(zip(images.data, metas[: len(images.data)], strict=True))
    by_url = dict(zip(images.urls, metas[len(images.data) :], strict=True))
    for placeholder, kind, key in images.parts:
        meta = by_data[key] if kind == "data" else by_url[key]
        detail = placeholder.pop("detail")
        placeholder.update(image_part(meta, detail))


def _placed(exc: ImageError, images: _Images) -> ImageError:
    """The refused image's error, prefixed with the message and part it came from
    (``messages[2].content[1]: …``, also as ``details['at']`` and ``param``): admission
    only knows its place among the request's distinct images."""
    index = exc.details.get("index")
    keys = [*images.data, *images.urls]
    if not isinstance(index, int) or not 0 <= index < len(keys):
        return exc
    at = images.first_at[keys[index]]
    return ImageError(f"{at}: {exc.message}", code=exc.code,
                      details={**exc.details, "at": at, "param": at})


def _structure(raw: Any, images: _Images, max_image_bytes: int,
               head: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The runtime form of each message, the first ``len(head)`` given (the forms of equal
    messages at the same places), and how many leading messages hold no image."""
    if not isinstance(raw, list) or not raw:
        raise _bad("messages must be a non-empty list", "messages")
    out: list[dict[str, Any]] = list(head)
    plain: int | None = None
    for index in range(len(head), len(raw)):
        message = raw[index]
        if plain is None and images.parts:
            plain = index - 1  # the message before held the first image
        where = f"messages[{index}]"
        if not isinstance(message, Mapping):
            raise _bad("a message must be an object", where)
        role = message.get("role")
        if role not in _ROLES:
            raise _bad(f"unknown role {str(role)[:40]!r}", where)
        role = "system" if role == "developer" else role
        content = _content(
            message.get("content"), where, images=images,
            max_image_bytes=max_image_bytes, allow_images=role in ("user", "tool"),
        )
        parsed: dict[str, Any] = {"role": role, "content": content}
        if role == "assistant":
            calls = _tool_calls(message.get("tool_calls"), where)
            if calls:
                parsed["tool_calls"] = calls
            # DeepSeek's thinking mode: the reasoning that came with the message, which a
            # tool-call message must carry back (OpenRouter and vLLM call it "reasoning").
            reasoning = message.get("reasoning_content")
            if reasoning is None and isinstance(message.get("reasoning"), str):
                reasoning = message["reasoning"]
            if reasoning is not None:
                parsed["reasoning"] = _text(reasoning, f"{where}.reasoning_content")
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise _bad("a tool message needs tool_call_id", where)
            parsed["tool_call_id"] = call_id
            if isinstance(message.get("name"), str):
                parsed["name"] = message["name"]
        out.append(parsed)
    if plain is None:
        plain = len(raw) - 1 if images.parts else len(raw)
    return out, plain


def text_of(content: str | Sequence[Mapping[str, Any]]) -> str:
    """The text of a message's content, parts joined by newlines."""
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content if p.get("type") == "text")


def image_refs(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every image part of the conversation, in order of first appearance, deduplicated."""
    seen: dict[str, dict[str, Any]] = {}
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if part.get("type") == "image" and part["sha256"] not in seen:
                    seen[part["sha256"]] = dict(part)
    return list(seen.values())


def has_images(messages: Sequence[Mapping[str, Any]]) -> bool:
    return any(
        isinstance(m.get("content"), list)
        and any(p.get("type") == "image" for p in m["content"])
        for m in messages
    )
