"""The turn loop's events: what one turn does, in order, as typed values.

:meth:`TurnRunner.events <deepseek_eyes.runtime.turn.loop.TurnRunner.events>` yields
them; ``run()`` drains them for the answer and the OpenAI stream maps each to chunks
(:mod:`deepseek_eyes.runtime.turn.wire.openai_chat`), so the plain and the streamed turn
are the same loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.llm.client import ToolCall
from deepseek_eyes.runtime.tools import ProgressEvent
from deepseek_eyes.runtime.turn.request import TurnResult

__all__ = ["Answer", "Delta", "ModelCalled", "Progress", "Started", "TurnEvent"]


@dataclass(frozen=True)
class Started:
    """The turn is prepared (its request logged): the session that holds it."""

    session_id: str
    model: str
    created: int


@dataclass(frozen=True)
class Delta:
    """Streamed pieces of a model call the client may see: reasoning, content and the
    client's own tool-call deltas (never the runtime's)."""

    delta: JsonObject  # OpenAI wire: a chunk's delta


@dataclass(frozen=True)
class ModelCalled:
    """A model call answered: its number in the instruction, its category of usage, and
    whether it was the last call, offered no tools."""

    call: int
    request_sha256: str
    category: str
    forced_final: bool


@dataclass(frozen=True)
class Progress:
    """A progress event for a front end (its ``type``): ``tool.started``,
    ``tool.finished``, ``approval.wanted``, ``approval.decided``, ``turn.final_call``."""

    event: ProgressEvent


@dataclass(frozen=True)
class Answer:
    """The turn's answer; ``late`` holds the client's calls a stream did not relay piece
    by piece (sent whole at the end, numbered from ``relayed``, the client indices the
    relayed ones used)."""

    result: TurnResult
    late: list[ToolCall] = field(default_factory=list)
    relayed: int = 0


TurnEvent = Started | Delta | ModelCalled | Progress | Answer
