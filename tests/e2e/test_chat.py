"""``deepseek-eyes chat`` as a real process: lines piped in, a second process resuming the
session, and a person at a pseudo-terminal who sees the prompt, the answer as it streams and
an approval question. The final model is the loopback DeepSeek-like upstream (it echoes, and
turns ``CALL[tool]: args`` into tool calls); images get their evidence from the loopback
vision route, so no OCR model is loaded."""

from __future__ import annotations

import json
import os
import re
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from runtime.upstream import REASONING_TEXT, LoopbackUpstream
from vision.loopback import LoopbackVisionServer

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 90


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The terminal's workspace."""
    path = tmp_path / "work"
    path.mkdir()
    return path


def settings(tmp_path: Path, llm_url: str, vision_url: str, work: Path) -> Path:
    config = tmp_path / "eyes.toml"
    config.write_text(
        f'[llm]\nbase_url = "{llm_url}"\napi_key = false\nmodel = "deepseek-v4-pro"\n'
        "timeout = 20\n\n"
        '[runtime]\ntool_sources = ["look", "terminal"]\napproval_timeout = 60\n\n'
        f'[terminal]\nworkspaces = ["{work}"]\n\n'
        '[vision]\nroute_priority = ["loop"]\nprobe = false\n'
        f'[[vision.routes]]\nname = "loop"\nbase_url = "{vision_url}"\nmodel = "vision-1"\n',
        encoding="utf-8",
    )
    return config


@pytest.fixture
def config(tmp_path: Path, upstream: LoopbackUpstream, loopback: LoopbackVisionServer,
           work: Path) -> Path:
    return settings(tmp_path, upstream.base_url, loopback.url("healthy~chat"), work)


