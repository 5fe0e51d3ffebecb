"""One Code Mode program run: bubblewrap, the limits, the tool pipe, the bounded output.

The sandbox is the boundary, not a review of the program (docs/code-mode.md has the threat
model). The bubblewrap argv is the terminal's (:func:`~deepseek_eyes.terminal.execution.
sandbox.wrap_argv`: ``--unshare-all`` with no ``--share-net``, the read-only system view, a
private ``/tmp``, ``/dev`` and ``/proc``, ``--die-with-parent``) around an empty scratch
directory as cwd and HOME, with the terminal's allowlisted environment; no workspace root
and nothing of the data directory is mounted. Three things are added here:

* ``--new-session`` (no terminal to push input into) and a seccomp filter that refuses
  every new process (``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD``; ``clone3``
  answers ENOSYS so the C library falls back to ``clone``): threads work, fork bombs do
  not. ``RLIMIT_NPROC`` is no bound here: a root host's processes are exempt from it even
  inside a user namespace (observed: 32,000 forks under a limit of 16).
* resource limits set by the runner before the program's first line (CPU seconds, address
  space, file size, open files, no core files), and a wall-clock deadline kept here;
* the tool pipe: the program writes one JSON request a line to an inherited pipe and reads
  one JSON answer a line from another; :class:`Channel` answers each by calling back into
  the host (the same dispatch a native tool call takes).

Without a working bwrap the run is refused (``RUNTIME_CODE_SANDBOX_UNAVAILABLE``), never
run unsandboxed. Output is counted as it arrives; past the bound the process group is
killed and the run is ``RUNTIME_CODE_OUTPUT_LIMIT`` (the output is not published as a
prefix).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import signal
import struct
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from deepseek_eyes.errors import TurnError
from deepseek_eyes.runtime.code.sdk import RUNNER
from deepseek_eyes.terminal.execution.sandbox import (
    SandboxPlan,
    bwrap_available,
    child_environment,
    make_home,
    remove_home,
    wrap_argv,
)

__all__ = ["SYSTEM_PYTHON", "Limits", "Run", "Sandbox", "seccomp_filter"]

#: The interpreter inside the sandbox: the system's, under the read-only /usr.
SYSTEM_PYTHON = "/usr/bin/python3"
#: One request line from the program, at most (a longer one ends the run).
MAX_REQUEST_BYTES = 1024 * 1024

Handler = Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Limits:
    """What one program may use."""

    wall_seconds: float = 30.0
    cpu_seconds: int = 10
    memory_bytes: int = 512 * 1024 * 1024
    output_bytes: int = 64 * 1024  # stdout and stderr, each
    file_bytes: int = 16 * 1024 * 1024
    open_files: int = 64

    def rlimits(self) -> dict[str, tuple[int, int]]:
        """``(soft, hard)`` per limit; the CPU's hard limit a second later, so the program
        is told (SIGXCPU) before it is killed."""
        return {"RLIMIT_CPU": (self.cpu_seconds, self.cpu_seconds + 1),
                "RLIMIT_AS": (self.memory_bytes,) * 2, "RLIMIT_FSIZE": (self.file_bytes,) * 2,
                "RLIMIT_NOFILE": (self.open_files,) * 2, "RLIMIT_CORE": (0, 0)}


@dataclass
class Run:
    """How a program ended: its exit code, its (bounded) output, how long it took."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    seconds: float
    requests: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


