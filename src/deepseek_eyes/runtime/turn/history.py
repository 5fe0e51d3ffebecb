"""A conversation's history by hash: each message's digest, the chain, and a memo of both.

A stock client resends its whole history on every turn, and the gateway finds the session
it continues, and what of it is new, by the digest of each client-visible message
(:func:`visible_digest`) and their chain (:func:`prefix_chain`, the hashes
``session_prefixes`` notes after each answer). Hashing the whole history on every turn
made a conversation O(n²): at 2,000 messages the digests were about half of the gateway's
own time.

Decisions a newcomer would otherwise undo:

* **Each message is hashed once.** :class:`HistoryMemo` keeps, per session, the messages
  a client sent (or the turn appended) and their digests and chain. The next request is
  compared with them by ``==`` (parsed JSON, compared in C, no encode, no hash); only the
  messages that differ or are new are hashed. Equal parsed messages have equal digests
  (the digest is a function of the parsed message), so the memo changes no result, and a
  message that differs only in spacing or key order of its tool-call arguments is hashed
  and still matches by its canonical digest, as before.
* **The memo only ever shortens a computation.** A session it does not know, or a request
  that shares little with it, is hashed in full, as without it; what is found in the
  store (``find_prefix``) and the compare-and-set of every append decide as before, so a
  stale memo (another process appended) costs time, never a wrong match.
* **Bounded.** At most :data:`MEMO_SESSIONS` sessions, least recently used dropped first;
  a session's entry holds references to messages the turn holds anyway.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deepseek_eyes.canonical_json import normalized_text
from deepseek_eyes.runtime.walks import HistoryWalks, leading_equal
from deepseek_eyes.store.events import Event, body_digest

__all__ = ["MEMO_SESSIONS", "Chain", "HistoryMemo", "prefix_chain", "shared_prefix",
           "visible_digest"]

#: Sessions whose history a :class:`HistoryMemo` keeps (least recently used dropped).
MEMO_SESSIONS = 256


def visible_digest(message: Mapping[str, Any], *, legacy: bool = False) -> str:
    """A message as the client sees and resends it: an assistant message without the
    reasoning the client is not asked to send back; its tool-call arguments, and a tool
    result's text, by the digest of their canonical form (:func:`_json_digest`: a client
    that parses and dumps them again sends other bytes for the same history). ``legacy``:
    the arguments as sent, the digest ``session_prefixes`` rows were noted under before
    (format 1; see ``canonical_json.LENIENT``)."""
    if message.get("role") != "assistant":
        content = message.get("content")
        if legacy or message.get("role") != "tool" or not isinstance(content, str):
            return body_digest(dict(message))
        return body_digest({**message, "content": _json_digest(content)})
    visible: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    calls = message.get("tool_calls")
    if calls:
        visible["tool_calls"] = calls if legacy else [
            {**c, "arguments": _json_digest(c["arguments"])}
            if isinstance(c, Mapping) and isinstance(c.get("arguments"), str) else c
            for c in calls]
    return body_digest(visible)


#: Canonical digests of JSON texts by the SHA-256 of the text as sent: parsing a large
#: tool result each time it is hashed cost three times the hash. Keys and values are
#: digests, so the memo stays small.
_JSON_DIGESTS: dict[str, str] = {}
_JSON_DIGESTS_MAX = 32_768


def _json_digest(text: str) -> str:
    """``sha256:`` of :func:`~deepseek_eyes.canonical_json.normalized_text` of ``text``."""
    data = text.encode("utf-8", "surrogatepass")
    key = hashlib.sha256(data).hexdigest()
    found = _JSON_DIGESTS.get(key)
    if found is None:
        canonical = normalized_text(text)
        digest = key if canonical == text else hashlib.sha256(
            canonical.encode("utf-8", "surrogatepass")).hexdigest()
        found = "sha256:" + digest
        if len(_JSON_DIGESTS) >= _JSON_DIGESTS_MAX:
            _JSON_DIGESTS.clear()  # a bound, not a policy: the next turns fill it again
        _JSON_DIGESTS[key] = found
    return found


def _link(head: str, digest: str) -> str:
    return hashlib.sha256((head + digest).encode()).hexdigest()


def prefix_chain(messages: Sequence[Mapping[str, Any]], *, legacy: bool = False) -> list[str]:
    """The chained hash of a conversation's client-visible history after each of its
    visible messages (internal exchanges skipped, reasoning left out, JSON canonical, as
    a client resends it): ``h[i] = sha256(h[i-1] || digest(message i))``. ``legacy``: the
    chain of rows noted before JSON was made canonical (see :func:`visible_digest`)."""
    chain: list[str] = []
    head = ""
    for message in messages:
        if message.get("internal"):
            continue
        head = _link(head, visible_digest(message, legacy=legacy))
        chain.append(head)
    return chain


@dataclass
class Chain:
    """A history's visible messages, the digest of each and the chain after each;
    ``noted``: how many of them a noted history (``session_prefixes``) is known to hold
    (0: none known), and ``session``, the session this process noted it for (a guess: the
    store says which session holds it)."""

    messages: list[Mapping[str, Any]] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)
    noted: int = 0
    session: str | None = None

    def extended(self, messages: Sequence[Mapping[str, Any]]) -> Chain:
        """This chain with ``messages`` after it (internal ones skipped), hashing only
        those."""
        return Chain(list(self.messages), list(self.digests), list(self.hashes),
                     self.noted, self.session).extend(messages)

    def mark(self) -> tuple[int, int, int, int]:
        """Where the chain ends now (for :meth:`cut`): its lists' lengths and ``noted``."""
        return len(self.messages), len(self.digests), len(self.hashes), self.noted

    def cut(self, mark: tuple[int, int, int, int]) -> None:
        """Back to ``mark`` (a :meth:`mark` of this chain): what was extended since is
        dropped (a commit that failed)."""
        messages, digests, hashes, self.noted = mark
        del self.messages[messages:], self.digests[digests:], self.hashes[hashes:]

    def extend(self, messages: Sequence[Mapping[str, Any]]) -> Chain:
        """:meth:`extended`, in place (for a chain nothing else holds: its three lists
        are not copied again, a cost that grew with the history); returns it."""
        head = self.hashes[-1] if self.hashes else ""
        for message in messages:
            if message.get("internal"):
                continue
            digest = visible_digest(message)
            head = _link(head, digest)
            self.messages.append(message)
            self.digests.append(digest)
            self.hashes.append(head)
        return self


