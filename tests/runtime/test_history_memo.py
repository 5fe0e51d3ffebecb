"""The history memo (runtime/turn/history.py) only ever shortens the hashing: whatever it
holds, a history's chain is exactly :func:`prefix_chain`'s."""

from __future__ import annotations

from typing import Any

from deepseek_eyes.runtime.turn.history import Chain, HistoryMemo, prefix_chain, visible_digest


def conversation(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        if i % 3 == 0:
            out.append({"role": "user", "content": f"q{i}"})
        elif i % 3 == 1:
            out.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": f"c{i}", "name": "f", "arguments": '{"a": 1, "b": 2}'}]})
        else:
            out.append({"role": "tool", "tool_call_id": f"c{i - 1}", "content": '{"x": [1]}'})
    return out


def test_a_continuation_matches_the_full_chain() -> None:
    memo = HistoryMemo()
    first = conversation(30)
    chain = memo.chain(first, scope="k")
    assert chain.hashes == prefix_chain(first)
    noted = chain.extended([{"role": "assistant", "content": "done", "reasoning": "r"}])
    noted.noted = len(noted.hashes)
    memo.note("s1", "k", noted)
    # The client resends it without the reasoning, and asks again.
    again = [*first, {"role": "assistant", "content": "done"}, {"role": "user", "content": "?"}]
    found = memo.chain(again, scope="k")
    assert found.hashes == prefix_chain(again)
    assert found.digests == [visible_digest(m) for m in again]
    assert found.noted == 31  # the noted history is in it: look-ups start there
    assert memo.chain(again, session_id="s1").hashes == prefix_chain(again)


def test_an_edited_message_is_hashed_again() -> None:
    memo = HistoryMemo()
    first = conversation(12)
    noted = memo.chain(first, scope="k")
    noted.noted = len(noted.hashes)
    memo.note("s1", "k", noted)
    edited = [dict(m) for m in first]
    edited[5] = {**edited[5], "content": '{"x": [2]}'}
    chain = memo.chain(edited, scope="k")
    assert chain.hashes == prefix_chain(edited)
    assert chain.hashes[:5] == noted.hashes[:5]
    assert chain.hashes[5] != noted.hashes[5]
    assert chain.noted == 0  # the noted history is not a prefix of this one


def test_respaced_arguments_are_the_same_history() -> None:
    memo = HistoryMemo()
    first = conversation(6)
    noted = memo.chain(first, scope="k")
    memo.note("s1", "k", noted)
    respaced = [dict(m) for m in first]
    respaced[1] = {**respaced[1], "tool_calls": [
        {"id": "c1", "name": "f", "arguments": '{"b":2,"a":1}'}]}
    assert respaced != first
    assert memo.chain(respaced, scope="k").hashes == noted.hashes


def test_another_scope_and_internal_messages() -> None:
    memo = HistoryMemo(sessions=2)
    first = conversation(9)
    memo.note("s1", "k", memo.chain(first, scope="k"))
    with_internal = [*first[:3], {"role": "tool", "content": "x", "internal": True}, *first[3:]]
    assert memo.chain(with_internal, scope="other").hashes == prefix_chain(first)
    assert memo.chain(with_internal, scope="k").hashes == prefix_chain(first)
    for name in ("s2", "s3"):  # the oldest is dropped past the bound
        memo.note(name, "k", Chain())
    assert memo.chain(first, session_id="s1").noted == 0


class _Event:
    """A stored event as stored_digests reads it: its sequence number and message."""

    def __init__(self, seq: int, message: dict[str, Any]) -> None:
        self.seq = seq
        self.message = message


def test_stored_digests_hash_only_what_the_session_appended() -> None:
    memo = HistoryMemo()
    log = [_Event(i, m) for i, m in enumerate(conversation(9))]
    first = memo.stored_digests("s1", log)
    assert first == [visible_digest(e.message) for e in log]
    # Grown by two: the kept digests stay the same objects, the new ones are appended.
    grown = [*log, _Event(9, {"role": "user", "content": "more"}),
             _Event(11, {"role": "assistant", "content": "ok"})]
    again = memo.stored_digests("s1", grown)
    assert again == [visible_digest(e.message) for e in grown]
    assert all(a is b for a, b in zip(again, first, strict=False))
    # Another history under the same id (its sequence numbers do not line up): all again.
    other = [_Event(i, {"role": "user", "content": f"x{i}"}) for i in range(3)]
    assert memo.stored_digests("s1", other) == [visible_digest(e.message) for e in other]


def test_a_one_message_request_stops_at_the_first_session_that_holds_it() -> None:
    memo = HistoryMemo()
    ping = [{"role": "user", "content": "ping"}]
    for i in range(50):  # fifty sessions that began alike, each answered
        chain = memo.chain(ping, scope="k").extended([{"role": "assistant", "content": f"{i}"}])
        memo.note(f"s{i}", "k", chain)
    assert memo.chain(ping, scope="k").hashes == prefix_chain(ping)
