"""Progress as a person sees it: the real command with its standard error on a pseudo-terminal
and a step that really takes over a second (a route or a model that does not answer until its
timeout), and the same command piped or with --json, where no progress may appear."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runtime.upstream import LoopbackUpstream
from vision.loopback import LoopbackVisionServer, solid_png

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")

TIMEOUT_S = 2.0  # how long the slow step takes: well past the first second, when progress shows


def on_terminal(*args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run ``deepseek-eyes ARGS…`` with only its standard error on a pseudo-terminal; return
    the process (stdout piped) and everything it wrote to the terminal."""
    controller, terminal = os.openpty()
    try:
        process = subprocess.Popen(  # noqa: S603 - our own CLI, argv list, no shell
            [sys.executable, "-m", "deepseek_eyes", *args], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=terminal, text=True,
        )
    finally:
        os.close(terminal)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the process closed its end
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        stdout, _ = process.communicate(timeout=120)
        reader.join(timeout=30)
    finally:
        os.close(controller)
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, "")
    # The terminal turns each "\n" into "\r\n"; undone, every "\r" left is the command's.
    return done, b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def piped(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own CLI, argv list, no shell
        [sys.executable, "-m", "deepseek_eyes", *args], capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=120, check=False,
    )


@pytest.fixture
def slow_route(tmp_path: Path, loopback: LoopbackVisionServer) -> tuple[Path, Path]:
    """A settings file whose one route answers nothing until its timeout, and an image."""
    config = tmp_path / "eyes.toml"
    config.write_text(
        f"""
[vision]
route_priority = ["slow"]
failover_attempts = 0
probe = false
[[vision.routes]]
name = "slow"
base_url = "{loopback.url('hang~progress')}"
model = "vision-1"
timeout = {TIMEOUT_S}
""",
        encoding="utf-8",
    )
    image = tmp_path / "photo.png"
    image.write_bytes(solid_png(64, 48))
    return config, image


def test_see_shows_its_step_on_a_terminal_and_erases_it(slow_route: tuple[Path, Path]) -> None:
    config, image = slow_route
    done, terminal = on_terminal("--config", str(config), "see", "--route", "slow", str(image))
    assert done.returncode == 1
    # The seconds shown depend on how long start-up took on this machine.
    assert re.search(r"\rsee 1/1 photo\.png: getting evidence… \d+s", terminal), terminal
    # The line is blanked before the error is written, so the error starts its own line.
    progress, error = terminal.rsplit("\r", 1)
    assert progress.rsplit("\r", 1)[-1].strip() == ""
    assert error.startswith("error VISION_ROUTE_TIMEOUT: ")
    assert done.stdout == ""


def test_see_shows_no_progress_when_piped_or_with_json(slow_route: tuple[Path, Path]) -> None:
    config, image = slow_route
    done = piped("--config", str(config), "see", "--route", "slow", str(image))
    assert done.returncode == 1
    assert done.stderr.startswith("error VISION_ROUTE_TIMEOUT: ")
    assert "\r" not in done.stderr
    assert "getting evidence" not in done.stderr
    as_json, terminal = on_terminal("--config", str(config), "see", "--route", "slow",
                                    str(image), "--json")
    assert as_json.returncode == 1
    assert terminal == ""
    assert json.loads(as_json.stdout)["error"]["code"] == "VISION_ROUTE_TIMEOUT"


def test_ask_shows_it_waits_for_the_answer(tmp_path: Path) -> None:
    with LoopbackUpstream() as upstream:
        config = tmp_path / "eyes.toml"
        config.write_text(
            f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\nmodel = "hang"\n'
            f"timeout = {TIMEOUT_S}\n", encoding="utf-8",
        )
        done, terminal = on_terminal("--config", str(config), "ask", "hello")
        as_json, quiet = on_terminal("--config", str(config), "ask", "hello", "--json")
    assert done.returncode == 1
    assert re.search(r"\rask: waiting for the answer… \d+s", terminal), terminal
    assert terminal.rsplit("\r", 1)[-1].startswith("error LLM_TIMEOUT: ")
    assert as_json.returncode == 1
    assert quiet == ""
    assert json.loads(as_json.stdout)["error"]["code"] == "LLM_TIMEOUT"
