"""One turn: a conversation in, the final model's answer out, every step recorded.

``prepare`` (path, thinking mode, session log, view) → ``loop`` (the one loop, as typed
``events``) → ``wire`` (the wire formats in and out, one module a format); ``ledger``
keeps the books (usage categories, audited requests, the turn record), ``relay`` forwards
a stream's client tool-call deltas, ``budget`` (one level up) fits every request.
"""

from deepseek_eyes.runtime.turn.loop import TurnRunner
from deepseek_eyes.runtime.turn.request import TurnRequest, TurnResult
from deepseek_eyes.runtime.turn.wire import (
    TurnStream,
    completion_json,
    deepseekeyes_json,
    request_from_openai,
    usage_json,
)

__all__ = [
    "TurnRequest", "TurnResult", "TurnRunner", "TurnStream", "completion_json",
    "deepseekeyes_json", "request_from_openai", "usage_json",
]
