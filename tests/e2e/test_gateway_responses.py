"""The OpenAI Responses front, end to end, with the official ``openai`` SDK's
``client.responses.create``: a real ``serve`` process and the loopback DeepSeek (which
enforces DeepSeek's contract: ``deepseek-flash`` sees, ``deepseek-v4-pro`` answers an image
with a 400, a tool-call exchange without its exact reasoning is a 400).

What each test shows is what Codex CLI needs from the front: text whole and streamed in
the Responses grammar, a function-call loop over several turns with thinking on where the
client sends reasoning back *only* as ``encrypted_content`` (and DeepSeek still gets the
exact text), images in a user message and inside a ``function_call_output`` (pixels for a
model that sees, evidence for one that does not), ``previous_response_id``, custom,
namespace and hosted tools, sessions by Codex's headers, and errors in OpenAI's shape."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image, ImageDraw

from helpers import GATEWAY_KEY, require_module, run_cli, serve_blind
from runtime.upstream import REASONING_TEXT, LoopbackUpstream

openai = require_module("openai")

PRO = "deepseek-v4-pro"
FLASH = "deepseek-flash"
WEATHER = {"type": "function", "name": "weather", "description": "the weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


@dataclass
class Setup:
    base: str  # http://127.0.0.1:PORT/v1
    upstream: LoopbackUpstream
    clients: list[Any]
    config: Path
    data: Path

    def client(self, key: str = GATEWAY_KEY, **headers: str) -> Any:
        client = openai.OpenAI(base_url=self.base, api_key=key, max_retries=0, timeout=60,
                               default_headers=headers or None)
        self.clients.append(client)
        return client


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("responses")
    with LoopbackUpstream() as upstream:
        config = root / "eyes.toml"
        with serve_blind(root, upstream.base_url, PRO) as gateway:
            setup = Setup(gateway.base, upstream, [], config, root / "data")
            yield setup
            for client in setup.clients:
                client.close()


def png_data_url(text: str = "INVOICE 4417") -> str:
    image = Image.new("RGB", (360, 120), "white")
    ImageDraw.Draw(image).text((20, 45), text, fill="black")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def only_encrypted(item: Any) -> dict[str, Any]:
    """What Codex sends back of a reasoning item: its id and encrypted_content only."""
    return {"type": "reasoning", "id": item.id, "summary": [],
            "encrypted_content": item.encrypted_content}


def test_text_whole(setup: Setup) -> None:
    response = setup.client().responses.create(
        model=PRO, instructions="be brief", input="ANSWER: hello there",
        reasoning={"summary": "auto"}, metadata={"k": "v"})
    assert response.status == "completed"
    assert response.output_text == "hello there"
    assert [item.type for item in response.output] == ["reasoning", "message"]
    reasoning = response.output[0]
    assert reasoning.encrypted_content.startswith("dse1r.")
    assert REASONING_TEXT not in reasoning.encrypted_content  # sealed, not encoded
    assert reasoning.summary[0].text  # asked for: a short readable summary
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens_details.reasoning_tokens > 0
    assert response.metadata == {"k": "v"}
    sent = setup.upstream.requests[-1]
    assert sent["model"] == PRO
    assert sent["messages"][0] == {"role": "system", "content": "be brief"}


def test_text_streamed_in_the_responses_grammar(setup: Setup) -> None:
    events = list(setup.client().responses.create(
        model=PRO, input=[{"role": "user", "content": [
            {"type": "input_text", "text": "ANSWER: streamed words"}]}], stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    for needed in ("response.output_item.added", "response.content_part.added",
                   "response.output_text.delta", "response.output_text.done",
                   "response.content_part.done", "response.output_item.done"):
        assert needed in kinds
    numbers = [e.sequence_number for e in events]
    assert numbers == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "streamed words"
    final = events[-1].response
    assert final.output_text == "streamed words"
    assert final.output[0].type == "reasoning"
    assert final.output[0].encrypted_content.startswith("dse1r.")
    assert final.usage.total_tokens > 0
    # The raw wire: each event an ``event:`` line and a ``data:`` line.
    with httpx.stream("POST", f"{setup.base}/responses", headers={
            "Authorization": f"Bearer {GATEWAY_KEY}"}, json={
            "model": PRO, "input": "ANSWER: raw", "stream": True}, timeout=60) as raw:
        assert raw.status_code == 200
        body = raw.read().decode()
    names = [line.removeprefix("event: ") for line in body.splitlines()
             if line.startswith("event: ")]
    datas = [json.loads(line.removeprefix("data: ")) for line in body.splitlines()
             if line.startswith("data: ")]
    assert names == [d["type"] for d in datas]
    assert names[-1] == "response.completed"


@pytest.mark.parametrize("stream", [False, True])
def test_a_function_call_loop_with_thinking_sends_back_only_encrypted_content(
        setup: Setup, stream: bool) -> None:
    client = setup.client()
    items: list[Any] = [{"role": "user", "content":
                         'CALL[weather]: {"city": "Oslo"}\nTHEN[weather]: {"city": "Rome"}'}]
    results = {"Oslo": "snow", "Rome": "sun"}
    for _ in range(2):
        if stream:
            events = list(client.responses.create(model=PRO, input=items, tools=[WEATHER],
                                                  stream=True))
            response = events[-1].response
            assert any(e.type == "response.function_call_arguments.delta" for e in events)
        else:
            response = client.responses.create(model=PRO, input=items, tools=[WEATHER])
        kinds = [item.type for item in response.output]
        assert kinds == ["reasoning", "function_call"], kinds
        call = response.output[1]
        city = json.loads(call.arguments)["city"]
        items += [only_encrypted(response.output[0]),
                  {"type": "function_call", "call_id": call.call_id, "name": call.name,
                   "arguments": call.arguments},
                  {"type": "function_call_output", "call_id": call.call_id,
                   "output": results[city]}]
    final = client.responses.create(model=PRO, input=items, tools=[WEATHER])
    assert final.output_text == "after weather: sun"
    # DeepSeek got every tool-call message back with its exact reasoning (the loopback
    # refuses a missing or different one), opened from encrypted_content.
    sent = setup.upstream.requests[-1]["messages"]
    calling = [m for m in sent if m.get("tool_calls")]
    assert len(calling) == 2
    assert all(m["reasoning_content"].startswith(REASONING_TEXT) for m in calling)


def test_altered_encrypted_content_is_restored_from_the_store(setup: Setup) -> None:
    client = setup.client()
    items: list[Any] = [{"role": "user", "content": 'CALL[weather]: {"city": "Oslo"}'}]
    first = client.responses.create(model=PRO, input=items, tools=[WEATHER])
    reasoning, call = first.output
    forged = reasoning.encrypted_content[:-4] + ("AAAA" if not reasoning.encrypted_content
                                                 .endswith("AAAA") else "BBBB")
    items += [{"type": "reasoning", "id": reasoning.id, "summary": [],
               "encrypted_content": forged},
              {"type": "function_call", "call_id": call.call_id, "name": call.name,
               "arguments": call.arguments},
              {"type": "function_call_output", "call_id": call.call_id, "output": "snow"}]
    second = client.responses.create(model=PRO, input=items, tools=[WEATHER])
    assert second.output_text == "after weather: snow"
    calling = [m for m in setup.upstream.requests[-1]["messages"] if m.get("tool_calls")]
    assert calling[0]["reasoning_content"].startswith(REASONING_TEXT)


def test_an_image_inside_a_function_call_output(setup: Setup) -> None:
    client = setup.client()
    for model, pixels in ((PRO, False), (FLASH, True)):
        items: list[Any] = [{"role": "user", "content": 'CALL[view_image]: {"path": "a.png"}'}]
        tool = {**WEATHER, "name": "view_image"}
        first = client.responses.create(model=model, input=items, tools=[tool])
        call = next(item for item in first.output if item.type == "function_call")
        before = len(setup.upstream.decoded)
        items += [item.model_dump(exclude_none=True) for item in first.output]
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": [
            {"type": "input_text", "text": "the screenshot"},
            {"type": "input_image", "image_url": png_data_url("RECEIPT 99")}]})
        second = client.responses.create(model=model, input=items, tools=[tool])
        assert second.status == "completed"
        sent = setup.upstream.requests_for(model)[-1]
        assert ("image_url" in json.dumps(sent)) is pixels
        assert (len(setup.upstream.decoded) > before) is pixels
        if not pixels:  # evidence: the local OCR read the text, DeepSeek got it as text
            assert "evidence from route local" in json.dumps(sent)


def test_an_image_in_a_user_message_is_evidence_for_pro(setup: Setup) -> None:
    before = len(setup.upstream.decoded)
    response = setup.client().responses.create(model=PRO, input=[{"role": "user", "content": [
        {"type": "input_text", "text": "what does it say?"},
        {"type": "input_image", "image_url": png_data_url(), "detail": "auto"}]}])
    assert response.status == "completed"
    sent = setup.upstream.requests_for(PRO)[-1]
    assert "image_url" not in json.dumps(sent)
    assert "INVOICE 4417" in json.dumps(sent)
    assert len(setup.upstream.decoded) == before


def test_previous_response_id_continues_and_store_false_keeps_nothing(setup: Setup) -> None:
    client = setup.client()
    first = client.responses.create(model=PRO, input="ANSWER: first answer")
    second = client.responses.create(model=PRO, previous_response_id=first.id,
                                     input="ANSWER: second answer")
    assert second.output_text == "second answer"
    history = json.dumps(setup.upstream.requests[-1]["messages"])
    assert "first answer" in history
    unstored = client.responses.create(model=PRO, input="ANSWER: gone", store=False)
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model=PRO, previous_response_id=unstored.id, input="hi")
    assert caught.value.body["code"] == "GATEWAY_RESPONSE_NOT_FOUND"


def test_custom_namespace_and_hosted_tools(setup: Setup) -> None:
    tools = [
        {"type": "custom", "name": "apply_patch", "description": "apply a patch"},
        {"type": "namespace", "name": "agents", "description": "sub-agents",
         "tools": [{**WEATHER, "name": "spawn"}]},
        {"type": "web_search"},
    ]
    response = setup.client().responses.create(
        model=FLASH, tools=tools,
        input='CALL[apply_patch]: {"input": "*** Begin Patch"}\nCALL[agents__spawn]: {}')
    kinds = {item.type: item for item in response.output}
    assert kinds["custom_tool_call"].input == "*** Begin Patch"
    assert kinds["custom_tool_call"].name == "apply_patch"
    spawned = kinds["function_call"]
    assert spawned.name == "spawn"
    assert spawned.model_dump().get("namespace") == "agents"
    assert response.metadata["deepseekeyes_dropped_tools"] == "web_search"
    offered = [t["function"]["name"] for t in setup.upstream.requests[-1]["tools"]]
    assert offered == ["apply_patch", "agents__spawn"]


def test_codex_session_headers_name_the_session(setup: Setup) -> None:
    thread = "01a24a46-b520-74d2-9b1d-b237b9171c33"
    raw = setup.client(**{"session-id": thread}).responses.with_raw_response.create(
        model=PRO, input="ANSWER: one")
    assert raw.headers["x-deepseekeyes-session"] == thread


def test_errors_in_openais_shape(setup: Setup) -> None:
    client = setup.client()
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=PRO, input=[{"type": "message", "role": "tool",
                                                   "content": "x"}])
    assert bad.value.body["code"] == "GATEWAY_BAD_REQUEST"
    assert bad.value.body["param"] == "input[0].role"
    with pytest.raises(openai.AuthenticationError):
        setup.client(key="wrong-key-0123456789abcdefghijklmnopqrstuvwxyz").responses.create(
            model=PRO, input="hi")
    # A failure after the stream started is a response.failed event with our code.
    events = list(client.responses.create(model="midfail", input="hi", stream=True))
    assert events[-1].type == "response.failed"
    assert events[-1].response.error.code.startswith("LLM_")


def test_models_in_codex_catalog_shape_for_codex(setup: Setup) -> None:
    """Codex asks ``/models?client_version=X`` and reads its own catalog shape: each model
    with its context window and reasoning levels, and the fields Codex 0.169 requires
    (an entry without instructions is refused by its parser). Other clients keep OpenAI's."""
    auth = {"Authorization": f"Bearer {GATEWAY_KEY}"}
    codex = httpx.get(f"{setup.base}/models", params={"client_version": "0.169.0"},
                      headers=auth, timeout=30)
    assert codex.status_code == 200, codex.text
    models = {m["slug"]: m for m in codex.json()["models"]}
    assert set(models) >= {PRO, FLASH}
    pro = models[PRO]
    assert pro["context_window"] == pro["max_context_window"] == 1048576  # known-models
    assert pro["default_reasoning_level"] == "high"  # v4-pro thinks by default
    assert [level["effort"] for level in pro["supported_reasoning_levels"]] == ["none", "high"]
    assert pro["input_modalities"] == ["text", "image"]  # the gateway gives it eyes
    for entry in models.values():
        for required in ("display_name", "shell_type", "visibility", "supported_in_api",
                         "priority", "support_verbosity", "truncation_policy",
                         "experimental_supported_tools", "supported_reasoning_levels"):
            assert required in entry
        assert entry["base_instructions"]
        assert entry["visibility"] == "list"
    plain = httpx.get(f"{setup.base}/models", headers=auth, timeout=30).json()
    assert plain["object"] == "list"
    assert PRO in [m["id"] for m in plain["data"]]
    # The same key check as every route.
    refused = httpx.get(f"{setup.base}/models", params={"client_version": "0.169.0"},
                        timeout=30)
    assert refused.status_code == 401


