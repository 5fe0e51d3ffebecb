"""The child's world: a reduced environment, a fresh HOME, and (where present) bubblewrap.

The environment is built from an allowlist, never copied from ours, so the bearer token,
receipt keys and API keys of this process cannot reach a child. ``HOME`` is a fresh
temporary directory (no dotfiles, no credentials, no shell history) and git is hardened:
no system or global config, no hooks, no fsmonitor, no pager, no editor, no credential
helper, no ``ext::`` transport.

Where Linux ``bwrap`` works, the command runs inside it, and the sandbox, not the policy,
is the boundary: the child's filesystem holds only what programs need, read-only (``/usr``
and the ``/bin``, ``/sbin``, ``/lib*`` links or directories, and a short list of files from
``/etc``: users and groups, the loader cache, time zone, name service, TLS roots, file magic),
the workspace roots, a private ``/tmp``, ``/dev`` and ``/proc``, and the scratch HOME. Not
the user's home, not the data directory with the receipt keyring (masked with an empty tmpfs
even when a workspace root contains it), not ``/var``, ``/run``, ``/opt`` or ``/srv``. New
PID/IPC/UTS/user/network namespaces; the workspace writable only when the plan's effects
allow writes, and the network only for network plans. Without bwrap the child runs as this
user with this user's reach, and the policy's refusals are all there is (see docs/terminal.md).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from functools import lru_cache

from deepseek_eyes.terminal.policy.paths import FIXED_PATH
from deepseek_eyes.terminal.records import SandboxView

__all__ = [
    "ETC_ENTRIES", "SYSTEM_DIRS", "SandboxPlan", "bwrap_available", "child_environment",
    "make_home", "remove_home", "staged_etc", "wrap_argv",
]

_PASS_THROUGH = ("TZ", "USER", "LOGNAME")
_PRIVATE_TMP = "/tmp"  # noqa: S108 - a fresh tmpfs inside the sandbox, not the host's /tmp
_GIT_CONFIG = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("core.askPass", "false"),
    ("credential.helper", ""),
    ("protocol.ext.allow", "never"),
    ("protocol.file.allow", "user"),
    ("sequence.editor", "false"),
    ("diff.external", ""),
)


_PATH = ":".join(FIXED_PATH)


def _hardening() -> dict[str, str]:
    """What every child's environment holds after PATH, HOME and TMPDIR, in that order."""
    env = {
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
        "GIT_EDITOR": "false",
        "GIT_SEQUENCE_EDITOR": "false",
        "GIT_ASKPASS": "false",
        "SSH_ASKPASS": "false",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_CONFIG_COUNT": str(len(_GIT_CONFIG)),
    }
    for i, (key, value) in enumerate(_GIT_CONFIG):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


_HARDENING = _hardening()  # the same for every command: built once, copied per child


def child_environment(home: str, roots: tuple[str, ...] = ()) -> dict[str, str]:
    """The complete environment of a child: an allowlist plus fixed hardening.

    ``GIT_CEILING_DIRECTORIES`` holds the parent of every workspace root, so git never
    looks for a repository (and its config) above the workspace.
    """
    env = {name: os.environ[name] for name in _PASS_THROUGH if name in os.environ}
    ceilings = sorted({os.path.dirname(root.rstrip("/")) or "/" for root in roots})
    if ceilings:
        env["GIT_CEILING_DIRECTORIES"] = ":".join(ceilings)
    env["PATH"] = _PATH
    env["HOME"] = home
    env["TMPDIR"] = home
    env.update(_HARDENING)
    return env


_SHM = "/dev/shm"  # noqa: S108 - a parent for mkdtemp (private, 0700), not a fixed file


def _home_parent() -> str | None:
    # A tmpfs when there is one: a scratch HOME never needs the disk, and creating and
    # removing a directory there costs microseconds instead of a journaled metadata update.
    if os.path.isdir(_SHM) and os.access(_SHM, os.W_OK | os.X_OK):
        return _SHM
    return None


def make_home() -> str:
    """A fresh, private (0700) HOME for one execution; it is also the child's TMPDIR."""
    return tempfile.mkdtemp(prefix="deepseek-eyes-home-", dir=_home_parent())