def chat(config: Path, *args: str, lines: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``chat`` from the repository root with ``lines`` piped in, then end of input."""
    return subprocess.run(  # noqa: S603 - our own CLI, argv list, no shell
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "chat", *args],
        input="".join(f"{line}\n" for line in lines), capture_output=True, text=True,
        cwd=ROOT, timeout=TIMEOUT_S, check=False,
    )


def user_texts(request: dict[str, Any]) -> list[str]:
    """The text of every user message a model call carried."""
    texts = []
    for message in request["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        texts.append("\n".join(p.get("text", "") for p in parts if p.get("type") == "text"))
    return texts


def test_a_piped_chat_runs_turns_and_commands_and_survives_errors(
    config: Path, upstream: LoopbackUpstream, work: Path
) -> None:
    touch = json.dumps({"argv": ["touch", "made.txt"], "cwd": str(work)})
    done = chat(config, lines=[
        "hello there",
        "/image examples/receipt.png",
        "What did I spend?",
        "/tools",
        "/session",
        "/image nope.png",
        "/frobnicate",
        f"CALL[terminal_run]: {touch}",
        "/usage",
        "//etc is a path",
    ])
    assert done.returncode == 0, done.stderr
    out, err = done.stdout, done.stderr
    assert "Traceback" not in err
    assert "you> " not in out + err  # no prompt without a terminal
    assert "\x1b[" not in out + err  # no colour either
    assert "echo: hello there" in out
    assert "attached examples/receipt.png (900x700 image/png" in out
    # The image went to the model as evidence from the vision route, never as pixels.
    image_turn = next(r for r in upstream.requests if "What did I spend?" in user_texts(r)[-1])
    assert "<image>" not in json.dumps(image_turn)
    assert "echo: " in out.split("attached", 1)[1]
    # /tools: look is offered once the conversation holds an image; the terminal's tools too.
    tools = {line.split()[0]: line.split()[1:3] for line in out.splitlines()
             if line.startswith(("look ", "terminal_"))}
    assert tools["look"] == ["look", "read"]
    assert tools["terminal_run"] == ["terminal", "exec"]
    assert "terminal_approve" not in tools
    # /session names the session and counts its messages (two turns so far).
    (session_line,) = [line for line in out.splitlines() if line.startswith("session ")
                       and "message(s)" in line]
    session_id = session_line.split()[1].rstrip(":")
    assert "4 message(s)" in session_line
    assert ", 2 turn(s)" in session_line
    # Errors are one line each, and the chat went on.
    assert "error IMAGE_UNREADABLE: " in err
    assert "error CLI_USAGE: unknown command /frobnicate; /help lists the commands" in err
    # Nobody at a terminal can approve: the plan did not run, and the model was told.
    assert "· terminal_run…\n· error RUNTIME_APPROVAL_UNAVAILABLE\n" in err
    assert not (work / "made.txt").exists()
    assert "RUNTIME_APPROVAL_UNAVAILABLE" in out
    assert f"session {session_id}: 3 turn(s)" in out
    assert "  final: " in out  # the tracker's exact totals
    assert out.rstrip().endswith("echo: /etc is a path")  # // escapes a leading slash

    # A second process resumes the session, in JSON: the history continued.
    again = chat(config, "--session", session_id, "--json", lines=[
        "/session", "/image nope.png", "/bogus", "and again", "/usage", "/tools", "/help",
    ])
    assert again.returncode == 0, again.stdout
    assert again.stderr == ""
    session, bad_image, unknown, turn, usage, offered, helped = (
        json.loads(line) for line in again.stdout.splitlines())
    assert session == {"command": "session", "session_id": session_id, "new": False,
                       "messages": session["messages"], "internal": 2, "turns": 4}
    assert session["messages"] > 4
    assert bad_image["error"]["code"] == "IMAGE_UNREADABLE"
    assert unknown["error"]["code"] == "CLI_USAGE"
    assert set(turn) == {"session_id", "answer", "path", "tools", "usage"}
    assert turn["session_id"] == session_id
    assert turn["answer"] == "echo: and again"
    assert turn["path"] == "bridged"  # the receipt is still in the conversation
    assert turn["usage"]["prompt_tokens"] > 0
    history = user_texts(upstream.requests[-1])
    assert history[0] == "hello there"
    assert "What did I spend?" in history[1]
    assert history[-1] == "and again"
    assert usage["command"] == "usage"
    assert len(usage["turns"]) == 5
    assert usage["session_total"]["prompt_tokens"] == sum(
        t["usage"]["prompt_tokens"] for t in usage["turns"])
    assert usage["tracker"]["exact"]["final"]["calls"] >= 5
    assert "look" in [t["name"] for t in offered["tools"]]
    assert "/image PATH" in [c["name"] for c in helped["commands"]]

    # ask shares the session.
    asked = subprocess.run(  # noqa: S603 - our own CLI, argv list, no shell
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "ask", "--json",
         "--session", session_id, "one more"],
        capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT_S, check=False,
    )
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert user_texts(upstream.requests[-1])[-2:] == ["and again", "one more"]


def test_a_failed_turn_is_reported_and_the_chat_goes_on(
    tmp_path: Path, loopback: LoopbackVisionServer, work: Path
) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = settings(tmp_path, f"http://127.0.0.1:{port}/v1", loopback.url("healthy~chat"),
                      work)
    done = chat(config, "--session", "down-1", lines=["hello", "/usage", "again", "/session"])
    assert done.returncode == 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error ")]
    assert [line.split(":")[0] for line in errors] == ["error LLM_UNAVAILABLE"] * 2
    assert "session down-1: 1 turn(s), 1 failed" in done.stdout
    # Both messages are in the log, and each failed turn is recorded.
    assert "session down-1: 2 message(s), 2 turn(s)" in done.stdout


def test_usage_shows_counters_as_events_and_estimates_as_tokens(config: Path) -> None:
    """/usage: a counter (local OCR runs) is events, never "0 tokens"; an estimate is
    tokens. The rows are written to the data directory the chat then opens."""
    from deepseek_eyes.home import DataHome
    from deepseek_eyes.settings import load_settings
    from deepseek_eyes.usage import UsageCategory

    with DataHome.open(load_settings(config).settings) as home:
        for _ in range(3):
            home.usage.count(UsageCategory.LOCAL_OCR)
        home.usage.record_estimate(UsageCategory.BRIDGE_INPUT, 120, calls=2)
    done = chat(config, lines=["/usage"])
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "local_ocr: 3 event(s)" in out
    assert "local_ocr: 0 tokens" not in out
    assert "bridge_input: 120 tokens (2 event(s))" in out
    counters = out.split("counters (no provider, no tokens):", 1)[1]
    assert "bridge_input" not in counters
    assert "local_ocr" not in out.split("counters", 1)[0]


def _with_slow_server(config: Path) -> Path:
    """The chat's settings with the MCP server of progress_server.py, its tool allowed."""
    server = Path(__file__).with_name("progress_server.py")
    text = config.read_text(encoding="utf-8").replace(
        'tool_sources = ["look", "terminal"]', 'tool_sources = ["look", "mcp"]')
    text += (f'\n[[mcp.servers]]\nid = "slow"\ntransport = "stdio"\n'
             f'command = "{sys.executable}"\nargs = ["{server}"]\n'
             '[mcp.servers.allow]\ntools = ["count"]\n')
    config.write_text(text, encoding="utf-8")
    return config


def test_a_slow_mcp_tool_shows_its_progress_and_elapsed_time(
    tmp_path: Path, upstream: LoopbackUpstream, work: Path, loopback: LoopbackVisionServer
) -> None:
    """An MCP tool that reports progress: each notification reaches chat's output as it
    arrives (progress/total, the server's message, the seconds it has run)."""
    config = _with_slow_server(settings(tmp_path, upstream.base_url,
                                        loopback.url("healthy~chat"), work))
    done = chat(config, lines=['CALL[mcp__slow__count]: {"steps": 3}'])
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("· ")]
    progress = [line for line in notes if line.startswith("· mcp__slow__count: ")]
    assert [line.split(" (")[0] for line in progress] == [
        f"· mcp__slow__count: {n}/3 counted {n} of 3" for n in (1, 2, 3)], done.stderr
    assert all(line.endswith("s)") for line in progress)
    assert notes[0] == "· mcp__slow__count…"
    assert notes[-1].startswith("· done")  # with its seconds once it ran one or more
    assert "after mcp__slow__count: counted to 3" in done.stdout


