"""Where things really are: workspace roots, argument paths and the executable.

Every check here works on *real* paths (``os.path.realpath``: symlinks and ``..`` resolved),
because every published bypass of a prefix check used a path that reads as inside and
resolves outside (a symlink, ``../``, ``/proc/self/root``, ``/dev/fd/N``). A path that does
not exist yet resolves as far as it exists, then lexically, which is also what the kernel
will do when the command creates it.

The executable is found through a fixed ``PATH`` (never the caller's), resolved to its real
file and hashed, so a receipt names exactly which binary ran, and the execution service can
refuse to run a plan whose binary changed since it was planned.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "FIXED_PATH",
    "REACH_LIMIT",
    "Reach",
    "ResolvedExecutable",
    "Workspace",
    "file_sha256",
    "resolve_executable",
]

FIXED_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
_TRUSTED_PREFIXES = ("/usr/", "/bin/", "/sbin/")
_PSEUDO_ROOTS = ("/proc", "/dev", "/sys")
_HASH_CACHE_MAX = 512
_hash_cache: dict[tuple[str, int, int, int, int, int], str] = {}
REACH_LIMIT = 20_000


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclass(frozen=True)
class Workspace:
    """The directories a command may touch, as real paths.

    ``protected`` are directories inside which no command may ever reach, even when a
    workspace root contains them: the data directory with the receipt keyring, receipts and
    audit. A recursive read of a directory that *contains* one is refused too, because the
    program would walk into it.
    """

    roots: tuple[str, ...]
    protected: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, roots: list[Path] | tuple[Path, ...], protected: list[Path] | tuple[Path, ...] = ()
    ) -> Workspace:
        """Resolve each root; a root must be an existing directory.

        Raises:
            ValueError: a root does not exist or is not a directory, or it lies inside a
                protected directory.
        """
        real: list[str] = []
        guarded = tuple(dict.fromkeys(os.path.realpath(str(p)) for p in protected))
        for root in roots:
            resolved = os.path.realpath(os.path.expanduser(str(root)))
            if not os.path.isdir(resolved):
                raise ValueError(f"workspace root {root} is not a directory")
            if resolved == "/":
                raise ValueError("the filesystem root cannot be a workspace")
            if any(_inside(resolved, p) for p in guarded):
                raise ValueError(f"workspace root {root} lies inside the data directory")
            if resolved not in real:
                real.append(resolved)
        if not real:
            raise ValueError("at least one workspace root is needed")
        return cls(tuple(real), guarded)

    def contains(self, real_path: str) -> bool:
        return any(_inside(real_path, root) for root in self.roots) and not self.guarded(
            real_path
        )

    def guarded(self, real_path: str) -> bool:
        """Whether ``real_path`` is inside a protected directory."""
        return any(_inside(real_path, p) for p in self.protected)

    def resolve(self, arg: str, cwd: str) -> tuple[str | None, str]:
        """``(real path, "")`` when ``arg`` resolves inside a root, else ``(None, reason)``."""
        joined = os.path.normpath(os.path.join(cwd, arg))
        for pseudo in _PSEUDO_ROOTS:
            if _inside(joined, pseudo):
                return None, f"{arg!r} is under {pseudo}, which is never allowed"
        # The kernel resolves a symlink before the ".." after it: "out-link/../x" is x beside
        # the link's target, not beside the link. realpath of the raw join walks the same
        # way; realpath of the lexically normalized path would not.
        # A file used as a directory ("passwd-link/../x") is ENOTDIR to the kernel: nothing
        # can be opened there, so it is judged by its lexical form, as before.
        raw = os.path.join(cwd, arg)
        try:
            os.stat(raw)  # the kernel's own walk
            real = os.path.realpath(raw)
        except NotADirectoryError:
            real = os.path.realpath(joined)
        except OSError:  # not there yet (an output): as far as it exists, as the kernel would
            real = os.path.realpath(raw)
        for pseudo in _PSEUDO_ROOTS:
            if _inside(real, pseudo):
                return None, f"{arg!r} resolves under {pseudo}, which is never allowed"
        if self.guarded(real) or self.guarded(joined):
            return None, f"{arg!r} is inside the DeepSeekEyes data directory, never readable"
        if not self.contains(real):
            how = "resolves" if real != joined else "is"
            return None, f"{arg!r} {how} outside the workspace ({real})"
        return real, ""

    def reach(self, real_dir: str, *, follow: bool, limit: int = REACH_LIMIT) -> Reach:
        """What a recursive read of ``real_dir`` will reach.

        The tree is walked (bounded by ``limit`` entries); a protected directory inside it
        is refused, and when the program follows symlinks, so is every link whose target
        resolves outside the workspace. Links into the workspace are walked too, once each.
        """
        for guarded in self.protected:
            if _inside(guarded, real_dir):
                return Reach(False, f"{real_dir} contains the DeepSeekEyes data directory")
        if not follow or not os.path.isdir(real_dir):
            return Reach(True, "")
        seen: set[str] = set()
        stack = [real_dir]
        count = 0
        while stack:  # bounded: each real directory once, at most ``limit`` entries
            directory = stack.pop()
            if directory in seen:
                continue
            seen.add(directory)
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            for entry in entries:
                count += 1
                if count > limit:
                    return Reach(None, f"{real_dir} holds more than {limit} entries to check")
                try:
                    link = entry.is_symlink()
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if link:
                    target = os.path.realpath(entry.path)
                    if not self.contains(target) or any(
                        _inside(target, p) for p in _PSEUDO_ROOTS
                    ):
                        return Reach(False, f"the symlink {entry.path} leads to {target}, "
                                            "outside the workspace")
                    if os.path.isdir(target):
                        stack.append(target)
                elif is_dir:
                    stack.append(entry.path)
        return Reach(True, "")


@dataclass(frozen=True)
class Reach:
    """The verdict on a recursive read: ``ok`` True, False (escapes) or None (too big)."""

    ok: bool | None
    reason: str


def file_sha256(path: str) -> str:
    """SHA-256 of a file, cached so re-planning (and the re-check at execute) is cheap.

    The key is the path and everything that changes when the file does: device, inode
    (a file renamed or copied over the path), size, mtime and ctime (a rewrite in place
    that restores the mtime still moves the ctime, which no caller can set back).
    """
    st = os.stat(path)
    key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    cached = _hash_cache.get(key)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    if len(_hash_cache) >= _HASH_CACHE_MAX:
        _hash_cache.clear()
    _hash_cache[key] = value
    return value


@dataclass(frozen=True)
class ResolvedExecutable:
    real_path: str
    sha256: str
    in_workspace: bool


def _is_executable_file(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and os.access(path, os.X_OK)


def resolve_executable(
    name: str, cwd: str, workspace: Workspace
) -> tuple[ResolvedExecutable | None, str]:
    """Find ``name`` through :data:`FIXED_PATH` (or as a path) and resolve it.

    Returns ``(executable, "")`` or ``(None, reason)``. A name with a slash must resolve into
    a system directory or into the workspace (then it is project code); anything else, such
    as ``/tmp/x``, is refused.
    """
    if "/" in name:
        candidate = os.path.realpath(os.path.join(cwd, name))
        if not _is_executable_file(candidate):
            return None, f"{name!r} is not an executable file"
        if workspace.contains(candidate):
            return ResolvedExecutable(candidate, file_sha256(candidate), True), ""
        if not candidate.startswith(_TRUSTED_PREFIXES):
            return None, f"{name!r} resolves to {candidate}, outside the system directories"
        return ResolvedExecutable(candidate, file_sha256(candidate), False), ""
    for directory in FIXED_PATH:
        candidate = os.path.join(directory, name)
        if _is_executable_file(candidate):
            real = os.path.realpath(candidate)
            return ResolvedExecutable(real, file_sha256(real), workspace.contains(real)), ""
    return None, f"{name!r} was not found on the fixed PATH ({':'.join(FIXED_PATH)})"
