"""Run one child: ``subprocess.Popen`` with an argv, no shell, its own process group.

The child gets stdin from ``/dev/null``, the environment from :mod:`.sandbox`, and a new
session (so it has no controlling terminal and leads its own process group). Its output is
read on the event loop as it arrives (no reader threads): each chunk is counted and hashed
in full, kept up to a byte limit (then marked truncated), and handed to a callback that
publishes live events. Reading never waits for subscribers, so a slow console cannot slow
the command.

Signals go to the whole group: pause (SIGSTOP), resume (SIGCONT), cancel and timeout
(SIGKILL). When the leader exits, the rest of its group is killed too, so a backgrounded
grandchild cannot outlive the execution or hold its pipes open.

Why the pipes and the pidfd are read with ``loop.add_reader``, and the end is one future
that those callbacks settle, rather than pipe transports and ``wait_for`` chains: beyond
``subprocess.run``, a short command costs event-loop hops. Pipe transports connect through
waiter futures (and a task per pipe to connect both at once), and ``wait_for(shield())`` on
the exit and again on the readers made an execution about fifteen loop iterations, about
0.26 ms over ``subprocess.run`` for ``true``. Here the exit and both EOFs usually arrive in
one ``epoll`` wake-up, the callback that sees the last of them settles the future, and
:meth:`RunningProcess.finished` wakes once (five iterations, about 0.15 ms). Timeouts are
timers that kill the group, so even a timed-out command ends through the same callbacks.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import fcntl
import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

__all__ = ["OutputCapture", "ProcessOutcome", "RunningProcess"]

_DRAIN_AFTER_EXIT_S = 5.0
_WAIT_AFTER_KILL_S = 10.0
_READ_BYTES = 256 * 1024  # per wake-up, as asyncio's pipe transport reads


@dataclass
class OutputCapture:
    """One stream: every byte counted and hashed, the first ``limit`` bytes kept."""

    limit: int
    kept: bytearray = field(default_factory=bytearray)
    total: int = 0
    truncated: bool = False
    _sha: Any = field(default_factory=hashlib.sha256)

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        self._sha.update(data)
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += data[:room]
        if len(data) > max(room, 0):
            self.truncated = True

    @property
    def sha256(self) -> str:
        return str(self._sha.hexdigest())

    def text(self) -> str:
        return bytes(self.kept).decode("utf-8", "replace")


@dataclass(frozen=True)
class ProcessOutcome:
    status: str  # completed, failed, timed_out, cancelled, expired
    exit_code: int | None
    signal: str | None
    started_at: float
    ended_at: float
    duration_ms: float


OutputCallback = Callable[[str, str], None]


class _Pipe:
    """One output pipe of the child, read without blocking whenever the loop sees data."""

    def __init__(self, name: str, file: IO[bytes]) -> None:
        self.name = name
        self.file = file
        self.fd = file.fileno()
        self.open = True
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        os.set_blocking(self.fd, False)


_PIPE_BYTES = 1024 * 1024
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)  # Linux; Python 3.10+ names it


def _widen(pipe: IO[bytes]) -> None:
    """A 1 MiB pipe (Linux): a fast writer fills fewer, larger chunks, so the loop wakes,
    hashes, redacts and publishes a quarter as often. Best effort: the default still works."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError):
        fcntl.fcntl(pipe.fileno(), _F_SETPIPE_SZ, _PIPE_BYTES)


