"""The ``Idempotency-Key`` header: a client's retry of a request answered from the store.

A client sends ``Idempotency-Key: <1-255 printable characters>`` with a chat completion.
The first request under a key runs; its answer is kept in the commit that stores the turn
(:mod:`deepseek_eyes.store.idempotency`). The same request again under the same key gets
that answer back, streamed or whole as it asks, marked ``deepseekeyes.replayed: true`` and
``Idempotent-Replayed: true``, with no upstream call and nothing billed. The same key
while the first request still runs is ``GATEWAY_IDEMPOTENCY_IN_PROGRESS`` (409, retry
later); with a different request it is ``GATEWAY_IDEMPOTENCY_KEY_REUSED`` (422). A request
that failed releases its key.

"The same request" is the body without ``stream`` and ``stream_options`` (a client may
retry a stream as a whole request) plus the session header; keys are scoped to the
gateway key the request came with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from deepseek_eyes import canonical_json
from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import GatewayError
from deepseek_eyes.store import scopes
from deepseek_eyes.store.idempotency import Claim, KeyRef

__all__ = ["HEADER", "REPLAYED_HEADER", "client_scope", "key_ref", "refusal", "replay_chunks"]

HEADER = "idempotency-key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_CHARS = 255
_TRANSPORT = frozenset({"stream", "stream_options"})


def key_ref(value: str | None, body: Mapping[str, Any], *, session_id: str | None,
            gateway_key: str | None) -> KeyRef | None:
    """The key a request names, or None without the header.

    Raises:
        GatewayError: ``GATEWAY_IDEMPOTENCY_KEY_INVALID`` (400) for an empty, long or
            non-printable key.
    """
    if value is None:
        return None
    if not 0 < len(value) <= MAX_KEY_CHARS or not all(" " <= c <= "~" for c in value):
        raise GatewayError(
            f"the Idempotency-Key header must be 1-{MAX_KEY_CHARS} printable ASCII "
            "characters", code="GATEWAY_IDEMPOTENCY_KEY_INVALID",
            details={"param": "Idempotency-Key"})
    scope = client_scope(gateway_key)
    request = {"body": {k: v for k, v in body.items() if k not in _TRANSPORT},
               "session": session_id}
    return KeyRef(scope, hashlib.sha256(value.encode()).hexdigest(),
                  hashlib.sha256(canonical_json.LENIENT.dumps(request).encode()).hexdigest())


def client_scope(gateway_key: str | None) -> str:
    """Whose keys and conversations a request's are: ``gateway:`` and a hash of the gateway
    key it came with (``gateway:open`` on a gateway without one), never the key itself
    (:mod:`deepseek_eyes.store.scopes`)."""
    return scopes.gateway(gateway_key)


def refusal(claim: Claim) -> GatewayError | None:
    """Why a claimed key must not run now (None: it may, or it is a replay)."""
    if claim.state == "busy":
        return GatewayError(
            "a request with this Idempotency-Key is still running; retry after it ends",
            code="GATEWAY_IDEMPOTENCY_IN_PROGRESS", details={"param": "Idempotency-Key"})
    if claim.state == "mismatch":
        return GatewayError(
            "this Idempotency-Key was used for a different request; use a new key for a "
            "new request", code="GATEWAY_IDEMPOTENCY_KEY_REUSED",
            details={"param": "Idempotency-Key"})
    return None


def replayed(completion: JsonObject) -> JsonObject:
    """A stored answer as sent again: marked as replayed."""
    extra = completion.get("deepseekeyes")
    return {**completion,
            "deepseekeyes": {**(extra if isinstance(extra, dict) else {}), "replayed": True}}


def replay_chunks(completion: JsonObject, *, include_usage: bool) -> list[JsonObject]:
    """A stored answer as the chunks of a stream (what a streaming retry asked for)."""
    answer = replayed(completion)
    choice = (answer.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    base = {"id": answer.get("id"), "object": "chat.completion.chunk",
            "created": answer.get("created"), "model": answer.get("model")}

    def chunk(delta: JsonObject, finish: str | None = None) -> JsonObject:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    delta: JsonObject = {"role": "assistant"}
    if message.get("reasoning_content"):
        delta["reasoning_content"] = message["reasoning_content"]
    delta["content"] = message.get("content") or ""
    chunks = [chunk(delta)]
    calls = message.get("tool_calls") or []
    if calls:
        chunks.append(chunk({"tool_calls": [{"index": i, **c} for i, c in enumerate(calls)]}))
    finish = choice.get("finish_reason") or "stop"
    if include_usage:
        chunks.append(chunk({}, finish))
        chunks.append({**base, "choices": [], "usage": answer.get("usage"),
                       "deepseekeyes": answer["deepseekeyes"]})
    else:
        chunks.append({**chunk({}, finish), "deepseekeyes": answer["deepseekeyes"]})
    return chunks
