"""The child's world: a reduced environment, a fresh HOME, and (where present) bubblewrap.

The environment is built from an allowlist, never copied from ours, so the bearer token,
receipt keys and API keys of this process cannot reach a child. ``HOME`` is a fresh
temporary directory (no dotfiles, no credentials, no shell history) and git is hardened:
no system or global config, no hooks, no fsmonitor, no pager, no editor, no credential
helper, no ``ext::`` transport.

Where Linux ``bwrap`` works, the command runs inside it: the whole filesystem read-only, a
private ``/tmp``, ``/dev`` and ``/proc``, new PID/IPC/UTS/network namespaces, the workspace
writable only when the plan's mode and effects allow writes, and the network only when the
plan is a network plan. The policy engine is triage; this is the boundary. Without bwrap the
child runs as this user with this user's reach (see the README).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache

from deepseek_eyes.terminal.paths import FIXED_PATH

__all__ = [
    "SandboxPlan", "bwrap_available", "child_environment", "make_home", "remove_home", "wrap_argv",
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


def child_environment(home: str) -> dict[str, str]:
    """The complete environment of a child: an allowlist plus fixed hardening."""
    env = {name: os.environ[name] for name in _PASS_THROUGH if name in os.environ}
    env.update({
        "PATH": ":".join(FIXED_PATH),
        "HOME": home,
        "TMPDIR": home,
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
    })
    for i, (key, value) in enumerate(_GIT_CONFIG):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
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

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind, "network": self.network,
            "workspace_writable": self.workspace_writable,
        }


def wrap_argv(
    argv: list[str], executable: str, cwd: str, home: str, roots: tuple[str, ...],
    plan: SandboxPlan, bwrap: str | None,
) -> tuple[list[str], str]:
    """``(argv to spawn, program to exec)`` for ``plan``."""
    if plan.kind != "bwrap" or bwrap is None:
        return argv, executable
    wrapped = [bwrap, "--die-with-parent", "--unshare-all"]
    if plan.network:
        wrapped.append("--share-net")
    wrapped += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs",
                _PRIVATE_TMP, "--bind", home, home]
    for root in roots:
        wrapped += ["--bind" if plan.workspace_writable else "--ro-bind", root, root]
    wrapped += ["--chdir", cwd, "--", executable, *argv[1:]]
    return wrapped, bwrap


def remove_home(home: str) -> None:
    shutil.rmtree(home, ignore_errors=True)