# -- the seccomp filter ------------------------------------------------------------------
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
#: (clone, clone3, fork, vfork) per architecture; aarch64 has no fork/vfork.
_NR = {"x86_64": (56, 435, 57, 58), "aarch64": (220, 435, None, None)}
_CLONE_THREAD = 0x00010000
_ALLOW, _ERRNO, _KILL = 0x7FFF0000, 0x00050000, 0x80000000
_EPERM, _ENOSYS = 1, 38
_LD, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """A classic-BPF seccomp program refusing new processes (threads allowed), for
    ``bwrap --seccomp FD``; None on an architecture it does not know."""
    machine = machine or platform.machine()
    if machine not in _AUDIT_ARCH:
        return None
    clone, clone3, fork, vfork = _NR[machine]
    prog: list[tuple[int, int, int, int]] = [
        (_LD, 0, 0, 4),                                 # arch
        (_JEQ, 1, 0, _AUDIT_ARCH[machine]),
        (_RET, 0, 0, _KILL),                            # another ABI: no
        (_LD, 0, 0, 0),                                 # syscall number
        (_JEQ, 0, 1, clone3), (_RET, 0, 0, _ERRNO | _ENOSYS),
    ]
    for number in (fork, vfork):
        if number is not None:
            prog += [(_JEQ, 0, 1, number), (_RET, 0, 0, _ERRNO | _EPERM)]
    prog += [
        (_JEQ, 1, 0, clone), (_RET, 0, 0, _ALLOW),
        (_LD, 0, 0, 16),                                # clone's flags (low 32 bits)
        (_JSET, 0, 1, _CLONE_THREAD), (_RET, 0, 0, _ALLOW),
        (_RET, 0, 0, _ERRNO | _EPERM),
    ]
    return b"".join(struct.pack("=HBBI", *insn) for insn in prog)


def _unavailable(why: str) -> TurnError:
    return TurnError(f"Code Mode needs a working bubblewrap sandbox ({why}); the program "
                     "was not run", code="RUNTIME_CODE_SANDBOX_UNAVAILABLE")


