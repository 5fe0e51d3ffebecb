"""Observe what a command really does: every program it executes and every file it opens.

Runs a command under Debian's ``strace -f -y`` (``-y`` prints the real path of every file
descriptor an open returns, so symlinks and ``..`` are already resolved by the kernel) and
returns what happened. The tripwire tests use it to prove the policy and the sandbox by
observation rather than by the policy's own verdict.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from deepseek_eyes.terminal.sandbox import ETC_ENTRIES, SYSTEM_DIRS

__all__ = ["Trace", "trace_command"]

_EXEC = re.compile(r'^\d+\s+execve\("((?:[^"\\]|\\.)*)"')
_OPEN_OK = re.compile(r"^\d+\s+(?:open|openat|openat2|creat)\(.*\)\s+=\s+\d+<(.*)>$")
_SYSTEM_PREFIXES = tuple(d + "/" for d in SYSTEM_DIRS)
_ETC = tuple(f"/etc/{name}" for name in ETC_ENTRIES)
_PSEUDO_OK = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/pts/",
              "/proc/self/", "/proc/thread-self/", "/proc/meminfo", "/proc/cpuinfo",
              "/proc/stat", "/proc/uptime", "/proc/loadavg", "/proc/filesystems",
              "/proc/sys/kernel/", "/proc/mounts", "/sys/devices/system/cpu/",
              "/sys/fs/cgroup/")


@dataclass
class Trace:
    returncode: int
    stdout: bytes
    stderr: bytes
    execs: list[str] = field(default_factory=list)
    opens: list[str] = field(default_factory=list)  # real paths of successful opens

    def opens_outside(self, allowed_roots: list[str]) -> list[str]:
        """Opened paths outside ``allowed_roots``, the system directories and the /etc
        files a sandboxed program is given."""
        bad = []
        for path in self.opens:
            if path.startswith(_SYSTEM_PREFIXES) or path in _ETC or path.startswith(
                tuple(e + "/" for e in _ETC)
            ):
                continue
            if path.startswith(_PSEUDO_OK) or re.match(r"^/proc/\d+/(stat|status|maps)$", path):
                continue
            if any(path == r or path.startswith(r.rstrip("/") + "/") for r in allowed_roots):
                continue
            if path.startswith(("pipe:", "socket:", "anon_inode:", "/memfd:")):
                continue
            bad.append(path)
        return bad


def trace_command(
    argv: list[str], *, cwd: str, env: dict[str, str], log_dir: Path, timeout: float = 10.0,
) -> Trace:
    """Run ``argv`` under strace with stdin from /dev/null; never raises on the command's
    own failure (a timeout kills it and returns code -9)."""
    log = log_dir / f"strace-{os.getpid()}-{len(list(log_dir.iterdir()))}.log"
    full = ["strace", "-f", "-qq", "-y", "-s", "256", "-o", str(log),
            "-e", "trace=execve,execveat,open,openat,openat2,creat", "--", *argv]
    try:
        done = subprocess.run(  # noqa: S603 - a test runs a fixed tool on generated argv
            full, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
            timeout=timeout, check=False,
        )
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = -9, exc.stdout or b"", exc.stderr or b""
    trace = Trace(code, out, err)
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    for line in text.splitlines():
        exec_match = _EXEC.match(line)
        if exec_match:
            trace.execs.append(exec_match.group(1))
            continue
        open_match = _OPEN_OK.match(line)
        if open_match:
            trace.opens.append(open_match.group(1))
    log.unlink(missing_ok=True)
    return trace
