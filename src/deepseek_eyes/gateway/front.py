"""What every wire-format front of the gateway shares with the gateway's own routes.

The OpenAI chat route lives in :mod:`.app`; the Anthropic Messages front
(:mod:`.anthropic`) and the OpenAI Responses front (:mod:`.responses`) are built from one
:class:`Front`, so each stands behind the same door: the security layer, the
concurrent-turn slots, the drain, the gateway key's scope, the idempotency store and the
image fetcher. Only the format differs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import DeepSeekEyesError, GatewayError
from deepseek_eyes.gateway.body import RequestBody
from deepseek_eyes.gateway.drain import Drain
from deepseek_eyes.runtime.approval import Approver
from deepseek_eyes.runtime.messages import Fetch
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.turn.wire.anthropic_messages import ThinkingSigner
from deepseek_eyes.runtime.turn.wire.openai_responses import ReasoningSealer
from deepseek_eyes.settings import GatewaySettings

__all__ = ["Front"]


@dataclass
class Front:
    """What the fronts share with the gateway's own routes (see :mod:`.app`)."""

    runtime: Runtime
    settings: GatewaySettings
    drain: Drain
    scope: str  # the gateway key's
    signer: ThinkingSigner
    sealer: ReasoningSealer
    approver: Approver | None
    fetch: Fetch | None
    read_body: Callable[[Request, frozenset[str]], Awaitable[RequestBody]]
    slots: asyncio.Semaphore
    error_status: Callable[[DeepSeekEyesError], int]
    error_body: Callable[[DeepSeekEyesError], JsonObject]  # OpenAI's shape
    internal: Callable[[BaseException], GatewayError]
    session_header: str  # the gateway's own session header (lower case)
    key: str | None  # the gateway key (idempotency keys are kept per key)
