"""What a turn takes and what it gives back: the typed edges of the runtime.

The runtime's message format (what the session log stores and a :class:`TurnRequest`
carries) is :mod:`deepseek_eyes.runtime.messages`' ``RuntimeMessage``; everything a turn
reports about itself (evidence it used, upstream requests it made) is typed here, because
clients read them (``deepseekeyes`` objects, turn records, ``ask --json``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from deepseek_eyes.audit.records import Seal
from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.llm.client import ToolCall
from deepseek_eyes.store import scopes
from deepseek_eyes.store.events import Fork
from deepseek_eyes.usage import ProviderUsage

if TYPE_CHECKING:
    from deepseek_eyes.runtime.approval import Approver
    from deepseek_eyes.runtime.tools import CallRecord, Notify
    from deepseek_eyes.store.idempotency import KeyRef

__all__ = [
    "EvidenceUse", "RequestRecord", "ThinkingNote", "TurnRequest", "TurnResult", "UsageJson",
    "add_usage",
]


class EvidenceUse(TypedDict):
    """One image of the conversation and the evidence that stood in for it."""

    image: str  # img-N
    sha256: str
    route: str
    record_sha256: str
    cached: bool
    operation_id: str | None


class UsageJson(TypedDict):
    """Usage in the OpenAI shape, with DeepSeek's cache fields beside it."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_cache_hit_tokens: int
    prompt_cache_miss_tokens: int
    prompt_tokens_details: dict[str, int]
    completion_tokens_details: dict[str, int]


class RequestRecord(TypedDict):
    """One upstream request of a turn, by hash, with the usage it was billed."""

    request_sha256: str
    call: int
    model: str
    category: str
    usage: UsageJson
    attempt: NotRequired[int]


class ThinkingNote(TypedDict):
    """The thinking mode of a turn, reasoning restored, and a fallback taken."""

    mode: str | None
    reasoning_restored: int
    fallback: NotRequired[str]
    reason: NotRequired[str]
    message_index: NotRequired[int]


@dataclass
class TurnRequest:
    # The whole conversation, runtime format (deepseek_eyes.runtime.messages).
    messages: list[dict[str, Any]]
    model: str | None = None
    params: JsonObject = field(default_factory=dict)  # the client's OpenAI fields
    client_tools: list[JsonObject] = field(default_factory=list)  # the client's ``tools``
    tool_choice: Any = None  # OpenAI ``tool_choice``: a string or an object
    session_id: str | None = None
    source: str = "gateway"
    include_usage: bool = False
    approver: Approver | None = None  # None: nobody can approve a plan here
    notify: Notify | None = None  # progress events (tool calls, approvals)
    idempotency: KeyRef | None = None  # the answer is kept for replay under this key
    # Whose conversations a request without a session id may continue (the gateway key's
    # scope); None: such a request is always a session of its own.
    client_scope: str | None = None
    # Whose this request is (store/scopes.py): the sessions it may name or continue, the
    # reasoning it may get back, the evidence it is told was cached. In-process callers
    # are the local user's; the gateway sets its key's.
    scope: str = scopes.CLI
    # False (the Responses API's ``store: false``): the session keeps each message's hash
    # and role only, never its content (store/events.py); the request carries its whole
    # history, and the turn is shown exactly that.
    keep: bool = True


@dataclass
class TurnResult:
    turn_id: str
    session_id: str
    model: str
    path: str
    content: str
    reasoning: str
    finish_reason: str
    tool_calls: list[ToolCall]
    usage: ProviderUsage
    evidence: list[EvidenceUse]
    rereads: int
    model_calls: int
    created: int
    fork: Fork | None = None  # set when the history did not extend the named session
    tools: list[CallRecord] = field(default_factory=list)  # the runtime's calls
    requests: list[RequestRecord] = field(default_factory=list)
    audit: Seal | None = None  # the chain's head (and checkpoint) after the turn
    thinking: ThinkingNote | None = None
    retry_of: str | None = None  # the turn this answer is a new attempt of
    #: Whether the model sees, and how that is known, when the turn had to know
    #: (``{"model", "sees", "how", "code"?, "checked_at"?, "expires_at"?}``); with
    #: ``"rebridged": true`` when the upstream refused the pixels and the turn went on
    #: with evidence.
    sight: JsonObject | None = None
    #: The model is an alias or a retired name: ``{"model", "successor", "kind", "message"}``.
    model_renamed: JsonObject | None = None


def add_usage(a: ProviderUsage, b: ProviderUsage) -> ProviderUsage:
    return ProviderUsage(
        a.prompt_tokens + b.prompt_tokens,
        a.completion_tokens + b.completion_tokens,
        a.reasoning_tokens + b.reasoning_tokens,
        a.cache_hit_tokens + b.cache_hit_tokens,
        a.cache_miss_tokens + b.cache_miss_tokens,
        a.image_tokens + b.image_tokens,
    )
