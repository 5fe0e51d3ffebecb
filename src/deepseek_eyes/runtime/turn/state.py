"""One turn's state between its model calls (the loop's only mutable object)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.llm.thinking import ThinkingMode
from deepseek_eyes.runtime.sight import SightVerdict
from deepseek_eyes.runtime.tools import Offer, TurnContext
from deepseek_eyes.runtime.turn.history import Chain
from deepseek_eyes.runtime.turn.request import (
    EvidenceUse,
    RequestRecord,
    ThinkingNote,
    TurnRequest,
)
from deepseek_eyes.runtime.view import SentImage, View
from deepseek_eyes.store.events import Fork
from deepseek_eyes.usage import ProviderUsage, UsageCategory

__all__ = ["TurnState", "Unlogged"]


@dataclass(frozen=True)
class Unlogged:
    """A text turn's request, judged but not written yet (runtime/turn/prepare.py): it is
    written in the transaction that writes its first call ahead."""

    write: Callable[[], int]  # the append and lease, in the caller's transaction: the base
    booked: list[Callable[[], None]]  # usage its view adds, counted once it is written


@dataclass
class TurnState:
    """Everything prepared before the first model call, and what the calls added.

    The request a model call gets is built from it every time (:meth:`TurnRunner._payload
    <deepseek_eyes.runtime.turn.loop.TurnRunner>`): ``history`` (the view, unfitted) and
    ``tail`` (this turn's own tool rounds) fitted together to the history budget, with the
    tools of the current ``offer``.
    """

    request: TurnRequest
    turn_id: str
    session_id: str
    model: str
    path: str
    view: View
    context: TurnContext
    offer: Offer
    base: JsonObject  # the upstream request: model, passthrough parameters
    history: list[JsonObject]  # upstream messages before the turn's own tool rounds
    started: float
    evidence: list[EvidenceUse]
    prior_calls: int = 0  # model calls of this instruction in earlier requests
    tail: list[JsonObject] = field(default_factory=list)  # the turn's tool rounds
    usage: ProviderUsage = field(default_factory=ProviderUsage)
    model_calls: int = 0
    omitted: int = 0  # messages the budget left out of the latest request
    fork: Fork | None = None
    category: UsageCategory = UsageCategory.FINAL  # of the next model call
    forced_final: bool = False
    client_names: frozenset[str] = frozenset()
    requests: list[RequestRecord] = field(default_factory=list)
    thinking: ThinkingMode = None
    thinking_note: ThinkingNote | None = None
    # Where the turn writes (store/events.py's compare-and-set): the session's sequence
    # number its history ended at, the last one it knows of, the turn it is a new attempt
    # of, and what it would copy into a fork if another turn got in first.
    base_seq: int = -1
    head: int = -1
    retry_of: str | None = None
    prefix: list[JsonObject] = field(default_factory=list)  # its history as logged
    outputs: list[JsonObject] = field(default_factory=list)  # what it appended since
    chain: Chain | None = None  # its request's history by hash (runtime/turn/history.py)
    sent: dict[int, int] = field(default_factory=dict)  # call -> attempts written ahead
    # call -> the request hash of its latest attempt written ahead: a call sent and never
    # answered (a turn cut at shutdown) is still named by the turn record
    sent_requests: dict[int, str] = field(default_factory=dict)
    failed_calls: set[int] = field(default_factory=set)  # sent, answered with an error
    recorded: bool = False  # its turn record (ok, failed or aborted) is written or queued
    sight: SightVerdict | None = None  # whether its model sees, when the turn had to know
    renamed: JsonObject | None = None  # its model is an alias or retired name: the successor
    pixels_counted: bool = False  # a native_visual_turns event was counted for it
    rebridged: bool = False  # the upstream refused its pixels; it went on with evidence
    tail_pixels: list[SentImage] = field(default_factory=list)  # pixels its tool rounds sent
    unlogged: Unlogged | None = None  # its request, until its first call writes it

    @property
    def internal(self) -> frozenset[str]:
        return self.offer.names

    @property
    def calls_so_far(self) -> int:
        """Model calls of this user instruction, this request's and earlier ones'."""
        return self.prior_calls + self.model_calls