class Sandbox:
    """Runs programs under bubblewrap; ``bwrap`` overrides the probe (tests, None: refused)."""

    def __init__(self, limits: Limits, *, bwrap: str | bool | None = True) -> None:
        self.limits = limits
        self._bwrap = bwrap

    def bwrap(self) -> str | None:
        if self._bwrap is True:
            return bwrap_available()
        return self._bwrap or None

    def check(self) -> str:
        """The bwrap path. Raises TurnError RUNTIME_CODE_SANDBOX_UNAVAILABLE."""
        path = self.bwrap()
        if path is None:
            raise _unavailable("bwrap is missing or cannot build a sandbox here")
        if not os.access(SYSTEM_PYTHON, os.X_OK):
            raise _unavailable(f"{SYSTEM_PYTHON} is missing")
        if seccomp_filter() is None:
            raise _unavailable(f"no process filter for {platform.machine()}")
        return path

    async def run(self, code: str, sdk: str, handler: Handler) -> Run:
        """Run ``code`` with the ``tools`` module ``sdk``; each tool request goes to
        ``handler``.

        Raises:
            TurnError: RUNTIME_CODE_SANDBOX_UNAVAILABLE (nothing ran),
                RUNTIME_CODE_TIMEOUT, RUNTIME_CODE_OUTPUT_LIMIT, RUNTIME_CODE_PROTOCOL.
        """
        bwrap = self.check()
        home = make_home()
        fds: list[int] = []
        try:
            answers_r, answers_w = os.pipe()
            requests_r, requests_w = os.pipe()
            fds += [answers_r, answers_w, requests_r, requests_w]
            filter_fd = os.memfd_create("seccomp", 0)
            fds.append(filter_fd)
            os.write(filter_fd, seccomp_filter() or b"")
            os.lseek(filter_fd, 0, os.SEEK_SET)
            inner = [SYSTEM_PYTHON, "-I", "-c", RUNNER, str(answers_r), str(requests_w)]
            argv, _ = wrap_argv(inner, SYSTEM_PYTHON, home, home, (),
                                SandboxPlan("bwrap", network=False, workspace_writable=False),
                                bwrap)
            argv = [argv[0], "--new-session", "--seccomp", str(filter_fd), *argv[1:]]
            document = json.dumps({"limits": self.limits.rlimits(), "sdk": sdk, "code": code})
            started = time.monotonic()
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=child_environment(home), cwd=home,
                start_new_session=True, pass_fds=(answers_r, requests_w, filter_fd))
            for fd in (answers_r, requests_w, filter_fd):  # the child's ends: theirs now
                os.close(fd)
                fds.remove(fd)
            return await self._supervise(proc, document.encode(), requests_r, answers_w,
                                         handler, started)
        except OSError as exc:
            raise _unavailable(f"the sandbox could not start: {exc.strerror or exc}") from None
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            remove_home(home)

    async def _supervise(self, proc: asyncio.subprocess.Process, document: bytes,
                         requests_fd: int, answers_fd: int, handler: Handler,
                         started: float) -> Run:
        limits = self.limits
        over: list[str] = []
        outputs = {"stdout": bytearray(), "stderr": bytearray()}
        served = [0]

        def kill() -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

        async def drain(name: str, stream: asyncio.StreamReader | None) -> None:
            if stream is None:
                return
            buffer = outputs[name]
            while chunk := await stream.read(65536):
                buffer += chunk
                if len(buffer) > limits.output_bytes:
                    over.append(name)
                    # Our end closed first: the program's next write fails (EPIPE) even
                    # if a kill this early races bubblewrap's own set-up.
                    transport = getattr(stream, "_transport", None)
                    if transport is not None:
                        transport.close()
                    kill()
                    return

        async def serve() -> None:
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(limit=MAX_REQUEST_BYTES)
            rfile = os.fdopen(os.dup(requests_fd), "rb", buffering=0)
            wfile = os.fdopen(os.dup(answers_fd), "wb", buffering=0)
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), rfile)
            try:
                while True:
                    try:
                        line = await reader.readline()
                    except ValueError:  # over MAX_REQUEST_BYTES
                        over.append("request")
                        kill()
                        return
                    if not line:
                        return
                    try:
                        request = json.loads(line)
                        if not isinstance(request, dict):
                            raise ValueError("not an object")
                    except ValueError:
                        over.append("request")
                        kill()
                        return
                    served[0] += 1
                    answer = await handler(request)
                    data = json.dumps(answer).encode() + b"\n"
                    try:
                        await loop.run_in_executor(None, wfile.write, data)
                    except OSError:  # the program is gone
                        return
            finally:
                transport.close()
                wfile.close()

        async def feed() -> None:
            assert proc.stdin is not None
            with contextlib.suppress(OSError, ConnectionError):
                proc.stdin.write(document)
                await proc.stdin.drain()
            proc.stdin.close()

        work = asyncio.gather(feed(), drain("stdout", proc.stdout),
                              drain("stderr", proc.stderr), proc.wait())
        server = asyncio.ensure_future(serve())
        timed_out = False
        try:
            async with asyncio.timeout(limits.wall_seconds):
                await work
        except TimeoutError:
            timed_out = True
            kill()
            await proc.wait()
        except BaseException:
            kill()
            raise
        finally:
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await server
        seconds = time.monotonic() - started
        code = proc.returncode
        details = {"seconds": round(seconds, 3), "requests": served[0]}
        # bwrap reports the program's death by a signal as 128 + its number.
        if timed_out or code in (128 + signal.SIGXCPU, -signal.SIGXCPU):
            raise TurnError(f"the program was stopped after {seconds:.1f} s (the time or "
                            "CPU limit)", code="RUNTIME_CODE_TIMEOUT", details=details)
        if "stdout" in over or "stderr" in over:
            raise TurnError(f"the program printed more than {limits.output_bytes} bytes; "
                            "it was stopped", code="RUNTIME_CODE_OUTPUT_LIMIT", details=details)
        if "request" in over:
            raise TurnError("the program sent a tool request that is not one JSON object "
                            f"of at most {MAX_REQUEST_BYTES} bytes on one line",
                            code="RUNTIME_CODE_PROTOCOL", details=details)
        return Run(code, bytes(outputs["stdout"]), bytes(outputs["stderr"]), seconds,
                   served[0])
