"""An OpenAI-compatible chat client on plain httpx, with every failure mapped to a code.

Why not the ``openai`` SDK: we must tell a complete answer from a cut one. The SDK raises a
generic connection error when an SSE stream is cut mid-way and raises nothing at all when a
stream ends cleanly without a finish reason, and it lets malformed chunk JSON escape as a bare
``json.JSONDecodeError``. Here the SSE lines are parsed by hand (:mod:`deepseek_eyes.llm.sse`),
and a stream only counts as complete once a chunk carried a ``finish_reason``; everything else
is ``LLM_STREAM_INCOMPLETE`` so the vision router can recognise it and retry once.

Decisions a newcomer would otherwise undo:

* One deadline, ``timeout``, covers the whole call (connect, send, headers, body or stream).
  A whole answer runs under :func:`anyio.fail_after`; a stream keeps an absolute deadline and
  bounds each network read by it, so the caller's own work between chunks (forwarding them to
  a gateway client) is never cancelled from inside this module, yet a slow trickle of bytes
  cannot stretch a call past its deadline. httpx's own timeouts only bound the connect phase
  separately.
* :meth:`ChatClient.stream` is the one streaming code path: ``complete(stream=True)`` drains
  it. It yields every upstream chunk exactly as parsed, so a gateway can forward it, and
  assembles the :class:`ChatResult` on the side; after ``[DONE]`` it drains the few bytes left
  so that the connection goes back to the pool (a new TLS handshake per turn would cost far
  more than anything else here).
* Every body read is bounded (:data:`MAX_RESPONSE_BYTES`, :data:`MAX_ERROR_BODY_BYTES`): a
  misbehaving endpoint can make a call fail, never make us buffer without limit.
* The API key lives only in the ``Authorization`` header. Messages and details carry status
  codes, hashes, sizes and exception *type* names, plus one exception: an HTTP error keeps the
  provider's own short message (``details["provider_message"]``), because a gateway must tell
  its user why the upstream refused. That text is cut to 300 characters, stripped of control
  characters, and every occurrence of the key (and of long header values) is replaced by
  ``[redacted]`` first, because providers echo keys back in error bodies. Header values are
  checked up front so that h11 never builds an "illegal header value" message that quotes
  the key.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

import anyio
import httpx

from deepseek_eyes.errors import LLMError
from deepseek_eyes.llm.sse import SSEDecoder
from deepseek_eyes.usage import ProviderUsage

__all__ = [
    "MAX_ERROR_BODY_BYTES",
    "MAX_RESPONSE_BYTES",
    "MAX_TOOL_CALLS",
    "PROVIDER_MESSAGE_CHARS",
    "ChatClient",
    "ChatResult",
    "ChatStream",
    "ToolCall",
]

#: Largest response body (or whole SSE stream) read from an endpoint.
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
#: Largest error body read (hashed, searched for a provider code and a short message).
MAX_ERROR_BODY_BYTES = 64 * 1024
#: Most tool calls one completion may carry.
MAX_TOOL_CALLS = 128
#: Longest provider error message kept in ``details["provider_message"]``.
PROVIDER_MESSAGE_CHARS = 300

_USER_AGENT = "deepseek-eyes/0.1"
# Visible ASCII and spaces only: no CR/LF/NUL that would split or poison a header line.
_HEADER_VALUE = re.compile(r"^[\x20-\x7e]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# C0/C1 controls, and the invisible format characters that reorder or hide text in a terminal.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_MIN_REDACTED_HEADER = 8  # shorter header values ("1", "json") are not secrets worth hiding
_DRAIN_S = 0.5  # after [DONE], how long we wait for the body's end to reuse the connection
_DRAIN_BYTES = 64 * 1024
_RETRY_AFTER = re.compile(r"^\s*(\d{1,6})(?:\.\d+)?\s*$")

T = TypeVar("T")


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for; ``arguments`` is the raw JSON text it wrote
    (possibly invalid JSON: judging it is the caller's job)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatResult:
    """One chat completion, whether it arrived whole or as an SSE stream."""

    content: str
    reasoning: str  # ``reasoning_content`` when the server sent any
    finish_reason: str | None
    model: str | None
    usage: ProviderUsage = field(default_factory=ProviderUsage)
    streamed: bool = False
    tool_calls: tuple[ToolCall, ...] = ()


class ChatClient:
    """Speaks ``/chat/completions`` and ``/models`` to one OpenAI-compatible base URL.

    Raises:
        ValueError: at construction, when the API key or a header cannot travel in an HTTP
            header (control characters, non-ASCII). The value is never quoted.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if timeout <= 0 or connect_timeout <= 0:
            raise ValueError("timeouts must be positive")
        merged: dict[str, str] = {"User-Agent": _USER_AGENT, "Accept": "application/json"}
        secrets: list[str] = []
        for name, value in (headers or {}).items():
            if not _HEADER_NAME.match(name):
                raise ValueError(f"header name {name!r} is not a valid HTTP token")
            if not _HEADER_VALUE.match(value):
                raise ValueError(f"the value of header {name!r} holds characters not allowed")
            merged[name] = value
            if len(value.strip()) >= _MIN_REDACTED_HEADER:
                secrets.append(value.strip())
        if api_key is not None:
            key = api_key.strip()
            if not key or not _HEADER_VALUE.match(key):
                raise ValueError("the API key is empty or holds characters not allowed")
            merged["Authorization"] = f"Bearer {key}"
            secrets.append(key)
        self._base_url = base_url.rstrip("/")
        self._chat_url = f"{self._base_url}/chat/completions"
        self._models_url = f"{self._base_url}/models"
        self._timeout = timeout
        # Longest first, so that a key containing a header value is replaced whole.
        self._secrets = tuple(sorted(set(secrets), key=len, reverse=True))
        self._http = httpx.AsyncClient(
            headers=merged,
            timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout)),
            transport=transport,
            follow_redirects=False,
        )

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def timeout(self) -> float:
        return self._timeout

    async def complete(self, payload: Mapping[str, Any], *, stream: bool = False) -> ChatResult:
        """POST ``{base_url}/chat/completions`` and return the assembled answer.

        ``stream=True`` drains :meth:`stream`; a server that answers a streaming request with
        plain JSON is accepted (``streamed=False``).

        Raises:
            LLMError: ``LLM_TIMEOUT``, ``LLM_UNAVAILABLE``, ``LLM_HTTP_ERROR`` (details:
                status, body_sha256, provider_code, provider_type, provider_message,
                retry_after_s when sent), ``LLM_BAD_RESPONSE`` or ``LLM_STREAM_INCOMPLETE``
                (details: chunks, bytes).
        """
        if stream:
            async with self.stream(payload) as chunks:
                async for _ in chunks:
                    pass
                return chunks.result
        body = dict(payload)
        body["stream"] = False
        body.pop("stream_options", None)
        return await self._deadline(lambda: self._complete(body))

    def stream(self, payload: Mapping[str, Any]) -> AbstractAsyncContextManager[ChatStream]:
        """``async with client.stream(payload) as chunks: async for chunk in chunks: ...``

        Sends ``stream: true`` and ``stream_options.include_usage`` (other stream options of
        the caller are kept). Entering sends the request and waits for the headers; HTTP
        errors are raised there, before any chunk. Iterating yields each chunk as the upstream
        sent it (keep-alives and ``[DONE]`` aside); ``chunks.result`` is the assembled answer
        once the iteration ended normally.

        Raises:
            LLMError: on entering, as :meth:`complete` less ``LLM_STREAM_INCOMPLETE``; while
                iterating, ``LLM_TIMEOUT``, ``LLM_BAD_RESPONSE`` (bad chunk JSON, size bound,
                a provider error object inside the stream, details carry provider_code) or
                ``LLM_STREAM_INCOMPLETE`` (no chunk carried a finish reason, or the stream
                was cut).
        """
        body = dict(payload)
        options = body.get("stream_options")
        body["stream"] = True
        body["stream_options"] = {
            **(options if isinstance(options, dict) else {}),
            "include_usage": True,
        }
        return _StreamOpener(self, body)

    async def list_models(self) -> list[dict[str, Any]]:
        """GET ``{base_url}/models`` and return its ``data`` list (entries that are objects).

        Raises:
            LLMError: as :meth:`complete`, less ``LLM_STREAM_INCOMPLETE``.
        """
        return await self._deadline(self._list_models)

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- the call skeleton ---------------------------------------------------------------

    def _timeout_error(self, **details: Any) -> LLMError:
        return LLMError(
            f"the model endpoint did not answer within {self._timeout:g}s",
            code="LLM_TIMEOUT",
            details={"timeout_s": self._timeout, **details},
        )

    async def _deadline(self, call: Callable[[], Awaitable[T]]) -> T:
        try:
            with anyio.fail_after(self._timeout):
                return await call()
        except TimeoutError:
            raise self._timeout_error() from None

    async def _list_models(self) -> list[dict[str, Any]]:
        request = self._http.build_request("GET", self._models_url)
        response = await _send(self._http, request, self._secrets)
        try:
            document = _parse_json(await _read_bounded(response, MAX_RESPONSE_BYTES))
        finally:
            await response.aclose()
        data = document.get("data")
        if not isinstance(data, list):
            raise LLMError("the model list has no 'data' array", code="LLM_BAD_RESPONSE")
        return [entry for entry in data if isinstance(entry, dict)]

    async def _complete(self, body: dict[str, Any]) -> ChatResult:
        request = self._http.build_request("POST", self._chat_url, json=body)
        response = await _send(self._http, request, self._secrets)
        try:
            document = _parse_json(await _read_bounded(response, MAX_RESPONSE_BYTES))
        finally:
            await response.aclose()
        return _result_from_document(document)

    async def _open_stream(self, body: dict[str, Any]) -> ChatStream:
        deadline = anyio.current_time() + self._timeout
        request = self._http.build_request("POST", self._chat_url, json=body)
        response: httpx.Response | None = None
        with anyio.CancelScope(deadline=deadline):
            response = await _send(self._http, request, self._secrets)
        if response is None:  # the deadline cancelled the send
            raise self._timeout_error()
        return ChatStream(
            response, deadline=deadline, timeout_error=self._timeout_error, secrets=self._secrets
        )