def test_a_busy_upstream_is_retried_and_the_chat_answers(
    config: Path, upstream: LoopbackUpstream
) -> None:
    upstream.busy(1, retry_after=1)  # DeepSeek's 503 "Server is busy", once
    before = upstream.chat_calls
    try:
        done = chat(config, lines=["hello busy"])
    finally:
        upstream.busy(0)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "echo: hello busy"
    assert done.stderr == ""
    assert upstream.chat_calls == before + 2


class Terminal:
    """A process whose standard streams and controlling terminal are a pseudo-terminal."""

    # Makes the pseudo-terminal the controlling terminal (a new session's leader opening
    # it), so /dev/tty is this terminal, as for a person; then becomes the CLI.
    _BECOME = ("import os, sys\n"
               "os.close(os.open(os.ttyname(0), os.O_RDWR))\n"
               "os.execv(sys.executable, [sys.executable, '-m', 'deepseek_eyes', "
               "*sys.argv[1:]])\n")

    def __init__(self, *args: str) -> None:
        self.controller, terminal = os.openpty()
        try:
            self.process = subprocess.Popen(  # noqa: S603 - our own CLI, argv list
                [sys.executable, "-c", self._BECOME, *args], stdin=terminal, stdout=terminal,
                stderr=terminal, cwd=ROOT, start_new_session=True,
            )
        finally:
            os.close(terminal)
        self.seen = ""

    def expect(self, text: str, timeout: float = TIMEOUT_S) -> str:
        """Read until ``text`` has appeared since the last expect; return what came."""
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.controller], [], [], left)[0]:
                pytest.fail(f"{text!r} did not appear; the terminal shows {self.seen!r}")
            try:
                chunk = os.read(self.controller, 4096)
            except OSError:  # EIO: the process closed the terminal
                chunk = b""
            if not chunk:
                pytest.fail(f"the terminal closed before {text!r}; it shows {self.seen!r}")
            self.seen += chunk.decode("utf-8", errors="replace").replace("\r\n", "\n")
        before, _, after = self.seen.partition(text)
        self.seen = after
        return before + text

    def send(self, text: str) -> None:
        os.write(self.controller, text.encode())

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if kind is not None:  # a failed step: end the process, keep the failure
            self.close(kill=True)

    def close(self, *, kill: bool = False) -> int:
        """Wait for the process to end (``kill``: end it first); its exit status."""
        try:
            if kill:
                self.process.kill()
            return self.process.wait(timeout=TIMEOUT_S)
        finally:
            os.close(self.controller)


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_at_a_terminal_the_prompt_streams_and_approvals_are_asked(
    config: Path, work: Path, upstream: LoopbackUpstream
) -> None:
    with Terminal("--config", str(config), "chat", "--model", "deepseek-v4-pro") as term:
        term.expect("Ctrl-D to leave")
        term.expect("you> ")
        term.send("hello terminal\n")
        answer = term.expect("echo: hello terminal")
        # The reasoning model's thinking comes first, dimmed, then the answer.
        assert f"\x1b[2m{REASONING_TEXT}\x1b[0m\necho: hello terminal" in answer
        term.expect("you> ")
        call = json.dumps({"argv": ["touch", "made.txt"], "cwd": str(work)})
        term.send(f"CALL[terminal_run]: {call}\n")
        term.expect("· terminal_run…")
        shown = term.expect("Approve? [y/N] ")
        assert "'touch' 'made.txt'" in shown
        assert not (work / "made.txt").exists()  # nothing runs before the person decides
        term.send("y\n")
        term.expect("· approved")
        term.expect("· done")
        term.expect('"exit_code": 0')
        assert (work / "made.txt").exists()
        term.expect("you> ")
        # What the model says cannot drive the terminal: its escape sequences are shown.
        # (Ctrl-V first: at a line-editing prompt Escape is a key, quoted-insert types it.)
        term.send("colour \x16\x1b[31mred\n")
        term.expect("echo: colour \ufffd[31mred")
        term.expect("you> ")
        # A second instruction that calls a tool: in thinking mode both tool exchanges go
        # back with the reasoning they came with (the upstream refuses them otherwise).
        (work / "made.txt").write_text("canary-3316\n", encoding="utf-8")
        read = json.dumps({"argv": ["cat", "made.txt"], "cwd": str(work)})
        term.send(f"CALL[terminal_run]: {read}\n")
        term.expect("· done")
        term.expect("canary-3316")
        term.expect("you> ")
        sent = [m for m in upstream.requests[-1]["messages"] if m.get("tool_calls")]
        assert len(sent) == 2
        assert all(m["reasoning_content"].startswith(REASONING_TEXT) for m in sent)
        term.send("/session\n")
        term.expect("4 turn(s)")
        term.expect("you> ")
        term.send("\x04")  # Ctrl-D: end of input
    assert term.close() == 0


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_ctrl_c_stops_the_turn_not_the_chat(config: Path, upstream: LoopbackUpstream) -> None:
    before = upstream.calls_for("hang")
    with Terminal("--config", str(config), "chat", "--model", "hang",
                  "--session", "hung-1") as term:
        term.expect("you> ")
        term.send("wait for ever\n")
        assert upstream.wait_for_calls("hang", before + 1, TIMEOUT_S)
        term.send("\x03")  # Ctrl-C while the model does not answer
        term.expect("· interrupted")
        term.expect("you> ")
        term.send("a draft")
        term.expect("a draft")
        term.send("\x03")  # at the prompt: the line is dropped, the chat stays
        term.expect("(/exit or Ctrl-D leaves)")
        term.expect("you> ")
        term.send("/session\n")
        term.expect("session hung-1: 1 message(s)")
        term.expect("you> ")
        term.send("/exit\n")
    assert term.close() == 0


