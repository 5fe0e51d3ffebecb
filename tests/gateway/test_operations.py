"""Operating the gateway: ``/readyz`` (public, names and codes only) and ``/metrics`` (behind
the key, read from the store), on one in-process gateway over a loopback upstream."""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.gateway.app import GATEWAY_REFUSALS
from deepseek_eyes.gateway.metrics import (
    MAX_LABEL_VALUES,
    CallLatencies,
    SqliteCounts,
    StoreCollector,
)
from deepseek_eyes.gateway.readiness import DatabaseCheck, UpstreamCheck
from deepseek_eyes.home import DataHome
from deepseek_eyes.llm.client import ChatClient
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.serving.security import RateLimiter, SecurityMiddleware
from deepseek_eyes.telemetry import latency
from deepseek_eyes.terminal.policy.paths import Workspace
from deepseek_eyes.terminal.receipts.keyring import Keyring
from deepseek_eyes.terminal.service import ServiceConfig, TerminalService
from deepseek_eyes.usage import ProviderUsage, UsageCategory
from deepseek_eyes.vision.routing.attempts import AttemptLog
from helpers import GATEWAY_KEY
from inprocess_gateway import InProcessGateway, serve_in_process
from runtime.upstream import LoopbackUpstream

MODEL = "deepseek-v4-pro"
#: The store's engine (tests/store/test_on_postgresql.py runs this file on PostgreSQL).
ENGINE = os.environ.get("DEEPSEEK_EYES_TEST_DATABASE", "sqlite")
AUTH = {"Authorization": f"Bearer {GATEWAY_KEY}"}


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def gateway(upstream: LoopbackUpstream, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[InProcessGateway]:
    home = tmp_path_factory.mktemp("ops")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEEPSEEK_EYES_HOME", str(home))
        # A verdict is never reused here, so each probe sees the upstream as it is now.
        with serve_in_process({"base_url": upstream.base_url, "model": MODEL},
                              gateway={"readiness_upstream_ttl": 0}, key=GATEWAY_KEY) as door:
            yield door


def test_readyz_is_public_and_names_each_check(gateway: InProcessGateway) -> None:
    answer = gateway.http.get("/readyz")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "ready"
    assert [(c["name"], c["status"], c.get("backend")) for c in body["checks"]] == [
        ("database", "ok", ENGINE), ("upstream", "ok", None), ("shared_state", "ok", "local")]
    assert answer.headers["cache-control"] == "no-store"
    for leak in ("127.0.0.1", str(gateway.runtime.home.root), "http"):
        assert leak not in answer.text


def test_readyz_fails_with_the_upstreams_code_when_it_refuses_the_key(
        gateway: InProcessGateway, upstream: LoopbackUpstream) -> None:
    try:
        upstream.fail_models(401)
        answer = gateway.http.get("/readyz")
        assert answer.status_code == 503
        body = answer.json()
        assert body["code"] == "GATEWAY_UPSTREAM_KEY_REFUSED"
        failed = [c for c in body["checks"] if c["status"] == "failed"]
        assert [(c["name"], c["code"]) for c in failed] == [
            ("upstream", "GATEWAY_UPSTREAM_KEY_REFUSED")]
        # A busy upstream is busy for every replica: still ready.
        upstream.fail_models(503)
        assert gateway.http.get("/readyz").status_code == 200
    finally:
        upstream.fail_models(None)
    assert gateway.http.get("/readyz").status_code == 200


@pytest.mark.anyio
async def test_an_upstream_nobody_listens_on_is_unavailable() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = ChatClient(f"http://127.0.0.1:{port}/v1")
    try:
        with pytest.raises(DeepSeekEyesError) as caught:
            await UpstreamCheck(client, timeout=5)()
    finally:
        await client.aclose()
    assert caught.value.code == "LLM_UNAVAILABLE"


def test_a_nearly_full_file_system_is_not_ready(gateway: InProcessGateway) -> None:
    check = DatabaseCheck(gateway.runtime.home, min_free_bytes=1 << 62)
    with pytest.raises(DeepSeekEyesError) as caught:
        check.check()
    assert caught.value.code == "STORE_FULL"
    DatabaseCheck(gateway.runtime.home).check()  # the real floor passes here


def _samples(text: str, name: str) -> dict[str, float]:
    """``{labels: value}`` of one metric in the exposition text."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(\{{.*\}})? (\S+)", line)
        if match:
            found[match.group(1) or ""] = float(match.group(2))
    return found


def test_metrics_need_the_key_and_hold_no_secret_content_or_session(
        gateway: InProcessGateway) -> None:
    assert gateway.http.get("/metrics").status_code == 401
    secret_text = "the launch code is 0000-tangerine"
    answer = gateway.http.post("/v1/chat/completions", headers=AUTH, json={
        "model": MODEL, "messages": [{"role": "user", "content": secret_text}]})
    assert answer.status_code == 200, answer.text
    session = answer.headers["x-deepseekeyes-session"]
    gateway.http.get(f"/v1/models/{'x' * 40}", headers=AUTH)  # a path with data in it
    scraped = gateway.http.get("/metrics", headers=AUTH)
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = scraped.text
    for secret in (GATEWAY_KEY, secret_text, session, "x" * 40):
        assert secret not in text
    requests = _samples(text, "deepseek_eyes_http_requests_total")
    assert requests['{method="POST",route="/v1/chat/completions",status="200"}'] >= 1
    assert requests['{method="GET",route="/v1/models/{model_id:path}",status="404"}'] >= 1
    assert requests['{method="GET",route="/metrics",status="401"}'] >= 1
    durations = _samples(text, "deepseek_eyes_http_request_duration_seconds_count")
    assert durations['{method="POST",route="/v1/chat/completions"}'] >= 1
    tokens = _samples(text, "deepseek_eyes_upstream_tokens_total")
    assert tokens['{category="final",kind="completion"}'] > 0
    assert _samples(text, "deepseek_eyes_upstream_calls_total")['{category="final"}'] >= 1
    assert _samples(text, "deepseek_eyes_audit_chain_length")[""] > 0
    # The store's totals are the ledger's: the same as `usage` reads.
    summary = gateway.runtime.home.usage.summary()
    assert tokens['{category="final",kind="completion"}'] == \
        summary["exact"]["final"]["completion_tokens"]  # type: ignore[index]


def test_metrics_may_be_open_to_loopback_only() -> None:
    async def hello(_request: Request) -> PlainTextResponse:
        return PlainTextResponse("metrics")

    app = SecurityMiddleware(
        Starlette(routes=[Route("/metrics", hello)]), token=GATEWAY_KEY,
        allowed_hosts=["testserver"], allowed_origins=[], limiter=RateLimiter(1000),
        max_body_bytes=1024, codes=GATEWAY_REFUSALS, loopback_paths=frozenset({"/metrics"}))

    def status(client: str, path: str = "/metrics") -> int:
        transport = httpx.ASGITransport(app, client=(client, 40000))

        async def get() -> int:
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
                return (await c.get(path)).status_code

        return anyio.run(get)

    assert status("127.0.0.1") == 200
    assert status("::1") == 200
    assert status("::ffff:127.0.0.1") == 200
    assert status("192.0.2.7") == 401
    assert status("127.0.0.1", "/metricsx") == 401  # exact paths only


def test_what_waits_for_a_person_is_counted_by_kind(gateway: InProcessGateway) -> None:
    """Terminal plans and MCP ask-first calls, by kind, each only where its queue runs (this
    gateway runs neither: no sample at all, rather than a zero that claims a queue)."""
    scraped = gateway.http.get("/metrics", headers=AUTH)
    assert scraped.status_code == 200
    assert gateway.runtime.terminal is None
    assert gateway.runtime.mcp_host is None
    assert _samples(scraped.text, "deepseek_eyes_approvals_waiting") == {}
    collector = StoreCollector(SqliteCounts(gateway.runtime.home.db))
    collector.waiting = {"terminal": 2, "mcp": 1}
    gauge = [f for f in collector.collect() if f.name == "deepseek_eyes_approvals_waiting"]
    assert [(s.labels, s.value) for s in gauge[0].samples] == [
        ({"kind": "mcp"}, 1), ({"kind": "terminal"}, 2)]


def test_store_totals_are_read_incrementally_and_labels_are_capped(tmp_path: Path) -> None:
    home = DataHome(tmp_path / "data")
    try:
        collector = StoreCollector(SqliteCounts(home.db))
        home.usage.record_exact(UsageCategory.VISION, ProviderUsage(prompt_tokens=7,
                                                                    completion_tokens=2))
        home.usage.record_estimate(UsageCategory.BRIDGE_INPUT, 11)
        attempts = AttemptLog(home.db)
        op = attempts.operation("see")
        op.record("call", "ok", route="llm/one")
        op.record("call", "fail", route="llm/one", code="VISION_ROUTE_TIMEOUT")
        McpAudit(home.audit).record(server="files", tool="read", kind="tool", risk="read",
                                    status="ok", started=time.perf_counter(),
                                    arguments_sha256=None)

        def values() -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
            out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
            for family in collector.collect():
                for sample in family.samples:
                    out.setdefault(sample.name, {})[
                        tuple(sorted(sample.labels.items()))] = sample.value
            return out

        first = values()
        tokens = first["deepseek_eyes_upstream_tokens_total"]
        assert tokens[(("category", "vision"), ("kind", "prompt"))] == 7
        assert tokens[(("category", "bridge_input"), ("kind", "estimated"))] == 11
        vision = first["deepseek_eyes_vision_attempts_total"]
        assert vision[(("outcome", "fail"), ("phase", "call"), ("route", "llm/one"))] == 1
        mcp = first["deepseek_eyes_mcp_calls_total"]
        assert mcp == {(("server", "files"), ("status", "ok")): 1}
        # New rows are added to what was read; old ones are not read again.
        home.usage.record_exact(UsageCategory.VISION, ProviderUsage(prompt_tokens=3))
        for index in range(MAX_LABEL_VALUES + 20):
            op.record("call", "ok", route=f"route-{index}")
        second = values()
        assert second["deepseek_eyes_upstream_tokens_total"][
            (("category", "vision"), ("kind", "prompt"))] == 10
        routes = {dict(labels)["route"] for labels in
                  second["deepseek_eyes_vision_attempts_total"]}
        assert len(routes) == MAX_LABEL_VALUES + 1  # the cap, and "other"
        assert "other" in routes
        assert second["deepseek_eyes_vision_attempts_total"][
            (("outcome", "ok"), ("phase", "call"), ("route", "other"))] == 21
    finally:
        home.close()


def test_a_real_waiting_plan_is_counted_and_calls_are_timed(
        gateway: InProcessGateway, tmp_path: Path) -> None:
    """A terminal plan that waits for a person (a real service, confirm mode) shows in
    ``deepseek_eyes_approvals_waiting`` at the next scrape, and leaves it once approved;
    the upstream chat call of a turn lands in the upstream latency histogram, and the
    vision and MCP histograms are declared (their calls are timed where they end:
    tests/vision, tests/mcp_host)."""
    workspace = tmp_path / "work"
    workspace.mkdir()
    service = TerminalService(ServiceConfig(workspace=Workspace.of([workspace]), mode="confirm"),
                              Keyring([b"k" * 32]), tmp_path / "receipts")
    runtime = gateway.runtime
    runtime.terminal = service
    try:
        plan = service.plan(argv=["touch", "made-by-the-plan.txt"])
        answer = gateway.http.post("/v1/chat/completions", headers=AUTH, json={
            "model": MODEL, "messages": [{"role": "user", "content": "time me"}]})
        assert answer.status_code == 200, answer.text
        text = gateway.http.get("/metrics", headers=AUTH).text
        assert _samples(text, "deepseek_eyes_approvals_waiting") == {'{kind="terminal"}': 1}
        upstream = _samples(text, "deepseek_eyes_upstream_call_duration_seconds_count")
        assert upstream[f'{{model="{MODEL}",outcome="ok"}}'] >= 1
        for name in ("vision_attempt", "mcp_call"):
            assert f"# TYPE deepseek_eyes_{name}_duration_seconds histogram" in text
        service.approve(plan["session_id"], plan["plan_id"], via="console", by="tester")
        text = gateway.http.get("/metrics", headers=AUTH).text
        assert _samples(text, "deepseek_eyes_approvals_waiting") == {'{kind="terminal"}': 0}
    finally:
        runtime.terminal = None
        anyio.run(service.aclose)


def test_call_latencies_are_bucketed_by_bounded_labels() -> None:
    """What the model client, the vision guard and the MCP audit observe reaches every
    live gateway registry: names capped like every data-driven label, no content."""
    registry = CollectorRegistry()
    calls = CallLatencies(registry)  # held: a registry nobody holds stops listening
    latency.observe("vision", "llm/one", "ok", 0.2)
    latency.observe("vision", "llm/one", "fail", 3.0)
    latency.observe("mcp", "files", "tool-error", 0.004)
    for index in range(MAX_LABEL_VALUES + 5):
        latency.observe("upstream", f"model-{index}", "ok", 0.01)
    text = generate_latest(registry).decode()
    vision = _samples(text, "deepseek_eyes_vision_attempt_duration_seconds_bucket")
    assert vision['{le="0.25",outcome="ok",route="llm/one"}'] == 1
    assert vision['{le="2.5",outcome="fail",route="llm/one"}'] == 0
    assert vision['{le="5.0",outcome="fail",route="llm/one"}'] == 1
    mcp = _samples(text, "deepseek_eyes_mcp_call_duration_seconds_count")
    assert mcp == {'{outcome="tool-error",server="files"}': 1}
    upstream = _samples(text, "deepseek_eyes_upstream_call_duration_seconds_count")
    assert len(upstream) == MAX_LABEL_VALUES + 1
    assert upstream['{model="other",outcome="ok"}'] == 5
    del calls