class _StreamOpener(AbstractAsyncContextManager["ChatStream"]):
    """What :meth:`ChatClient.stream` returns: opens on enter, always closes on exit."""

    def __init__(self, client: ChatClient, body: dict[str, Any]) -> None:
        self._client = client
        self._body = body
        self._stream: ChatStream | None = None

    async def __aenter__(self) -> ChatStream:
        self._stream = await self._client._open_stream(self._body)
        return self._stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._stream is not None:
            await self._stream.aclose()


class ChatStream:
    """The chunks of one streamed completion, and the answer they add up to.

    ``async for chunk in stream`` yields each chunk as the parsed JSON object the upstream
    sent. A server that answers with plain JSON instead yields one synthesized
    ``chat.completion.chunk`` holding the whole answer (``result.streamed`` is False).
    Only :meth:`ChatClient.stream` makes one; ``deadline`` is on :func:`anyio.current_time`'s
    clock.

    Attributes:
        first_chunk_at: :func:`time.perf_counter` when the first data chunk arrived.
    """

    def __init__(
        self,
        response: httpx.Response,
        *,
        deadline: float,
        timeout_error: Callable[..., LLMError],
        secrets: tuple[str, ...] = (),
    ) -> None:
        self.first_chunk_at: float | None = None
        self._response = response
        self._deadline = deadline
        self._timeout_error = timeout_error
        self._secrets = secrets
        content_type = response.headers.get("content-type", "").lower()
        self._sse = content_type.startswith("text/event-stream")
        self._raw = response.aiter_bytes()
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._decoder = SSEDecoder()
        self._pending: deque[str] = deque()
        self._eof = False
        self._done = False
        self._ended = False  # iteration is over, normally or not
        self._result: ChatResult | None = None
        self._chunks = 0
        self._size = 0
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._tools = _ToolCalls()
        self._finish_reason: str | None = None
        self._model: str | None = None
        self._usage: dict[str, Any] | None = None

    @property
    def result(self) -> ChatResult:
        """The assembled answer.

        Raises:
            RuntimeError: before the iteration ended normally (a programming error).
        """
        if self._result is None:
            raise RuntimeError("the stream has not ended normally; there is no result")
        return self._result

    def __aiter__(self) -> ChatStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if self._ended:
            raise StopAsyncIteration
        try:
            chunk = await (self._next_sse() if self._sse else self._next_json())
            if chunk is None and self._result is None:
                self._result = self._assemble()
        except BaseException:
            self._ended = True
            raise
        if chunk is None:
            self._ended = True
            raise StopAsyncIteration
        return chunk

    async def aclose(self) -> None:
        self._ended = True
        await self._response.aclose()

    # -- reading -------------------------------------------------------------------------

    async def _next_sse(self) -> dict[str, Any] | None:
        while True:
            while self._pending:
                data = self._pending.popleft()
                if data == "[DONE]":
                    self._done = True
                    await self._drain()
                    return None
                if data:  # an empty ``data:`` line is a keep-alive some servers send
                    return self._take(data)
            if self._eof:
                return None
            await self._read()

    async def _read(self) -> None:
        piece: bytes | None = None
        try:
            with anyio.CancelScope(deadline=self._deadline):
                piece = await self._raw.__anext__()
        except StopAsyncIteration:
            self._eof = True
            self._pending.extend(self._decoder.feed(self._utf8.decode(b"", final=True)))
            self._decoder.close()
            return
        except httpx.TimeoutException as exc:
            raise LLMError(
                "the model endpoint stopped streaming in time",
                code="LLM_TIMEOUT",
                details={"error": type(exc).__name__, **self._progress()},
            ) from exc
        except httpx.HTTPError as exc:
            # RemoteProtocolError (peer closed mid-chunk), ReadError, ... : the stream was cut.
            raise self._incomplete("the stream was cut before its finish reason", exc) from exc
        if piece is None:  # the deadline cancelled the read
            raise self._timeout_error(**self._progress())
        self._size += len(piece)
        if self._size > MAX_RESPONSE_BYTES:
            raise LLMError(
                f"the stream exceeds {MAX_RESPONSE_BYTES} bytes",
                code="LLM_BAD_RESPONSE",
                details={"limit_bytes": MAX_RESPONSE_BYTES, "chunks": self._chunks},
            )
        self._pending.extend(self._decoder.feed(self._utf8.decode(piece)))

    async def _drain(self) -> None:
        """Read the little that follows ``[DONE]`` so the connection can be reused; give up
        quietly (the connection is then closed) on anything unexpected."""
        self._pending.clear()
        left = _DRAIN_BYTES
        deadline = min(self._deadline, anyio.current_time() + _DRAIN_S)
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
            try:
                async for piece in self._raw:
                    left -= len(piece)
                    if left < 0:
                        break
            except httpx.HTTPError:
                pass

    async def _next_json(self) -> dict[str, Any] | None:
        if self._eof:
            return None
        self._eof = True
        try:
            with anyio.fail_after(max(0.0, self._deadline - anyio.current_time())):
                raw = await _read_bounded(self._response, MAX_RESPONSE_BYTES)
        except TimeoutError:
            raise self._timeout_error() from None
        document = _parse_json(raw)
        self._result = _result_from_document(document)
        self.first_chunk_at = time.perf_counter()
        return _chunk_from_document(document, self._result)

    # -- assembling ----------------------------------------------------------------------

    def _take(self, data: str) -> dict[str, Any]:
        try:
            chunk = json.loads(data)
        except ValueError:
            raise LLMError(
                "a stream chunk is not valid JSON",
                code="LLM_BAD_RESPONSE",
                details=self._progress(),
            ) from None
        if not isinstance(chunk, dict):
            raise LLMError("a stream chunk is not a JSON object", code="LLM_BAD_RESPONSE")
        self._chunks += 1
        if self.first_chunk_at is None:
            self.first_chunk_at = time.perf_counter()
        error = chunk.get("error")
        if isinstance(error, dict):
            code, kind = _provider_fields(error)
            raise LLMError(
                "the model endpoint reported an error inside its stream",
                code="LLM_BAD_RESPONSE",
                details={
                    "chunks": self._chunks,
                    "provider_code": code,
                    "provider_type": kind,
                    "provider_message": _provider_message(error.get("message"), self._secrets),
                },
            )
        model = chunk.get("model")
        if isinstance(model, str):
            self._model = model
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = usage
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            if choices is not None:
                raise LLMError("a stream chunk's choices is not a list", code="LLM_BAD_RESPONSE")
            return chunk
        # The chunk's size is bounded by MAX_RESPONSE_BYTES, and so is this loop.
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._take_choice(choice)
                break
        return chunk

    def _take_choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta")
        if isinstance(delta, dict):
            text = delta.get("content")
            if text:
                self._content.append(text if isinstance(text, str) else _text(text, "content"))
            thought = delta.get("reasoning_content")
            if thought:
                self._reasoning.append(_text(thought, "reasoning"))
            elif isinstance(delta.get("reasoning"), str):  # OpenRouter, vLLM
                self._reasoning.append(delta["reasoning"])
            calls = delta.get("tool_calls")
            if calls:
                self._tools.take_deltas(calls)
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            self._finish_reason = reason

    def _assemble(self) -> ChatResult:
        if self._finish_reason is None:
            ending = "[DONE]" if self._done else "the end of the stream"
            raise self._incomplete(f"the stream reached {ending} without a finish reason")
        return ChatResult(
            content="".join(self._content),
            reasoning="".join(self._reasoning),
            finish_reason=self._finish_reason,
            model=self._model,
            usage=ProviderUsage.from_openai(self._usage),
            streamed=True,
            tool_calls=self._tools.result(),
        )

    def _progress(self) -> dict[str, Any]:
        return {"chunks": self._chunks, "bytes": self._size}

    def _incomplete(self, message: str, exc: Exception | None = None) -> LLMError:
        details = self._progress()
        if exc is not None:
            details["error"] = type(exc).__name__
        return LLMError(message, code="LLM_STREAM_INCOMPLETE", details=details)


