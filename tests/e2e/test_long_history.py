"""A long conversation keeps working (issue #41 goal 6): no message-count cap, the size of
a request bounded by bytes instead, and a stock client's continuation found by its history
whether or not this process saw the conversation before.

Real parts: the gateway app on loopback (in this process, so the store can be read), the
loopback DeepSeek, the official ``openai`` client (which sends no session id).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from inprocess_gateway import serve_in_process
from runtime.upstream import LoopbackUpstream

MODEL = "deepseek-v4-pro"


def history(n: int) -> list[dict[str, Any]]:
    """``n`` short messages, user first (``n`` odd: ends with a user message)."""
    return [{"role": "user", "content": f"Question {i}?"} if i % 2 == 0
            else {"role": "assistant", "content": f"Answer {i}."} for i in range(n)]


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


def _session(answer: Any) -> str:
    extra = answer.model_extra["deepseekeyes"]
    assert "fork" not in extra
    return str(extra["session_id"])


def test_2500_messages_are_one_session(upstream: LoopbackUpstream) -> None:
    messages = history(2499)
    with serve_in_process({"base_url": upstream.base_url, "model": MODEL},
                          gateway={"rate_limit_per_minute": 1_000_000}) as served:
        client = openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)
        first = client.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
        session = _session(first)
        for turn in range(2):
            messages += [{"role": "assistant", "content": first.choices[0].message.content},
                         {"role": "user", "content": f"ANSWER: turn {turn}"}]
            first = client.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
            assert first.choices[0].message.content == f"turn {turn}"
            assert _session(first) == session  # found by its history, not forked
        stored = served.runtime.sessions.messages(session)
        assert len(stored) == 2499 + 5
        assert [m["content"] for m in stored[:3]] == ["Question 0?", "Answer 1.", "Question 2?"]
    # Another process (a fresh memo) over the same data finds the same session.
    with serve_in_process({"base_url": upstream.base_url, "model": MODEL},
                          gateway={"rate_limit_per_minute": 1_000_000}) as again:
        client = openai.OpenAI(base_url=again.url + "/v1", api_key="unused", max_retries=0)
        messages += [{"role": "assistant", "content": first.choices[0].message.content},
                     {"role": "user", "content": "ANSWER: later"}]
        later = client.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
        assert _session(later) == session
        assert len(again.runtime.sessions.messages(session)) == 2499 + 7


def test_a_history_too_large_is_refused_by_its_bytes(upstream: LoopbackUpstream) -> None:
    messages = history(3001)
    with serve_in_process({"base_url": upstream.base_url, "model": MODEL},
                          gateway={"rate_limit_per_minute": 1_000_000,
                                   "max_text_bytes": 64 * 1024}) as served:
        client = openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
        assert caught.value.status_code == 413
        assert "GATEWAY_BODY_TEXT_TOO_LARGE" in str(caught.value.body)
        assert served.sessions() == []  # refused at the door: nothing stored
