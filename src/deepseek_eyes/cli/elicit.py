"""``chat``'s answer to a server's elicitation: its form asked in the terminal.

:class:`TerminalForm` is the :class:`~deepseek_eyes.mcp_host.elicitation.Elicitor` that
``chat`` installs when a person sits at a terminal (never with ``--json``, never for the
gateway or ``ask``). It asks on the controlling terminal the way plan approvals do
(``runtime/approval.py``): ``/dev/tty`` read in a thread, so the REPL's own reader is not
involved. :func:`ask_form` is the conversation itself, over any line source, so tests (and
the conformance harness) feed it a scripted stream.

For each field the person types a value; an empty line takes the server's default (or
leaves an optional field out); ``!decline`` declines and ``!cancel`` (or end of input)
cancels the whole form. A value that does not fit its field is explained and asked again,
at most :data:`MAX_TRIES` times. The server's text is shown as untrusted, with control
characters removed, and the person confirms before anything is sent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Protocol, TextIO

import anyio

from deepseek_eyes.mcp_host.elicitation import Answer, FormField, Value, install_elicitor
from deepseek_eyes.runtime.approval import open_terminal, terminal_available

__all__ = ["MAX_TRIES", "TerminalForm", "ask_form", "ask_url", "install_terminal_form"]

#: Wrong answers to one field before the form is cancelled (a loop over a person's input
#: that always ends).
MAX_TRIES = 5

Read = Callable[[], str | None]
Write = Callable[[str], None]


def _clean(text: str, limit: int) -> str:
    kept = "".join(ch if ch.isprintable() or ch == "\n" else " " for ch in text)
    return kept[:limit]


def _describe(item: FormField) -> str:
    need = "required" if item.required else "optional"
    lines = [f"  {_clean(item.title, 200)} ({item.kind}, {need})"]
    if item.description:
        lines.append(f"    {_clean(item.description, 500)}")
    for number, (_, label) in enumerate(item.choices, 1):
        lines.append(f"    {number}. {_clean(label, 200)}")
    if item.kind == "multi":
        lines.append("    (numbers or values, separated by commas)")
    if item.default is not None:
        lines.append(f"    [empty line: {_clean(str(item.default), 200)}]")
    return "\n".join(lines) + "\n  > "


def _control(line: str) -> Answer | None:
    word = line.strip().lower()
    if word == "!decline":
        return Answer("decline")
    if word == "!cancel":
        return Answer("cancel")
    return None


def ask_form(server: str, message: str, fields: Sequence[FormField], read: Read,
             write: Write) -> Answer:
    """Ask a form's questions over ``read``/``write``; the answers, converted and checked."""
    write(f"\nMCP server {server!r} asks (its words, not ours):\n  {_clean(message, 2000)}\n"
          "Type !decline to refuse or !cancel to dismiss.\n")
    content: dict[str, Value] = {}
    for item in fields:
        for _ in range(MAX_TRIES):
            write(_describe(item))
            line = read()
            if line is None:
                return Answer("cancel")
            stop = _control(line)
            if stop is not None:
                return stop
            if not line.strip():
                if item.default is not None:
                    content[item.name] = item.default
                    break
                if not item.required:
                    break
                write("  this field is required\n")
                continue
            try:
                content[item.name] = item.convert(line)
                break
            except ValueError as exc:
                write(f"  {exc}\n")
        else:
            write("  too many tries; the form is cancelled\n")
            return Answer("cancel")
    write("Send these answers? [Y/n] ")
    line = read()
    if line is None:
        return Answer("cancel")
    stop = _control(line)
    if stop is not None:
        return stop
    if line.strip().lower() in ("n", "no"):
        return Answer("decline")
    return Answer("accept", content)


def ask_url(server: str, message: str, url: str, read: Read, write: Write) -> Answer:
    """A URL-mode request: show the URL; "accept" means the person will open it."""
    write(f"\nMCP server {server!r} asks you to open a page (its words, not ours):\n"
          f"  {_clean(message, 2000)}\n  {_clean(url, 2000)}\n"
          "Open it yourself in a browser. Will you? [y/N] ")
    line = read()
    if line is None:
        return Answer("cancel")
    return Answer("accept" if line.strip().lower() in ("y", "yes") else "decline")


class Echo(Protocol):
    """The REPL's type-ahead: echo off while a turn streams, on while a person answers."""

    def hold(self) -> None: ...

    def release(self) -> None: ...


class TerminalForm:
    """Ask on the controlling terminal (``chat`` run interactively). ``echo`` (set by the
    REPL once it runs) is released while a form is asked: a form arrives mid-turn, when
    what is typed is otherwise held unseen."""

    def __init__(self, *, tty: str = "/dev/tty",
                 opener: Callable[[], tuple[TextIO, TextIO]] | None = None) -> None:
        self._tty = tty
        self._opener = opener
        self.echo: Echo | None = None

    @staticmethod
    def available(tty: str = "/dev/tty") -> bool:
        """Whether there is a terminal to ask on (stdin and stderr are terminals)."""
        return terminal_available(tty)

    def _run(self, ask: Callable[[Read, Write], Answer]) -> Answer:
        echo = self.echo
        if echo is not None:
            echo.release()
        try:
            return self._ask(ask)
        finally:
            if echo is not None:
                echo.hold()

    def _ask(self, ask: Callable[[Read, Write], Answer]) -> Answer:
        with contextlib.ExitStack() as opened:
            reader, writer = open_terminal(opened, self._tty, self._opener)

            def read() -> str | None:
                line = reader.readline(64 * 1024)
                return line.rstrip("\r\n") if line else None

            def write(text: str) -> None:
                writer.write(text)
                writer.flush()

            return ask(read, write)

    async def form(self, server: str, message: str, fields: Sequence[FormField]) -> Answer:
        return await anyio.to_thread.run_sync(
            self._run, lambda r, w: ask_form(server, message, fields, r, w),
            abandon_on_cancel=True)

    async def url(self, server: str, message: str, url: str) -> Answer:
        return await anyio.to_thread.run_sync(
            self._run, lambda r, w: ask_url(server, message, url, r, w),
            abandon_on_cancel=True)


def install_terminal_form(*, interactive: bool) -> TerminalForm | None:
    """Offer elicitation on this process's MCP connections when a person can answer here
    (``chat``, interactive, at a terminal); otherwise offer none. Returns the form asked
    (None: none is offered)."""
    if interactive and TerminalForm.available():
        form = TerminalForm()
        install_elicitor(form)
        return form
    install_elicitor(None)
    return None
