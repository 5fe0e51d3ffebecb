"""The HTTP server on a real uvicorn over loopback, driven by the real MCP SDK client and
plain HTTP: protocol revisions, the security layer, the console API and SSE isolation."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from deepseek_eyes.errors import TerminalError
from deepseek_eyes.terminal.receipts.chain import verify_receipt
from deepseek_eyes.terminal.transport.security import check_token_strength
from terminal.support import Running

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_mcp_sdk_client_over_http(running: Running, mode: str) -> None:
    async with (
        httpx2.AsyncClient(headers=running.headers(), timeout=30) as http_client,
        Client(streamable_http_client(running.url + "/mcp", http_client=http_client),
               mode=mode) as client,
    ):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["terminal_plan"].annotations.read_only_hint is True
        assert tools["terminal_execute"].annotations.read_only_hint is False
        assert tools["terminal_execute"].annotations.destructive_hint is True
        plan = (await client.call_tool("terminal_plan", {"argv": ["cat", "a.txt"]}))
        assert plan.structured_content is not None
        ids = {k: plan.structured_content[k] for k in ("session_id", "plan_id")}
        result = await client.call_tool("terminal_execute", ids)
        assert not result.is_error
        receipt = result.structured_content
        assert receipt is not None
        assert receipt["stdout"]["text"] == "alpha\n"
        verify_receipt(receipt, running.keyring)
        refused = await client.call_tool("terminal_plan", {"command": "cat a.txt | sh"})
        assert refused.structured_content["state"] == "refused"  # type: ignore[index]
        bad = await client.call_tool("terminal_execute", {
            "session_id": refused.structured_content["session_id"],  # type: ignore[index]
            "plan_id": refused.structured_content["plan_id"],  # type: ignore[index]
        })
        assert bad.is_error
        assert "TERMINAL_POLICY_BLOCKED" in bad.content[0].text  # type: ignore[union-attr]
        prompts = await client.list_prompts()
        assert [p.name for p in prompts.prompts] == ["terminal_workflow"]
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        assert "terminal://policy" in resources


PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def _reached_mcp(response: httpx.Response) -> bool:
    """Past the security layer: the SDK's own answer (a ping outside a session is its 400)."""
    return response.status_code == 400 and response.json().get("jsonrpc") == "2.0"


