"""``deepseek-eyes serve`` running server-side tools for any OpenAI client: an MCP tool of
the real server-everything and the in-process terminal, with approvals given by a person in
the terminal console served beside the gateway. The gateway is a real process started from
a settings file; the client is the official ``openai`` package; the upstream is the loopback
DeepSeek-like server that issues tool calls (``CALL[tool]: args``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import mcp_peers
from helpers import GATEWAY_KEY, require_module, serve_gateway
from runtime.upstream import LoopbackUpstream
from services import free_port

openai = require_module("openai")


TOKEN = "lsLYSic2r8Zx9-1vw-oGelFuPfzJEZRd3NwnpoyuMxM"
START_DEADLINE_S = 60


class Served:
    def __init__(self, base: str, console: str, work: Path, config: Path,
                 env: dict[str, str], cookie: str) -> None:
        self.base = base
        self.console = console
        self.work = work
        self.config = config
        self.env = env
        self.cookie = cookie  # a person's console login, made with the printed one-time code

    def client(self) -> Any:
        return openai.OpenAI(base_url=self.base, api_key=GATEWAY_KEY, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    everything = mcp_peers.need(mcp_peers.EVERYTHING)
    node = mcp_peers.need(mcp_peers.NODE_BIN / "node")
    root = tmp_path_factory.mktemp("agent-gateway")
    work = root / "work"
    work.mkdir()
    console_port = free_port()
    with LoopbackUpstream() as upstream:
        config = root / "eyes.toml"
        config.write_text(
            f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\n'
            'model = "deepseek-v4-pro"\ntimeout = 20\n\n'
            '[runtime]\ntool_sources = ["look", "mcp", "terminal"]\napproval_timeout = 30\n\n'
            f'[terminal]\nworkspaces = ["{work}"]\nport = {console_port}\n\n'
            '[[mcp.servers]]\nid = "everything"\ntransport = "stdio"\n'
            f'command = "{node}"\nargs = ["{everything}", "stdio"]\n'
            'env = { PATH = { env = "DSE_TEST_NODE_PATH" } }\nallow = { tools = ["echo"] }\n',
            encoding="utf-8",
        )
        env = {**os.environ, "DEEPSEEK_EYES_HOME": str(root / "data"),
               "DEEPSEEK_EYES_TERMINAL_TOKEN": TOKEN,
               "DSE_TEST_NODE_PATH": mcp_peers.node_path()}
        with serve_gateway(config, env, deadline_s=START_DEADLINE_S) as gateway:
            assert gateway.wait_for_stderr("terminal console login (one use): ", 30)
            link = re.search(r"terminal console login \(one use\): (\S+)", gateway.stderr)
            assert link is not None
            assert link.group(1).startswith(f"http://127.0.0.1:{console_port}/console/#login=")
            console = f"http://127.0.0.1:{console_port}"
            with httpx.Client(base_url=console, timeout=30) as person:
                # The terminal token does not open the console; the printed code does.
                refused = person.get("/api/sessions",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
                assert refused.status_code == 401
                login = person.post("/api/login",
                                    json={"code": link.group(1).split("#login=", 1)[1]})
                assert login.status_code == 200, login.text
                cookie = login.headers["set-cookie"].split(";", 1)[0]
            yield Served(gateway.base, console, work, config, env, cookie)


def events_of(chunks: list[Any]) -> list[dict[str, Any]]:
    out = []
    for chunk in chunks:
        extra = (chunk.model_extra or {}).get("deepseekeyes") or {}
        if "event" in extra:
            out.append(extra["event"])
    return out


def test_an_mcp_tool_reaches_the_answer_whole_and_streamed(served: Served) -> None:
    api = served.client()
    try:
        ask = 'CALL[mcp__everything__echo]: {"message": "zebra"}'
        messages = [{"role": "user", "content": ask}]
        reply = api.chat.completions.create(model="deepseek-v4-pro", messages=messages)
        text = reply.choices[0].message.content or ""
        assert text.startswith("after mcp__everything__echo:")
        assert "zebra" in text
        assert reply.choices[0].finish_reason == "stop"  # the client saw no tool call
        ours = (reply.model_extra or {})["deepseekeyes"]
        assert [t["tool"] for t in ours["tools"]] == ["mcp__everything__echo"]
        chunks = list(api.chat.completions.create(
            model="deepseek-v4-pro", messages=messages, stream=True))
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert streamed == text
        kinds = [e["type"] for e in events_of(chunks)]
        assert kinds == ["tool.started", "tool.finished"]
        assert all(not (c.choices and c.choices[0].delta.tool_calls) for c in chunks)
    finally:
        api.close()


@pytest.mark.parametrize(("action", "made"), [("approve", True), ("deny", False)])
def test_a_write_waits_for_the_console(served: Served, action: str, made: bool) -> None:
    target = served.work / f"made-{action}.txt"
    api = served.client()
    console = httpx.Client(base_url=served.console, timeout=30,
                           headers={"content-type": "application/json", "cookie": served.cookie})
    try:
        call = {"argv": ["touch", target.name], "cwd": str(served.work)}
        stream = api.chat.completions.create(
            model="deepseek-v4-pro", stream=True,
            messages=[{"role": "user", "content": f"CALL[terminal_run]: {json.dumps(call)}"}])
        chunks: list[Any] = []
        decided = False
        started = time.monotonic()
        for chunk in stream:
            chunks.append(chunk)
            for event in events_of([chunk]):
                if event["type"] == "approval.wanted":
                    assert not target.exists()  # nothing ran before a person decided
                    assert "touch" in event["text"]
                    answer = console.post(f"/api/sessions/{event['session_id']}/plans/"
                                          f"{event['plan_id']}/{action}")
                    assert answer.status_code == 200, answer.text
                    assert answer.json()["approval"]["by"].startswith("console-")
                    decided = True
        assert decided
        assert time.monotonic() - started < 30  # decided by the person, not the timeout
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert target.exists() is made
        if made:
            assert '"exit_code": 0' in text
        else:
            assert "RUNTIME_APPROVAL_DENIED" in text
    finally:
        console.close()
        api.close()


def test_ask_reaches_an_mcp_tool_and_cannot_approve_without_a_terminal(served: Served) -> None:
    """The same settings from the command line: ``ask`` connects the MCP server, the model's
    call reaches it; a write it plans is not run, since a pipe cannot approve."""
    def ask(text: str) -> dict[str, Any]:
        done = subprocess.run(  # noqa: S603 - our own CLI, argv list
            [sys.executable, "-m", "deepseek_eyes", "--config", str(served.config), "ask",
             "--json", text],
            env=served.env, capture_output=True, text=True, timeout=120, check=False,
        )
        assert done.returncode == 0, done.stderr
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    echoed = ask('CALL[mcp__everything__echo]: {"message": "from-the-cli"}')
    assert echoed["answer"].startswith("after mcp__everything__echo:")
    assert "from-the-cli" in echoed["answer"]
    assert [t["tool"] for t in echoed["tools"]] == ["mcp__everything__echo"]
    target = served.work / "from-ask.txt"
    call = {"argv": ["touch", target.name], "cwd": str(served.work)}
    refused = ask(f"CALL[terminal_run]: {json.dumps(call)}")
    assert "RUNTIME_APPROVAL_UNAVAILABLE" in refused["answer"]
    assert not target.exists()
