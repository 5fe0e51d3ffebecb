"""A stock OpenAI client keeps its conversation without naming a session (issue #24.3).

Stock clients (the official ``openai`` SDK, langchain-openai) never send
``X-DeepSeekEyes-Session``; they resend the whole history each turn. The gateway finds the
session that history continues by its hash (noted after each answer, per gateway key), so
one conversation is one session: pointer history, ``look`` continuity and a useful
``sessions list``. An edited history is still a fork; a first message is a new session.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from helpers import ServedGateway, open_gateway_env, require_module, run_cli, serve_gateway
from runtime.upstream import LoopbackUpstream

MODEL = "deepseek-v4-pro"


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


@pytest.fixture
def served(tmp_path: Path, upstream: LoopbackUpstream) -> Iterator[tuple[ServedGateway, Path]]:
    config = tmp_path / "eyes.toml"
    config.write_text(
        f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\nmodel = "{MODEL}"\n'
        "[gateway]\nrate_limit_per_minute = 1000000\n", encoding="utf-8")
    with serve_gateway(config, open_gateway_env(tmp_path / "data")) as gateway:
        yield gateway, config


def _session(response: Any) -> str:
    return str(response.headers["x-deepseekeyes-session"])


def test_the_openai_client_keeps_one_session_for_one_conversation(
    served: tuple[ServedGateway, Path], tmp_path: Path,
) -> None:
    gateway, config = served
    home = tmp_path / "data"
    with openai.OpenAI(base_url=gateway.base, api_key="unused", max_retries=0) as client:
        history: list[Any] = [{"role": "system", "content": "Be brief."}]
        sessions = []
        for text in ("Plan a trip to Lisbon\nANSWER: day one", "and day two?\nANSWER: two",
                     "and three?\nANSWER: three"):
            history.append({"role": "user", "content": text})
            raw = client.chat.completions.with_raw_response.create(model=MODEL,
                                                                   messages=history)
            answer = raw.parse()
            sessions.append(_session(raw))
            history.append({"role": "assistant", "content": answer.choices[0].message.content})
        assert len(set(sessions)) == 1, sessions
        (session,) = set(sessions)
        # An edited history is a fork of the conversation it shares a prefix with.
        edited = [*history[:3], {"role": "user", "content": "no, Porto instead"}]
        forked = client.chat.completions.create(model=MODEL, messages=edited)
        assert forked.model_extra is not None
        assert forked.model_extra["deepseekeyes"]["fork"] == {"from": session, "at": 3}
        # A new conversation (a first message) is a session of its own, even the same text.
        fresh = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=[history[0], history[1]])
        assert _session(fresh) not in (session, forked.model_extra["deepseekeyes"]["session_id"])
    listed = json.loads(run_cli(config, home, "sessions", "list", "--json").stdout)
    rows = {row["id"]: row for row in listed["sessions"]}
    assert rows[session]["title"] == "Plan a trip to Lisbon ANSWER: day one"
    assert rows[session]["turns"] == 3
    assert rows[session]["model"] == MODEL
    assert rows[session]["events"] == 7  # system, 3 users, 3 answers
    found = json.loads(run_cli(config, home, "sessions", "list", "--search", "Porto",
                               "--json").stdout)["sessions"]
    assert [row["forked_from"] for row in found] == [session]
    text = run_cli(config, home, "sessions", "list").stdout
    assert "Plan a trip to Lisbon" in text
    assert "3 turn(s)" in text


def test_langchain_keeps_one_session_too(served: tuple[ServedGateway, Path]) -> None:
    require_module("langchain_openai")
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langchain_openai import ChatOpenAI

    gateway, _config = served
    model = ChatOpenAI(model=MODEL, base_url=gateway.base, api_key="unused",  # type: ignore[arg-type]
                       max_retries=0, timeout=60, include_response_headers=True)
    history: list[BaseMessage] = []
    seen = []
    for text in ("first question\nANSWER: one", "second question\nANSWER: two"):
        history.append(HumanMessage(text))
        answer = model.invoke(history)
        seen.append(answer.response_metadata["headers"]["x-deepseekeyes-session"])
        history.append(AIMessage(str(answer.content)))
    assert seen[0] == seen[1]
    # DeepSeek's cache hits, read where langchain reads OpenAI's (#24.4): the second
    # request shares the first one's prefix.
    assert answer.usage_metadata is not None
    details = answer.usage_metadata.get("input_token_details") or {}
    assert details.get("cache_read", 0) > 0
    assert answer.usage_metadata["output_token_details"].get("reasoning", 0) > 0


def test_without_continue_by_history_every_request_is_its_own_session(
    tmp_path: Path, upstream: LoopbackUpstream,
) -> None:
    config = tmp_path / "eyes.toml"
    config.write_text(
        f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\nmodel = "{MODEL}"\n'
        "[gateway]\ncontinue_by_history = false\n", encoding="utf-8")
    env = {**open_gateway_env(tmp_path / "data"), "PATH": os.environ.get("PATH", "")}
    with serve_gateway(config, env) as gateway, \
            openai.OpenAI(base_url=gateway.base, api_key="unused", max_retries=0) as client:
        first = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}])
        again = client.chat.completions.with_raw_response.create(model=MODEL, messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": first.parse().choices[0].message.content},
            {"role": "user", "content": "more"}])
        assert _session(first) != _session(again)
