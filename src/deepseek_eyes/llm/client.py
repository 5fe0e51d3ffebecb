"""An OpenAI-compatible chat client on plain httpx: it builds and sends the requests, owns
their deadline, and maps every transport failure to a code.

Why not the ``openai`` SDK: we must tell a complete answer from a cut one. The SDK raises a
generic connection error when an SSE stream is cut mid-way and raises nothing at all when a
stream ends cleanly without a finish reason, and it lets malformed chunk JSON escape as a bare
``json.JSONDecodeError``. So this module only sends; a streamed answer is read by
:mod:`deepseek_eyes.llm.stream`, a whole answer or an HTTP error by
:mod:`deepseek_eyes.llm.response`. The names those define that callers import from here
(:class:`ChatResult`, :class:`ToolCall`, :class:`ChatStream`, the limits) are re-exported.

Decisions a newcomer would otherwise undo:

* One deadline, ``timeout``, covers the whole call (connect, send, headers, body or stream).
  A whole answer runs under :func:`anyio.fail_after`; a stream gets an absolute deadline
  when it is opened and bounds each network read by it (:mod:`deepseek_eyes.llm.stream`
  says why). httpx's own timeouts only bound the connect phase separately.
* :meth:`ChatClient.stream` is the one streaming code path: ``complete(stream=True)`` drains
  it, so that both see the same completeness rules.
* A busy upstream is retried (:mod:`deepseek_eyes.llm.retry`: which failures, how long to
  wait, the bound), each attempt under its own deadline. A stream is retried only before
  its first chunk: entering :meth:`ChatClient.stream` waits for that chunk, so no byte of a
  failed attempt ever reaches the caller. The failed attempts travel with the answer
  (``ChatResult.retries``) or with the final error (``details["attempts"]``), so that each
  request actually sent can be audited.
* The API key lives only in the ``Authorization`` header, and every error built from a
  provider's text has it replaced by ``[redacted]`` (:mod:`deepseek_eyes.llm.response`).
  Header values are checked up front so that h11 never builds an "illegal header value"
  message that quotes the key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import re
import time
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from json import dumps as _json_dumps
from types import TracebackType
from typing import Any, TypeVar

import anyio
import httpx

from deepseek_eyes import telemetry
from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import LLMError
from deepseek_eyes.llm.response import (
    MAX_ERROR_BODY_BYTES,
    MAX_RESPONSE_BYTES,
    MAX_TOOL_CALLS,
    PROVIDER_MESSAGE_CHARS,
    ChatResult,
    ToolCall,
    http_error,
    parse_json,
    read_bounded,
    result_from_document,
)
from deepseek_eyes.llm.retry import Attempt, RetryPolicy, attempts_json
from deepseek_eyes.llm.stream import ChatStream
from deepseek_eyes.llm.transport import KeepAliveTransport
from deepseek_eyes.stages import stage
from deepseek_eyes.telemetry.conventions import (
    RESPONSE_FINISH_REASONS,
    RESPONSE_MODEL,
    RESPONSE_TIME_TO_FIRST_CHUNK,
    USAGE_CACHE_READ_INPUT_TOKENS,
    USAGE_INPUT_TOKENS,
    USAGE_OUTPUT_TOKENS,
    USAGE_REASONING_OUTPUT_TOKENS,
    chat_attributes,
    chat_span_name,
)
from deepseek_eyes.telemetry.latency import observe as observe_latency
from deepseek_eyes.untrusted.redact import redact_url

__all__ = [
    "MAX_ERROR_BODY_BYTES",
    "MAX_RESPONSE_BYTES",
    "MAX_TOOL_CALLS",
    "PROVIDER_MESSAGE_CHARS",
    "BeforeSend",
    "ChatClient",
    "ChatResult",
    "ChatStream",
    "Encoded",
    "ToolCall",
]

_USER_AGENT = "deepseek-eyes/0.1"
# Visible ASCII and spaces only: no CR/LF/NUL that would split or poison a header line.
_HEADER_VALUE = re.compile(r"^[\x20-\x7e]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_MIN_REDACTED_HEADER = 8  # shorter header values ("1", "json") are not secrets worth hiding

T = TypeVar("T")

#: Told each attempt's request hash and number (1, 2, …) just before it is sent; what it
#: raises stops the call, unsent (the turn writes its billed calls ahead with it).
BeforeSend = Callable[[str, int], None]


@dataclasses.dataclass(frozen=True)
class Encoded:
    """A chat request encoded ahead of its call (:meth:`ChatClient.encode`): its hash can be
    written down before the call, and the call sends exactly these bytes, every attempt."""

    request: httpx.Request
    sha256: str
    stream: bool


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
        retry: RetryPolicy | None = None,
        base_url_source: str | None = None,
        provider: str | None = None,
    ) -> None:
        if timeout <= 0 or connect_timeout <= 0:
            raise ValueError("timeouts must be positive")
        self._retry = retry or RetryPolicy()
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
        #: ``gen_ai.provider.name`` of this client's chat spans (None: no chat spans; a
        #: vision route's own attempt span says what it called instead).
        self.provider = provider
        # Where an unreachable endpoint's message says the URL came from, so that the person
        # knows what to change ("llm.base_url", "DEEPSEEK_BASE_URL", the default).
        self._where = _Where(redact_url(self._base_url), base_url_source)
        self._chat_url = f"{self._base_url}/chat/completions"
        self._models_url = f"{self._base_url}/models"
        self._timeout = timeout
        # Longest first, so that a key containing a header value is replaced whole.
        self._secrets = tuple(sorted(set(secrets), key=len, reverse=True))
        self._http = httpx.AsyncClient(
            headers=merged,
            timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout)),
            transport=transport or _default_transport(),
            follow_redirects=False,
        )
        # A chat call's request but its body, merged once (see _request): the URL, the
        # client's headers with the body's type (a stream's with its Accept), the timeouts.
        self._chat_target = httpx.URL(self._chat_url)
        self._chat_timeouts = self._http.timeout.as_dict()
        whole = httpx.Headers(self._http.headers)
        whole["Content-Type"] = "application/json"
        streamed = httpx.Headers(whole)
        streamed["Accept"] = "text/event-stream"
        self._chat_headers = {False: whole, True: streamed}
        _extract_only_set_cookies(self._http.cookies)

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def timeout(self) -> float:
        return self._timeout

    async def complete(self, payload: Mapping[str, Any], *, stream: bool = False,
                       before_send: BeforeSend | None = None,
                       encoded: Encoded | None = None) -> ChatResult:
        """POST ``{base_url}/chat/completions`` and return the assembled answer.

        ``stream=True`` drains :meth:`stream`; a server that answers a streaming request with
        plain JSON is accepted (``streamed=False``). ``before_send`` is told each attempt
        before it is sent; what it raises stops the call unsent. ``encoded``: the request
        :meth:`encode` made of ``payload`` (same ``stream``), sent as it is.

        Raises:
            LLMError: ``LLM_TIMEOUT``, ``LLM_UNAVAILABLE``, ``LLM_HTTP_ERROR`` (details:
                status, body_sha256, provider_code, provider_type, provider_message,
                retry_after_s when sent), ``LLM_BAD_RESPONSE`` or ``LLM_STREAM_INCOMPLETE``
                (details: chunks, bytes). When it follows retried attempts,
                ``details["attempts"]`` lists every attempt (request_sha256, code, status,
                waited_s), the last one included.
        """
        if stream:
            async with self.stream(payload, before_send=before_send, encoded=encoded) as chunks:
                async for _ in chunks:
                    pass
                return chunks.result
        body = _body(payload, stream=False)
        failed: list[Attempt] = []
        started, outcome = time.perf_counter(), "error"
        # every attempt and the waits between them
        try:
            with self._chat_span(body, stream=False) as span, stage("upstream"):
                request = self._request(body, stream=False, encoded=encoded)
                while True:
                    sent: list[str] = []
                    try:
                        result = await self._deadline(functools.partial(
                            self._complete, request, sent, before_send, len(failed) + 1))
                    except LLMError as exc:
                        await self._pause_or_raise(exc, failed, sent[0] if sent else None)
                        continue
                    answered(span, result, retries=len(failed))
                    outcome = "ok"
                    return dataclasses.replace(result, retries=tuple(failed))
        finally:
            with stage("upstream"):  # the call's own latency metric
                observe_latency("upstream", _model_of(body), outcome,
                                time.perf_counter() - started)

    def _chat_span(self, body: JsonObject, *, stream: bool,
                   ) -> contextlib.AbstractContextManager[Any]:
        """The GenAI client span of one chat call (nothing without a provider or traces)."""
        if self.provider is None or not telemetry.active():
            return contextlib.nullcontext()
        model = body.get("model")
        model = model if isinstance(model, str) else None
        return telemetry.client_span(
            chat_span_name(model),
            chat_attributes(self.provider, model, self._base_url, stream=stream))

    async def _pause_or_raise(
        self, error: LLMError, failed: list[Attempt], request_sha256: str | None
    ) -> None:
        """Wait before the next attempt, or raise ``error`` (with every failed attempt in
        ``details["attempts"]``) when it is final."""
        wait = self._retry.delay(len(failed) + 1, error)
        attempt = Attempt(request_sha256, error.code, _status(error), wait or 0.0)
        if wait is None:
            if failed:
                error.details["attempts"] = attempts_json([*failed, attempt])
            raise error
        failed.append(attempt)
        await anyio.sleep(wait)

    def stream(self, payload: Mapping[str, Any], *, before_send: BeforeSend | None = None,
               encoded: Encoded | None = None) -> AbstractAsyncContextManager[ChatStream]:
        """``async with client.stream(payload) as chunks: async for chunk in chunks: ...``

        Sends ``stream: true`` and ``stream_options.include_usage`` (other stream options of
        the caller are kept). Entering sends the request and waits for its first chunk; HTTP
        errors, and a stream cut before that chunk, are raised there (after the retries the
        policy allows). Iterating yields each chunk as the upstream sent it (keep-alives and
        ``[DONE]`` aside); ``chunks.result`` is the assembled answer once the iteration
        ended normally. ``before_send`` and ``encoded``: as for :meth:`complete`.

        Raises:
            LLMError: on entering, as :meth:`complete`; while
                iterating, ``LLM_TIMEOUT``, ``LLM_BAD_RESPONSE`` (bad chunk JSON, size bound,
                a provider error object inside the stream, details carry provider_code) or
                ``LLM_STREAM_INCOMPLETE`` (no chunk carried a finish reason, or the stream
                was cut).
        """
        return _StreamOpener(self, _body(payload, stream=True), encoded, before_send)

    def encode(self, payload: Mapping[str, Any], *, stream: bool) -> Encoded:
        """The request :meth:`complete` (or :meth:`stream`, with ``stream``) would send for
        ``payload``, encoded now: the caller learns its hash before the call and hands it
        to the call, which sends these bytes (the turn writes its first call ahead together
        with the request that caused it)."""
        request = self._request(_body(payload, stream=stream), stream=stream)
        return Encoded(request, hashlib.sha256(request.content).hexdigest(), stream)

    def _request(self, body: JsonObject, *, stream: bool,
                 encoded: Encoded | None = None) -> httpx.Request:
        """The HTTP request of one chat call (each attempt sends it again): ``encoded``'s
        when given (for the same kind of call), else ``body`` encoded."""
        if encoded is not None:
            if encoded.stream != stream:
                raise ValueError("a request encoded for another kind of call")
            return encoded.request
        if self._http.cookies:  # an upstream set one: httpx's own merge sends it back
            return self._http.build_request(
                "POST", self._chat_url, json=body,
                headers={"Accept": "text/event-stream"} if stream else None)
        # What build_request makes (the same URL, headers, JSON bytes and timeouts) from
        # the parts merged at start: it merged and parsed them again on every call, about
        # 70 us of a turn's path to the model (tests/llm/test_client.py holds them equal).
        content = _json_dumps(body, ensure_ascii=False, separators=(",", ":"),
                              allow_nan=False).encode("utf-8")
        return httpx.Request("POST", self._chat_target, headers=self._chat_headers[stream],
                             content=content, extensions={"timeout": self._chat_timeouts})

    async def list_models(self) -> list[JsonObject]:
        """GET ``{base_url}/models`` and return its ``data`` list (entries that are objects).

        Raises:
            LLMError: as :meth:`complete`, less ``LLM_STREAM_INCOMPLETE``.
        """
        return await self._deadline(self._list_models)

    async def reach(self, timeout: float) -> int:
        """One ``GET {base_url}/models`` under ``timeout`` seconds, never retried: the status
        of whatever HTTP answer came (readiness asks whether the upstream answers at all,
        and reads nothing of the body).

        Raises:
            LLMError: ``LLM_UNAVAILABLE`` (no connection) or ``LLM_TIMEOUT``.
        """
        request = self._http.build_request("GET", self._models_url)
        try:
            with anyio.fail_after(timeout):
                response = await self._http.send(request, stream=True)
                await response.aclose()
        except TimeoutError:
            raise LLMError(f"the model endpoint did not answer within {timeout:g}s",
                           code="LLM_TIMEOUT", details={"timeout_s": timeout}) from None
        except httpx.TimeoutException as exc:
            raise LLMError("the model endpoint did not answer in time", code="LLM_TIMEOUT",
                           details={"error": type(exc).__name__}) from exc
        except httpx.HTTPError as exc:
            raise _unavailable("the model endpoint could not be reached", exc,
                               self._where) from exc
        return response.status_code

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

    async def _list_models(self) -> list[JsonObject]:
        request = self._http.build_request("GET", self._models_url)
        response = await _send(self._http, request, self._secrets, self._where)
        try:
            document = parse_json(await read_bounded(response, MAX_RESPONSE_BYTES))
        finally:
            await response.aclose()
        data = document.get("data")
        if not isinstance(data, list):
            raise LLMError("the model list has no 'data' array", code="LLM_BAD_RESPONSE")
        return [entry for entry in data if isinstance(entry, dict)]

    async def _complete(self, request: httpx.Request, sent_hash: list[str],
                        before_send: BeforeSend | None, attempt: int) -> ChatResult:
        sent = hashlib.sha256(request.content).hexdigest()
        sent_hash.append(sent)
        if before_send is not None:
            before_send(sent, attempt)
        response = await _send(self._http, request, self._secrets, self._where)
        try:
            document = parse_json(await read_bounded(response, MAX_RESPONSE_BYTES))
        finally:
            await response.aclose()
        return result_from_document(document, request_sha256=sent)

    async def _open_stream(
        self, request: httpx.Request, sent_hash: list[str], retries: tuple[Attempt, ...],
        before_send: BeforeSend | None = None,
    ) -> ChatStream:
        deadline = anyio.current_time() + self._timeout
        sent_hash.append(hashlib.sha256(request.content).hexdigest())
        if before_send is not None:
            before_send(sent_hash[-1], len(retries) + 1)
        response: httpx.Response | None = None
        with anyio.CancelScope(deadline=deadline):
            response = await _send(self._http, request, self._secrets, self._where)
        if response is None:  # the deadline cancelled the send
            raise self._timeout_error()
        return ChatStream(
            response, deadline=deadline, timeout_error=self._timeout_error, secrets=self._secrets,
            request_sha256=sent_hash[-1], retries=retries,
        )


class _StreamOpener(AbstractAsyncContextManager["ChatStream"]):
    """What :meth:`ChatClient.stream` returns: opens on enter (retrying until the first
    chunk arrived, see the module docstring), always closes on exit."""

    def __init__(self, client: ChatClient, body: JsonObject, encoded: Encoded | None,
                 before_send: BeforeSend | None = None) -> None:
        self._client = client
        self._body = body
        self._encoded = encoded
        self._before_send = before_send
        self._stream: ChatStream | None = None
        self._span: Any = None  # the chat span when traces are on
        self._started = 0.0

    async def __aenter__(self) -> ChatStream:
        client = self._client
        self._started = time.perf_counter()
        if client.provider is not None and telemetry.active():
            model = self._body.get("model")
            model = model if isinstance(model, str) else None
            # Not the current span: the stream is read across the caller's yields.
            self._span = telemetry.detached_span(
                chat_span_name(model),
                chat_attributes(client.provider, model, client.base_url, stream=True))
        with stage("upstream"):  # until the first chunk (each one after: ChatStream's)
            try:
                stream = await self._open()
            except BaseException as exc:
                observe_latency("upstream", _model_of(self._body), "error",
                                time.perf_counter() - self._started)
                self._started = 0.0
                if self._span is not None:
                    telemetry.fail(self._span, exc)
                    self._span.end()
                    self._span = None
                raise
        if self._span is not None:
            self._span.set_attribute(RESPONSE_TIME_TO_FIRST_CHUNK,
                                     round(time.perf_counter() - self._started, 6))
        return stream

    async def _open(self) -> ChatStream:
        request = self._client._request(self._body, stream=True, encoded=self._encoded)
        failed: list[Attempt] = []
        while True:
            sent: list[str] = []
            stream: ChatStream | None = None
            try:
                stream = await self._client._open_stream(request, sent, tuple(failed),
                                                         self._before_send)
                await stream.prime()
            except LLMError as exc:
                if stream is not None:
                    await stream.aclose()
                await self._client._pause_or_raise(exc, failed, sent[0] if sent else None)
                continue
            except BaseException:
                if stream is not None:
                    await stream.aclose()
                raise
            self._stream = stream
            return stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        span, self._span = self._span, None
        ended = self._stream.ended_with if self._stream is not None else None
        if self._started:  # opened (or tried to): the whole stream, its last chunk read
            observe_latency("upstream", _model_of(self._body),
                            "ok" if ended is not None else "error",
                            time.perf_counter() - self._started)
            self._started = 0.0
        if span is not None:
            result = ended
            if result is not None:
                answered(span, result, retries=len(result.retries))
            else:  # cut, failed, or left before its end
                telemetry.fail(span, exc if exc is not None else "incomplete")
            span.end()
        if self._stream is not None:
            await self._stream.aclose()


def _model_of(body: JsonObject) -> str | None:
    model = body.get("model")
    return model if isinstance(model, str) else None


def answered(span: Any, result: ChatResult, *, retries: int) -> None:
    """The answer's model, finish reason and token usage on its chat span (no content)."""
    if span is None:
        return
    usage = result.usage
    span.set_attributes(_clean({
        RESPONSE_MODEL: result.model,
        RESPONSE_FINISH_REASONS: [result.finish_reason] if result.finish_reason else None,
        USAGE_INPUT_TOKENS: usage.prompt_tokens,
        USAGE_OUTPUT_TOKENS: usage.completion_tokens,
        USAGE_CACHE_READ_INPUT_TOKENS: usage.cache_hit_tokens or None,
        USAGE_REASONING_OUTPUT_TOKENS: usage.reasoning_tokens or None,
        "deepseek_eyes.llm.retries": retries or None,
    }))


