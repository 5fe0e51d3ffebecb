"""The Anthropic Messages wire format on its own: a request as the OpenAI body the one
admission path takes, the repairs DeepSeek needs, thinking signatures, the answer's shape.
(End to end, with the official SDK and with Claude Code: tests/e2e.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.errors import GatewayError, TurnError
from deepseek_eyes.runtime.turn.wire.anthropic_messages import (
    DEFAULT_CLAUDE_MODELS,
    ThinkingKeyring,
    ThinkingSigner,
    check_forced,
    count_tokens,
    error_json,
    message_json,
    openai_body,
    upstream_model,
)


@pytest.fixture
def signer(tmp_path: Path) -> ThinkingSigner:
    return ThinkingSigner(ThinkingKeyring.load_or_create(tmp_path / "thinking"))


def translate(signer: ThinkingSigner, scope: str = "gateway:a", **body: Any) -> Any:
    return openai_body({"model": "claude-opus-4-8", "max_tokens": 100, **body},
                       claude_models=DEFAULT_CLAUDE_MODELS, signer=signer, scope=scope)


def test_model_names() -> None:
    assert upstream_model("claude-opus-4-8", DEFAULT_CLAUDE_MODELS) == "deepseek-v4-pro"
    assert upstream_model("claude-opus-4-8[1m]", DEFAULT_CLAUDE_MODELS) == "deepseek-v4-pro"
    assert upstream_model("claude-sonnet-4-5", DEFAULT_CLAUDE_MODELS) == "deepseek-flash"
    assert upstream_model("Claude-Haiku-4-5", DEFAULT_CLAUDE_MODELS) == "deepseek-flash"
    assert upstream_model("deepseek-v4-pro[1m]", DEFAULT_CLAUDE_MODELS) == "deepseek-v4-pro"
    assert upstream_model("claude-x", {"claude-x*": "mine"}) == "mine"


def test_signatures_bind_scope_and_text(signer: ThinkingSigner, tmp_path: Path) -> None:
    signature = signer.mint("I think", scope="gateway:a", message_id="msg_1")
    assert signer.verify("I think", signature, scope="gateway:a")
    assert not signer.verify("I think!", signature, scope="gateway:a")
    assert not signer.verify("I think", signature, scope="gateway:b")
    other = ThinkingSigner(ThinkingKeyring.load_or_create(tmp_path / "other"))
    assert not other.verify("I think", signature, scope="gateway:a")  # unknown key
    for junk in (None, "", "x.y", "dse1.a.b.c", 7, "dse1." + "x" * 600):
        assert not signer.verify("I think", junk, scope="gateway:a")
    # The key persists: the same directory verifies what it signed before.
    again = ThinkingSigner(ThinkingKeyring.load_or_create(tmp_path / "thinking"))
    assert again.verify("I think", signature, scope="gateway:a")


def test_content_translation(signer: ThinkingSigner) -> None:
    signature = signer.mint("plan", scope="gateway:a", message_id="msg_1")
    out = translate(signer, system=[{"type": "text", "text": "sys", "cache_control": {}}],
                    messages=[
        {"role": "user", "content": [
            {"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo="}},
            {"type": "document", "title": "t", "source": {"type": "text", "data": "doc"}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan", "signature": signature},
            {"type": "text", "text": "calling"},
            {"type": "tool_use", "id": "tu_1", "name": "Read", "input": {"p": 1}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "tu_1", "is_error": True, "content": [
                {"type": "text", "text": "no"},
                {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                {"type": "tool_reference", "tool_name": "Grep"}]},
            {"type": "text", "text": "go on"}]},
        {"role": "system", "content": "mid-conversation"},
    ])
    messages = out.body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user",
                                             "system"]
    assert messages[1]["content"][1] == {
        "type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    assert messages[1]["content"][2]["text"] == "[document: t]\ndoc"
    assert messages[2]["reasoning_content"] == "plan"
    assert messages[2]["tool_calls"][0]["function"] == {"name": "Read",
                                                        "arguments": '{"p":1}'}
    tool = messages[3]
    assert tool["tool_call_id"] == "tu_1"
    assert tool["content"][0]["text"] == "[the tool reported an error]"
    assert tool["content"][2]["image_url"]["url"] == "https://x/y.png"
    assert tool["content"][3]["text"] == "[tool available: Grep]"
    assert messages[5]["content"] == "mid-conversation"
    assert out.verified_thinking == 1


def test_unsigned_and_foreign_thinking_is_dropped(signer: ThinkingSigner) -> None:
    foreign = signer.mint("plan", scope="gateway:b", message_id="msg_1")
    out = translate(signer, messages=[
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan", "signature": foreign},
            {"type": "thinking", "thinking": "more", "signature": "EqQBCkgIB..."},
            {"type": "redacted_thinking", "data": "abc"},
            {"type": "tool_use", "id": "tu_1", "name": "Read", "input": {}}]},
    ])
    assert "reasoning_content" not in out.body["messages"][1]
    assert out.dropped_thinking == 3


def test_repairs(signer: ThinkingSigner) -> None:
    tools = [{"name": "Read", "input_schema": {"type": "object"}, "defer_loading": True},
             {"type": "web_search_20250305", "name": "web_search"}]
    user = [{"role": "user", "content": "hi"}]
    subagent = translate(signer, messages=user, thinking={"type": "disabled"},
                         output_config={"effort": "high"}, tools=tools,
                         tool_choice={"type": "any", "disable_parallel_tool_use": True})
    body = subagent.body
    assert body["thinking"] == {"type": "disabled"}
    assert "reasoning_effort" not in body
    assert [t["function"]["name"] for t in body["tools"]] == ["Read"]
    assert body["tool_choice"] == "required"
    assert body["parallel_tool_calls"] is False
    assert subagent.forced_tool == "any"
    assert subagent.dropped == ["tools[1]:web_search_20250305"]
    main = translate(signer, messages=user, thinking={"type": "enabled", "budget_tokens": 9},
                     output_config={"effort": "max"}, tools=tools, top_k=5,
                     tool_choice={"type": "tool", "name": "Read"}, stop_sequences=["END"])
    assert main.body["thinking"] == {"type": "enabled"}
    assert main.body["reasoning_effort"] == "max"
    assert main.body["tool_choice"] == {"type": "function", "function": {"name": "Read"}}
    assert main.body["stop"] == ["END"]
    assert "top_k" not in main.body
    assert main.forced_tool == "Read"
    no_tools = translate(signer, messages=user, tool_choice={"type": "any"})
    assert "tool_choice" not in no_tools.body
    assert no_tools.forced_tool is None


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {
        "type": "file", "file_id": "f"}}]}]}, "messages[0].content[0].source.type"),
    ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
    ({"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "maybe"}},
     "tool_choice.type"),
    ({"messages": [{"role": "user", "content": "x"}], "system": 3}, "system"),
])
def test_bad_requests_name_their_field(signer: ThinkingSigner, body: dict[str, Any],
                                       param: str) -> None:
    with pytest.raises(GatewayError) as caught:
        translate(signer, **body)
    assert caught.value.code == "GATEWAY_BAD_REQUEST"
    assert caught.value.details["param"] == param


def test_message_shape(signer: ThinkingSigner) -> None:
    completion = {
        "id": "chatcmpl-t1", "choices": [{"finish_reason": "tool_calls", "message": {
            "content": "ok", "reasoning_content": "why",
            "tool_calls": [{"id": "c1", "function": {"name": "Read", "arguments": "{bad"}}]}}],
        "usage": {"prompt_tokens": 100, "prompt_cache_hit_tokens": 60,
                  "completion_tokens": 7}}
    message = message_json(completion, model="claude-opus-4-8", signer=signer,
                           scope="gateway:a")
    assert message["id"] == "msg_t1"
    assert [b["type"] for b in message["content"]] == ["thinking", "text", "tool_use"]
    assert signer.verify("why", message["content"][0]["signature"], scope="gateway:a")
    assert message["content"][2]["input"] == {"_arguments": "{bad"}
    assert message["stop_reason"] == "tool_use"
    assert message["usage"] == {"input_tokens": 40, "output_tokens": 7,
                                "cache_read_input_tokens": 60,
                                "cache_creation_input_tokens": 0}


def test_forced_tools_and_counts_and_errors() -> None:
    check_forced(1, "any", ["x"])
    check_forced(1, "Read", ["Read"])
    check_forced(0, None, [])
    with pytest.raises(TurnError) as caught:
        check_forced(1, "Read", ["Write"])
    assert caught.value.code == "RUNTIME_TOOL_NOT_CALLED"
    text = {"messages": [{"role": "user", "content": "x" * 400}]}
    image = {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:"}}]}]}
    assert count_tokens(text) == 100
    assert count_tokens(image) == 1024
    assert error_json(529, "busy", "LLM_HTTP_ERROR") == {
        "type": "error", "error": {"type": "overloaded_error", "message": "busy",
                                   "code": "LLM_HTTP_ERROR"}}
    assert error_json(502, "x", None)["error"]["type"] == "api_error"