class _ToolSlot:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class _ToolCalls:
    """Tool-call deltas gathered by ``index``: the id and name arrive once, the arguments
    in pieces. A server that omits ``index`` opens a call with each new id."""

    def __init__(self) -> None:
        self._slots: dict[int, _ToolSlot] = {}
        self._last: _ToolSlot | None = None

    def take_deltas(self, calls: Any) -> None:
        if not isinstance(calls, list):
            raise LLMError("a stream chunk's tool_calls is not a list", code="LLM_BAD_RESPONSE")
        for call in calls:  # bounded by the stream's byte limit; slots by MAX_TOOL_CALLS
            if isinstance(call, dict):
                self._take(call)

    def _take(self, call: dict[str, Any]) -> None:
        raw_id = call.get("id")
        call_id = raw_id if isinstance(raw_id, str) else ""
        slot = self._slot(call.get("index"), call_id)
        if call_id and not slot.id:
            slot.id = call_id
        function = call.get("function")
        if isinstance(function, dict):
            name = function.get("name")
            if isinstance(name, str) and name and not slot.name:
                slot.name = name
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                slot.arguments.append(arguments)
            elif isinstance(arguments, dict):
                slot.arguments.append(json.dumps(arguments))

    def _slot(self, index: Any, call_id: str) -> _ToolSlot:
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            known = next((i for i, s in self._slots.items() if call_id and s.id == call_id), None)
            if known is not None:
                index = known
            elif self._last is not None and not call_id:
                return self._last
            else:
                index = max(self._slots, default=-1) + 1
        slot = self._slots.get(index)
        if slot is None:
            if index >= MAX_TOOL_CALLS or len(self._slots) >= MAX_TOOL_CALLS:
                raise LLMError(
                    f"the completion asks for more than {MAX_TOOL_CALLS} tool calls",
                    code="LLM_BAD_RESPONSE",
                    details={"limit": MAX_TOOL_CALLS},
                )
            slot = self._slots[index] = _ToolSlot()
        self._last = slot
        return slot

    def result(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(id=slot.id, name=slot.name, arguments="".join(slot.arguments))
            for _, slot in sorted(self._slots.items())
        )


