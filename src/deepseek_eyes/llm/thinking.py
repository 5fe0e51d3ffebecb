"""DeepSeek's thinking mode: when it is on, and what a request must then carry.

DeepSeek's V4 models (``deepseek-v4-flash``, ``deepseek-v4-pro``, the ``deepseek-chat`` and
``deepseek-reasoner`` aliases) think by default: each answer has a ``reasoning_content``
beside its ``content``. The thinking-mode guide sets one rule for histories: between two
user messages, if the model called tools, the assistant messages of that exchange go back
*with* their ``reasoning_content``, in that request and every later one; a tool-call
message without it is refused with HTTP 400. Without tool calls, past reasoning is ignored.

This module decides the mode of one request (:func:`thinking_mode`) and finds the messages
that break the rule (:func:`reasoning_gaps`). It knows nothing of sessions: restoring a
reasoning text a client dropped is the runtime's job.

Decisions a newcomer would otherwise undo:

* The mode is **unknown** (``None``), not "off", for a model this module cannot name:
  another provider may think too. Only a mode known to be on makes a missing reasoning an
  error before the upstream call; an unknown one sends back what reasoning we hold.
* ``thinking`` in the request wins, then the model's settings
  (``[[llm.models]] thinking``), then DeepSeek's documented default for its names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

from deepseek_eyes.settings import LLMSettings
from deepseek_eyes.store.events import message_calls

__all__ = ["ThinkingMode", "model_defaults", "reasoning_gaps", "thinking_mode"]

ThinkingMode = Literal["enabled", "disabled"] | None

# The names DeepSeek's guide says run in thinking mode unless told otherwise.
_THINKING_BY_DEFAULT = re.compile(r"^deepseek-(?:v4(?:-[a-z0-9.-]+)?|chat|reasoner)$")


def thinking_mode(
    model: str, params: Mapping[str, Any], settings: LLMSettings
) -> ThinkingMode:
    """The thinking mode one request to ``model`` runs in: the request's own ``thinking``,
    else the model's settings, else DeepSeek's default for its V4 names, else None."""
    requested = params.get("thinking")
    if isinstance(requested, Mapping) and requested.get("type") in ("enabled", "disabled"):
        return "enabled" if requested["type"] == "enabled" else "disabled"
    configured = settings.model_settings(model)
    if configured is not None and configured.thinking is not None:
        return configured.thinking
    return "enabled" if _THINKING_BY_DEFAULT.match(model) else None


class ThinkingField(TypedDict):
    type: str


class ModelDefaults(TypedDict, total=False):
    """The request fields a model's settings add (DeepSeek's ``thinking`` switch)."""

    thinking: ThinkingField
    reasoning_effort: str


def model_defaults(model: str, settings: LLMSettings) -> ModelDefaults:
    """The ``thinking`` and ``reasoning_effort`` fields the model's settings add to a
    request that names none itself."""
    configured = settings.model_settings(model)
    out: ModelDefaults = {}
    if configured is None:
        return out
    if configured.thinking is not None:
        out["thinking"] = {"type": configured.thinking}
    if configured.reasoning_effort is not None:
        out["reasoning_effort"] = configured.reasoning_effort
    return out


def reasoning_gaps(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of the assistant messages (runtime format) that called tools and hold no
    reasoning text: the ones DeepSeek refuses in thinking mode."""
    return [
        index for index, message in enumerate(messages)
        if message.get("role") == "assistant" and message_calls(message)
        and not isinstance(message.get("reasoning"), str)
    ]
