"""The OpenAI chat-completions wire format: a request in, a completion or chunks out.

The gateway, ``ask`` and ``chat`` all build their turn with :func:`request_from_openai`
(so admission — message structure, image counts, decoding, storing — is one path), and
read answers in the shapes below: :func:`completion_json` (``chat.completion``),
:class:`TurnStream` (``chat.completion.chunk``), :func:`usage_json` and
:func:`deepseekeyes_json` (the object a client cannot learn elsewhere).

A streamed turn is not blind: tool progress and approval requests travel as
``deepseekeyes`` event chunks (``choices: []``), the last chunk carries the same
``deepseekeyes`` object (session id, path, evidence) a whole answer carries, and the
client's tool-call deltas are forwarded as they arrive.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import StoreError
from deepseek_eyes.runtime.messages import Admit, Fetch, ParsedHistories, parse_messages
from deepseek_eyes.runtime.turn.events import Answer, Delta, Progress, Started, TurnEvent
from deepseek_eyes.runtime.turn.ledger import usage_json
from deepseek_eyes.runtime.turn.relay import tool_call_json
from deepseek_eyes.runtime.turn.request import TurnRequest, TurnResult
from deepseek_eyes.store.events import SessionStore

if TYPE_CHECKING:
    from deepseek_eyes.runtime.approval import Approver
    from deepseek_eyes.runtime.tools import Notify

__all__ = [
    "TurnStream", "completion_json", "deepseekeyes_json", "request_from_openai", "usage_json",
]


async def request_from_openai(
    body: Mapping[str, Any],
    *,
    admit: Admit,
    max_image_bytes: int,
    max_images: int,
    fetch: Fetch | None = None,
    session_id: str | None = None,
    history: Sequence[JsonObject] = (),
    source: str = "gateway",
    approver: Approver | None = None,
    notify: Notify | None = None,
    memo: ParsedHistories | None = None,
    scope: str | None = None,
) -> TurnRequest:
    """A turn request from an OpenAI ``chat/completions`` body whose field types are
    checked (the gateway's ``check_fields``; ``ask`` and ``chat`` build theirs).

    ``history`` goes before the body's messages, already in the runtime's format: the
    stored log a local front end continues (a client of the gateway resends its own).

    Raises:
        StoreError: ``STORE_SESSION_INVALID`` for a malformed session id.
        TurnError: ``RUNTIME_BAD_MESSAGE``, ``RUNTIME_TOO_MANY_IMAGES``.
        ImageError: an image that cannot be admitted (nothing is stored then).
    """
    if session_id is not None and not SessionStore.valid_id(session_id):
        raise StoreError("the session id is not valid: 1-128 letters, digits, '.', '_', "
                         "':' or '-'", code="STORE_SESSION_INVALID")
    messages = await parse_messages(
        body.get("messages"), admit=admit, fetch=fetch, max_image_bytes=max_image_bytes,
        max_images=max_images, memo=memo, scope=scope,
    )
    options = body.get("stream_options") or {}
    model = body.get("model")
    return TurnRequest(
        messages=[*history, *messages],
        model=model if isinstance(model, str) and model else None,
        params=dict(body),
        client_tools=list(body.get("tools") or []),
        tool_choice=body.get("tool_choice"),
        session_id=session_id,
        source=source,
        include_usage=isinstance(options, Mapping) and bool(options.get("include_usage")),
        approver=approver,
        notify=notify,
    )


def deepseekeyes_json(result: TurnResult) -> JsonObject:
    """The ``deepseekeyes`` object of a response: what a client cannot learn elsewhere."""
    out: JsonObject = {
        "session_id": result.session_id,
        "path": result.path,
        "evidence": result.evidence,
        "rereads": result.rereads,
    }
    if result.tools:
        out["tools"] = result.tools
    if result.fork is not None:
        out["fork"] = {"from": result.fork.parent, "at": result.fork.at}
    if result.retry_of is not None:
        out["retry_of"] = result.retry_of
    if result.thinking is not None:
        out["thinking"] = result.thinking
    if result.sight is not None:
        out["sight"] = result.sight
    if result.model_renamed is not None:
        out["model_renamed"] = result.model_renamed
    out["provenance"] = {
        # image hash -> attempts (operation) -> evidence hash -> request hash -> usage,
        # each resolvable with `deepseek-eyes audit show` (the turn id resolves them all)
        "turn_id": result.turn_id,
        "images": [
            {"sha256": e["sha256"], "operation_id": e["operation_id"],
             "record_sha256": e["record_sha256"]}
            for e in result.evidence
        ],
        "requests": result.requests,
        "audit": result.audit,
    }
    return out


def completion_json(result: TurnResult) -> JsonObject:
    """A whole answer as an OpenAI ``chat.completion``."""
    # As OpenAI does: beside tool calls, no text is ``null``, not ``""``.
    content = result.content or None if result.tool_calls else result.content
    message: JsonObject = {"role": "assistant", "content": content}
    if result.reasoning:
        message["reasoning_content"] = result.reasoning
    if result.tool_calls:
        message["tool_calls"] = tool_call_json(result.tool_calls)
    return {
        "id": f"chatcmpl-{result.turn_id}",
        "object": "chat.completion",
        "created": result.created,
        "model": result.model,
        "choices": [{"index": 0, "message": message, "finish_reason": result.finish_reason}],
        "usage": usage_json(result.usage),
        "deepseekeyes": deepseekeyes_json(result),
    }


class TurnStream:
    """``async for chunk in runner.stream(request)``; ``result`` is set at the end.

    Content, reasoning and the client's tool-call deltas are forwarded as the upstream
    sends them; calls to the runtime's own tools never reach the client. The last chunk
    carries ``deepseekeyes`` (and ``usage`` when asked). ``session_id`` is set once the
    turn is prepared, before the first chunk is yielded.
    """

    def __init__(self, events: AsyncGenerator[TurnEvent, None], *, include_usage: bool) -> None:
        self._events = events
        self._include_usage = include_usage
        self.result: TurnResult | None = None
        self.session_id: str | None = None
        self.chunk_id = f"chatcmpl-{uuid.uuid4().hex}"
        self._created = 0
        self._model = ""

    def _chunk(self, delta: JsonObject, finish: str | None = None) -> JsonObject:
        return {
            "id": self.chunk_id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def __aiter__(self) -> AsyncIterator[JsonObject]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[JsonObject]:
        sent_role = False

        def with_role(delta: JsonObject) -> JsonObject:
            nonlocal sent_role
            if sent_role:
                return delta
            sent_role = True
            return {"role": "assistant", **delta}

        try:
            async for event in self._events:
                if isinstance(event, Started):
                    self.session_id = event.session_id
                    self._created, self._model = event.created, event.model
                elif isinstance(event, Delta):
                    yield self._chunk(with_role(event.delta))
                elif isinstance(event, Progress):
                    # A progress event as a chunk OpenAI clients pass over (no choices).
                    yield {**self._chunk({}), "choices": [],
                           "deepseekeyes": {"event": event.event}}
                elif isinstance(event, Answer):
                    final = event.result
                    if event.late:
                        base = event.relayed
                        yield self._chunk(with_role({"tool_calls": [
                            {"index": base + i, **call}
                            for i, call in enumerate(tool_call_json(event.late))
                        ]}))
                    if not sent_role:
                        yield self._chunk(with_role({"content": ""}))
                    extra = {"deepseekeyes": deepseekeyes_json(final)}
                    if self._include_usage:
                        yield self._chunk({}, final.finish_reason)
                        yield {**self._chunk({}), "choices": [],
                               "usage": usage_json(final.usage), **extra}
                    else:
                        yield {**self._chunk({}, final.finish_reason), **extra}
                    self.result = final
        finally:
            await self._events.aclose()