# -- sending and reading ----------------------------------------------------------------------


async def _send(
    http: httpx.AsyncClient, request: httpx.Request, secrets: tuple[str, ...]
) -> httpx.Response:
    """Send one request, map transport failures, and turn status >= 400 into
    ``LLM_HTTP_ERROR``; the caller closes the response it gets."""
    try:
        response = await http.send(request, stream=True)
    except httpx.ConnectTimeout as exc:
        raise _unavailable("connecting to the model endpoint timed out", exc) from exc
    except httpx.TimeoutException as exc:
        raise LLMError(
            "the model endpoint did not answer in time",
            code="LLM_TIMEOUT",
            details={"error": type(exc).__name__},
        ) from exc
    except httpx.HTTPError as exc:
        raise _unavailable("the model endpoint could not be reached", exc) from exc
    if response.status_code >= 400:
        try:
            error = await _http_error(response, secrets)
        finally:
            await response.aclose()
        raise error
    return response


def _unavailable(message: str, exc: Exception) -> LLMError:
    return LLMError(message, code="LLM_UNAVAILABLE", details={"error": type(exc).__name__})


def _provider_fields(error: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(code, type)`` of a provider error object; the code falls back to the type."""

    def short(value: Any) -> str | None:
        if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
            return _CONTROL.sub("", str(value))[:100]
        return None

    kind = short(error.get("type"))
    return short(error.get("code")) or kind, kind


def _provider_message(value: Any, secrets: tuple[str, ...]) -> str | None:
    """A provider's error text made safe to show: control characters out, secrets replaced,
    then cut (in that order, so that a cut can never leave part of a key behind)."""
    if not isinstance(value, str) or not value:
        return None
    text = _CONTROL.sub(" ", value[:MAX_ERROR_BODY_BYTES])
    for secret in secrets:
        text = text.replace(secret, "[redacted]")
    text = " ".join(text.split())
    return text[:PROVIDER_MESSAGE_CHARS] or None


async def _http_error(response: httpx.Response, secrets: tuple[str, ...]) -> LLMError:
    status = response.status_code
    try:
        raw = await _read_bounded(response, MAX_ERROR_BODY_BYTES, truncate=True)
    except LLMError:
        raw = b""
    provider_code: str | None = None
    provider_type: str | None = None
    message: Any = None
    try:
        document = json.loads(raw)
    except ValueError:
        document = None
    if isinstance(document, dict):
        error = document.get("error")
        if isinstance(error, dict):
            provider_code, provider_type = _provider_fields(error)
            message = error.get("message")
        elif isinstance(error, str):
            message = error
        else:  # {"message": ...} or FastAPI's {"detail": ...}
            message = document.get("message", document.get("detail"))
    details: dict[str, Any] = {
        "status": status,
        "body_sha256": hashlib.sha256(raw).hexdigest(),
        "provider_code": provider_code,
        "provider_type": provider_type,
        "provider_message": _provider_message(message, secrets),
    }
    retry_after = _RETRY_AFTER.match(response.headers.get("retry-after", ""))
    if retry_after:
        details["retry_after_s"] = int(retry_after.group(1))
    return LLMError(
        f"the model endpoint answered HTTP {status}", code="LLM_HTTP_ERROR", details=details
    )


async def _read_bounded(
    response: httpx.Response, limit: int, *, truncate: bool = False
) -> bytes:
    """Read at most ``limit`` bytes; past it, stop (``truncate``) or fail."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                if truncate:
                    chunks.append(chunk[: limit - (size - len(chunk))])
                    break
                raise LLMError(
                    f"the response body exceeds {limit} bytes",
                    code="LLM_BAD_RESPONSE",
                    details={"limit_bytes": limit},
                )
            chunks.append(chunk)
    except httpx.TimeoutException as exc:
        raise LLMError(
            "the model endpoint stopped sending its body in time",
            code="LLM_TIMEOUT",
            details={"error": type(exc).__name__},
        ) from exc
    except httpx.HTTPError as exc:
        raise LLMError(
            "the response body could not be read completely",
            code="LLM_BAD_RESPONSE",
            details={"error": type(exc).__name__, "bytes": size},
        ) from exc
    return b"".join(chunks)


# -- whole answers ------------------------------------------------------------------------------


def _parse_json(raw: bytes) -> dict[str, Any]:
    try:
        document = json.loads(raw)
    except ValueError:
        raise LLMError(
            "the model endpoint's answer is not JSON",
            code="LLM_BAD_RESPONSE",
            details={"bytes": len(raw)},
        ) from None
    if not isinstance(document, dict):
        raise LLMError("the model endpoint's answer is not a JSON object", code="LLM_BAD_RESPONSE")
    return document


def _text(value: Any, what: str) -> str:
    """Message content: a string, null, or a list of ``{"type": "text", "text": ...}`` parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            part["text"]
            for part in value
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    raise LLMError(f"the completion's {what} is not text", code="LLM_BAD_RESPONSE")


def _optional_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _tool_calls(value: Any) -> tuple[ToolCall, ...]:
    """``message.tool_calls`` of a whole answer; ``arguments`` sent as an object (Ollama)
    is turned back into JSON text."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise LLMError("the completion's tool_calls is not a list", code="LLM_BAD_RESPONSE")
    if len(value) > MAX_TOOL_CALLS:
        raise LLMError(
            f"the completion asks for more than {MAX_TOOL_CALLS} tool calls",
            code="LLM_BAD_RESPONSE",
            details={"limit": MAX_TOOL_CALLS},
        )
    calls: list[ToolCall] = []
    for call in value:
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)
        calls.append(
            ToolCall(
                id=call["id"] if isinstance(call.get("id"), str) else "",
                name=function["name"] if isinstance(function.get("name"), str) else "",
                arguments=arguments if isinstance(arguments, str) else "",
            )
        )
    return tuple(calls)