async def test_401_without_or_with_a_wrong_token(running: Running, http: httpx.AsyncClient) -> None:
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": running.token}):
        response = await http.post("/mcp", json=PING, headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.json()["error"]["code"] == "TERMINAL_UNAUTHORIZED"
        assert running.token not in response.text
    assert _reached_mcp(await http.post("/mcp", json=PING, headers=running.headers()))
    ok = await http.get("/api/info", headers=running.console_headers())
    assert ok.status_code == 200
    assert ok.json()["mode"] == "confirm"


async def test_403_and_421_for_foreign_origin_and_host(
    running: Running, http: httpx.AsyncClient
) -> None:
    for origin in ("http://evil.example", "null", "http://127.0.0.1.evil.example:80"):
        response = await http.get("/api/info", headers=running.console_headers(origin=origin))
        assert response.status_code == 403, origin
        assert response.json()["error"]["code"] == "TERMINAL_FORBIDDEN"
    same = await http.get("/api/info", headers=running.console_headers(origin=running.url))
    assert same.status_code == 200
    rebinding = await http.get("/api/info", headers=running.console_headers(host="evil.example:80"))
    assert rebinding.status_code == 421


@pytest.mark.parametrize("running", [{"rate_limit_per_minute": 60}], indirect=True)
async def test_rate_limit(running: Running, http: httpx.AsyncClient) -> None:
    statuses = [(await http.get("/api/info", headers=running.console_headers())).status_code
                for _ in range(12)]
    assert statuses[:10] == [200] * 10
    assert statuses[-1] == 429
    limited = await http.get("/api/info", headers=running.console_headers())
    assert int(limited.headers["retry-after"]) >= 1


@pytest.mark.parametrize("running", [{"rate_limit_per_minute": 60}], indirect=True)
async def test_an_unauthenticated_flood_does_not_starve_the_token_holder(
    running: Running, http: httpx.AsyncClient
) -> None:
    """Same address, no or wrong token: the flood exhausts its own bucket only."""
    flood = [(await http.get("/api/info", headers=headers)).status_code
             for headers in [{}, {"authorization": "Bearer wrong"}] * 15]
    assert flood[:10] == [401] * 10
    assert flood[-1] == 429
    limited = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert limited.status_code == 429
    assert int(limited.headers["retry-after"]) >= 1
    for _ in range(5):
        ok = await http.get("/api/info", headers=running.console_headers())
        assert ok.status_code == 200
    static = await http.get("/console/")  # unauthenticated too: the flood's bucket
    assert static.status_code == 429


async def test_rate_limit_buckets_never_hold_the_token() -> None:
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from deepseek_eyes.terminal.transport.security import RateLimiter, SecurityMiddleware

    class Recording(RateLimiter):
        def __init__(self) -> None:
            super().__init__(600)
            self.keys: list[str] = []

        def allow(self, client: str) -> float:
            self.keys.append(client)
            return super().allow(client)

    async def ok(_: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    token = secrets.token_urlsafe(32)
    by_token, by_address = Recording(), Recording()
    app = SecurityMiddleware(Starlette(routes=[Route("/x", ok)]), token=token,
                             allowed_hosts=["testserver"], allowed_origins=[],
                             limiter=by_token, anonymous_limiter=by_address,
                             max_body_bytes=1024)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        assert (await client.get("/x", headers={"authorization": f"Bearer {token}"})).text == "ok"
        assert (await client.get("/x", headers={"authorization": "Bearer no"})).status_code == 401
    assert len(by_token.keys) == 1
    assert by_token.keys[0].startswith("token:")
    assert token not in by_token.keys[0]
    assert by_address.keys == ["ip:127.0.0.1"]


@pytest.mark.parametrize("running", [{"max_body_bytes": 4096}], indirect=True)
async def test_bounded_bodies(running: Running, http: httpx.AsyncClient) -> None:
    big = json.dumps({"argv": ["echo", "x" * 10_000]})
    sid = (await http.post("/api/sessions", headers=running.console_headers())).json()["session_id"]
    response = await http.post(f"/api/sessions/{sid}/plans", content=big,
                               headers=running.console_headers())
    assert response.status_code == 413

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"x" * 1000

    streamed = await http.post(f"/api/sessions/{sid}/plans", content=chunks(),
                               headers=running.console_headers())
    assert streamed.status_code == 413


async def test_security_headers_everywhere(running: Running, http: httpx.AsyncClient) -> None:
    for response in (await http.get("/console/"), await http.get("/api/info"),
                     await http.get("/api/info", headers=running.console_headers())):
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert response.headers["cache-control"] == "no-store"
    page = await http.get("/console/")
    assert page.status_code == 200
    assert "<script src=\"console.js\"" in page.text
    assert "<script>" not in page.text
    assert "http" not in page.text.split("<body>")[1]  # no CDN or remote asset


async def _read_until_finished(
    http: httpx.AsyncClient, running: Running, session_id: str, ready: asyncio.Event,
) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    async with http.stream("GET", f"/api/sessions/{session_id}/events",
                           headers=running.console_headers()) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        ready.set()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                seen.append(event)
                if event["type"] == "finished":
                    return seen
    return seen


async def test_sse_streams_are_isolated_between_sessions(
    running: Running, http: httpx.AsyncClient
) -> None:
    a = (await http.post("/api/sessions", headers=running.console_headers())).json()["session_id"]
    b = (await http.post("/api/sessions", headers=running.console_headers())).json()["session_id"]
    ready_a, ready_b = asyncio.Event(), asyncio.Event()
    async with asyncio.timeout(60):
        stream_a = asyncio.create_task(_read_until_finished(http, running, a, ready_a))
        stream_b = asyncio.create_task(_read_until_finished(http, running, b, ready_b))
        await ready_a.wait()
        await ready_b.wait()
        for sid, word in ((b, "bravo-output"), (a, "alpha-output")):
            plan = (await http.post(f"/api/sessions/{sid}/plans", headers=running.console_headers(),
                                    json={"argv": ["echo", word]})).json()
            started = await http.post(
                f"/api/sessions/{sid}/plans/{plan['plan_id']}/execute",
                headers=running.console_headers())
            assert started.json()["state"] == "running"
            if sid == b:
                await stream_b
        seen_a, seen_b = await stream_a, await stream_b
    assert {e["session_id"] for e in seen_a} == {a}
    assert {e["session_id"] for e in seen_b} == {b}
    output_a = "".join(e["data"] for e in seen_a if e["type"] == "output")
    assert output_a == "alpha-output\n"
    assert "bravo" not in json.dumps(seen_a)
    finished = seen_a[-1]
    receipt = (await http.get(f"/api/receipts/{finished['receipt_id']}",
                              headers=running.console_headers())).json()
    verify_receipt(receipt, running.keyring)
    shared = (await http.get(f"/api/receipts/{finished['receipt_id']}/share",
                             headers=running.console_headers())).json()
    assert shared["sharing_redacted"] is True
    assert "alpha-output" not in json.dumps(shared)


async def test_console_approval_flow_over_the_api(
    running: Running, http: httpx.AsyncClient
) -> None:
    sid = (await http.post("/api/sessions", headers=running.console_headers())).json()["session_id"]
    plan = (await http.post(f"/api/sessions/{sid}/plans", headers=running.console_headers(),
                            json={"argv": ["touch", "made.txt"]})).json()
    assert plan["decision"]["requires_approval"]
    early = await http.post(f"/api/sessions/{sid}/plans/{plan['plan_id']}/execute",
                            headers=running.console_headers())
    assert early.status_code == 409
    assert early.json()["error"]["code"] == "TERMINAL_APPROVAL_REQUIRED"
    approved = await http.post(f"/api/sessions/{sid}/plans/{plan['plan_id']}/approve",
                               headers=running.console_headers())
    assert approved.json()["approval"]["via"] == "console"
    missing = await http.post(f"/api/sessions/{sid}/plans/nope/approve",
                              headers=running.console_headers())
    assert missing.status_code == 404



async def test_an_unknown_session_action_is_refused_not_taken_for_cancel(
    running: Running, http: httpx.AsyncClient
) -> None:
    sid = (await http.post("/api/sessions", headers=running.console_headers())).json()["session_id"]
    typo = await http.post(f"/api/sessions/{sid}/cancle", headers=running.console_headers())
    assert typo.status_code == 404
    assert typo.json()["error"]["code"] == "TERMINAL_NOT_FOUND"
    listed = (await http.get("/api/sessions", headers=running.console_headers())).json()
    assert sid in [s["session_id"] for s in listed["sessions"]]  # not cancelled
    plan = await http.post(f"/api/sessions/{sid}/plans", headers=running.console_headers(),
                           json={"argv": ["true"]})
    assert plan.status_code == 200, plan.text
    unknown = await http.get("/api/nope", headers=running.console_headers())
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "TERMINAL_NOT_FOUND"


@pytest.mark.parametrize(
    "token", ["a" * 100, "short", "0123456789abcdef" * 3, "correct horse battery staple " * 4]
)
def test_weak_tokens_are_refused(token: str) -> None:
    with pytest.raises(TerminalError) as err:
        check_token_strength(token)
    assert err.value.code == "TERMINAL_TOKEN_WEAK"
    assert token not in str(err.value)


def test_strong_tokens_pass() -> None:
    check_token_strength(secrets.token_urlsafe(32))
    check_token_strength(secrets.token_hex(32))