def _clean(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


# -- sending ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Where:
    """The endpoint an ``LLM_UNAVAILABLE`` names: its URL (redacted) and what set it."""

    url: str
    source: str | None

    def said(self, message: str) -> str:
        where = f" (set by {self.source})" if self.source else ""
        return f"{message}: {self.url}{where}"


async def _send(
    http: httpx.AsyncClient, request: httpx.Request, secrets: tuple[str, ...], where: _Where,
) -> httpx.Response:
    """Send one request, map transport failures, and turn status >= 400 into
    ``LLM_HTTP_ERROR``; the caller closes the response it gets."""
    try:
        response = await http.send(request, stream=True)
    except httpx.ConnectTimeout as exc:
        raise _unavailable("connecting to the model endpoint timed out", exc, where) from exc
    except httpx.TimeoutException as exc:
        raise LLMError(
            "the model endpoint did not answer in time",
            code="LLM_TIMEOUT",
            details={"error": type(exc).__name__},
        ) from exc
    except httpx.HTTPError as exc:
        raise _unavailable("the model endpoint could not be reached", exc, where) from exc
    if response.status_code >= 400:
        try:
            error = await http_error(response, secrets)
        finally:
            await response.aclose()
        raise error
    return response


def _default_transport() -> httpx.AsyncBaseTransport | None:
    """Ours (llm/transport.py says why: most of a turn's own cost was httpcore's), unless
    the environment names a proxy: httpx honours ``*_PROXY`` and ``NO_PROXY`` only with
    its own transport (None), so a proxied setup keeps exactly what it had."""
    if any(scheme in ("http", "https", "all") for scheme in urllib.request.getproxies()):
        return None
    return KeepAliveTransport()


def _status(error: LLMError) -> int | None:
    status = error.details.get("status")
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def _extract_only_set_cookies(cookies: httpx.Cookies) -> None:
    """Have ``cookies`` (a client's jar, which httpx hands every response) read only the
    responses that set a cookie. For each one it built a urllib request and an email
    message of the response's headers first (about 55 us a call here), and the standard
    jar takes cookies from ``Set-Cookie`` and ``Set-Cookie2`` alone: a response without
    either changes nothing, so it is passed by."""
    extract = cookies.extract_cookies

    def extract_if_set(response: httpx.Response) -> None:
        headers = response.headers
        if "set-cookie" in headers or "set-cookie2" in headers:
            extract(response)

    cookies.extract_cookies = extract_if_set  # type: ignore[method-assign]


def _unavailable(message: str, exc: Exception, where: _Where) -> LLMError:
    details: dict[str, Any] = {"error": type(exc).__name__, "url": where.url}
    if where.source:
        details["source"] = where.source
    return LLMError(where.said(message), code="LLM_UNAVAILABLE", details=details)


def _body(payload: Mapping[str, Any], *, stream: bool) -> JsonObject:
    """The JSON body of a chat call: ``payload`` with ``stream`` set; a streamed call asks
    for usage in its last chunk (other stream options of the caller are kept), a whole
    one sends no stream options."""
    body = dict(payload)
    body["stream"] = stream
    if not stream:
        body.pop("stream_options", None)
        return body
    options = body.get("stream_options")
    body["stream_options"] = {**(options if isinstance(options, dict) else {}),
                              "include_usage": True}
    return body
