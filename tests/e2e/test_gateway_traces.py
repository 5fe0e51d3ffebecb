"""A real ``serve`` exports its traces over OTLP/HTTP, configured by the standard variable
alone, to a collector on loopback: a small HTTP server here that decodes each export with
the OTLP protobuf definitions (``opentelemetry-proto``), as a collector would. The batch
is flushed at SIGTERM, so the spans arrive by the time the process has exited."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from helpers import serve_gateway
from runtime.upstream import LoopbackUpstream

MODEL = "deepseek-v4-pro"
SECRET = "the orchard gate code is 5521-quince"


class Collector(ThreadingHTTPServer):
    """Receives ``POST /v1/traces`` (protobuf); keeps each span as a plain dict."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.spans: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.lock = threading.Lock()
        self.arrived = threading.Event()


class _Handler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:  # the OTLP/HTTP exporter's one request
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        found: list[dict[str, Any]] = []
        for resource in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}
            for scope in resource.scope_spans:
                found.extend({
                    "name": span.name, "service": service.get("service.name"),
                    "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                    "parent": span.parent_span_id.hex(),
                    "attributes": {a.key: _value(a.value) for a in span.attributes}}
                    for span in scope.spans)
        with self.server.lock:
            self.server.paths.append(self.path)
            self.server.spans.extend(found)
        self.server.arrived.set()
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        return


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_serve_exports_genai_spans_to_an_otlp_collector(
        tmp_path: Path, collector: Collector) -> None:
    home = tmp_path / "data"
    home.mkdir()
    config = tmp_path / "eyes.toml"
    with LoopbackUpstream() as upstream:
        config.write_text(f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\n'
                          f'model = "{MODEL}"\n[telemetry]\nservice_name = "eyes-under-test"\n',
                          encoding="utf-8")
        port = collector.server_address[1]
        env = {**os.environ, "DEEPSEEK_EYES_HOME": str(home),
               "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}
        with serve_gateway(config, env) as gateway:
            answer = httpx.post(f"{gateway.base}/chat/completions", headers=gateway.headers,
                                json={"model": MODEL, "messages": [
                                    {"role": "user", "content": SECRET}]}, timeout=60)
            assert answer.status_code == 200, answer.text
            gateway.process.send_signal(signal.SIGTERM)
            assert gateway.process.wait(timeout=30) == 0, gateway.stderr[-3000:]
            assert "Traceback" not in gateway.stderr, gateway.stderr[-3000:]
    assert collector.arrived.wait(timeout=10), "no export reached the collector"
    with collector.lock:
        spans = list(collector.spans)
        paths = list(collector.paths)
    assert set(paths) == {"/v1/traces"}
    by_name = {span["name"]: span for span in spans}
    server = by_name["POST /v1/chat/completions"]
    chat = by_name[f"chat {MODEL}"]
    assert chat["parent"] == server["span_id"]
    assert chat["trace_id"] == server["trace_id"]
    assert {span["service"] for span in spans} == {"eyes-under-test"}
    assert chat["attributes"]["gen_ai.provider.name"] == "deepseek"
    assert chat["attributes"]["gen_ai.operation.name"] == "chat"
    assert chat["attributes"]["gen_ai.request.model"] == MODEL
    assert chat["attributes"]["gen_ai.usage.output_tokens"] > 0
    assert server["attributes"]["http.response.status_code"] == 200
    assert SECRET not in repr(spans)
    assert gateway.key is not None
    assert gateway.key not in repr(spans)
