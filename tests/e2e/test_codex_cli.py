"""Real Codex CLI against ``serve`` and the loopback DeepSeek: ``codex exec`` headless with
``--json`` in a temporary project, ``CODEX_HOME`` a scratch directory whose ``config.toml``
names the gateway as a ``wire_api = "responses"`` provider (it talks only to the gateway).

Codex's tools are client tools, so the loopback's markers make the model call them:
``CALL[exec_command]`` first, then, one round of tool results at a time,
``THEN[exec_command]`` (a sequential agent). The model is ``deepseek-v4-pro``: it thinks
throughout (Codex replays reasoning only as ``encrypted_content``; every tool-call message
must reach DeepSeek with its exact reasoning or the loopback answers DeepSeek's 400) and it
is text-only (an image attached with ``-i`` reaches it as evidence, never pixels).

The provider's key comes from an ``auth`` command (``printenv EYES_KEY``), as the README
says: Codex 0.169 asks a custom provider for its model catalog (``GET /v1/models?
client_version=…``) only then, and with the gateway's catalog it prints no
"Model metadata … not found" warning and caches what it read in ``models_cache.json``.

Codex's own sandbox cannot start here (bwrap cannot exec its helper), so it runs with
``-s danger-full-access`` inside the scratch project. Three process starts in all: the
task, the image, ``exec resume --last``. Codex is installed by ``scripts/ci-deps.sh``
(build/codex-npm); without it these tests skip locally and fail under CI=true.
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
CODEX = ROOT / "build" / "codex-npm" / "node_modules" / ".bin" / "codex"
MODEL = "deepseek-v4-pro"


@dataclass
class Run:
    events: list[dict[str, Any]]
    stderr: str

    def items(self, kind: str) -> list[dict[str, Any]]:
        return [e["item"] for e in self.events
                if e.get("type") == "item.completed" and e["item"].get("type") == kind]

    @property
    def answer(self) -> str:
        return str(self.items("agent_message")[-1]["text"])

    def metadata_warnings(self) -> list[str]:
        """Codex's "Model metadata for `X` not found" notices (an ``error`` item), if any."""
        texts = [json.dumps(e) for e in self.events] + [self.stderr]
        return [t for t in texts if "Model metadata for" in t]

    @property
    def thread_id(self) -> str:
        return str(next(e["thread_id"] for e in self.events
                        if e.get("type") == "thread.started"))


