"""The wire formats a turn speaks: one module a format, each translating a client's
request into the one turn loop's :class:`~deepseek_eyes.runtime.turn.request.TurnRequest`
and the loop's answer and events back into that format.

* :mod:`.openai_chat` — OpenAI ``chat/completions`` (the runtime's own message format is
  close to it, so the other formats build their requests through it);
* :mod:`.anthropic_messages` — Anthropic ``/v1/messages`` (Claude Code);
* :mod:`.openai_responses` — OpenAI ``/v1/responses`` (Codex CLI).

A new format is a sibling module here, never a second loop. The names
of :mod:`.openai_chat` are re-exported, so ``runtime.turn.wire`` keeps its old surface.
"""

from deepseek_eyes.runtime.turn.wire.openai_chat import (
    TurnStream,
    completion_json,
    deepseekeyes_json,
    request_from_openai,
    usage_json,
)

__all__ = [
    "TurnStream", "completion_json", "deepseekeyes_json", "request_from_openai", "usage_json",
]
