"""The progress line: silent off a terminal and with --json, nothing in the first second,
redrawn in place by its thread, erased before other output and at the end."""

from __future__ import annotations

import io
import threading

import pytest

from deepseek_eyes.cli import progress as progress_module
from deepseek_eyes.cli.progress import Progress, progress_on_stderr


class Terminal(io.StringIO):
    """A stream that says it is a terminal and signals every write."""

    def __init__(self) -> None:
        super().__init__()
        self.written = threading.Event()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        count = super().write(text)
        self.written.set()
        return count


def screen(text: str) -> str:
    """What a terminal shows after ``text``: carriage returns overwrite the line."""
    line: list[str] = []
    column = 0
    for char in text:
        if char == "\r":
            column = 0
            continue
        line[column:column + 1] = [char]
        column += 1
    return "".join(line).rstrip()


def test_silent_with_json_or_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = Terminal()
    monkeypatch.setattr(progress_module.sys, "stderr", terminal)
    assert progress_on_stderr(as_json=False).stream is terminal
    assert progress_on_stderr(as_json=True).stream is None
    monkeypatch.setattr(progress_module.sys, "stderr", io.StringIO())
    assert progress_on_stderr(as_json=False).stream is None
    with Progress(None, delay=0) as progress:
        progress.update("see 1/1 a.png: getting evidence…")  # nowhere to draw: no error


def test_nothing_is_drawn_in_the_first_second() -> None:
    terminal = Terminal()
    assert Progress(terminal).delay == 1.0
    with Progress(terminal, delay=60) as progress:
        progress.update("see 1/1 a.png: reading the file…")
        with progress.hidden():
            pass
    assert terminal.getvalue() == ""


def test_the_line_is_redrawn_in_place_and_erased_at_the_end() -> None:
    terminal = Terminal()
    with Progress(terminal, delay=0) as progress:
        progress.update("see 1/2 a.png: getting evidence…")
        assert terminal.getvalue().startswith("\rsee 1/2 a.png: getting evidence… ")
        assert screen(terminal.getvalue()) == "see 1/2 a.png: getting evidence… 0s"
        progress.update("see 2/2 b.png: reading…")
        assert screen(terminal.getvalue()) == "see 2/2 b.png: reading… 0s"
    assert "\n" not in terminal.getvalue()
    assert terminal.getvalue().endswith("\r")
    assert screen(terminal.getvalue()) == ""


def test_output_in_hidden_never_shares_the_line() -> None:
    terminal = Terminal()
    with Progress(terminal, delay=0) as progress:
        progress.update("ask: waiting for the answer…")
        with progress.hidden():
            assert screen(terminal.getvalue()) == ""
            progress.update("ask: still waiting…")  # held off while the caller writes
            terminal.write("error CODE: sentence\n")
        assert terminal.getvalue().endswith("error CODE: sentence\n")
        progress.update("ask: waiting for the answer…")
    assert screen(terminal.getvalue().split("\n")[-1]) == ""


def test_the_thread_draws_once_the_delay_has_passed() -> None:
    terminal = Terminal()
    with Progress(terminal, delay=0.05, interval=0.05) as progress:
        progress.update("see 1/1 a.png: getting evidence…")
        assert terminal.getvalue() == ""  # too early for update() to draw
        assert terminal.written.wait(10)  # the thread draws it, with no update() call
        assert "see 1/1 a.png: getting evidence…" in terminal.getvalue()
    assert screen(terminal.getvalue()) == ""


def test_a_long_line_is_cut_to_the_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "_columns", lambda stream: 20)
    terminal = Terminal()
    with Progress(terminal, delay=0) as progress:
        progress.update("see 1/1 " + "x" * 100 + ".png: reading…")
        assert len(screen(terminal.getvalue())) == 19


def test_a_file_name_cannot_break_the_line() -> None:
    terminal = Terminal()
    with Progress(terminal, delay=0) as progress:
        progress.update("see 1/1 evil\n\x1b[2J.png: reading…")
        assert screen(terminal.getvalue()) == "see 1/1 evil??[2J.png: reading… 0s"
