"""How a failed read or write of the data directory becomes a :class:`StoreError`.

Every path that writes under the data directory — the database (its WAL and WAL index
too), blobs, atomic files, keyrings, MCP artifacts, terminal receipts, audit exports —
hands its ``sqlite3.Error`` or ``OSError`` to :func:`store_error`, so one failure has one
code wherever it strikes:

* ``STORE_FULL``: no space (``ENOSPC``, ``EDQUOT``, SQLite's ``SQLITE_FULL``). The gateway
  answers it with HTTP 507; the message says where to free space. Nothing already stored
  is lost, and the process recovers once there is room: queued log rows stay queued
  (:func:`keeps_rows`) and go out with the next write that succeeds.
* ``STORE_READ_ONLY``: the place cannot be written at all (a read-only mount or copy, no
  write permission). The commands that only look work there; the others cannot.
* ``STORE_READ_FAILED`` / ``STORE_WRITE_FAILED``: anything else, by direction.

Why the free space is asked when SQLite says only "disk I/O error": SQLite turns ``ENOSPC``
into ``SQLITE_FULL`` where it writes pages (the database file, the WAL), but growing the
WAL index (``-shm``: ``SQLITE_IOERR_SHMSIZE``) or a size hint that fails (``_WRITE``,
``_TRUNCATE``) reports an I/O error and drops the errno. An I/O error on a filesystem with
under :data:`LOW_SPACE_BYTES` free is taken for what it almost certainly is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from deepseek_eyes.errors import StoreError

__all__ = ["LOW_SPACE_BYTES", "check_writable", "guarded", "is_full", "keeps_rows", "store_error"]

#: Free space under which an I/O error without an errno counts as a full disk.
LOW_SPACE_BYTES = 1 << 20

# SQLite's primary result codes (an extended code keeps its primary in the low byte).
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
_SQLITE_PROTOCOL = 15

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# Not EPERM: a filesystem without hard links answers os.link with it, and that is no
# read-only directory.
_READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES})
#: Failures of the store, not of the rows written: rows queued for a batch outlive them.
_STORE_FAULTS = frozenset({_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR,
                           _SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_PROTOCOL})


def _primary(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (what ``statvfs`` can ask)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return path


def _free_bytes(path: Path) -> int | None:
    try:
        info = os.statvfs(_existing(path))
    except (OSError, AttributeError):  # AttributeError: no statvfs (Windows)
        return None
    # Root may use the blocks reserved for it; anyone else only the available ones.
    blocks = info.f_bfree if getattr(os, "geteuid", lambda: -1)() == 0 else info.f_bavail
    return blocks * info.f_frsize


def _not_writable(path: Path) -> bool:
    where = _existing(path)
    try:
        if os.statvfs(where).f_flag & os.ST_RDONLY:
            return True
    except (OSError, AttributeError):
        pass
    return not os.access(where, os.W_OK)


def is_full(exc: BaseException, path: Path) -> bool:
    """Whether ``exc``, raised writing (or reading) ``path``, means there is no space."""
    if isinstance(exc, StoreError):
        return exc.code == "STORE_FULL"
    if isinstance(exc, OSError):
        return exc.errno in _FULL_ERRNOS
    if isinstance(exc, sqlite3.Error):
        primary = _primary(exc)
        if primary == _SQLITE_FULL:
            return True
        if primary == _SQLITE_IOERR:
            free = _free_bytes(path)
            return free is not None and free < LOW_SPACE_BYTES
    return False


def keeps_rows(exc: sqlite3.Error) -> bool:
    """Whether rows whose write failed with ``exc`` should be tried again: the store
    failed (space, a lock, I/O), not the rows (a constraint, a bad statement)."""
    return _primary(exc) in _STORE_FAULTS


def _read_only(exc: BaseException, path: Path) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in _READ_ONLY_ERRNOS or (
            exc.errno == errno.EIO and _not_writable(path))
    if isinstance(exc, sqlite3.Error):
        primary = _primary(exc)
        if primary == _SQLITE_READONLY:
            return True
        return primary in (_SQLITE_CANTOPEN, _SQLITE_IOERR) and _not_writable(path)
    return False


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)


def store_error(exc: OSError | sqlite3.Error, action: str, path: Path | str, *,
                reading: bool = False) -> StoreError:
    """The :class:`StoreError` for ``exc``, raised while doing ``action`` (a phrase: "cannot
    write blob") to ``path``, a file or directory in the data directory (or an export's
    target). A :class:`StoreError` is returned unchanged.

    ``reading`` says the operation only read: its generic failure is
    ``STORE_READ_FAILED`` rather than ``STORE_WRITE_FAILED`` (a read can still find the disk
    full: SQLite grows the WAL index to read a WAL).
    """
    if isinstance(exc, StoreError):
        return exc
    failure = getattr(exc, "store_failure", None)
    if isinstance(failure, StoreError):  # a failed expectation: its writer's own error
        return failure
    if getattr(exc, "pg_sqlstate", None) is not None:
        return _postgres_error(exc, action, reading=reading)
    target = Path(path)
    where = target if target.is_dir() else target.parent
    details: dict[str, Any] = {"path": str(target)}
    if isinstance(exc, OSError) and exc.errno is not None:
        details["errno"] = errno.errorcode.get(exc.errno, str(exc.errno))
    elif isinstance(exc, sqlite3.Error):
        details["sqlite_error"] = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    if is_full(exc, target):
        free = _free_bytes(where)
        if free is not None:
            details["free_bytes"] = free
        return StoreError(
            f"{action}: no space left on the disk that holds {where} ({_reason(exc)}); "
            f"free space there and retry (nothing already stored is lost)",
            code="STORE_FULL", details=details)
    if not reading and _read_only(exc, target):
        return _read_only_error(action, target, _reason(exc), details)
    return StoreError(f"{action}: {_reason(exc)}",
                      code="STORE_READ_FAILED" if reading else "STORE_WRITE_FAILED",
                      details=details)


def _postgres_error(exc: OSError | sqlite3.Error, action: str, *,
                    reading: bool) -> StoreError:
    """A PostgreSQL failure (translated to ``sqlite3`` by store/postgres.py, which adds
    ``pg_sqlstate`` and ``pg_unavailable``) as a :class:`StoreError`: the server out of
    reach (down, restarting, the connection cut) is ``STORE_DATABASE_UNAVAILABLE``, and the
    next statement after it is back connects again."""
    details: dict[str, Any] = {"backend": "postgresql",
                               "sqlstate": getattr(exc, "pg_sqlstate", "") or None}
    reason = str(exc)
    if getattr(exc, "pg_unavailable", False):
        return StoreError(
            f"{action}: the PostgreSQL database cannot be reached ({reason}); nothing was "
            "half-written, retry when it is back", code="STORE_DATABASE_UNAVAILABLE",
            details=details)
    primary = _primary(exc) if isinstance(exc, sqlite3.Error) else None
    if primary == _SQLITE_FULL:
        return StoreError(f"{action}: the database server's disk is full ({reason})",
                          code="STORE_FULL", details=details)
    if primary == _SQLITE_READONLY and not reading:
        return StoreError(f"{action}: the database cannot be written ({reason})",
                          code="STORE_READ_ONLY", details=details)
    return StoreError(f"{action}: {reason}",
                      code="STORE_READ_FAILED" if reading else "STORE_WRITE_FAILED",
                      details=details)


def _read_only_error(action: str, path: Path, reason: str,
                     details: dict[str, Any]) -> StoreError:
    where = path if path.is_dir() else path.parent
    return StoreError(
        f"{action}: {where} cannot be written ({reason}); only the commands that read "
        "(audit verify|show|export, sessions, usage) work on a read-only data directory",
        code="STORE_READ_ONLY", details=details)


def check_writable(paths: Iterable[Path], action: str) -> None:
    """Refuse, before anything is written, to write where the process cannot: each of
    ``paths`` that exists must be writable (a read-only mount or copy fails here, at start,
    not at the first write; SQLite would open a database it cannot write read-only, without
    a word).

    Raises:
        StoreError: ``STORE_READ_ONLY``.
    """
    for path in paths:
        if path.exists() and _not_writable(path):
            raise _read_only_error(action, path, "read-only", {"path": str(path)})


@contextlib.contextmanager
def guarded(action: str, path: Path, *, reading: bool = False) -> Iterator[None]:
    """The block's ``OSError`` or ``sqlite3.Error`` as :func:`store_error`'s
    :class:`StoreError` (one it raised itself passes unchanged).

    Raises:
        StoreError: ``STORE_FULL``, ``STORE_READ_ONLY``, ``STORE_READ_FAILED`` or
            ``STORE_WRITE_FAILED``.
    """
    try:
        yield
    except StoreError:
        raise
    except (OSError, sqlite3.Error) as exc:
        raise store_error(exc, action, path, reading=reading) from exc
