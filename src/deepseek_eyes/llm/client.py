"""An OpenAI-compatible chat client on plain httpx, with every failure mapped to a code.

Why not the ``openai`` SDK: we must tell a complete answer from a cut one. The SDK raises a
generic connection error when an SSE stream is cut mid-way and raises nothing at all when a
stream ends cleanly without a finish reason, and it lets malformed chunk JSON escape as a bare
``json.JSONDecodeError``. Here the SSE lines are parsed by hand (:mod:`deepseek_eyes.llm.sse`),
and a stream only counts as complete once a chunk carried a ``finish_reason``; everything else
is ``LLM_STREAM_INCOMPLETE`` so the vision router can recognise it and retry once.

Decisions a newcomer would otherwise undo:

* One deadline, ``timeout``, covers the whole call (connect, send, headers, body or stream),
  enforced with :func:`anyio.fail_after`; httpx's own timeouts only bound the connect phase
  separately. A slow trickle of bytes cannot stretch a call past its deadline.
* Every body read is bounded (:data:`MAX_RESPONSE_BYTES`, :data:`MAX_ERROR_BODY_BYTES`): a
  misbehaving endpoint can make a call fail, never make us buffer without limit.
* The API key lives only in the ``Authorization`` header. Messages and details carry
  status codes, hashes, sizes and exception *type* names; never header values or response
  text, because providers echo keys back in error bodies. Header values are checked up
  front so that h11 never builds an "illegal header value" message that quotes the key.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import httpx

from deepseek_eyes.errors import LLMError
from deepseek_eyes.llm.sse import SSEDecoder
from deepseek_eyes.usage import ProviderUsage

__all__ = [
    "MAX_ERROR_BODY_BYTES",
    "MAX_RESPONSE_BYTES",
    "ChatClient",
    "ChatResult",
]

#: Largest response body (or whole SSE stream) read from an endpoint.
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
#: Largest error body read (it is only hashed and searched for a provider code).
MAX_ERROR_BODY_BYTES = 64 * 1024

_USER_AGENT = "deepseek-eyes/0.1"
# Visible ASCII and spaces only: no CR/LF/NUL that would split or poison a header line.
_HEADER_VALUE = re.compile(r"^[\x20-\x7e]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

T = TypeVar("T")


@dataclass(frozen=True)
class ChatResult:
    """One chat completion, whether it arrived whole or as an SSE stream."""

    content: str
    reasoning: str  # ``reasoning_content`` when the server sent any
    finish_reason: str | None
    model: str | None
    usage: ProviderUsage = field(default_factory=ProviderUsage)
    streamed: bool = False


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
        for name, value in (headers or {}).items():
            if not _HEADER_NAME.match(name):
                raise ValueError(f"header name {name!r} is not a valid HTTP token")
            if not _HEADER_VALUE.match(value):
                raise ValueError(f"the value of header {name!r} holds characters not allowed")
            merged[name] = value
        if api_key is not None:
            key = api_key.strip()
            if not key or not _HEADER_VALUE.match(key):
                raise ValueError("the API key is empty or holds characters not allowed")
            merged["Authorization"] = f"Bearer {key}"
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._http = httpx.AsyncClient(
            headers=merged,
            timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout)),
            transport=transport,
            follow_redirects=False,
        )

    @property
    def base_url(self) -> str:
        return self._base_url

    async def complete(self, payload: Mapping[str, Any], *, stream: bool = False) -> ChatResult:
        """POST ``{base_url}/chat/completions`` and return the assembled answer.

        ``stream=True`` asks for SSE with ``stream_options.include_usage``; a server that
        answers a streaming request with plain JSON is accepted (``streamed=False``).

        Raises:
            LLMError: ``LLM_TIMEOUT``, ``LLM_UNAVAILABLE``, ``LLM_HTTP_ERROR`` (details:
                status, body_sha256, provider_code), ``LLM_BAD_RESPONSE`` or
                ``LLM_STREAM_INCOMPLETE`` (details: chunks, bytes).
        """
        body = dict(payload)
        if stream:
            options = body.get("stream_options")
            body["stream"] = True
            body["stream_options"] = {
                **(options if isinstance(options, dict) else {}),
                "include_usage": True,
            }
        else:
            body["stream"] = False
            body.pop("stream_options", None)
        return await self._deadline(lambda: self._complete(body, stream=stream))

    async def list_models(self) -> list[dict[str, Any]]:
        """GET ``{base_url}/models`` and return its ``data`` list (entries that are objects).

        Raises:
            LLMError: as :meth:`complete`, less ``LLM_STREAM_INCOMPLETE``.
        """
        return await self._deadline(self._list_models)

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- the call skeleton ---------------------------------------------------------------

    async def _deadline(self, call: Callable[[], Awaitable[T]]) -> T:
        try:
            with anyio.fail_after(self._timeout):
                return await call()
        except TimeoutError:
            raise LLMError(
                f"the model endpoint did not answer within {self._timeout:g}s",
                code="LLM_TIMEOUT",
                details={"timeout_s": self._timeout},
            ) from None

    async def _list_models(self) -> list[dict[str, Any]]:
        url = f"{self._base_url}/models"
        async with self._open("GET", url, None) as response:
            document = _parse_json(await _read_bounded(response, MAX_RESPONSE_BYTES))
        data = document.get("data")
        if not isinstance(data, list):
            raise LLMError("the model list has no 'data' array", code="LLM_BAD_RESPONSE")
        return [entry for entry in data if isinstance(entry, dict)]

    async def _complete(self, body: dict[str, Any], *, stream: bool) -> ChatResult:
        url = f"{self._base_url}/chat/completions"
        async with self._open("POST", url, body) as response:
            content_type = response.headers.get("content-type", "").lower()
            if stream and content_type.startswith("text/event-stream"):
                return await _read_stream(response)
            document = _parse_json(await _read_bounded(response, MAX_RESPONSE_BYTES))
        return _result_from_document(document)

    def _open(self, method: str, url: str, body: dict[str, Any] | None) -> _Exchange:
        return _Exchange(self._http, method, url, body)


class _Exchange:
    """``async with``: send one request, map transport failures, turn status >= 400 into
    ``LLM_HTTP_ERROR``, and always close the response."""

    def __init__(
        self, http: httpx.AsyncClient, method: str, url: str, body: dict[str, Any] | None
    ) -> None:
        self._http = http
        self._request = http.build_request(method, url, json=body)
        self._response: httpx.Response | None = None

    async def __aenter__(self) -> httpx.Response:
        try:
            response = await self._http.send(self._request, stream=True)
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
                error = await _http_error(response)
            finally:
                await response.aclose()
            raise error
        self._response = response
        return response

    async def __aexit__(self, *exc_info: object) -> None:
        if self._response is not None:
            await self._response.aclose()


def _unavailable(message: str, exc: Exception) -> LLMError:
    return LLMError(message, code="LLM_UNAVAILABLE", details={"error": type(exc).__name__})


async def _http_error(response: httpx.Response) -> LLMError:
    status = response.status_code
    try:
        raw = await _read_bounded(response, MAX_ERROR_BODY_BYTES, truncate=True)
    except LLMError:
        raw = b""
    provider_code: str | None = None
    try:
        document = json.loads(raw)
    except ValueError:
        document = None
    if isinstance(document, dict) and isinstance(document.get("error"), dict):
        error = document["error"]
        for key in ("code", "type"):
            value = error.get(key)
            if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
                provider_code = str(value)[:100]
                break
    return LLMError(
        f"the model endpoint answered HTTP {status}",
        code="LLM_HTTP_ERROR",
        details={
            "status": status,
            "body_sha256": hashlib.sha256(raw).hexdigest(),
            "provider_code": provider_code,
        },
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


def _result_from_document(document: dict[str, Any]) -> ChatResult:
    choices = document.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise LLMError("the completion has no choices", code="LLM_BAD_RESPONSE")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise LLMError("the completion's first choice has no message", code="LLM_BAD_RESPONSE")
    usage = document.get("usage")
    return ChatResult(
        content=_text(message.get("content"), "content"),
        reasoning=_text(message.get("reasoning_content"), "reasoning"),
        finish_reason=_optional_str(choices[0].get("finish_reason")),
        model=_optional_str(document.get("model")),
        usage=ProviderUsage.from_openai(usage if isinstance(usage, dict) else None),
        streamed=False,
    )


async def _read_stream(response: httpx.Response) -> ChatResult:
    decoder = SSEDecoder()
    content: list[str] = []
    reasoning: list[str] = []
    finish_reason: str | None = None
    model: str | None = None
    usage: dict[str, Any] | None = None
    chunks = 0
    size = 0
    done = False

    def incomplete(message: str, exc: Exception | None = None) -> LLMError:
        details: dict[str, Any] = {"chunks": chunks, "bytes": size}
        if exc is not None:
            details["error"] = type(exc).__name__
        return LLMError(message, code="LLM_STREAM_INCOMPLETE", details=details)

    def take(data: str) -> None:
        nonlocal chunks, finish_reason, model, usage, done
        if data == "[DONE]":
            done = True
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            raise LLMError(
                "a stream chunk is not valid JSON",
                code="LLM_BAD_RESPONSE",
                details={"chunks": chunks, "bytes": size},
            ) from None
        if not isinstance(chunk, dict):
            raise LLMError("a stream chunk is not a JSON object", code="LLM_BAD_RESPONSE")
        chunks += 1
        if isinstance(chunk.get("error"), dict):
            code = chunk["error"].get("code") or chunk["error"].get("type")
            raise LLMError(
                "the model endpoint reported an error inside its stream",
                code="LLM_BAD_RESPONSE",
                details={
                    "chunks": chunks,
                    "provider_code": str(code)[:100] if isinstance(code, str | int) else None,
                },
            )
        model = _optional_str(chunk.get("model")) or model
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            if "choices" in chunk and choices is not None:
                raise LLMError("a stream chunk's choices is not a list", code="LLM_BAD_RESPONSE")
            return
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                content.append(_text(delta.get("content"), "content"))
                reasoning.append(_text(delta.get("reasoning_content"), "reasoning"))
            reason = _optional_str(choice.get("finish_reason"))
            if reason:
                finish_reason = reason

    try:
        async with aclosing(_decoded(response)) as pieces:
            async for received, text in pieces:
                size += received
                if size > MAX_RESPONSE_BYTES:
                    raise LLMError(
                        f"the stream exceeds {MAX_RESPONSE_BYTES} bytes",
                        code="LLM_BAD_RESPONSE",
                        details={"limit_bytes": MAX_RESPONSE_BYTES, "chunks": chunks},
                    )
                for data in decoder.feed(text):
                    take(data)
                    if done:
                        break
                if done:
                    break
    except httpx.TimeoutException as exc:
        raise LLMError(
            "the model endpoint stopped streaming in time",
            code="LLM_TIMEOUT",
            details={"error": type(exc).__name__, "chunks": chunks, "bytes": size},
        ) from exc
    except httpx.HTTPError as exc:
        # RemoteProtocolError (peer closed mid-chunk), ReadError, ... : the stream was cut.
        raise incomplete("the stream was cut before its finish reason", exc) from exc
    if not done:
        for data in decoder.close():
            take(data)
    if finish_reason is None:
        ending = "[DONE]" if done else "the end of the stream"
        raise incomplete(f"the stream reached {ending} without a finish reason")
    return ChatResult(
        content="".join(content),
        reasoning="".join(reasoning),
        finish_reason=finish_reason,
        model=model,
        usage=ProviderUsage.from_openai(usage),
        streamed=True,
    )


async def _decoded(response: httpx.Response) -> AsyncGenerator[tuple[int, str], None]:
    """``(bytes received, text)`` pairs; SSE is UTF-8 by definition, whatever the charset."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    async for chunk in response.aiter_bytes():
        yield len(chunk), decoder.decode(chunk)
    yield 0, decoder.decode(b"", final=True)
