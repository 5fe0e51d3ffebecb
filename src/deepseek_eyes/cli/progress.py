"""Progress on standard error for work that takes over a second: one status line, redrawn in
place (``see 2/4 photo.png: getting evidence… 3s``), erased when the work ends.

It speaks only to a person watching a terminal. It is silent when standard error is not a
terminal (piped or redirected: a log file gets no carriage returns) and with ``--json``
(a program reads that output), and it shows nothing during the first second, so a quick
command (a cached ``see``) never flickers a line. Past that second a background thread
redraws the line about twice a second, because the slow step (a route call, OCR in a worker
thread, a model answer) gives the command no chance to redraw it itself.

Written by hand rather than with ``click.progressbar``: the work here has stages, not a
count of items, and the bar has no delay before its first draw. Only the standard library is
imported, as every command that reports progress imports this module and start-up is
measured (``bench/cli_startup.py``).

Anything else written to the terminal while the line is shown (a result on standard output,
an error on standard error) goes inside :meth:`Progress.hidden`, which erases the line first
and holds it off until the write is done, so the two never share a line.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import TextIO

__all__ = ["DELAY_S", "Progress", "progress_on_stderr"]

#: Nothing is drawn before the work has run this long.
DELAY_S = 1.0
#: How often the line is redrawn (its elapsed seconds) while a step runs.
REDRAW_S = 0.5
_FALLBACK_COLUMNS = 80


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns or _FALLBACK_COLUMNS
    except (OSError, ValueError):
        return _FALLBACK_COLUMNS


def progress_on_stderr(*, as_json: bool) -> Progress:
    """The command's progress line: on standard error when it is a terminal and the output
    is not ``--json``, else a :class:`Progress` that never writes."""
    stream = sys.stderr
    return Progress(stream if not as_json and _is_terminal(stream) else None)


class Progress:
    """A status line on ``stream`` (``None``: silent), used as a context manager around the
    work; :meth:`update` names the current step. Thread-safe."""

    def __init__(self, stream: TextIO | None, *, delay: float = DELAY_S,
                 interval: float = REDRAW_S) -> None:
        self.stream = stream
        self.delay = delay
        self.interval = interval
        self._text = ""
        self._started = time.monotonic()
        self._line = ""  # the line now on the terminal ("": nothing drawn)
        self._held = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        if self.stream is not None:
            self._thread = threading.Thread(target=self._redraw, name="progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._erase()

    def update(self, text: str) -> None:
        """Name the step now running; drawn at once if the first second has passed."""
        # A file name may hold a newline or an escape sequence: either would break the line.
        printable = "".join(char if char.isprintable() else "?" for char in text)
        with self._lock:
            self._text = printable
            self._draw()

    @contextlib.contextmanager
    def hidden(self) -> Iterator[None]:
        """Erase the line and keep it off the terminal while the caller writes."""
        with self._lock:
            self._erase()
            self._held = True
        try:
            yield
        finally:
            with self._lock:
                self._held = False

    def _redraw(self) -> None:
        if self._stop.wait(self.delay):
            return
        while True:
            with self._lock:
                self._draw()
            if self._stop.wait(self.interval):
                return

    def _draw(self) -> None:
        """Draw the line (the lock is held)."""
        elapsed = time.monotonic() - self._started
        if self.stream is None or self._held or not self._text or elapsed < self.delay:
            return
        # One character short of the width: a line that fills it would wrap, and \r would
        # then return to its second row, leaving the first behind on every redraw.
        line = f"{self._text} {int(elapsed)}s"[: _columns(self.stream) - 1]
        if line != self._line:
            self._write("\r" + line.ljust(len(self._line)))
            self._line = line

    def _erase(self) -> None:
        """Blank the drawn line and return to its start (the lock is held)."""
        if self._line:
            self._write("\r" + " " * len(self._line) + "\r")
            self._line = ""

    def _write(self, text: str) -> None:
        if self.stream is None:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: stop drawing, never fail
            self.stream = None