def _data_bytes(data: Path) -> bytes:
    """Every byte the gateway's data directory holds (databases, their WAL, logs, keys)."""
    return b"".join(f.read_bytes() for f in sorted(data.rglob("*")) if f.is_file())


def test_store_false_keeps_only_hashes(setup: Setup) -> None:
    """``store: false`` keeps nothing but what the audit needs: the session holds each
    message's hash and role (Codex's sessions still list and resume), the audit chain
    verifies, and no byte of what was said is in the data directory, the answer included.
    The same words with ``store`` left on are there (the check can fail)."""
    thread = "01a24a46-0000-7000-8000-00000000f00d"
    client = setup.client(**{"session-id": thread})
    said = "ANSWER: unkept-canary-5521"
    first = client.responses.create(model=PRO, input=said, store=False)
    assert first.output_text == "unkept-canary-5521"
    assert first.store is False
    # Codex's next turn: the whole history again (reasoning sealed), plus a new message.
    again = client.responses.create(model=PRO, store=False, input=[
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": said}]},
        *[item.model_dump(exclude_none=True) for item in first.output],
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "ANSWER: second-unkept-7730"}]}])
    assert again.output_text == "second-unkept-7730"
    sent = setup.upstream.requests[-1]["messages"]
    assert "unkept-canary-5521" in json.dumps(sent)  # the turn was shown the whole history
    kept = setup.client().responses.create(model=PRO, input="ANSWER: kept-canary-6612")
    assert kept.output_text == "kept-canary-6612"
    stored = _data_bytes(setup.data)
    assert b"kept-canary-6612" in stored
    assert b"unkept-canary-5521" not in stored
    assert b"second-unkept-7730" not in stored
    shown = run_cli(setup.config, setup.data, "sessions", "show", thread, "--json")
    assert shown.returncode == 0, shown.stderr
    assert "unkept-canary" not in shown.stdout
    events = json.loads(shown.stdout)["events"]
    # user, answer; then only what the second request added: user, answer (no duplicates).
    assert [e["role"] for e in events] == ["user", "assistant", "user", "assistant"]
    assert all(e["message"] == {"role": e["role"], "unkept": True} for e in events)
    verified = run_cli(setup.config, setup.data, "audit", "verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_store_false_refuses_what_would_keep_content(setup: Setup) -> None:
    client = setup.client()
    # An Idempotency-Key needs the answer kept for replay.
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=PRO, input="ANSWER: x", store=False,
                                extra_headers={"Idempotency-Key": "unkept-1"})
    assert bad.value.body["code"] == "GATEWAY_IDEMPOTENCY_UNKEPT"
    # A stored response whose session later kept hashes only cannot be continued from it.
    thread = "01a24a46-0000-7000-8000-00000000beef"
    named = setup.client(**{"session-id": thread})
    kept = named.responses.create(model=PRO, input="ANSWER: kept first")
    named.responses.create(model=PRO, input="ANSWER: then unkept", store=False)
    with pytest.raises(openai.ConflictError) as conflict:
        client.responses.create(model=PRO, previous_response_id=kept.id, input="ANSWER: more")
    assert conflict.value.body["code"] == "STORE_SESSION_UNKEPT"