def _shown(message: Mapping[str, Any]) -> bool:
    """Whether a client sees a message (the runtime's internal exchanges it does not)."""
    return not message.get("internal")


class HistoryMemo:
    """Per session, the last history seen and its digests (see the module docstring)."""

    def __init__(self, *, sessions: int = MEMO_SESSIONS) -> None:
        self._max = sessions
        self._walks = HistoryWalks(entries=sessions)  # each history's visible messages
        self._by_session: OrderedDict[str, tuple[str | None, Chain]] = OrderedDict()
        # Per session: the sequence numbers and digests of its visible stored messages.
        self._stored: OrderedDict[str, tuple[list[int], list[str]]] = OrderedDict()

    def chain(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None = None,
              scope: str | None = None) -> Chain:
        """The :class:`Chain` of ``messages``, reusing the digests of the session's memo
        (``session_id``), else of the memo of ``scope``'s that shares the longest leading
        run of messages with them."""
        key = f"session {session_id}" if session_id is not None else \
            f"client {scope}" if scope is not None else None
        visible = self._walks.select(key, messages, "visible", _shown)
        session, known = self._known(visible, session_id, scope)
        if known is None:
            return Chain().extend(visible)
        shared = leading_equal(visible, known.messages)
        # Slices are new lists: extended in place, not copied again.
        out = Chain(visible[:shared], known.digests[:shared], known.hashes[:shared]).extend(
            visible[shared:])
        # Equal chain hashes at the noted length: the whole noted history is in this one
        # (its last message, the answer, is stored with its reasoning, so it is equal by
        # digest, not by ``==``).
        at = known.noted - 1
        out.noted = known.noted if 0 <= at < len(out.hashes) and \
            out.hashes[at] == known.hashes[at] else 0
        out.session = session if out.noted else None
        return out

    def stored_digests(self, session_id: str, visible: Sequence[Event]) -> list[str]:
        """The digest of each of a session's visible stored messages (do not mutate the
        list). Stored events never change (append-only, sequence numbers rising), so
        when the event where the kept digests end still has its sequence number, the
        session only grew: only the events after it are hashed."""
        seqs, digests = self._stored.pop(session_id, ([], []))
        kept = len(seqs)
        if not (kept <= len(visible) and (not kept or visible[kept - 1].seq == seqs[-1])):
            seqs, digests, kept = [], [], 0  # another history (a fork's, a stale memo)
        for event in visible[kept:]:
            seqs.append(event.seq)
            digests.append(visible_digest(event.message))
        self._stored[session_id] = (seqs, digests)  # the most recently used
        while len(self._stored) > self._max:
            self._stored.popitem(last=False)
        return digests

    def note(self, session_id: str, scope: str | None, chain: Chain) -> None:
        """``chain`` is where ``session_id`` stands now (the most recently used)."""
        self._by_session[session_id] = (scope, chain)
        self._by_session.move_to_end(session_id)
        while len(self._by_session) > self._max:
            self._by_session.popitem(last=False)

    def _known(self, visible: list[Mapping[str, Any]], session_id: str | None,
               scope: str | None) -> tuple[str | None, Chain | None]:
        """The noted history sharing the most leading messages with ``visible`` (of the
        named session, else of ``scope``'s), and its session."""
        if session_id is not None:
            entry = self._by_session.get(session_id)
            return session_id, entry[1] if entry is not None else None
        if scope is None or not visible:
            return None, None
        best: tuple[str | None, Chain | None] = (None, None)
        best_shared = 0
        first = visible[0]
        for noted, (owner, chain) in reversed(self._by_session.items()):
            if owner != scope or not chain.messages or chain.messages[0] != first:
                continue
            shared = leading_equal(visible, chain.messages)
            if shared > best_shared:
                best, best_shared = (noted, chain), shared
                if shared in (len(chain.messages), len(visible)):
                    # The whole noted history, or the whole request: none can share more
                    # (without the second, a one-message request walked every session
                    # of its scope that began alike: a cost that grew with traffic).
                    break
        return best


def shared_prefix(left: Sequence[object], right: Sequence[object]) -> int:
    """How many leading items two lists have equal (messages, digests): compared whole
    first (in C), then by halves to the first difference."""
    return leading_equal(left, right)
