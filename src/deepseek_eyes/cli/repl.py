"""The input and output of a line-by-line conversation on the standard streams, apart from
what the conversation does (:mod:`deepseek_eyes.cli.chat`).

* The readers are called from the main thread while the event loop runs in another
  (:mod:`deepseek_eyes.cli.chat`), and only between turns: nothing reads ahead, so an
  approval prompt gets the person's answer and a pipe's next line waits for the turn
  before it. :class:`EditingReader` is used when standard input and output are both a
  terminal: the standard library's ``readline`` (GNU readline; ``prompt_toolkit`` would be
  a new dependency for the same keys) edits the line, recalls the history of earlier runs,
  and turns Ctrl-C at the prompt into :class:`KeyboardInterrupt` with the line dropped,
  which only works in the main thread. :class:`LineReader` reads a pipe, one line a
  message. Messages are bounded (:data:`MAX_LINE_CHARS`).
* :class:`InterruptRelay` makes a Ctrl-C end the main thread's wait even when it lands a
  moment before readline starts waiting.
* :class:`Screen` writes the answer to standard output as it streams and every other line
  (events, errors) to standard error, each on a line of its own even when both
  streams are the same terminal. Reasoning is shown only on a terminal: dimmed, or
  prefixed with ``(thinking)`` under ``NO_COLOR``.
  On a terminal, control characters in what the model or an error says are shown as
  ``\ufffd``, never sent: a model that read a hostile page or tool result must not be able
  to move the cursor, retitle the window or write the clipboard (OSC 52). Piped output is
  the text exactly as received.
* :class:`TypeAhead` turns the terminal's echo off while a turn streams, so text typed
  meanwhile is not echoed into the middle of the answer; the terminal keeps it, and it is
  read (and, with line editing, shown at the prompt) as the next message.

Only the standard library is imported: this module is imported when ``chat`` starts.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from deepseek_eyes.cli.progress import Progress
from deepseek_eyes.errors import CliError

__all__ = ["CONTINUATION", "MAX_LINE_CHARS", "PROMPT", "EditingReader", "InterruptRelay",
           "LineReader", "Screen", "ToolTicker", "TypeAhead", "describe_event", "is_terminal"]

#: The longest message read; a longer one is refused whole, never cut.
MAX_LINE_CHARS = 1024 * 1024
PROMPT = "you> "
#: The prompt of a message's next line (after a line ending in a backslash).
CONTINUATION = "...> "
#: How many messages the history file keeps.
HISTORY_LENGTH = 1000
#: Input already waiting this soon after a line ends belongs to it (a paste's next line).
PASTE_GAP_S = 0.05
#: How long a Ctrl-C may go unacted on before the main thread's wait is interrupted again.
NUDGE_S = 0.05
#: C0 and C1 control characters but tab and newline; a carriage return is dropped.
_CONTROLS = {code: "\ufffd" for code in (*range(0x20), *range(0x7F, 0xA0))
             if chr(code) not in "\t\n"} | {ord("\r"): None}


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class LineReader:
    """Standard input one message per call, without line editing (a pipe, or a terminal
    whose standard output is not one); the prompt, if any, goes to ``prompt_to``."""

    def __init__(self, stream: TextIO, prompt_to: TextIO | None = None) -> None:
        self._stream = stream
        self._prompt_to = prompt_to

    def read(self, prompt: str = PROMPT) -> str | None:
        """The next line without its line ending; None at end of input.

        Raises:
            CliError: ``CLI_USAGE`` for a line over :data:`MAX_LINE_CHARS` (it is skipped).
            KeyboardInterrupt: Ctrl-C while waiting (the terminal dropped the line).
        """
        if self._prompt_to is not None:
            self._prompt_to.write(prompt)
            self._prompt_to.flush()
        line = self._stream.readline(MAX_LINE_CHARS + 1)
        if not line:
            return None
        if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
            while True:  # skip the rest of the line, a bounded piece at a time
                rest = self._stream.readline(MAX_LINE_CHARS)
                if not rest or rest.endswith("\n"):
                    break
            raise _too_long()
        return line.rstrip("\r\n")

    def close(self) -> None:
        """Nothing to keep (the editing reader saves its history here)."""


def _too_long() -> CliError:
    return CliError(f"a message is at most {MAX_LINE_CHARS:,} characters; this one was not "
                    "sent", code="CLI_USAGE", details={"limit": MAX_LINE_CHARS})


class EditingReader:
    """A terminal's messages through GNU readline: line editing, and a history kept across
    runs in ``history`` (mode 0600: what a person typed is theirs alone).

    A message is one line, or several: a line ending in a backslash continues on the next
    (:data:`CONTINUATION` prompt), and lines that arrive together, as a pasted block does,
    are one message (what is already waiting when a line ends is read into it).
    """

    def __init__(self, stream: TextIO, history: Path) -> None:
        import readline  # here: importing it switches input() to line editing

        self._readline = readline
        self._stream = stream
        self._history = history
        readline.set_history_length(HISTORY_LENGTH)
        with contextlib.suppress(OSError):  # none yet, or unreadable: start empty
            readline.read_history_file(history)

    @staticmethod
    def available(stdin: TextIO, stdout: TextIO) -> bool:
        """Whether line editing works here: both streams a terminal (input() edits only
        then) and readline importable (it is not on Windows)."""
        if not (is_terminal(stdin) and is_terminal(stdout)):
            return False
        try:
            import readline  # noqa: F401 - the check is whether it imports
        except ImportError:
            return False
        return True

    def read(self, prompt: str = PROMPT) -> str | None:
        """The next message; None at end of input (Ctrl-D on an empty line).

        Raises:
            CliError: ``CLI_USAGE`` for a message over :data:`MAX_LINE_CHARS`.
            KeyboardInterrupt: Ctrl-C at the prompt (readline has dropped the line).
        """
        try:
            lines = [input(prompt)]
        except EOFError:
            return None
        size = len(lines[0])
        while size <= MAX_LINE_CHARS:
            if lines[-1].endswith("\\"):
                lines[-1] = lines[-1][:-1]
                following = CONTINUATION
            elif self._waiting():
                following = ""  # a pasted block's next line: no prompt in its middle
            else:
                break
            try:
                lines.append(input(following))
            except EOFError:
                break
            size += len(lines[-1]) + 1
        if size > MAX_LINE_CHARS:
            raise _too_long()
        return "\n".join(lines)

    def _waiting(self) -> bool:
        """Whether more input is already there (a paste's next line), within a moment."""
        try:
            ready, _, _ = select.select([self._stream], [], [], PASTE_GAP_S)
        except (OSError, ValueError):
            return False
        return bool(ready)

    def close(self) -> None:
        """Save the history (created 0600 before readline writes it)."""
        with contextlib.suppress(OSError):
            os.close(os.open(self._history, os.O_WRONLY | os.O_CREAT, 0o600))
            os.chmod(self._history, 0o600)
            self._readline.write_history_file(self._history)


class InterruptRelay:
    """Makes sure a Ctrl-C ends the main thread's wait, for a line or for a turn.

    Python acts on a signal only when the main thread runs Python code, and a wait in C
    (readline's ``select``, a lock) wakes only if the signal interrupts that very call. A
    Ctrl-C that lands a moment before the call starts (the prompt just drawn, a key just
    echoed), or that the kernel hands to another thread, would wait for the next key. So
    every signal is also written to a pipe (:func:`signal.set_wakeup_fd`), the SIGINT
    handler writes :data:`_ACTED` to the same pipe when the main thread runs it, and a
    thread reading the pipe in order wakes the main thread every :data:`NUDGE_S` while a
    Ctrl-C is written but not yet acted on.

    The wake-up is :data:`_NUDGE`, whose handler does nothing: it only interrupts the
    main thread's wait, and on the way out of it Python runs the SIGINT handler that is
    still due. A nudge that comes just after the Ctrl-C was acted on therefore does
    nothing either, where a second SIGINT would be a second Ctrl-C.
    """

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)  # set_wakeup_fd's requirement
        self._main = threading.main_thread().ident
        self._previous = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._previous_int = signal.signal(signal.SIGINT, self._on_interrupt)
        self._previous_nudge = signal.signal(_NUDGE, _nothing)
        threading.Thread(target=self._relay, name="chat-interrupts", daemon=True).start()

    def _on_interrupt(self, _signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):  # a full pipe: the relay has it to read anyway
            os.write(self._write, _ACTED)
        raise KeyboardInterrupt

    def close(self) -> None:
        signal.signal(signal.SIGINT, self._previous_int)
        signal.signal(_NUDGE, self._previous_nudge)
        signal.set_wakeup_fd(self._previous)
        with contextlib.suppress(OSError):
            os.write(self._write, _STOP)

    def _relay(self) -> None:
        with contextlib.suppress(AttributeError, OSError, ValueError):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, _NUDGE})
        owed = False  # a Ctrl-C written to the pipe and not yet acted on
        while True:
            if not select.select([self._read], [], [], NUDGE_S if owed else None)[0]:
                if self._main:
                    signal.pthread_kill(self._main, _NUDGE)
                continue
            data = os.read(self._read, 512)
            if not data or _STOP[0] in data:
                return
            for byte in data:  # in the order written: a Ctrl-C, then its handler's mark
                if byte == signal.SIGINT:
                    owed = True
                elif byte == _ACTED[0]:
                    owed = False