def _bwrap_path() -> str | None:
    for directory in FIXED_PATH:
        candidate = os.path.join(directory, "bwrap")
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@lru_cache(maxsize=1)
def bwrap_available() -> str | None:
    """The bwrap path when it can really build a sandbox here (probed once), else None."""
    path = _bwrap_path()
    if path is None:
        return None
    probe = [path, "--die-with-parent", "--unshare-all", "--ro-bind", "/", "/", "--dev",
             "/dev", "--proc", "/proc", "--tmpfs", _PRIVATE_TMP, "--", "/bin/true"]
    try:
        done = subprocess.run(  # noqa: S603 - fixed argv, no shell
            probe, stdin=subprocess.DEVNULL, capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return path if done.returncode == 0 else None


@dataclass(frozen=True)
class SandboxPlan:
    """How one execution is confined."""

    kind: str  # "bwrap" or "none"
    network: bool
    workspace_writable: bool

    def to_dict(self) -> SandboxView:
        return {
            "kind": self.kind, "network": self.network,
            "workspace_writable": self.workspace_writable,
        }


#: The system directories a program may need, bound read-only (or recreated as the same
#: symlink on a merged-/usr system).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
#: The files and directories of /etc that ordinary programs read; nothing else of /etc.
ETC_ENTRIES = (
    "passwd", "group", "nsswitch.conf", "host.conf", "hosts", "resolv.conf", "gai.conf",
    "protocols", "services", "localtime", "timezone", "ld.so.cache", "ld.so.conf",
    "ld.so.conf.d", "alternatives", "ssl", "ca-certificates", "ca-certificates.conf",
    "magic", "magic.mime", "mime.types", "locale.alias", "os-release", "lsb-release",
    "debian_version", "xattr.conf",
)


_etc_lock = threading.Lock()
_etc_stage: tuple[tuple[tuple[str, int, int], ...], str] | None = None


def _etc_signature() -> tuple[tuple[str, int, int], ...]:
    out = []
    for name in ETC_ENTRIES:
        try:
            st = os.lstat(f"/etc/{name}")
        except OSError:
            continue
        out.append((name, st.st_mtime_ns, st.st_size))
    return tuple(out)


def _copy_entry(source: str, target: str) -> None:
    if os.path.islink(source):
        os.symlink(os.readlink(source), target)
    elif os.path.isdir(source):
        shutil.copytree(source, target, symlinks=True, ignore_dangling_symlinks=True,
                        ignore=lambda _d, names: [n for n in names if n == "private"])
    elif os.path.isfile(source):
        shutil.copy2(source, target)


def staged_etc() -> str:
    """A private copy of the /etc entries programs need (:data:`ETC_ENTRIES`), made once
    and remade when one of them changes; bound as the sandbox's /etc in one mount.

    One bind of a staged directory costs one mount; binding the 26 entries one by one cost
    about 6 ms per command. Keys under ``ssl/private`` are never copied.
    """
    global _etc_stage
    signature = _etc_signature()
    with _etc_lock:
        if _etc_stage is not None and _etc_stage[0] == signature and os.path.isdir(
            _etc_stage[1]
        ):
            return _etc_stage[1]
        stage = tempfile.mkdtemp(prefix="deepseek-eyes-etc-", dir=_home_parent())
        for name, _, _ in signature:
            with contextlib.suppress(OSError, shutil.Error):
                _copy_entry(f"/etc/{name}", os.path.join(stage, name))
        os.chmod(stage, 0o755)  # noqa: S103 - the sandbox's /etc: world-readable as /etc is
        previous, _etc_stage = _etc_stage, (signature, stage)
        if previous is None:
            atexit.register(_remove_etc_stage)
        else:
            shutil.rmtree(previous[1], ignore_errors=True)
        return stage


def _remove_etc_stage() -> None:
    if _etc_stage is not None:
        shutil.rmtree(_etc_stage[1], ignore_errors=True)


def _system_binds() -> list[str]:
    binds: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            binds += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            binds += ["--ro-bind", path, path]
    return [*binds, "--ro-bind", staged_etc(), "/etc"]


def wrap_argv(
    argv: list[str], executable: str, cwd: str, home: str, roots: tuple[str, ...],
    plan: SandboxPlan, bwrap: str | None, protected: tuple[str, ...] = (),
) -> tuple[list[str], str]:
    """``(argv to spawn, program to exec)`` for ``plan``.

    Mount order matters: later mounts cover earlier ones, so each protected directory that
    lies inside a workspace root is covered with an empty tmpfs after the roots are bound.
    """
    if plan.kind != "bwrap" or bwrap is None:
        return argv, executable
    wrapped = [bwrap, "--die-with-parent", "--unshare-all"]
    if plan.network:
        wrapped.append("--share-net")
    wrapped += _system_binds()
    wrapped += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", _PRIVATE_TMP,
                "--bind", home, home]
    for root in roots:
        wrapped += ["--bind" if plan.workspace_writable else "--ro-bind", root, root]
    for guarded in protected:
        if any(guarded == r or guarded.startswith(r.rstrip("/") + "/") for r in roots):
            wrapped += ["--tmpfs", guarded]
    wrapped += ["--chdir", cwd, "--", executable, *argv[1:]]
    return wrapped, bwrap


def remove_home(home: str) -> None:
    """Remove a HOME of :func:`make_home` and whatever the command left in it."""
    try:
        os.rmdir(home)  # most commands leave it empty: one syscall, not a tree walk
    except OSError:
        shutil.rmtree(home, ignore_errors=True)
