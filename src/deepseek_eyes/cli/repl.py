"""The input and output of a line-by-line conversation on the standard streams, apart from
what the conversation does (:mod:`deepseek_eyes.cli.chat`).

* :class:`LineReader` reads standard input one line per request, in a daemon thread, so the
  event loop keeps running while a person types (the runtime holds live connections), and
  so nothing reads ahead: while a turn runs, standard input is left alone for an approval
  prompt, and a pipe's next line waits for the turn before it. A daemon thread rather than
  the loop's executor, because a read blocked on a terminal must not keep the process
  alive once the conversation has ended. Lines are bounded (:data:`MAX_LINE_CHARS`).
* :class:`Screen` writes the answer to standard output as it streams and every other line
  (events, errors, the prompt) to standard error, each on a line of its own even when both
  streams are the same terminal. Reasoning is shown only on a terminal: dimmed, or
  prefixed with ``(thinking)`` under ``NO_COLOR``.
  On a terminal, control characters in what the model or an error says are shown as
  ``\ufffd``, never sent: a model that read a hostile page or tool result must not be able
  to move the cursor, retitle the window or write the clipboard (OSC 52). Piped output is
  the text exactly as received.
* :class:`TypeAhead` turns the terminal's echo off while a turn streams, so text typed
  meanwhile is not echoed into the middle of the answer; the terminal keeps it, and it is
  read (and, with line editing, shown at the prompt) as the next message.
* :func:`interrupts` sends Ctrl-C to a handler instead of ending the process.

Only the standard library is imported: this module is imported when ``chat`` starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TextIO

from deepseek_eyes.errors import CliError

__all__ = ["MAX_LINE_CHARS", "PROMPT", "LineReader", "Screen", "TypeAhead", "describe_event",
           "interrupts", "is_terminal"]

#: The longest line read as one message; a longer one is refused whole, never cut.
MAX_LINE_CHARS = 1024 * 1024
PROMPT = "you> "
#: C0 and C1 control characters but tab and newline; a carriage return is dropped.
_CONTROLS = {code: "\ufffd" for code in (*range(0x20), *range(0x7F, 0xA0))
             if chr(code) not in "\t\n"} | {ord("\r"): None}


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class LineReader:
    """Standard input one line at a time, each read in a daemon thread on request."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    async def readline(self) -> str | None:
        """The next line without its line ending; None at end of input.

        Raises:
            CliError: ``CLI_USAGE`` for a line over :data:`MAX_LINE_CHARS` (it is skipped).
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()

        def settle(line: str | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(line)

        def read() -> None:
            line: str | None = None
            error: BaseException | None = None
            try:
                line = self._read()
            except (CliError, OSError, ValueError) as exc:
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
                loop.call_soon_threadsafe(settle, line, error)

        threading.Thread(target=read, name="chat-stdin", daemon=True).start()
        return await future

    def _read(self) -> str | None:
        line = self._stream.readline(MAX_LINE_CHARS + 1)
        if not line:
            return None
        if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
            while True:  # skip the rest of the line, a bounded piece at a time
                rest = self._stream.readline(MAX_LINE_CHARS)
                if not rest or rest.endswith("\n"):
                    break
            raise CliError(f"a line is at most {MAX_LINE_CHARS:,} characters; this one was "
                           "not sent", code="CLI_USAGE", details={"limit": MAX_LINE_CHARS})
        return line.rstrip("\r\n")


class Screen:
    """What a person sees: the answer streaming on stdout, everything else on stderr.

    Keeps track of a half-written stdout line, so that an event or an error written to the
    same terminal starts on a line of its own. Reasoning is shown only on a terminal.
    """

    def __init__(self, out: TextIO, err: TextIO, *, interactive: bool) -> None:
        self.out = out
        self.err = err
        self.interactive = interactive  # stdin is a terminal: prompt and banner
        self.out_tty = is_terminal(out)
        self.colour = self.out_tty and "NO_COLOR" not in os.environ
        self._open = False  # stdout's last line is not finished
        self._reasoning = False  # inside a reasoning block

    def shown(self, text: str) -> str:
        """``text`` as it may reach a terminal (see the module docstring)."""
        return text.translate(_CONTROLS)

    def _write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self._open = not text.endswith("\n")

    def reasoning(self, text: str) -> None:
        if not self.out_tty:
            return
        if not self._reasoning:
            self._reasoning = True
            self._write("\x1b[2m" if self.colour else "(thinking) ")
        self._write(self.shown(text))

    def content(self, text: str) -> None:
        self._end_reasoning()
        self._write(self.shown(text) if self.out_tty else text)

    def _end_reasoning(self) -> None:
        if self._reasoning:
            self._reasoning = False
            self._write("\x1b[0m" if self.colour else "")
            self.out.write("\n")
            self.out.flush()
            self._open = False

    def end_answer(self) -> None:
        """Close the answer's line (and a reasoning block left open by an interruption)."""
        self._end_reasoning()
        if self._open:
            self._write("\n")

    def note(self, text: str) -> None:
        """One line on stderr, on a line of its own even when stdout is the same terminal."""
        if self.out_tty:
            self.end_answer()
        if is_terminal(self.err):
            text = "\n".join(self.shown(line) for line in text.split("\n"))
        self.err.write(text + "\n")
        self.err.flush()

    def prompt(self) -> None:
        if self.interactive:
            self.err.write(PROMPT)
            self.err.flush()


class TypeAhead:
    """The terminal's echo, off while a turn runs (:meth:`hold`) and on again after it or
    while an approval question wants an answer (:meth:`release`).

    Only echo changes: the line discipline still collects what is typed, so nothing is lost
    and nothing is flushed, and Ctrl-C still interrupts. Not a terminal (a pipe): nothing.
    """

    def __init__(self, stream: TextIO) -> None:
        self._fd: int | None = None
        self._saved: list[Any] | None = None
        if is_terminal(stream):
            try:
                import termios  # POSIX only: elsewhere text typed ahead is echoed as before

                self._fd = stream.fileno()
                self._saved = termios.tcgetattr(self._fd)
            except (ImportError, OSError, ValueError):
                self._fd = None

    def _set(self, *, echo: bool) -> None:
        if self._fd is None or self._saved is None:
            return
        import termios

        attributes = list(self._saved)
        attributes[3] = (attributes[3] | termios.ECHO if echo
                         else attributes[3] & ~termios.ECHO)
        with contextlib.suppress(OSError):  # TCSANOW: what was typed stays queued
            termios.tcsetattr(self._fd, termios.TCSANOW, attributes)

    def hold(self) -> None:
        self._set(echo=False)

    def release(self) -> None:
        self._set(echo=True)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self.hold()
        try:
            yield
        finally:
            self.release()


def describe_event(event: Mapping[str, Any]) -> str | None:
    """A progress event as one short line (None: nothing to show)."""
    kind = event.get("type")
    if kind == "tool.started":
        return f"· {event.get('tool')}…"
    if kind == "tool.finished":
        if not event.get("is_error"):
            return "· done"
        return f"· error {event.get('code')}" if event.get("code") else "· error"
    if kind == "approval.decided":
        decision = event.get("decision")
        return {"approved": "· approved", "denied": "· denied"}.get(
            str(decision), "· nobody decided in time; not run")
    if kind == "turn.final_call":
        return "· the model-call limit is reached; asking for the answer"
    return None  # approval.wanted: the approval prompt shows the plan itself


@contextlib.contextmanager
def interrupts(handler: Callable[[], None]) -> Iterator[None]:
    """Route Ctrl-C to ``handler`` inside the block (where the platform allows it)."""
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError, ValueError):  # Windows, or not the main thread
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)