#: What the SIGINT handler writes to the wake-up pipe (no signal has this number).
_ACTED = b"\xff"
#: What :meth:`InterruptRelay.close` writes to stop the relay (no signal has number 0).
_STOP = b"\0"
#: The signal that wakes the main thread's wait without being a Ctrl-C.
_NUDGE = signal.SIGUSR2


def _nothing(_signum: int, _frame: object) -> None:
    """The nudge's handler: the interrupted wait is all it is for."""


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


class ToolTicker:
    """While tools run, one status line on a terminal's standard error naming them, with
    the time they have run and their server's latest progress, redrawn in place
    (:class:`~deepseek_eyes.cli.progress.Progress`: nothing in the first second, nothing
    when standard error is not a terminal). What is said on lines of its own (a tool's
    start and end) is written inside :meth:`hidden`, so the two never share a line."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream
        self._running: dict[str, str] = {}  # tool -> its latest progress ("" none yet)
        self._line: Progress | None = None

    def on_event(self, event: Mapping[str, Any]) -> None:
        """Follow a turn's event (called before its line, if any, is written)."""
        kind, tool = event.get("type"), str(event.get("tool") or "a tool")
        if kind == "tool.started":
            self._running[tool] = ""
        elif kind == "tool.progress" and tool in self._running:
            self._running[tool] = _progress_text(event)
        elif kind == "tool.finished":
            self._running.pop(tool, None)
        elif kind == "approval.wanted":  # the question owns the terminal until answered
            self._running.clear()
        self._show()

    @property
    def live(self) -> bool:
        """Whether the line is drawn on a terminal (else the ticker says nothing)."""
        return self._stream is not None

    def stop(self) -> None:
        """The turn is over (answered, failed or interrupted): erase the line."""
        self._running.clear()
        self._show()

    @contextlib.contextmanager
    def hidden(self) -> Iterator[None]:
        """Keep the line off the terminal while the caller writes."""
        if self._line is None:
            yield
            return
        with self._line.hidden():
            yield

    def _show(self) -> None:
        if not self._running:
            if self._line is not None:
                self._line.__exit__(None, None, None)
                self._line = None
            return
        if self._line is None:
            if self._stream is None:
                return
            self._line = Progress(self._stream).__enter__()
        self._line.update("· " + ", ".join(
            f"{tool}: {said}" if said else f"{tool} running"
            for tool, said in self._running.items()))


