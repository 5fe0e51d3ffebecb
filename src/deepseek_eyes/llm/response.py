"""What a model endpoint's answer turns into: a :class:`ChatResult`, or an
:class:`~deepseek_eyes.errors.LLMError` with a stable ``LLM_*`` code.

The lowest layer of :mod:`deepseek_eyes.llm`: the result types, bounded body reads, the
parse of a whole (non-streamed) answer, and the reading of an HTTP error. Both
:mod:`~deepseek_eyes.llm.client` and :mod:`~deepseek_eyes.llm.stream` build on it and it
imports neither, which is what keeps those two free of an import cycle. Its functions are
public to those siblings only; callers outside the package use :mod:`deepseek_eyes.llm`.

Decisions a newcomer would otherwise undo:

* Every body read is bounded (:data:`MAX_RESPONSE_BYTES`, :data:`MAX_ERROR_BODY_BYTES`): a
  misbehaving endpoint can make a call fail, never make us buffer without limit.
* Messages and details carry status codes, hashes, sizes and exception *type* names, plus
  one exception: an HTTP error keeps the provider's own short message
  (``details["provider_message"]``), because a gateway must tell its user why the upstream
  refused. That text is cut to :data:`PROVIDER_MESSAGE_CHARS`, stripped of control
  characters, and every occurrence of the key (and of long header values) is replaced by
  ``[redacted]`` first, because providers echo keys back in error bodies.
"""

from __future__ import annotations

import datetime
import email.utils
import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

import httpx

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import LLMError
from deepseek_eyes.llm.retry import Attempt
from deepseek_eyes.usage import ProviderUsage

__all__ = [
    "MAX_ERROR_BODY_BYTES",
    "MAX_RESPONSE_BYTES",
    "MAX_TOOL_CALLS",
    "PROVIDER_MESSAGE_CHARS",
    "ChatResult",
    "ToolCall",
    "http_error",
    "message_text",
    "parse_json",
    "provider_fields",
    "provider_message",
    "read_bounded",
    "result_from_document",
    "retry_after_s",
]

#: Largest response body (or whole SSE stream) read from an endpoint.
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
#: Largest error body read (hashed, searched for a provider code and a short message).
MAX_ERROR_BODY_BYTES = 64 * 1024
#: Most tool calls one completion may carry.
MAX_TOOL_CALLS = 128
#: Longest provider error message kept in ``details["provider_message"]``.
PROVIDER_MESSAGE_CHARS = 300

# C0/C1 controls, and the invisible format characters that reorder or hide text in a terminal.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_RETRY_AFTER = re.compile(r"^\s*(\d{1,9}(?:\.\d{1,6})?)\s*$")


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
    request_sha256: str | None = None  # of the exact request body bytes sent
    # Requests sent before this one for the same call, that failed and were retried.
    retries: tuple[Attempt, ...] = ()


# -- reading a response ----------------------------------------------------------------------


def provider_fields(error: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(code, type)`` of a provider error object; the code falls back to the type."""

    def short(value: Any) -> str | None:
        if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
            return _CONTROL.sub("", str(value))[:100]
        return None

    kind = short(error.get("type"))
    return short(error.get("code")) or kind, kind


def provider_message(value: Any, secrets: tuple[str, ...]) -> str | None:
    """A provider's error text made safe to show: control characters out, secrets replaced,
    then cut (in that order, so that a cut can never leave part of a key behind)."""
    if not isinstance(value, str) or not value:
        return None
    text = _CONTROL.sub(" ", value[:MAX_ERROR_BODY_BYTES])
    for secret in secrets:
        text = text.replace(secret, "[redacted]")
    text = " ".join(text.split())
    return text[:PROVIDER_MESSAGE_CHARS] or None


class HttpErrorDetails(TypedDict):
    """The details of an ``LLM_HTTP_ERROR`` (docs/errors.md); the body itself only as
    its hash, the provider's message redacted and cut."""

    status: int
    body_sha256: str
    provider_code: str | None
    provider_type: str | None
    provider_message: str | None
    retry_after_s: NotRequired[int]


async def http_error(response: httpx.Response, secrets: tuple[str, ...]) -> LLMError:
    """The ``LLM_HTTP_ERROR`` for a response of status >= 400, read from at most
    :data:`MAX_ERROR_BODY_BYTES` of its body; the caller closes the response."""
    status = response.status_code
    try:
        raw = await read_bounded(response, MAX_ERROR_BODY_BYTES, truncate=True)
    except LLMError:
        raw = b""
    provider_code: str | None = None
    provider_type: str | None = None
    message: Any = None
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):  # absurdly deep nesting is malformed too
        document = None
    if isinstance(document, dict):
        error = document.get("error")
        if isinstance(error, dict):
            provider_code, provider_type = provider_fields(error)
            message = error.get("message")
        elif isinstance(error, str):
            message = error
        else:  # {"message": ...} or FastAPI's {"detail": ...}
            message = document.get("message", document.get("detail"))
    details: HttpErrorDetails = {
        "status": status,
        "body_sha256": hashlib.sha256(raw).hexdigest(),
        "provider_code": provider_code,
        "provider_type": provider_type,
        "provider_message": provider_message(message, secrets),
    }
    retry_after = retry_after_s(response.headers)
    if retry_after is not None:
        details["retry_after_s"] = retry_after
    return LLMError(
        f"the model endpoint answered HTTP {status}", code="LLM_HTTP_ERROR", details=details
    )


def retry_after_s(headers: Mapping[str, str]) -> int | None:
    """Whole seconds a server asked us to wait (``Retry-After`` as seconds or an HTTP date,
    rounded up; ``retry-after-ms`` as OpenAI sends it), or None when it said nothing usable."""
    millis = _RETRY_AFTER.match(headers.get("retry-after-ms", ""))
    if millis:
        return math.ceil(float(millis.group(1)) / 1000)
    value = headers.get("retry-after", "")
    seconds = _RETRY_AFTER.match(value)
    if seconds:
        return math.ceil(float(seconds.group(1)))
    if not value or len(value) > 64:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is always GMT
        when = when.replace(tzinfo=datetime.UTC)
    return max(0, math.ceil((when - datetime.datetime.now(datetime.UTC)).total_seconds()))


async def read_bounded(response: httpx.Response, limit: int, *, truncate: bool = False) -> bytes:
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


def parse_json(raw: bytes) -> JsonObject:
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        raise LLMError(
            "the model endpoint's answer is not JSON",
            code="LLM_BAD_RESPONSE",
            details={"bytes": len(raw)},
        ) from None
    if not isinstance(document, dict):
        raise LLMError("the model endpoint's answer is not a JSON object", code="LLM_BAD_RESPONSE")
    return document


def message_text(value: Any, what: str) -> str:
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


def result_from_document(document: JsonObject, *, request_sha256: str | None = None,
                         retries: tuple[Attempt, ...] = ()) -> ChatResult:
    """A whole (not streamed) completion as the call's result; ``request_sha256`` and
    ``retries`` say what was sent (set here: a ``dataclasses.replace`` after, on every
    call, cost ~6 us more)."""
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
        content=message_text(message.get("content"), "content"),
        reasoning=message_text(reasoning, "reasoning"),
        finish_reason=_optional_str(choices[0].get("finish_reason")),
        model=_optional_str(document.get("model")),
        usage=ProviderUsage.from_openai(usage if isinstance(usage, dict) else None),
        streamed=False,
        tool_calls=_tool_calls(message.get("tool_calls")),
        request_sha256=request_sha256,
        retries=retries,
    )