def _result_from_document(document: dict[str, Any]) -> ChatResult:
    choices = document.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise LLMError("the completion has no choices", code="LLM_BAD_RESPONSE")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise LLMError("the completion's first choice has no message", code="LLM_BAD_RESPONSE")
    usage = document.get("usage")
    reasoning = message.get("reasoning_content")
    if reasoning is None and isinstance(message.get("reasoning"), str):
        reasoning = message["reasoning"]
    return ChatResult(
        content=_text(message.get("content"), "content"),
        reasoning=_text(reasoning, "reasoning"),
        finish_reason=_optional_str(choices[0].get("finish_reason")),
        model=_optional_str(document.get("model")),
        usage=ProviderUsage.from_openai(usage if isinstance(usage, dict) else None),
        streamed=False,
        tool_calls=_tool_calls(message.get("tool_calls")),
    )


def _chunk_from_document(document: dict[str, Any], result: ChatResult) -> dict[str, Any]:
    """One ``chat.completion.chunk`` that carries a whole answer, for a server that answered
    a streaming request with plain JSON: a gateway forwarding chunks still sends it all."""
    delta: dict[str, Any] = {"role": "assistant", "content": result.content}
    if result.reasoning:
        delta["reasoning_content"] = result.reasoning
    if result.tool_calls:
        delta["tool_calls"] = [
            {
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for index, call in enumerate(result.tool_calls)
        ]
    chunk: dict[str, Any] = {
        key: document[key] for key in ("id", "created", "model") if key in document
    }
    chunk["object"] = "chat.completion.chunk"
    chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": result.finish_reason}]
    if isinstance(document.get("usage"), dict):
        chunk["usage"] = document["usage"]
    return chunk
