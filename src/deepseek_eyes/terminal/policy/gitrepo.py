"""What a repository's own files can make git do: the part of ``git log`` the argv hides.

``git diff`` and ``git log -p`` run ``diff.<driver>.textconv`` and ``diff.<driver>.command``
programs named in the repository's ``.git/config``; ``filter.<driver>`` runs on checkout
and add; ``gpg.program`` runs for ``--show-signature``; ``include.path`` pulls in any file.
The child's environment overrides the keys it can (pager, editor, hooks, fsmonitor, external
diff), but a driver's name comes from the repository, so it cannot be overridden by name.
A "read" of such a repository is therefore judged unknown (approval, or refused in
read-only mode) whenever its config sets a key that can run a program.

The repository itself must lie inside the workspace: git walks up from the working
directory, so a workspace inside a larger repository would read objects and config from
outside. The child also gets ``GIT_CEILING_DIRECTORIES`` so git never walks above a root.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from deepseek_eyes.terminal.policy.paths import Workspace

__all__ = ["repository_risks"]

_MAX_FILES = 64
_MAX_BYTES = 256 * 1024
_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]')
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(=|$)")
_RUNS_SECTIONS = ("filter", "credential", "include", "includeif", "pager")
_RUNS_KEYS = frozenset({
    "core.pager", "core.editor", "core.sshcommand", "core.fsmonitor", "core.hookspath",
    "core.gitproxy", "core.askpass", "core.alternaterefscommand", "core.worktree",
    "diff.external", "gpg.program", "sequence.editor", "uploadpack.packobjectshook",
    "uploadpack.allowanysha1inwant", "protocol.allow", "receive.procreceiverefs",
})
_RUNS_SUFFIXES = (".textconv", ".command", ".driver", ".program", ".cmd", ".helper",
                  ".uploadpack", ".receivepack", ".proxy", ".tool")


def _find_git(start: str, workspace: Workspace) -> tuple[str | None, str]:
    """``(git dir, "")``, ``(None, "")`` when there is no repository, or ``(None, why)``."""
    current = start
    for _ in range(256):  # bounded: the depth of a path
        candidate = os.path.join(current, ".git")
        if os.path.lexists(candidate):
            real: str | None = os.path.realpath(candidate)
            if real is not None and os.path.isfile(real):
                real = _gitdir_file(real, current)
            if real is None or not workspace.contains(real):
                return None, f"the repository at {current} keeps its data outside the workspace"
            if not workspace.contains(current):
                return None, f"the repository at {current} is outside the workspace"
            return real, ""
        parent = os.path.dirname(current)
        if parent == current:
            return None, ""
        current = parent
    return None, ""


def _gitdir_file(path: str, base: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            line = fh.read(4096).strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    return os.path.realpath(os.path.join(base, line[len("gitdir:") :].strip()))


def _config_files(git_dir: str) -> list[str]:
    files = [os.path.join(git_dir, "config"), os.path.join(git_dir, "config.worktree")]
    for sub, name in (("modules", "config"), ("worktrees", "config.worktree")):
        folder = os.path.join(git_dir, sub)
        try:
            entries = sorted(os.listdir(folder))[:_MAX_FILES]
        except OSError:
            continue
        files += [os.path.join(folder, e, name) for e in entries]
    commondir = os.path.join(git_dir, "commondir")
    if os.path.isfile(commondir):
        files.append(commondir)  # its target is judged below as "data outside"
    return [f for f in files[:_MAX_FILES] if os.path.isfile(f)]


def _risky_keys(text: str) -> Iterable[str]:
    section = ""
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header:
            name, sub = header.group(1).lower(), header.group(2)
            section = name if sub is None else f"{name}.{sub}"
            line = line[header.end():]
        key = _KEY.match(line)
        if not key or not section:
            continue
        full = f"{section}.{key.group(1)}".lower()
        top = section.split(".", 1)[0].lower()
        if top in _RUNS_SECTIONS or full in _RUNS_KEYS or full.endswith(_RUNS_SUFFIXES):
            yield full


def repository_risks(directories: list[str], workspace: Workspace) -> tuple[list[str], list[str]]:
    """``(refusals, unknowns)`` for git run in each of ``directories`` (real paths).

    A repository outside the workspace is a refusal; a config key that can run a program,
    or a config file too large or unreadable to judge, is an unknown.
    """
    refusals: list[str] = []
    unknowns: list[str] = []
    for directory in directories:
        git_dir, problem = _find_git(directory, workspace)
        if problem:
            refusals.append(problem)
            continue
        if git_dir is None:
            continue
        for path in _config_files(git_dir):
            if os.path.basename(path) == "commondir":
                unknowns.append("the repository shares its data through a commondir file")
                continue
            try:
                if os.path.getsize(path) > _MAX_BYTES:
                    unknowns.append(f"the git config {path} is too large to read")
                    continue
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read(_MAX_BYTES)
            except OSError:
                unknowns.append(f"the git config {path} cannot be read")
                continue
            unknowns.extend(f"the repository's config sets {key}, which can make git run a "
                            "program or read outside the workspace" for key in _risky_keys(text))
    return list(dict.fromkeys(refusals)), list(dict.fromkeys(unknowns))