@dataclass
class Setup:
    project: Path
    codex_home: Path
    config: Path
    data: Path
    upstream: LoopbackUpstream

    def codex(self, *args: str) -> Run:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(self.codex_home.parent),
               "CODEX_HOME": str(self.codex_home), "EYES_KEY": GATEWAY_KEY}
        done = subprocess.run(  # noqa: S603 - the installed Codex CLI, argv list
            [str(CODEX), "exec", *args], cwd=self.project, env=env, capture_output=True,
            text=True, timeout=240, check=False, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
        events = [json.loads(line) for line in done.stdout.splitlines()
                  if line.startswith("{")]
        return Run(events, done.stderr)

    def sessions(self) -> list[dict[str, Any]]:
        listed = run_cli(self.config, self.data, "sessions", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        sessions: list[dict[str, Any]] = json.loads(listed.stdout)["sessions"]
        return sessions


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    if not CODEX.exists():
        _unavailable("Codex CLI is not installed (scripts/ci-deps.sh: build/codex-npm)")
    root = tmp_path_factory.mktemp("codex")
    project, codex_home = root / "project", root / "home" / ".codex"
    project.mkdir()
    codex_home.mkdir(parents=True)
    image = Image.new("RGB", (360, 120), "white")
    ImageDraw.Draw(image).text((20, 45), "INVOICE 4417", fill="black")
    image.save(project / "shot.png")
    with LoopbackUpstream() as upstream:
        config, data = root / "eyes.toml", root / "data"
        with serve_blind(root, upstream.base_url, MODEL, timeout=30) as gateway:
            (codex_home / "config.toml").write_text(
                f'model = "{MODEL}"\nmodel_provider = "eyes"\n\n'
                '[model_providers.eyes]\nname = "DeepSeekEyes"\n'
                f'base_url = "{gateway.base}"\nwire_api = "responses"\n\n'
                '[model_providers.eyes.auth]\ncommand = "printenv"\nargs = ["EYES_KEY"]\n',
                encoding="utf-8")
            yield Setup(project, codex_home, config, data, upstream)


@pytest.fixture(scope="module")
def task(setup: Setup) -> Run:
    return setup.codex(
        "--skip-git-repo-check", "-s", "danger-full-access", "--json",
        "Do the steps.\n"
        'CALL[exec_command]: {"cmd": "printf canary-7781 > notes.txt"}\n'
        'THEN[exec_command]: {"cmd": "cat notes.txt"}\n')


def test_a_multi_step_task_with_exec_command_writes_a_file(setup: Setup, task: Run) -> None:
    assert (setup.project / "notes.txt").read_text(encoding="utf-8") == "canary-7781"
    commands = task.items("command_execution")
    assert len(commands) == 2, task.events
    assert "canary-7781" in task.answer  # the model answered after cat's output
    sent = [r for r in setup.upstream.requests if r.get("model") == MODEL]
    calling = [m for m in sent[-1]["messages"] if m.get("tool_calls")]
    assert len(calling) == 2
    assert all(m.get("reasoning_content") for m in calling)  # from encrypted_content
    # One Codex thread, one session, under Codex's own id.
    sessions = setup.sessions()
    assert task.thread_id in [s["id"] for s in sessions]


def test_codex_reads_the_gateways_model_catalog(setup: Setup, task: Run) -> None:
    assert task.metadata_warnings() == []  # Codex found deepseek-v4-pro's metadata
    # What Codex fetched and parsed from the gateway's /v1/models (it caches it here).
    cache = json.loads((setup.codex_home / "models_cache.json").read_text(encoding="utf-8"))
    entry = next(m for m in cache["models"] if m["slug"] == MODEL)
    assert entry["context_window"] == 1048576
    assert [level["effort"] for level in entry["supported_reasoning_levels"]] == [
        "none", "high"]
    sent = [r for r in setup.upstream.requests if r.get("model") == MODEL]
    assert "DeepSeekEyes" in json.dumps(sent[0]["messages"])  # the catalog's instructions


@pytest.fixture(scope="module")
def image_run(setup: Setup, task: Run) -> tuple[Run, list[dict[str, Any]]]:
    before = len(setup.upstream.requests)
    run = setup.codex("--skip-git-repo-check", "-s", "danger-full-access", "--json",
                      "What does the attached image say?", "-i",
                      str(setup.project / "shot.png"))
    return run, setup.upstream.requests[before:]


def test_an_image_attached_with_i_is_answered_from_evidence(
        setup: Setup, image_run: tuple[Run, list[dict[str, Any]]]) -> None:
    run, new = image_run
    assert run.answer
    assert new
    sent = json.dumps(new[-1]["messages"])  # (Codex's tool schemas mention image_url)
    assert '"image_url"' not in sent  # v4-pro is text-only: evidence, never pixels
    assert "evidence from route local" in sent
    assert setup.upstream.decoded == []


def test_resume_last_keeps_the_session(
        setup: Setup, image_run: tuple[Run, list[dict[str, Any]]]) -> None:
    before = len(setup.upstream.requests)
    again = setup.codex("resume", "--last", "--skip-git-repo-check", "--json",
                        "-c", 'sandbox_mode="danger-full-access"',
                        "ANSWER: continued fine")
    assert again.answer == "continued fine"
    assert again.metadata_warnings() == []
    assert image_run[0].metadata_warnings() == []
    assert again.thread_id == image_run[0].thread_id
    new = setup.upstream.requests[before:]
    assert new
    history = json.dumps(new[-1]["messages"])
    assert "What does the attached image say" in history  # the earlier exchange went up
    ids = [s["id"] for s in setup.sessions()]
    assert ids.count(again.thread_id) == 1  # the same session, continued
    # Codex sends store: false: its sessions hold hashes, never what was said.
    held = b"".join(f.read_bytes() for f in setup.data.rglob("*") if f.is_file())
    assert b"What does the attached image say" not in held
    assert b"continued fine" not in held
    assert b"canary-7781" not in held
