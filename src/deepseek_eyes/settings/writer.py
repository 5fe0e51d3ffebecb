"""One writer at a time: how every edit of the settings file replaces it.

Two commands editing at once (``mcp allow`` in one terminal, ``mcp deny`` in another, a
script, the gateway's console) each read the file, change their copy and write it back; the
second write used to erase the first, and still report success. Here an edit is:

1. the **exclusive lock**: ``fcntl.flock`` on a sidecar file beside the file it edits
   (``.<name>.lock``), held for the whole read-change-replace, so our writers queue;
2. a **re-read** under the lock, the change applied to what the file says now;
3. a **hash compare** just before the replace: the bytes the change was computed from must
   still be the file's (an editor or a script that takes no lock may have written
   meanwhile); when they are not, the change is computed again on the new content, a few
   times, then ``CONFIG_EDIT_CONFLICT``: an edit that is not in the file is never reported
   as made;
4. an **atomic replace**: a temp file in the same directory, flushed and fsynced, given the
   old file's mode, renamed over it, and the directory fsynced.

A **symlinked** settings file (a dotfiles repository) is resolved first: its target is what
is locked, read and replaced, and the link stays a link.

The lock file also says which version of the file our last writer wrote (its SHA-256, the
only thing it holds). The settings watch (:mod:`deepseek_eyes.gateway.settings_watch`) reads
it: a version written whole by one of our atomic writes needs no debounce, while any other
change (a hand edit, an in-place writer) must settle first.

``flock`` is advisory: it orders the processes that ask for it (ours), and the hash compare
catches most of the rest; an outside writer that lands between the compare and the rename
cannot be stopped by anything a reader does.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import fcntl
import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from deepseek_eyes.errors import ConfigError

__all__ = ["EDIT_ATTEMPTS", "LOCK_TIMEOUT_S", "Written", "last_written", "lock_path",
           "recording", "resolved", "rewrite"]

#: Times a change is computed again when another writer changed the file under it.
EDIT_ATTEMPTS = 5
#: Seconds an edit waits for the lock another edit holds.
LOCK_TIMEOUT_S = 15.0
#: Mode of a settings file an edit creates, and of the lock file.
_NEW_MODE = 0o600


@dataclass(frozen=True)
class Written:
    """What an edit did: the file it replaced (a symlink's target), the SHA-256 of the
    bytes it wrote and of those it replaced (None: there was no file), and whether it wrote
    at all (a change that changes nothing leaves the file untouched)."""

    path: Path
    sha256: str
    before: str | None
    changed: bool
    attempts: int


_recorded: contextvars.ContextVar[list[Written] | None] = contextvars.ContextVar(
    "settings_writes", default=None)


@contextlib.contextmanager
def recording() -> Iterator[list[Written]]:
    """Collect what every :func:`rewrite` in the block did: the hashes before and after
    each edit, as seen under its lock (the audit's ``settings.change`` row; a hash read
    outside the lock could be another writer's)."""
    writes: list[Written] = []
    token = _recorded.set(writes)
    try:
        yield writes
    finally:
        _recorded.reset(token)


def resolved(path: Path) -> Path:
    """The file an edit of ``path`` writes: its symlinks followed (a dangling link's
    target is created), made absolute."""
    return Path(os.path.realpath(path.expanduser()))


def lock_path(path: Path) -> Path:
    """The sidecar lock file of the settings file at ``path`` (beside its target)."""
    target = resolved(path)
    return target.with_name(f".{target.name}.lock")


def last_written(path: Path) -> str | None:
    """The SHA-256 of the version our last writer wrote to ``path``, or None."""
    try:
        text = lock_path(path).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else None


def _sha256(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _read(target: Path) -> bytes | None:
    try:
        return target.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"settings file {target} cannot be read: {exc}",
                          code="CONFIG_UNREADABLE", details={"path": str(target)}) from exc


def _write_failed(target: Path, exc: OSError) -> ConfigError:
    return ConfigError(f"settings file {target} cannot be written: {exc.strerror or exc}",
                       code="CONFIG_WRITE_FAILED", details={"path": str(target)})


@contextlib.contextmanager
def _exclusive(lock: Path, timeout: float) -> Iterator[int]:
    """Hold ``flock(LOCK_EX)`` on ``lock``; yields its descriptor.

    Raises:
        ConfigError: ``CONFIG_EDIT_BUSY`` when another edit held it ``timeout`` seconds.
    """
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, _NEW_MODE)
    except OSError as exc:
        raise _write_failed(lock, exc) from exc
    try:
        deadline = time.monotonic() + timeout
        pause = 0.002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                    raise _write_failed(lock, exc) from exc
            if time.monotonic() >= deadline:
                raise ConfigError(
                    f"another edit of the settings file has held {lock} for {timeout:g} s; "
                    "nothing was written (try again once it finished)",
                    code="CONFIG_EDIT_BUSY", details={"lock": str(lock)})
            # A lock held by a process, not an event of ours: polled, with a short backoff.
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        yield fd
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _record(fd: int, sha256: str) -> None:
    """Say in the lock file which version our writer wrote (under the lock)."""
    data = f"{sha256}\n".encode("ascii")
    with contextlib.suppress(OSError):  # a hint for the watch, never worth failing an edit
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every filesystem lets a directory be fsynced
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def rewrite(path: Path, render: Callable[[str | None], str], *,
            check: Callable[[Path], None] | None = None,
            attempts: int = EDIT_ATTEMPTS, lock_timeout: float = LOCK_TIMEOUT_S) -> Written:
    """Replace the settings file at ``path`` with ``render(current text)``, one writer at a
    time (see the module's docstring). ``render`` gets None when there is no file; it may
    raise to refuse the edit. ``check`` is given the temp file holding the new text, beside
    the target, before it replaces the file; it may raise to refuse the edit.

    Raises:
        ConfigError: ``CONFIG_EDIT_BUSY`` (the lock stayed held), ``CONFIG_EDIT_CONFLICT``
            (another writer changed the file under every attempt), ``CONFIG_UNREADABLE``,
            ``CONFIG_WRITE_FAILED``; whatever ``render`` or ``check`` raise. Nothing is
            written then.
    """
    target = resolved(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _write_failed(target, exc) from exc
    with _exclusive(lock_path(target), lock_timeout) as lock_fd:
        for attempt in range(1, attempts + 1):
            current = _read(target)
            before = _sha256(current)
            try:
                text = None if current is None else current.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(f"settings file {target} is not UTF-8: {exc}",
                                  code="CONFIG_UNREADABLE",
                                  details={"path": str(target)}) from exc
            data = render(text).encode("utf-8")
            if data == current:
                assert before is not None
                return Written(target, before, before, changed=False, attempts=attempt)
            if _replace(target, data, before, check):
                sha = hashlib.sha256(data).hexdigest()
                _record(lock_fd, sha)
                written = Written(target, sha, before, changed=True, attempts=attempt)
                writes = _recorded.get()
                if writes is not None:
                    writes.append(written)
                return written
    raise ConfigError(
        f"settings file {target} kept changing under the edit ({attempts} attempts: a "
        "program that takes no lock is writing it); nothing was written",
        code="CONFIG_EDIT_CONFLICT", details={"path": str(target), "attempts": attempts})


def _replace(target: Path, data: bytes, before: str | None,
             check: Callable[[Path], None] | None) -> bool:
    """Write ``data`` beside ``target`` and rename it over ``target`` if the file still
    hashes to ``before``; False (nothing written) when it does not."""
    try:
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                        suffix=".tmp")
    except OSError as exc:
        raise _write_failed(target, exc) from exc
    tmp: Path | None = Path(tmp_name)
    try:
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise _write_failed(target, exc) from exc
        assert tmp is not None
        if check is not None:
            check(tmp)
        if _sha256(_read(target)) != before:
            return False
        try:
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = _NEW_MODE
        try:
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except OSError as exc:
            raise _write_failed(target, exc) from exc
        tmp = None
        _fsync_dir(target.parent)
        return True
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()
