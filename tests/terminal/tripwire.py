"""Observe what a command really does: every program it executes and every file it opens.

Runs a command under Debian's ``strace -f -y`` (``-y`` prints the real path of every file
descriptor an open returns, so symlinks and ``..`` are already resolved by the kernel) and
returns what happened. The tripwire tests use it to prove the policy and the sandbox by
observation rather than by the policy's own verdict.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from deepseek_eyes.terminal.execution.sandbox import (
    ETC_ENTRIES,
    SYSTEM_DIRS,
    SandboxPlan,
    child_environment,
    make_home,
    wrap_argv,
)
from deepseek_eyes.terminal.policy.engine import PolicyEngine
from deepseek_eyes.terminal.policy.paths import Workspace

__all__ = ["Arena", "Trace", "assert_contained", "build_arena", "run_as_planned",
           "trace_command"]

_EXEC = re.compile(r'^\d+\s+execve\("((?:[^"\\]|\\.)*)"')
_OPEN_OK = re.compile(r"^(\d+)\s+(?:open|openat|openat2|creat)\((.*)\)\s+=\s+\d+<(.*)>$")
_PID = re.compile(r"^(\d+)\s")
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
    pids: set[str] = field(default_factory=set)  # every traced process

    def opens_outside(self, allowed_roots: list[str]) -> list[str]:
        """Opened paths outside ``allowed_roots``, the system directories and the /etc
        files a sandboxed program is given."""
        bad = []
        for path in self.opens:
            if path.startswith(_SYSTEM_PREFIXES) or path in _ETC or path.startswith(
                tuple(e + "/" for e in _ETC)
            ):
                continue
            if path.startswith(_PSEUDO_OK):
                continue
            own = re.match(r"^/proc/(\d+)/", path)
            if own and own.group(1) in self.pids:
                continue  # a traced process reading its own /proc entry, as /proc/self
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
        pid = _PID.match(line)
        if pid:
            trace.pids.add(pid.group(1))
        exec_match = _EXEC.match(line)
        if exec_match:
            trace.execs.append(exec_match.group(1))
            continue
        open_match = _OPEN_OK.match(line)
        if open_match and "O_PATH" not in open_match.group(2):
            # An O_PATH descriptor reads nothing (systemd's NSS module walks "/", "/run"
            # with them); every descriptor that can read or write is counted.
            trace.opens.append(open_match.group(3))
    log.unlink(missing_ok=True)
    return trace


@dataclass(frozen=True)
class Arena:
    ws: Path
    outside: Path
    protected: Path
    home: str
    canaries: tuple[bytes, ...]
    logs: Path

    def engine(self) -> PolicyEngine:
        return PolicyEngine(Workspace.of([self.ws], [self.protected]), "read-only")


def build_arena(root: Path, *, protected_inside: bool = True) -> Arena:
    canary_out = b"CANARY-OUTSIDE-" + secrets.token_hex(8).encode()
    canary_key = b"CANARY-KEYRING-" + secrets.token_hex(8).encode()
    ws, outside, logs = root / "ws", root / "outside", root / "logs"
    for d in (ws / "sub", ws / "deep", outside / "dir", logs):
        d.mkdir(parents=True)
    (outside / "secret.txt").write_bytes(canary_out + b"\n")
    (outside / "dir" / "more.txt").write_bytes(canary_out + b"\n")
    (ws / "a.txt").write_text("alpha e w\nbeta\n")
    (ws / "b.txt").write_text("beta\ngamma\n")
    (ws / "sub" / "c.txt").write_text("gamma\n")
    (ws / "out-link").symlink_to(outside)
    (ws / "file-link").symlink_to(outside / "secret.txt")
    (ws / "deep" / "inner").symlink_to(Path("..") / ".." / "outside")
    (ws / "list0").write_bytes(str(outside / "secret.txt").encode() + b"\0a.txt\0")
    (ws / "list").write_text(f"{outside / 'secret.txt'}\na.txt\n")
    protected = (ws if protected_inside else root) / ".eyes-data"
    (protected / "terminal").mkdir(parents=True)
    keyring = protected / "terminal" / "keyring.json"
    keyring.write_bytes(canary_key + b"\n")
    keyring.chmod(0o600)
    return Arena(ws, outside, protected, make_home(), (canary_out, canary_key), logs)


def run_as_planned(arena: Arena, argv: list[str], sandbox: str | None) -> Trace | None:
    """Plan ``argv`` in read-only mode; run it under strace only when the plan is allowed."""
    result = arena.engine().evaluate(argv=argv, cwd=str(arena.ws))
    if not result.decision.allowed or result.resolution is None:
        return None
    res = result.resolution
    plan = SandboxPlan("bwrap" if sandbox else "none", network=False, workspace_writable=False)
    spawn, _ = wrap_argv(list(result.argv), res.executable, res.cwd, arena.home,
                         (str(arena.ws),), plan, sandbox, (str(arena.protected),))
    env = child_environment(arena.home, (str(arena.ws),)) | {"PWD": res.cwd}
    if sandbox is None:
        spawn = [res.executable, *spawn[1:]]
    return trace_command(spawn, cwd=res.cwd, env=env, log_dir=arena.logs)


def assert_contained(arena: Arena, argv: list[str], trace: Trace, planned: set[str]) -> None:
    where = f"{argv!r} was allowed read-only and then"
    extra = list(dict.fromkeys(e for e in trace.execs if e not in planned))
    assert not extra, f"{where} executed {extra[:8]}"
    outside = list(dict.fromkeys(trace.opens_outside([str(arena.ws), arena.home])))
    assert not outside, f"{where} opened {outside[:8]}"
    inside_protected = [p for p in trace.opens if p.startswith(str(arena.protected))]
    assert not inside_protected, f"{where} opened the protected {inside_protected}"
    for canary in arena.canaries:
        assert canary not in trace.stdout + trace.stderr, f"{where} printed a canary"