class RunningProcess:
    """A started child. Create with :meth:`start`, then ``await finished()``."""

    def __init__(self, popen: subprocess.Popen[bytes], limit: int,
                 on_output: OutputCallback) -> None:
        self.popen = popen
        self.pgid = popen.pid  # start_new_session: the child leads its own group
        self.on_output = on_output
        self.captures = {"stdout": OutputCapture(limit), "stderr": OutputCapture(limit)}
        self.started_at = time.time()
        self._t0 = time.monotonic()
        self.paused = False
        self._reason: str | None = None  # why we killed it: timed_out, cancelled, expired
        self._loop = asyncio.get_running_loop()
        self._pipes: list[_Pipe] = []
        self._pidfd: int | None = None
        self._exited = False  # the leader's exit was seen (or waiting for it was given up)
        self._code: int | None = None
        self._timer: asyncio.TimerHandle | None = None  # the timeout, then the drain
        self._ended = 0.0
        self._duration = 0.0
        # Set once the leader has exited and both pipes are closed (or given up on).
        self._settled: asyncio.Future[None] = self._loop.create_future()

    @classmethod
    def start(
        cls, argv: list[str], *, executable: str, cwd: str, env: dict[str, str], limit: int,
        on_output: OutputCallback,
    ) -> RunningProcess:
        """Spawn the child and start reading it (on the running loop).

        Raises:
            OSError: the child cannot be started.
        """
        popen = subprocess.Popen(  # noqa: S603 - argv list, no shell: the whole point
            argv, executable=executable, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            close_fds=True, bufsize=0,
        )
        proc = cls(popen, limit, on_output)
        for name, file in (("stdout", popen.stdout), ("stderr", popen.stderr)):
            if file is None:  # never: both are PIPE above (the type allows None)
                continue
            _widen(file)
            pipe = _Pipe(name, file)
            proc._pipes.append(pipe)
            proc._loop.add_reader(pipe.fd, proc._on_readable, pipe)
        proc._watch_exit()
        return proc

    # -- the child's output and exit, as the loop sees them ---------------------------------

    def _on_readable(self, pipe: _Pipe) -> None:
        try:
            data = os.read(pipe.fd, _READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""  # an unreadable pipe ends like a closed one
        if not data:
            self._close_pipe(pipe)
            if self._exited and not self._draining():
                self._settle()
            return
        self.captures[pipe.name].feed(data)
        text = pipe.decoder.decode(data)
        if text:
            self.on_output(pipe.name, text)

    def _close_pipe(self, pipe: _Pipe) -> None:
        if not pipe.open:
            return
        pipe.open = False
        self._loop.remove_reader(pipe.fd)
        with contextlib.suppress(OSError):
            pipe.file.close()
        tail = pipe.decoder.decode(b"", final=True)
        if tail:
            self.on_output(pipe.name, tail)

    def _watch_exit(self) -> None:
        try:
            self._pidfd = os.pidfd_open(self.popen.pid)
        except (AttributeError, OSError):
            fut = self._loop.run_in_executor(None, self.popen.wait)
            fut.add_done_callback(lambda f: self._on_exit(f.result()))
            return
        self._loop.add_reader(self._pidfd, self._on_pidfd)

    def _on_pidfd(self) -> None:
        code = self.popen.poll()
        if code is not None:
            self._close_pidfd()
            self._on_exit(code)

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _on_exit(self, code: int | None) -> None:
        """The leader exited with ``code`` (None: it did not die within the wait after
        SIGKILL). Its group dies with it; its pipes get a bounded time to drain."""
        if self._exited:
            return
        self._exited = True
        self._code = code
        self._signal_group(signal.SIGKILL)  # stragglers of the group die with the leader
        if self._draining():
            self._arm(_DRAIN_AFTER_EXIT_S, self._stop_draining)
        else:
            self._settle()

    def _draining(self) -> bool:
        return any(pipe.open for pipe in self._pipes)

    def _stop_draining(self) -> None:
        for pipe in self._pipes:
            self._close_pipe(pipe)
        self._settle()

    def _settle(self) -> None:
        """The leader is gone and its pipes are closed: :meth:`finished` may return."""
        self._disarm()
        self._close_pidfd()
        self._ended = time.time()
        self._duration = (time.monotonic() - self._t0) * 1000.0
        if not self._settled.done():  # done already only if the waiter was cancelled
            self._settled.set_result(None)

    def _arm(self, delay: float, callback: Callable[[], None]) -> None:
        """Replace the one pending timer: the timeout, the wait after SIGKILL or the drain."""
        self._disarm()
        self._timer = self._loop.call_later(delay, callback)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _time_out(self) -> None:
        self.kill("timed_out")
        # Only if the kernel ignored SIGKILL: stop waiting for the exit after a while.
        self._arm(_WAIT_AFTER_KILL_S, lambda: self._on_exit(None))

    # -- control ----------------------------------------------------------------------------

    def _signal_group(self, sig: int) -> bool:
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    @property
    def running(self) -> bool:
        return not self._exited

    def pause(self) -> bool:
        if self.running and self._signal_group(signal.SIGSTOP):
            self.paused = True
            return True
        return False

    def resume(self) -> bool:
        if self.running and self._signal_group(signal.SIGCONT):
            self.paused = False
            return True
        return False

    def kill(self, reason: str) -> None:
        """End the whole group now; ``reason`` becomes the outcome's status."""
        if self._reason is None:
            self._reason = reason
        self._signal_group(signal.SIGKILL)
        self._signal_group(signal.SIGCONT)  # a stopped group still dies, but be explicit

    # -- completion -------------------------------------------------------------------------

    async def finished(self, timeout: float) -> ProcessOutcome:
        """Wait for the child (killing the group at ``timeout``) and for its output."""
        if not self._exited:
            self._arm(timeout, self._time_out)
        await self._settled
        code = self._code
        sig_name: str | None = None
        exit_code: int | None = code
        if code is not None and code < 0:
            sig_name = signal.Signals(-code).name if -code in signal.valid_signals() else str(
                -code
            )
            exit_code = None
        if self._reason is not None:
            status = self._reason
        elif code == 0:
            status = "completed"
        else:
            status = "failed"
        return ProcessOutcome(status, exit_code, sig_name, self.started_at, self._ended,
                              self._duration)
