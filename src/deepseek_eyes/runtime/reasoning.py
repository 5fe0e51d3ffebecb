"""Reasoning a client dropped, put back from the session store before the upstream call.

In thinking mode DeepSeek refuses a history whose tool-call assistant messages lack their
``reasoning_content`` (:mod:`deepseek_eyes.llm.thinking`), and most agent frameworks drop
that field when they echo an assistant message back (LangChain's ``ChatOpenAI``, the
OpenAI Agents SDK, crewAI, ...). Every assistant message the runtime answered with is in
the session store with the exact reasoning it received, and its tool call ids are indexed
(``event_calls``), so a message the client echoes without it gets it back here, whether
or not the client names a session.

Decisions a newcomer would otherwise undo:

* **Matched by tool call ids and names, not by arguments.** The ids are the upstream's,
  random and issued once; frameworks re-serialise the arguments (LangChain parses them and
  dumps them again, which changes spacing), so comparing them would miss the messages this
  exists for. A stored message is used only when every call of the client's message is
  among its calls under the same name.
* **Only from the same scope.** The ids are looked up among the asking scope's sessions
  only (:meth:`~deepseek_eyes.store.events.SessionStore.issued_calls`): a client of one
  gateway key that echoes an id issued to another key's conversation gets nothing back,
  and is refused or sent without thinking like any client whose calls were not issued
  here (docs/security.md, "Scopes").
* **Restored text only goes upstream.** It is never returned to the client; the session
  the request is logged in keeps it, so later turns render it from their own log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from deepseek_eyes.llm.thinking import reasoning_gaps
from deepseek_eyes.store.events import SessionStore, message_calls

__all__ = ["restore_reasoning"]


def _covers(stored: Mapping[str, Any], calls: Sequence[Mapping[str, Any]]) -> bool:
    names = {c.get("id"): c.get("name") for c in message_calls(stored)}
    return all(c.get("id") in names and names[c.get("id")] == c.get("name") for c in calls)


def restore_reasoning(
    messages: Sequence[dict[str, Any]], sessions: SessionStore, *, scope: str
) -> tuple[list[dict[str, Any]], int]:
    """``messages`` with the reasoning of each tool-call assistant message that lacks it
    put back from the message of ``scope``'s sessions that issued its calls; returns them
    and how many were restored. One indexed query for the whole history."""
    out = list(messages)
    gaps = reasoning_gaps(out)
    if not gaps:
        return out, 0
    issued = sessions.issued_calls(
        [str(c.get("id")) for index in gaps for c in message_calls(out[index])], scope=scope)
    restored = 0
    for index in gaps:
        calls = message_calls(out[index])
        for stored in issued.get(str(calls[0].get("id")), ()):
            if stored.get("role") == "assistant" and isinstance(stored.get("reasoning"), str) \
                    and _covers(stored, calls):
                out[index] = {**out[index], "reasoning": stored["reasoning"]}
                restored += 1
                break
    return out, restored
