"""The attacker is the MCP client that planned a command and wants it run without a person:
over stdio and over HTTP against real ``deepseek-eyes terminal serve`` processes, it calls
``terminal_approve`` on its own plan, then tries the console API with the MCP token it
holds. Every attempt is refused with a stable code, and the command never runs: a canary
file it would create stays absent. Then the person logs in to the console with the one-time
link the server printed (a real HTTP client: code, then cookie), approves, and the signed
receipt names that console login as the approver."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from deepseek_eyes.terminal.config import ENV_TOKEN
from terminal.support import tool_error

pytestmark = pytest.mark.anyio

EXE = str(Path(sys.executable).with_name("deepseek-eyes"))
CANARY = "canary.txt"
START_DEADLINE_S = 60


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def _stdio(workspace: Path, config: Path | None = None) -> Client:
    head = ["--config", str(config)] if config is not None else []
    params = StdioServerParameters(
        command=EXE, args=[*head, "terminal", "serve", "--stdio", "--mode", "confirm",
                           "--workspace", str(workspace)],
        env={**os.environ})
    return Client(params)


async def _plan_canary(client: Client) -> dict[str, Any]:
    planned = await client.call_tool("terminal_plan", {"argv": ["touch", CANARY]})
    plan = planned.structured_content
    assert plan is not None
    assert plan["decision"]["requires_approval"] is True
    return plan


async def _cannot_run_it_alone(client: Client, plan: dict[str, Any], workspace: Path) -> None:
    """What the client can do on its own: every way to approve or run is refused."""
    ids = {"session_id": plan["session_id"], "plan_id": plan["plan_id"]}
    refused = tool_error(await client.call_tool("terminal_approve", ids))
    assert refused["code"] == "TERMINAL_SELF_APPROVAL_REFUSED"
    assert refused["details"]["approvals"] == "person"
    blocked = tool_error(await client.call_tool("terminal_execute", ids))
    assert blocked["code"] == "TERMINAL_APPROVAL_REQUIRED"
    ran = await client.call_tool("terminal_run", {"argv": ["touch", CANARY]})
    assert ran.structured_content is not None
    assert ran.structured_content["executed"] is False
    status = await client.call_tool("terminal_session_status",
                                    {"session_id": plan["session_id"]})
    assert status.structured_content is not None
    states = {p["plan_id"]: p["state"] for p in status.structured_content["plans"]}
    assert states[plan["plan_id"]] == "planned"
    assert not (workspace / CANARY).exists()


async def test_over_stdio_a_client_cannot_approve_its_own_plan(workspace: Path) -> None:
    async with _stdio(workspace) as client:
        plan = await _plan_canary(client)
        await _cannot_run_it_alone(client, plan, workspace)
    assert not (workspace / CANARY).exists()


async def test_self_approval_is_a_setting_named_for_what_it_does(
    workspace: Path, tmp_path: Path
) -> None:
    config = tmp_path / "eyes.toml"
    config.write_text('[terminal]\napprovals = "mcp-client"\n', encoding="utf-8")
    async with _stdio(workspace, config) as client:
        plan = await _plan_canary(client)
        ids = {"session_id": plan["session_id"], "plan_id": plan["plan_id"]}
        approved = await client.call_tool("terminal_approve", ids)
        assert not approved.is_error, approved
        receipt = (await client.call_tool("terminal_execute", ids)).structured_content
    assert receipt is not None
    assert receipt["approval"] == {"approved": True, "via": "client", "by": "mcp-stdio",
                                   "at": receipt["approval"]["at"], "required": True}
    assert (workspace / CANARY).exists()


@pytest.mark.parametrize(("value", "refused"), [("client", True), ("console", False)])
def test_the_old_values_are_refused_or_read_as_a_person(
    tmp_path: Path, value: str, refused: bool
) -> None:
    config = tmp_path / "eyes.toml"
    config.write_text(f'[terminal]\napprovals = "{value}"\n', encoding="utf-8")
    done = subprocess.run(  # noqa: S603 - our own command
        [EXE, "--config", str(config), "config", "check"], capture_output=True,
        text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)
    if refused:
        assert done.returncode != 0
        assert 'approvals = "client" is no longer accepted' in done.stdout + done.stderr
        assert "mcp-client" in done.stdout + done.stderr
    else:
        assert done.returncode == 0, done.stdout + done.stderr


# -- over HTTP, a real server process ----------------------------------------------------------


@dataclass
class Served:
    mcp: str
    console: str
    first_login: str
    token: str
    stderr: queue.Queue[str]

    def next_login(self) -> str:
        """The next one-time link the server printed (a JSON line on standard error)."""
        while True:
            line = self.stderr.get(timeout=30)
            with contextlib.suppress(ValueError):
                link = json.loads(line).get("console_login")
                if link:
                    return str(link)


@pytest.fixture
def served(workspace: Path) -> Iterator[Served]:
    token = secrets.token_urlsafe(32)
    process = subprocess.Popen(  # noqa: S603 - our own command
        [EXE, "terminal", "serve", "--http", "--port", "0", "--json", "--mode", "confirm",
         "--workspace", str(workspace)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, ENV_TOKEN: token})
    lines: queue.Queue[str] = queue.Queue()
    errors: queue.Queue[str] = queue.Queue()
    readers = [threading.Thread(target=lambda: [lines.put(x) for x in process.stdout or []],
                                daemon=True),
               threading.Thread(target=lambda: [errors.put(x) for x in process.stderr or []],
                                daemon=True)]
    for reader in readers:
        reader.start()
    try:
        try:
            described = json.loads(lines.get(timeout=START_DEADLINE_S))
        except queue.Empty:
            pytest.fail("the terminal server did not start")
        where = described["listening"]
        assert described["approvals"] == "person"
        yield Served(where["url"], where["console"].rstrip("/").removesuffix("/console"),
                     where["console_login"], token, errors)
    finally:
        process.terminate()
        process.wait(timeout=30)
        for reader in readers:
            reader.join(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@contextlib.asynccontextmanager
async def _http_mcp(served: Served) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {served.token}"},
                           timeout=30) as http_client,
        Client(streamable_http_client(served.mcp, http_client=http_client)) as client,
    ):
        yield client


def _code(link: str) -> str:
    return link.split("#login=", 1)[1]


async def test_over_http_neither_the_tool_nor_the_console_api_lets_the_client_approve(
    served: Served, workspace: Path
) -> None:
    bearer = {"authorization": f"Bearer {served.token}", "content-type": "application/json"}
    async with _http_mcp(served) as client, httpx.AsyncClient(
            base_url=served.console, timeout=30) as attacker:
        plan = await _plan_canary(client)
        await _cannot_run_it_alone(client, plan, workspace)
        approve = f"/api/sessions/{plan['session_id']}/plans/{plan['plan_id']}/approve"
        # The MCP token on the console API: refused at the door, for every route.
        for method, path in (("POST", approve), ("GET", "/api/sessions"), ("GET", "/api/info"),
                             ("POST", f"/api/sessions/{plan['session_id']}/plans"),
                             ("GET", "/api/whoami")):
            response = await attacker.request(method, path, headers=bearer, json={})
            assert response.status_code == 401, (method, path)
            assert response.json()["error"]["code"] == "TERMINAL_CONSOLE_LOGIN_REQUIRED"
        # Logging in needs the code the server printed for the person, not the token.
        for guess in ({}, {"code": served.token}, {"code": ""}, {"code": "x" * 32}):
            response = await attacker.post("/api/login", headers=bearer, json=guess)
            assert response.status_code in (400, 401), guess
            assert "set-cookie" not in response.headers
        # A forged cookie is no login either.
        forged = await attacker.post(approve, headers={
            "cookie": f"deepseek_eyes_console={served.token}",
            "content-type": "application/json"})
        assert forged.status_code == 401
        await _cannot_run_it_alone(client, plan, workspace)  # still planned, never ran
    assert not (workspace / CANARY).exists()


async def test_a_person_logs_in_once_and_the_receipt_names_the_login(
    served: Served, workspace: Path
) -> None:
    json_type = {"content-type": "application/json"}
    async with _http_mcp(served) as client, httpx.AsyncClient(
            base_url=served.console, timeout=30) as person:
        plan = await _plan_canary(client)
        login = await person.post("/api/login", json={"code": _code(served.first_login)})
        assert login.status_code == 200, login.text
        credential = login.json()["credential"]
        assert credential.startswith("console-")
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        assert "Path=/api/" in cookie
        assert (await person.get("/api/whoami")).json() == {"credential": credential}
        # The code was spent: a second use is refused, and a fresh link was printed.
        async with httpx.AsyncClient(base_url=served.console, timeout=30) as other:
            again = await other.post("/api/login", json={"code": _code(served.first_login)})
            assert again.status_code == 401
            assert again.json()["error"]["code"] == "TERMINAL_CONSOLE_LOGIN_INVALID"
            second = await other.post("/api/login",
                                      json={"code": _code(served.next_login())})
            assert second.status_code == 200
            assert second.json()["credential"] != credential
        # The console cookie opens the console only: /mcp still wants the token.
        mcp = await person.post("/mcp", headers=json_type,
                                json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert mcp.status_code == 401
        # Another loopback origin (a page another local server serves) cannot use it, and a
        # body a page could send without a preflight is refused.
        approve = f"/api/sessions/{plan['session_id']}/plans/{plan['plan_id']}/approve"
        port = served.console.rsplit(":", 1)[1]
        other_origin = {**json_type, "origin": f"http://127.0.0.1:{int(port) + 1}"}
        assert (await person.post(approve, headers=other_origin)).status_code == 403
        plain = {"content-type": "text/plain"}
        assert (await person.post(approve, headers=plain, content=b"")).status_code == 415
        assert not (workspace / CANARY).exists()

        approved = await person.post(approve, headers=json_type)
        assert approved.status_code == 200, approved.text
        assert approved.json()["approval"]["by"] == credential
        ids = {"session_id": plan["session_id"], "plan_id": plan["plan_id"]}
        receipt = (await client.call_tool("terminal_execute", ids)).structured_content
        assert receipt is not None
        assert receipt["status"] == "completed"
        assert receipt["approval"]["via"] == "console"
        assert receipt["approval"]["by"] == credential
        assert (workspace / CANARY).exists()
        # Logging out ends the credential.
        out = await person.post("/api/logout", headers=json_type)
        assert out.json() == {"logged_out": True}
        assert (await person.get("/api/whoami")).status_code == 401
