"""A client's resent history is parsed once (gateway/resent.py): the next body reuses the
last one's parsed messages only when it starts with the same bytes, and the result is
always what a whole parse gives."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deepseek_eyes.errors import GatewayError
from deepseek_eyes.gateway.body import BodyLimits, RequestBody, check_fields, read_request
from deepseek_eyes.gateway.resent import ResentBodies

LIMITS = BodyLimits()


def _history(n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
            for i in range(n)]


def _body(messages: list[Any], **more: Any) -> bytes:
    return json.dumps({"messages": messages, "model": "m", **more}).encode()


def _read(memo: ResentBodies, raw: bytes, scope: str = "gateway:a") -> RequestBody:
    parsed = read_request(raw, LIMITS, memo=memo, scope=scope)
    check_fields(parsed.fields, parsed)
    parsed.remember(memo)
    return parsed


def test_a_continued_body_reuses_the_parsed_history_and_parses_the_same() -> None:
    memo = ResentBodies()
    history = _history(6)
    first = _read(memo, _body(history))
    assert first.reused == 0
    longer = [*history, {"role": "user", "content": "and now?"}]
    second = _read(memo, _body(longer, stream=False))
    assert second.reused == 6
    assert second.fields == read_request(_body(longer, stream=False), LIMITS).fields
    # The same objects: nothing of the history was parsed again.
    assert all(a is b for a, b in zip(second.fields["messages"], first.fields["messages"],
                                      strict=False))
    third = _read(memo, _body([*longer, {"role": "assistant", "content": "x"}]))
    assert third.reused == 7


@pytest.mark.parametrize("changed", [
    lambda h: [{"role": "user", "content": "edited"}, *h[1:]],  # an edited message
    lambda h: h[:3],  # a trimmed history
    lambda h: [*h[:-1], {**h[-1], "name": "x"}],  # the last message changed
])
def test_a_body_that_does_not_continue_is_parsed_whole(changed: Any) -> None:
    memo = ResentBodies()
    history = _history(6)
    _read(memo, _body(history))
    other = changed(history)
    again = _read(memo, _body(other))
    assert again.reused == 0
    assert again.fields["messages"] == other


def test_other_spacing_is_parsed_whole_and_equal() -> None:
    memo = ResentBodies()
    history = _history(4)
    _read(memo, _body(history))
    spaced = json.dumps({"messages": [*history, {"role": "user", "content": "q"}],
                         "model": "m"}, indent=2).encode()
    again = _read(memo, spaced)
    assert again.reused == 0
    assert again.fields == json.loads(spaced)


def test_another_scope_never_reaches_a_kept_body() -> None:
    memo = ResentBodies()
    history = _history(4)
    _read(memo, _body(history), scope="gateway:a")
    other = _read(memo, _body([*history, {"role": "user", "content": "q"}]),
                  scope="gateway:b")
    assert other.reused == 0
    assert memo.candidates("gateway:b", "openai")[0].messages is not \
        memo.candidates("gateway:a", "openai")[0].messages


@pytest.mark.parametrize("tail", [
    ', {"role": "user", "content": "x"',  # cut short
    ', {"role": "user", "content": "x"} {"role": "user"}]}',  # no comma
    ', ]}',  # a trailing comma
    ', {"role": "user", "content": NaN}]}',  # no number JSON has
])
def test_a_broken_continuation_fails_as_a_whole_parse_does(tail: str) -> None:
    memo = ResentBodies()
    history = _history(4)
    _read(memo, _body(history))
    raw = json.dumps({"messages": history})[:-2].encode() + tail.encode()
    with pytest.raises(GatewayError) as fresh:
        read_request(raw, LIMITS)
    with pytest.raises(GatewayError) as continued:
        read_request(raw, LIMITS, memo=memo, scope="gateway:a")
    assert (continued.value.code, continued.value.details) == \
        (fresh.value.code, fresh.value.details)


def test_what_is_new_is_still_checked() -> None:
    memo = ResentBodies()
    history = _history(4)
    _read(memo, _body(history))
    surrogate = _body(history)[:-len(b'], "model": "m"}')] + \
        b', {"role": "user", "content": "\\ud800"}], "model": "m"}'
    with pytest.raises(GatewayError) as refused:
        read_request(surrogate, LIMITS, memo=memo, scope="gateway:a")
    assert refused.value.details["reason"] == "lone_surrogate"
    deep: Any = "x"
    for _ in range(80):
        deep = [deep]
    with pytest.raises(GatewayError) as too_deep:
        read_request(_body([*history, {"role": "user", "content": deep}]), LIMITS,
                     memo=memo, scope="gateway:a")
    assert too_deep.value.code == "GATEWAY_JSON_TOO_DEEP"


def test_the_tool_reply_check_resumes_where_the_kept_body_left_it() -> None:
    memo = ResentBodies()
    call = {"role": "assistant", "content": "",
            "tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": "f", "arguments": "{}"}}]}
    history = [*_history(3), call]
    _read(memo, _body(history))
    answered = _read(memo, _body([*history, {"role": "tool", "tool_call_id": "c1",
                                             "content": "ok"}]))
    assert answered.reused == 4
    _read(memo, _body(history))  # the call again, kept last
    with pytest.raises(GatewayError) as unmatched:
        _read(memo, _body([*history, {"role": "tool", "tool_call_id": "c2", "content": "?"}]))
    assert unmatched.value.details == {"param": "messages[4].tool_call_id",
                                       "reason": "tool_reply_unmatched"}
    # A user message between the call and the reply: refused, though the call is kept.
    with pytest.raises(GatewayError):
        _read(memo, _body([*history, {"role": "user", "content": "hm"},
                           {"role": "tool", "tool_call_id": "c1", "content": "ok"}]))


def test_a_repeated_messages_key_takes_the_last_as_json_does() -> None:
    memo = ResentBodies()
    history = _history(4)
    _read(memo, _body(history))
    head = json.dumps({"messages": history})[:-1]
    raw = (head + ', "messages": [{"role": "user", "content": "other"}]}').encode()
    again = _read(memo, raw)
    assert again.fields["messages"] == json.loads(raw)["messages"]
    assert again.reused == 0


def test_the_memo_is_bounded() -> None:
    memo = ResentBodies(per_scope=2, entries=3, chars=10_000)
    for conversation in range(4):
        _read(memo, _body([{"role": "user", "content": f"conversation {conversation}"}]))
    assert len(memo.candidates("gateway:a", "openai")) == 2
    for scope in ("gateway:b", "gateway:c"):
        _read(memo, _body(_history(2)), scope=scope)
    assert len(memo) == 3
    _read(memo, _body([{"role": "user", "content": "x" * 20_000}]), scope="gateway:d")
    assert memo.candidates("gateway:d", "openai") == []  # larger than the whole bound


def test_only_a_field_the_format_reads_is_kept_and_another_history_field_can_be() -> None:
    memo = ResentBodies()
    known = frozenset({"model", "input"})
    items = [{"type": "message", "role": "user", "content": f"q{i}"} for i in range(4)]
    raw = json.dumps({"messages": items, "input": items, "model": "m"}).encode()
    first = read_request(raw, LIMITS, known, memo=memo, scope="gateway:a", front="r",
                         history="input")
    assert "messages" not in first.fields  # not this format's: skipped and named
    assert first.ignored == ("messages",)
    first.remember(memo)
    longer = [*items, {"type": "message", "role": "user", "content": "more"}]
    raw = json.dumps({"messages": items, "input": longer, "model": "m"}).encode()
    again = read_request(raw, LIMITS, known, memo=memo, scope="gateway:a", front="r",
                         history="input")
    assert again.reused == 4
    assert again.fields == {"input": longer, "model": "m"}
    assert again.ignored == ("messages",)
