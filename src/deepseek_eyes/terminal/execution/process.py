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
from typing import Any

__all__ = ["OutputCapture", "ProcessOutcome", "RunningProcess"]

_DRAIN_AFTER_EXIT_S = 5.0
_WAIT_AFTER_KILL_S = 10.0


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


class _PipeReader(asyncio.Protocol):
    def __init__(self, name: str, owner: RunningProcess) -> None:
        self.name = name
        self.owner = owner
        self.closed = asyncio.get_running_loop().create_future()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def data_received(self, data: bytes) -> None:
        self.owner.captures[self.name].feed(data)
        text = self._decoder.decode(data)
        if text:
            self.owner.on_output(self.name, text)

    def eof_received(self) -> bool | None:
        tail = self._decoder.decode(b"", final=True)
        if tail:
            self.owner.on_output(self.name, tail)
        return None

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002 - protocol API
        if not self.closed.done():
            self.closed.set_result(None)


_PIPE_BYTES = 1024 * 1024
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)  # Linux; Python 3.10+ names it


def _widen(pipe: Any) -> None:
    """A 1 MiB pipe (Linux): a fast writer fills fewer, larger chunks, so the loop wakes,
    hashes, redacts and publishes a quarter as often. Best effort: the default still works."""
    if pipe is None or not sys.platform.startswith("linux"):
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
        self._readers: list[_PipeReader] = []
        self._exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pidfd: int | None = None

    @classmethod
    async def start(
        cls, argv: list[str], *, executable: str, cwd: str, env: dict[str, str], limit: int,
        on_output: OutputCallback,
    ) -> RunningProcess:
        """Spawn the child. Raises ``OSError`` when it cannot be started."""
        popen = subprocess.Popen(  # noqa: S603 - argv list, no shell: the whole point
            argv, executable=executable, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            close_fds=True, bufsize=0,
        )
        proc = cls(popen, limit, on_output)
        loop = asyncio.get_running_loop()
        pipes = (("stdout", popen.stdout), ("stderr", popen.stderr))
        for _, pipe in pipes:
            _widen(pipe)
        proc._readers = [_PipeReader(name, proc) for name, _ in pipes]
        # Both pipes are connected in the same loop iteration (one wake-up, not two).
        await asyncio.gather(*(
            loop.connect_read_pipe(lambda r=reader: r, pipe)  # type: ignore[misc]
            for reader, (_, pipe) in zip(proc._readers, pipes, strict=True)
        ))
        proc._watch_exit()
        return proc

    def _watch_exit(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            self._pidfd = os.pidfd_open(self.popen.pid)
        except (AttributeError, OSError):
            fut = loop.run_in_executor(None, self.popen.wait)
            fut.add_done_callback(lambda f: self._set_exit(f.result()))
            return
        loop.add_reader(self._pidfd, self._on_pidfd)

    def _on_pidfd(self) -> None:
        code = self.popen.poll()
        if code is not None:
            self._close_pidfd()
            self._set_exit(code)

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _set_exit(self, code: int) -> None:
        if not self._exited.done():
            self._exited.set_result(code)

    # -- control ----------------------------------------------------------------------------

    def _signal_group(self, sig: int) -> bool:
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    @property
    def running(self) -> bool:
        return not self._exited.done()

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
        try:
            await asyncio.wait_for(asyncio.shield(self._exited), timeout)
        except TimeoutError:
            self.kill("timed_out")
            with contextlib.suppress(TimeoutError):  # only if the kernel ignored SIGKILL
                await asyncio.wait_for(asyncio.shield(self._exited), _WAIT_AFTER_KILL_S)
        code = self._exited.result() if self._exited.done() else None
        self._signal_group(signal.SIGKILL)  # stragglers of the group die with the leader
        readers = [r.closed for r in self._readers]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*readers), _DRAIN_AFTER_EXIT_S)
        self._close_pidfd()
        for pipe in (self.popen.stdout, self.popen.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        ended = time.time()
        duration = (time.monotonic() - self._t0) * 1000.0
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
        return ProcessOutcome(status, exit_code, sig_name, self.started_at, ended, duration)
