"""A stdio server's stderr, kept in a bounded, rotated file in the data directory.

A stdio server's stderr is its log; the SDK hands it the parent's stderr by default, so a
chatty or crashing server wrote over the operator's terminal (and the CLI's JSON users'
stderr). Here each server gets ``<data home>/logs/mcp/<id>.stderr.log``.

Why a pipe and a thread rather than the file itself as the child's stderr: a child writing
straight into a file cannot be bounded, and its lines could not be scrubbed. The child
writes into a pipe; a daemon thread reads it, scrubs each line with the server's
:class:`~deepseek_eyes.mcp_host.redact.Redactor` (a server may log the token it was given),
and appends it to the file, which rotates at :data:`MAX_BYTES` keeping :data:`BACKUPS`
older files. The thread ends when the last holder of the pipe (the child, or a grandchild
it left behind) closes it; it is a daemon so that a grandchild that never exits cannot
hold this process open. Blocking reads of a pipe are what threads are for: the event loop
never waits on it.
"""

from __future__ import annotations

import codecs
import contextlib
import datetime as dt
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from deepseek_eyes.mcp_host.redact import Redactor

__all__ = ["BACKUPS", "LINE_CAP", "MAX_BYTES", "StderrLog", "server_log_dir"]

MAX_BYTES = 1 << 20
BACKUPS = 2
#: Characters of a line without a newline held before it is written anyway.
LINE_CAP = 8192


def server_log_dir(data_home: Path) -> Path:
    """Where the servers' stderr logs live under a data directory."""
    return data_home / "logs" / "mcp"


class StderrLog:
    """One server's stderr file, shared by every connection to that server."""

    def __init__(self, path: Path, redactor: Redactor | None = None, *,
                 max_bytes: int = MAX_BYTES, backups: int = BACKUPS) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None

    @contextlib.contextmanager
    def pipe(self) -> Iterator[TextIO]:
        """The write end of a new pipe for one child's stderr, read into the file.

        Close it (or leave the block) once the child holds its own copy: the reader ends
        only when every copy of the write end is closed.
        """
        read_fd, write_fd = os.pipe()
        try:
            writer = os.fdopen(write_fd, "w", encoding="utf-8")
        except BaseException:
            os.close(read_fd)
            os.close(write_fd)
            raise
        self.write_line(f"--- {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')} "
                        "server started ---")
        thread = threading.Thread(target=self._drain, args=(read_fd,), daemon=True,
                                  name=f"mcp-stderr:{self.path.stem}")
        thread.start()
        self._reader = thread
        try:
            yield writer
        finally:
            writer.close()

    def drained(self, timeout: float) -> bool:
        """Wait until the latest pipe's reader has written everything (its writers closed)."""
        reader = self._reader
        if reader is not None:
            reader.join(timeout)
        return reader is None or not reader.is_alive()

    def _drain(self, fd: int) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        try:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                pending += decoder.decode(chunk)
                *lines, pending = pending.split("\n")
                while len(pending) > LINE_CAP:
                    lines.append(pending[:LINE_CAP])
                    pending = pending[LINE_CAP:]
                for line in lines:
                    self.write_line(line)
            pending += decoder.decode(b"", final=True)
            if pending:
                self.write_line(pending)
        finally:
            os.close(fd)

    def write_line(self, line: str) -> None:
        """Append one scrubbed line, rotating first when it would pass the bound."""
        data = (self.redactor.scrub(line.rstrip("\r")) + "\n").encode("utf-8", "replace")
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                size = self.path.stat().st_size if self.path.exists() else 0
                if size and size + len(data) > self.max_bytes:
                    self._rotate()
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, data[: self.max_bytes])
                finally:
                    os.close(fd)
            except OSError:
                return  # a log that cannot be written must not take the server down

    def _rotate(self) -> None:
        for index in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{index + 1}"))
        if self.backups > 0:
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink()