def _has_readline() -> bool:
    try:
        import readline  # noqa: F401 - the check is whether it imports
    except ImportError:
        return False
    return True


# With CI=true a missing pseudo-terminal or readline fails the test instead of skipping it.
_CI = os.environ.get("CI") == "true"
needs_editing = pytest.mark.skipif(
    not _CI and not (hasattr(os, "openpty") and _has_readline()),
    reason="needs a pseudo-terminal and readline")


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_text_typed_while_a_turn_streams_waits_for_the_next_prompt(config: Path) -> None:
    with Terminal("--config", str(config), "chat") as term:
        term.expect("you> ")
        term.send("SLOW[0.5] a slow answer in several pieces\n")
        term.expect("echo:")  # the answer has begun; its next pieces are half a second apart
        term.send("typed ahead\n")
        answer = term.expect("you> ")
        assert "typed ahead" not in answer  # not echoed into the middle of the answer
        assert "a slow answer in several pieces" in answer
        # What was typed is the next message.
        term.expect("echo: typed ahead")
        term.expect("you> ")
        term.send("\x04")
    assert term.close() == 0


def test_ask_shows_tool_activity_on_standard_error(config: Path, work: Path) -> None:
    touch = json.dumps({"argv": ["touch", "made.txt"], "cwd": str(work)})

    def ask(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603 - our own CLI, argv list, no shell
            [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "ask", *args],
            capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT_S, check=False,
            stdin=subprocess.DEVNULL,
        )

    plain = ask(f"CALL[terminal_run]: {touch}")
    assert plain.returncode == 0, plain.stderr
    assert "· terminal_run…\n· error RUNTIME_APPROVAL_UNAVAILABLE\n" in plain.stderr
    assert "· terminal_run" not in plain.stdout
    as_json = ask("--json", f"CALL[terminal_run]: {touch}")
    assert as_json.returncode == 0, as_json.stderr
    assert "· terminal_run…\n· error RUNTIME_APPROVAL_UNAVAILABLE\n" in as_json.stderr
    answer = json.loads(as_json.stdout)  # standard output is still one JSON object
    assert len(answer["tools"]) == 1
    assert not (work / "made.txt").exists()


