"""The real ``deepseek-eyes terminal`` command: stdio serving with the SDK client, the
HTTP token gate, planning without running, and receipt verification."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from deepseek_eyes.terminal.config import ENV_TOKEN

pytestmark = pytest.mark.anyio

EXE = str(Path(sys.executable).with_name("deepseek-eyes"))


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own command
        [EXE, *args], capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
    )


async def test_stdio_server_with_the_sdk_client(workspace: Path) -> None:
    params = StdioServerParameters(
        command=EXE,
        args=["terminal", "serve", "--stdio", "--workspace", str(workspace),
              "--mode", "read-only"],
        env={**os.environ},
    )
    async with Client(params, mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"terminal_plan", "terminal_execute", "terminal_receipt_share"} <= names
        plan = await client.call_tool("terminal_plan", {"argv": ["cat", "a.txt"]})
        content = plan.structured_content
        assert content is not None
        receipt = await client.call_tool(
            "terminal_execute", {"session_id": content["session_id"],
                                 "plan_id": content["plan_id"]})
        assert receipt.structured_content is not None
        assert receipt.structured_content["stdout"]["text"] == "alpha\n"
        write = await client.call_tool("terminal_plan", {"argv": ["touch", "x"]})
        assert write.structured_content is not None
        assert write.structured_content["state"] == "refused"
        # stdio is one connection: plans without session_id share its default session
        assert write.structured_content["session_id"] == content["session_id"]
    log = Path(os.environ["DEEPSEEK_EYES_HOME"]) / "terminal" / "receipts" / "receipts.jsonl"
    lines = log.read_text().splitlines()
    assert len(lines) == 1
    verified = _run("terminal", "receipts", "verify", "--chain", str(log))
    assert verified.returncode == 0, verified.stderr
    assert "chain intact" in verified.stdout
    tampered = json.loads(lines[0])
    tampered["exit_code"] = 1
    bad = log.with_name("tampered.json")
    bad.write_text(json.dumps(tampered))
    refused = _run("terminal", "receipts", "verify", str(bad))
    assert refused.returncode == 1
    assert "TERMINAL_RECEIPT_INVALID" in refused.stderr


def test_http_refuses_to_start_without_a_strong_token(workspace: Path) -> None:
    args = ("terminal", "serve", "--http", "--port", "0", "--workspace", str(workspace))
    missing = _run(*args)
    assert missing.returncode == 1
    assert "TERMINAL_TOKEN_MISSING" in missing.stderr
    weak = _run(*args, env={ENV_TOKEN: "password123"})
    assert weak.returncode == 1
    assert "TERMINAL_TOKEN_WEAK" in weak.stderr
    assert "password123" not in weak.stderr


def test_plan_prints_the_decision_without_running(workspace: Path) -> None:
    done = _run("terminal", "plan", "--workspace", str(workspace), "--mode", "read-only",
                "--json", "--", "touch", "made.txt")
    assert done.returncode == 1
    plan = json.loads(done.stdout)
    assert plan["decision"]["allowed"] is False
    assert "write" in plan["decision"]["effects"]
    assert not (workspace / "made.txt").exists()
    ok = _run("terminal", "plan", "--workspace", str(workspace), "--command", "cat a.txt")
    assert ok.returncode == 0
    assert ok.stdout.startswith("allowed")


def test_keys_rotate_and_list() -> None:
    first = _run("terminal", "keys", "list")
    assert first.returncode == 0
    rotated = _run("terminal", "keys", "rotate")
    new_id = rotated.stdout.strip()
    listed = _run("terminal", "keys", "list").stdout.splitlines()
    assert listed[0] == f"{new_id}  (signs)"
    assert len(listed) == 2
    token = _run("terminal", "token").stdout.strip()
    assert len(token) >= 43
