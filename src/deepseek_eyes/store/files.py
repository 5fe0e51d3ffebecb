"""Atomic file writes: a reader sees the whole file or none of it, never a prefix.

The data goes to a private temp file in the target's own directory (so the rename never
crosses a filesystem), is flushed and fsynced, gets its final permissions, and is renamed
over the target. On any failure the temp file is removed and the error raised as the
store's (:func:`~deepseek_eyes.store.failures.store_error`: a full disk is ``STORE_FULL``),
still an ``OSError`` for callers that catch one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from deepseek_eyes.store.failures import guarded

__all__ = ["write_file_atomic"]


def write_file_atomic(target: Path, data: bytes, *, mode: int, dir_mode: int = 0o777) -> None:
    """Write ``data`` to ``target`` atomically with permissions ``mode``.

    Raises:
        StoreError: (an ``OSError``) ``STORE_FULL``, ``STORE_READ_ONLY`` or
            ``STORE_WRITE_FAILED``; nothing was left behind.
    """
    tmp: str | None = None
    with guarded(f"cannot write {target}", target):
        try:
            target.parent.mkdir(parents=True, exist_ok=True, mode=dir_mode)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, target)
            tmp = None
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