@needs_editing
def test_the_history_of_one_chat_is_recalled_in_the_next(config: Path) -> None:
    with Terminal("--config", str(config), "chat") as first:
        first.expect("you> ")
        first.send("remember this line\n")
        first.expect("echo: remember this line")
        first.expect("you> ")
        first.send("\x04")  # Ctrl-D
    assert first.close() == 0
    history = Path(os.environ["DEEPSEEK_EYES_HOME"]) / "chat_history"
    assert history.stat().st_mode & 0o777 == 0o600
    with Terminal("--config", str(config), "chat") as second:
        second.expect("you> ")
        second.send("\x1b[A\n")  # up arrow: the last message of the chat before
        second.expect("echo: remember this line")
        second.expect("you> ")
        second.send("half typed")
        second.expect("half typed")
        second.send("\x03")  # Ctrl-C at the prompt clears the line
        second.expect("(/exit or Ctrl-D leaves)")
        second.expect("you> ")
        second.send("whole\n")
        answer = second.expect("you> ")
        assert "echo: whole" in answer
        assert "half typed" not in answer
        # A Ctrl-C in the same instant as the prompt (before readline waits for a key)
        # is acted on too, not only once the next key comes (repl.InterruptRelay).
        second.send("\x03")
        second.expect("(/exit or Ctrl-D leaves)")
        second.expect("you> ")
        second.send("\x04")
    assert second.close() == 0


@needs_editing
def test_a_message_of_several_lines_arrives_whole(
    config: Path, upstream: LoopbackUpstream
) -> None:
    with Terminal("--config", str(config), "chat") as term:
        term.expect("you> ")
        term.send("first line \\\n")  # a trailing backslash continues the message
        term.expect("...> ")
        term.send("second line\n")
        term.expect("echo: first line \nsecond line")
        assert user_texts(upstream.requests[-1])[-1] == "first line \nsecond line"
        term.expect("you> ")
        term.send("pasted one\npasted two\npasted three\n")  # a pasted block: one write
        term.expect("pasted three")
        term.expect("you> ")
        assert user_texts(upstream.requests[-1])[-1] == "pasted one\npasted two\npasted three"
        term.send("\x04")
    assert term.close() == 0


@needs_editing
def test_ctrl_c_mid_stream_aborts_the_turn_and_the_next_message_works(
    config: Path, upstream: LoopbackUpstream
) -> None:
    cut = upstream.cut_streams
    with Terminal("--config", str(config), "chat", "--session", "abort-1") as term:
        term.expect("you> ")
        term.send("SLOW[5] a long answer that is stopped\n")
        term.expect("echo:")  # streaming; the next piece is five seconds away
        term.send("\x03")
        term.expect("· interrupted")
        assert upstream.wait_for_cut_streams(cut + 1, TIMEOUT_S)  # the stream was closed
        term.expect("you> ")
        term.send("after the stop\n")
        term.expect("echo: after the stop")
        term.expect("you> ")
        term.send("\x04")
    assert term.close() == 0
    shown = subprocess.run(  # noqa: S603 - our own CLI, argv list, no shell
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "sessions", "show",
         "abort-1", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT_S,
        check=True,
    )
    turns = json.loads(shown.stdout)["turns"]
    assert [turn["outcome"] for turn in turns] == ["aborted", "ok"]
    # The next turn carried the stopped message, and the model was asked once more.
    assert user_texts(upstream.requests[-1])[-1] == "after the stop"


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_on_a_terminal_a_slow_tool_ticks_in_place(
    tmp_path: Path, upstream: LoopbackUpstream, work: Path, loopback: LoopbackVisionServer
) -> None:
    """On a terminal a running tool is one line redrawn in place with the seconds it has
    run and its server's latest progress, not a line per notification; it is erased before
    the tool's end is said."""
    config = _with_slow_server(settings(tmp_path, upstream.base_url,
                                        loopback.url("healthy~chat"), work))
    with Terminal("--config", str(config), "chat") as term:
        term.expect("you> ")
        term.send('CALL[mcp__slow__count]: {"steps": 2, "pause": 1.5}\n')
        seen = term.expect("· done (")
        term.expect("you> ")
        term.send("/exit\n")
    assert term.close() == 0
    assert re.search(r"\r· mcp__slow__count running \d+s", seen), seen
    assert re.search(r"\r· mcp__slow__count: 1/2 counted 1 of 2 \d+s", seen), seen
    assert "counted 1 of 2 (" not in seen  # no line of its own on a terminal
    done_at = seen.rindex("· done (")
    assert seen[:done_at].rstrip(" ").endswith("\r")  # the line was erased first
