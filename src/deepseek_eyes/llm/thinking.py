"""DeepSeek's thinking mode: when it is on, and what a request must then carry.

DeepSeek's documented models (``deepseek-flash``, ``deepseek-v4-pro`` and the names that
resolve to them, :mod:`deepseek_eyes.llm.known`) think by default: each answer has a
``reasoning_content`` beside its ``content``. The thinking-mode guide sets one rule for
histories: between two user messages, if the model called tools, *every* assistant message
of that exchange goes back with its ``reasoning_content`` (the exchange's final answer
too; an empty string is accepted), in that request and every later one; a message without
it is refused with HTTP 400. Without tool calls, past reasoning is ignored.

This module decides the mode of one request (:func:`thinking_mode`) and finds the messages
that break the rule (:func:`reasoning_gaps`). It knows nothing of sessions: restoring a
reasoning text a client dropped is the runtime's job.

Decisions a newcomer would otherwise undo:

* The mode is **unknown** (``None``), not "off", for a model this module cannot name:
  another provider may think too. Only a mode known to be on makes a missing reasoning an
  error before the upstream call; an unknown one sends back what reasoning we hold.
* ``thinking`` in the request wins, then the model's settings
  (``[[llm.models]] thinking``), then the documented default of the model's table entry
  (an alias or retired name resolves to its successor's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

from deepseek_eyes.llm.known import known_model
from deepseek_eyes.settings import LLMSettings
from deepseek_eyes.store.events import message_calls

__all__ = ["ThinkingMode", "lacks_reasoning", "model_defaults", "reasoning_gaps",
           "thinking_mode"]

ThinkingMode = Literal["enabled", "disabled"] | None


def thinking_mode(
    model: str, params: Mapping[str, Any], settings: LLMSettings
) -> ThinkingMode:
    """The thinking mode one request to ``model`` runs in: the request's own ``thinking``,
    else the model's settings, else its documented default (the known-models table), else
    None."""
    requested = params.get("thinking")
    if isinstance(requested, Mapping) and requested.get("type") in ("enabled", "disabled"):
        return "enabled" if requested["type"] == "enabled" else "disabled"
    configured = settings.model_settings(model)
    if configured is not None and configured.thinking is not None:
        return configured.thinking
    known = known_model(model)
    return "enabled" if known is not None and known.thinks_by_default else None


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


def lacks_reasoning(message: Mapping[str, Any]) -> bool:
    """Whether a message (runtime format) is an assistant message that called tools and
    holds no reasoning text: one DeepSeek refuses in thinking mode."""
    return bool(
        message.get("role") == "assistant"
        and (message.get("tool_calls") or message.get("internal_calls"))  # cheap first
        and message_calls(message) and not isinstance(message.get("reasoning"), str))


def reasoning_gaps(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of the messages :func:`lacks_reasoning` holds for."""
    return [index for index, message in enumerate(messages) if lacks_reasoning(message)]