def _progress_text(event: Mapping[str, Any]) -> str:
    done, total = event.get("progress"), event.get("total")
    amount = f"{done:g}/{total:g}" if isinstance(done, int | float) and isinstance(
        total, int | float) else (f"{done:g}" if isinstance(done, int | float) else "")
    text = event.get("text")
    return " ".join(str(part) for part in (amount, text) if part)


def describe_event(event: Mapping[str, Any]) -> str | None:
    """A progress event as one short line (None: nothing to show)."""
    kind = event.get("type")
    if kind == "tool.started":
        return f"· {event.get('tool')}…"
    if kind == "tool.progress":
        # A long tool's advance as its server reports it, with the time it has run.
        return f"· {event.get('tool')}: {_progress_text(event)} ({_seconds(event)})"
    if kind == "tool.finished":
        # How long it took, once that is worth saying (a quick tool's "(0s)" is noise).
        elapsed = event.get("elapsed_s")
        took = f" ({_seconds(event)})" if isinstance(elapsed, int | float) and elapsed >= 1 \
            else ""
        if not event.get("is_error"):
            return f"· done{took}"
        return (f"· error {event.get('code')}" if event.get("code") else "· error") + took
    if kind == "approval.decided":
        decision = event.get("decision")
        return {"approved": "· approved", "denied": "· denied"}.get(
            str(decision), "· nobody decided in time; not run")
    if kind == "turn.final_call":
        return "· the model-call limit is reached; asking for the answer"
    return None  # approval.wanted: the approval prompt shows the plan itself


def _seconds(event: Mapping[str, Any]) -> str:
    elapsed = event.get("elapsed_s")
    return f"{elapsed:.0f}s" if isinstance(elapsed, int | float) else "-"

