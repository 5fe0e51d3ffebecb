"""One streamed chat completion: :class:`ChatStream` yields each chunk the upstream sends and
assembles the :class:`~deepseek_eyes.llm.response.ChatResult` they add up to.

Only :meth:`ChatClient.stream <deepseek_eyes.llm.client.ChatClient.stream>` makes one, and
it is the one streaming code path: ``complete(stream=True)`` drains it too.

Decisions a newcomer would otherwise undo:

* A stream only counts as complete once a chunk carried a ``finish_reason``; a cut, or an
  end (even ``[DONE]``) without one, is ``LLM_STREAM_INCOMPLETE``, so that the vision
  router can recognise it and retry once. That is why the SSE lines are parsed by hand
  (:mod:`deepseek_eyes.llm.sse`) instead of by the ``openai`` SDK, which raises a generic
  connection error for a cut stream and nothing at all for a missing finish reason.
* Every upstream chunk is yielded exactly as parsed, so a gateway can forward it; the
  result is assembled on the side. A server that answers a streaming request with plain
  JSON yields one synthesized ``chat.completion.chunk``.
* The call's deadline is absolute and bounds each network read, not the iteration: the
  caller's own work between chunks (forwarding them to a gateway client) is never
  cancelled from inside this module, yet a slow trickle of bytes cannot stretch a call
  past its deadline.
* After ``[DONE]`` the few bytes left are drained so that the connection goes back to the
  pool (a new TLS handshake per turn would cost far more than anything else here).
"""

from __future__ import annotations

import codecs
import contextlib
import json
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NotRequired, TypedDict

import anyio
import httpx

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import LLMError
from deepseek_eyes.llm.response import (
    MAX_RESPONSE_BYTES,
    MAX_TOOL_CALLS,
    ChatResult,
    ToolCall,
    message_text,
    parse_json,
    provider_fields,
    provider_message,
    read_bounded,
    result_from_document,
)
from deepseek_eyes.llm.retry import Attempt
from deepseek_eyes.llm.sse import SSEDecoder
from deepseek_eyes.stages import stage
from deepseek_eyes.usage import ProviderUsage

__all__ = ["ChatStream"]

_DRAIN_S = 0.5  # after [DONE], how long we wait for the body's end to reuse the connection
_DRAIN_BYTES = 64 * 1024


class ChatStream:
    """The chunks of one streamed completion, and the answer they add up to.

    ``async for chunk in stream`` yields each chunk as the parsed JSON object the upstream
    sent. A server that answers with plain JSON instead yields one synthesized
    ``chat.completion.chunk`` holding the whole answer (``result.streamed`` is False).
    Only :meth:`~deepseek_eyes.llm.client.ChatClient.stream` makes one; ``deadline`` is on
    :func:`anyio.current_time`'s clock.

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
        request_sha256: str | None = None,
        retries: tuple[Attempt, ...] = (),
    ) -> None:
        self.request_sha256 = request_sha256
        self.retries = retries  # failed attempts before this one
        self.first_chunk_at: float | None = None
        self._primed: JsonObject | None = None  # upstream chunks are the provider's JSON
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
        self._usage: JsonObject | None = None

    @property
    def result(self) -> ChatResult:
        """The assembled answer.

        Raises:
            RuntimeError: before the iteration ended normally (a programming error).
        """
        if self._result is None:
            raise RuntimeError("the stream has not ended normally; there is no result")
        return self._result

    @property
    def ended_with(self) -> ChatResult | None:
        """The assembled answer once the iteration ended normally, else None."""
        return self._result

    def __aiter__(self) -> ChatStream:
        return self

    async def prime(self) -> None:
        """Read the first chunk now and keep it for the iteration: the client retries a
        stream that fails here, before anything reached its caller.

        Raises:
            LLMError: as iterating does.
        """
        if self._primed is not None or self._ended or self._chunks:
            return
        # An end with a finish reason and no data chunk is a result all the same.
        with contextlib.suppress(StopAsyncIteration):
            self._primed = await self.__anext__()

    async def __anext__(self) -> JsonObject:
        if self._primed is not None:
            primed, self._primed = self._primed, None
            return primed
        if self._ended:
            raise StopAsyncIteration
        try:
            with stage("upstream"):  # the model's answer read, chunk by chunk
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

    async def _next_sse(self) -> JsonObject | None:
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

    async def _next_json(self) -> JsonObject | None:
        if self._eof:
            return None
        self._eof = True
        try:
            with anyio.fail_after(max(0.0, self._deadline - anyio.current_time())):
                raw = await read_bounded(self._response, MAX_RESPONSE_BYTES)
        except TimeoutError:
            raise self._timeout_error() from None
        document = parse_json(raw)
        self._result = result_from_document(document, request_sha256=self.request_sha256,
                                            retries=self.retries)
        self.first_chunk_at = time.perf_counter()
        return _chunk_from_document(document, self._result)

    # -- assembling ----------------------------------------------------------------------

    def _take(self, data: str) -> JsonObject:
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
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
            code, kind = provider_fields(error)
            raise LLMError(
                "the model endpoint reported an error inside its stream",
                code="LLM_BAD_RESPONSE",
                details={
                    "chunks": self._chunks,
                    "provider_code": code,
                    "provider_type": kind,
                    "provider_message": provider_message(error.get("message"), self._secrets),
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

    def _take_choice(self, choice: JsonObject) -> None:
        delta = choice.get("delta")
        if isinstance(delta, dict):
            text = delta.get("content")
            if text:
                self._content.append(
                    text if isinstance(text, str) else message_text(text, "content")
                )
            thought = delta.get("reasoning_content")
            if thought:
                self._reasoning.append(message_text(thought, "reasoning"))
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
            request_sha256=self.request_sha256,
            retries=self.retries,
        )

    def _progress(self) -> StreamProgress:
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

    def _take(self, call: JsonObject) -> None:
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


class StreamProgress(TypedDict):
    """How far a stream got: the details of an incomplete stream's error."""

    chunks: int
    bytes: int
    error: NotRequired[str]


# -- a whole answer as one chunk ------------------------------------------------------------


def _chunk_from_document(document: JsonObject, result: ChatResult) -> JsonObject:
    """One ``chat.completion.chunk`` that carries a whole answer, for a server that answered
    a streaming request with plain JSON: a gateway forwarding chunks still sends it all.
    The chunk is in OpenAI's schema, not ours, hence ``JsonObject``."""
    delta: JsonObject = {"role": "assistant", "content": result.content}
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
    chunk: JsonObject = {
        key: document[key] for key in ("id", "created", "model") if key in document
    }
    chunk["object"] = "chat.completion.chunk"
    chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": result.finish_reason}]
    if isinstance(document.get("usage"), dict):
        chunk["usage"] = document["usage"]
    return chunk
