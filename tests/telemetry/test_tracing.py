"""Traces: nothing when off; when on, GenAI chat spans, MCP client spans with the trace
context in ``params._meta``, and no secret or content in any attribute.

Spans are read from the SDK's in-memory exporter here; tests/e2e/test_gateway_traces.py
exports them for real, over OTLP/HTTP to a receiver on loopback."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import ValidationError

from deepseek_eyes import telemetry
from deepseek_eyes.errors import ERROR_CODES, LLMError
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import McpSettings, TelemetrySettings, format_validation_errors
from deepseek_eyes.store.blobs import BlobStore
from deepseek_eyes.telemetry.setup import TraceSettings, wanted
from helpers import GATEWAY_KEY, recorded_spans
from inprocess_gateway import serve_in_process
from runtime.upstream import LoopbackUpstream

MODEL = "deepseek-v4-pro"
RAW_SERVER = Path(__file__).parents[1] / "mcp_host" / "raw_server.py"
SECRET = "the vault code is 7319-marmalade"
RECEIPT = Path(__file__).parents[2] / "examples" / "receipt.png"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with recorded_spans() as exporter:
        yield exporter


def _attributes(finished: list[ReadableSpan]) -> str:
    """Every name and attribute value of ``finished``, as one text to search."""
    return json.dumps([[s.name, dict(s.attributes or {})] for s in finished], default=str)


def test_off_means_no_span_no_context_and_no_opentelemetry_work() -> None:
    assert not telemetry.active()
    with telemetry.span("x", {"a": 1}) as current:
        assert current is None
    assert telemetry.detached_span("x") is None
    assert telemetry.trace_meta() is None


def test_a_failed_span_carries_the_code_never_the_message(
        spans: InMemorySpanExporter) -> None:
    with pytest.raises(LLMError), telemetry.span("work"):
        raise LLMError(f"upstream said {SECRET}", code="LLM_UNAVAILABLE")
    with pytest.raises(KeyError), telemetry.span("bug"):
        raise KeyError(SECRET)
    work, bug = spans.get_finished_spans()
    assert work.attributes is not None
    assert bug.attributes is not None
    assert work.attributes["error.type"] == "LLM_UNAVAILABLE"
    assert bug.attributes["error.type"] == "KeyError"
    assert work.status.description is None
    assert list(work.events) == []  # no exception event with its message
    assert SECRET not in _attributes([work, bug])


@pytest.mark.parametrize(("enabled", "env", "on"), [
    (False, {}, False),
    (True, {}, True),
    (False, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
    (False, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
    (True, {"OTEL_SDK_DISABLED": "true"}, False),
    (True, {"OTEL_TRACES_EXPORTER": "none"}, False),
])
def test_traces_are_on_when_configured_and_off_when_disabled(
        enabled: bool, env: dict[str, str], on: bool) -> None:
    assert wanted(TraceSettings(enabled=enabled), env) is on


def test_a_gateway_turn_is_a_server_span_over_a_genai_chat_span(
        spans: InMemorySpanExporter) -> None:
    with LoopbackUpstream() as upstream, serve_in_process(
            {"base_url": upstream.base_url, "model": MODEL}, key=GATEWAY_KEY) as gateway:
        caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        for stream in (False, True):
            answer = gateway.http.post(
                "/v1/chat/completions", headers={
                    "Authorization": f"Bearer {GATEWAY_KEY}", "traceparent": caller},
                json={"model": MODEL, "stream": stream,
                      "messages": [{"role": "user", "content": SECRET}]})
            assert answer.status_code == 200, answer.text
    finished = spans.get_finished_spans()
    servers = [s for s in finished if s.name == "POST /v1/chat/completions"]
    chats = [s for s in finished if s.name == f"chat {MODEL}"]
    assert len(servers) == 2
    assert len(chats) == 2
    for server, chat in zip(servers, chats, strict=True):
        # The caller's trace continues through the gateway to the upstream call.
        assert format(server.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
        assert chat.parent is not None
        assert chat.parent.span_id == server.context.span_id
        attrs: dict[str, Any] = dict(chat.attributes or {})
        assert attrs["gen_ai.provider.name"] == "deepseek"
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.request.model"] == MODEL
        assert attrs["gen_ai.response.model"]
        assert attrs["gen_ai.usage.input_tokens"] > 0
        assert attrs["gen_ai.usage.output_tokens"] > 0
        assert attrs["server.address"] == "127.0.0.1"
        assert (server.attributes or {})["http.response.status_code"] == 200
    assert dict(chats[1].attributes or {})["gen_ai.request.stream"] is True
    assert "gen_ai.response.time_to_first_chunk" in dict(chats[1].attributes or {})
    text = _attributes(list(finished))
    for leak in (SECRET, GATEWAY_KEY, "Bearer"):
        assert leak not in text


def test_an_image_for_a_blind_model_is_seen_in_vision_attempt_spans(
        spans: InMemorySpanExporter) -> None:
    image = "data:image/png;base64," + base64.b64encode(RECEIPT.read_bytes()).decode()
    with LoopbackUpstream() as upstream, serve_in_process(
            {"base_url": upstream.base_url, "model": MODEL}) as gateway:
        answer = gateway.http.post("/v1/chat/completions", json={"model": MODEL, "messages": [
            {"role": "user", "content": [{"type": "text", "text": SECRET},
                                         {"type": "image_url", "image_url": {"url": image}}]}]})
        assert answer.status_code == 200, answer.text
    finished = spans.get_finished_spans()
    (server,) = [s for s in finished if s.name == "POST /v1/chat/completions"]
    (call,) = [s for s in finished if s.name == "vision.call deepseek"]
    assert call.context.trace_id == server.context.trace_id
    attrs = dict(call.attributes or {})
    assert attrs["deepseek_eyes.vision.route"] == "deepseek"
    assert attrs["gen_ai.request.model"]
    assert attrs["gen_ai.usage.input_tokens"] > 0
    # A chat the upstream refused (a text model sent pixels, while the gateway learns
    # which model sees) is a failed span with our code, never the upstream's message.
    refused = [s for s in finished if (s.attributes or {}).get("error.type")]
    assert all(dict(s.attributes or {})["error.type"] in ERROR_CODES for s in refused)
    text = _attributes(list(finished))
    for leak in (SECRET, "base64", "image_url"):
        assert leak not in text


@pytest.mark.anyio
async def test_an_mcp_call_is_a_client_span_whose_context_travels_in_meta(
        spans: InMemorySpanExporter, tmp_path: Path) -> None:
    cfg = McpSettings.model_validate({"servers": [{
        "id": "raw", "transport": "stdio", "command": sys.executable,
        "args": [str(RAW_SERVER), "meta"], "protocol": "legacy", "allow": {"tools": ["t*"]},
        "call_timeout": 60, "connect_timeout": 60}]})
    host = McpHost(McpManager(cfg, log_dir=tmp_path / "logs"), blobs=BlobStore(tmp_path / "b"),
                   artifacts=tmp_path / "a", audit=McpAudit(None))
    await host.manager.start(wait=30)
    try:
        with telemetry.span("turn"):
            result = await host.call_tool("mcp__raw__tok", {"secret": SECRET})
        protocol = host.manager.servers["raw"].protocol
    finally:
        await host.manager.stop()
    meta = json.loads(result.preview)
    finished = spans.get_finished_spans()
    (call,) = [s for s in finished if s.name == "tools/call tok"]
    attrs = dict(call.attributes or {})
    assert attrs["mcp.method.name"] == "tools/call"
    assert attrs["gen_ai.tool.name"] == "tok"
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["network.transport"] == "pipe"
    # The wire, per the MCP conventions: the id the server saw, the negotiated revision;
    # no session id over stdio (only Streamable HTTP has one).
    assert attrs["jsonrpc.request.id"] == str(meta["request_id"])
    assert protocol is not None
    assert attrs["mcp.protocol.version"] == protocol
    assert "mcp.session.id" not in attrs
    trace_id = format(call.context.trace_id, "032x")
    span_id = format(call.context.span_id, "016x")
    assert meta["traceparent"].startswith(f"00-{trace_id}-{span_id}-")  # then its flags
    assert SECRET not in _attributes(list(finished))


def test_meta_is_none_when_no_span_is_current(spans: InMemorySpanExporter) -> None:
    assert telemetry.trace_meta() is None
    with telemetry.span("outer"):
        meta = telemetry.trace_meta()
    assert meta is not None
    assert set(meta) == {"traceparent"}
    assert httpx.Headers(meta)["traceparent"].startswith("00-")


@pytest.mark.parametrize("endpoint", [
    "http://robot:hunter2pass@collector:4318/v1/traces",
    "http://collector:4318/v1/traces?token=hunter2pass",
    "collector:4318",
])
def test_an_endpoint_with_credentials_or_no_scheme_is_refused_without_echoing_it(
        endpoint: str) -> None:
    with pytest.raises(ValidationError) as refused:
        TelemetrySettings(endpoint=endpoint)
    assert "hunter2pass" not in str(format_validation_errors(refused.value))
    assert TelemetrySettings(endpoint="https://collector:4318/v1/traces").endpoint
