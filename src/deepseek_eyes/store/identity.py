"""Judge an opened file by what it *is*, not by how its path is spelled.

A served root (``vision serve``) or an upload root (``browser.upload_roots``) is checked
by path, but a hard link has no "real" path to resolve: ``root/photo.png`` can be a second
name of ``<data dir>/eyes.db``, of the audit keyring or of another session's blob, and its
resolved path lies inside the root. So, after the path checks and on the *opened*
descriptor's ``fstat`` (never a separate ``stat``, which a swap between the two would fool):

* a regular file with more than one link is refused unless the root's settings allow hard
  links (``reason = "hard_link"``);
* a file that is one of the data directory's own — its ``(st_dev, st_ino)`` equal to the
  database's, its WAL's or SHM's, a keyring's, a blob's — is refused whatever its link
  count (``reason = "data_directory"``): a bind mount or a second mount of the same file
  system gives a file a second path without a second link.

How the data directory's files are found, cheapest first: nothing at all when the file is
on another device than the data directory; the named files of the layout (``eyes.db`` and
its ``-wal``, ``-shm`` and ``-journal``, ``audit/`` and ``terminal/`` keyrings); the blob
store by content (a blob's name is the SHA-256 of its bytes, so a digest of what was read
finds the one blob that could be the same file); and only for a file that has
more than one link (allowed by the settings) a walk of the rest of the directory, bounded
by :data:`MAX_WALK`.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from deepseek_eyes.store.blobs import BlobStore
from deepseek_eyes.store.keyring import KEYRING_FILENAME

__all__ = ["MAX_WALK", "DataFiles", "refusal_reason"]

#: Entries of the data directory (outside blobs/) a walk looks at, at most.
MAX_WALK = 4096
_DATABASE = "eyes.db"
_DATABASE_SIDES = ("", "-wal", "-shm", "-journal")
_KEYRING_DIRS = ("audit", "terminal", "terminal/receipts")


@dataclass(frozen=True)
class DataFiles:
    """The data directory at ``root``, as far as identities go."""

    root: Path

    @functools.cached_property
    def _named(self) -> tuple[str, ...]:
        """The layout's named files, spelled once: every file a served root hands out is
        checked against them twice, and building the paths cost more than the stats."""
        return (
            *(os.path.join(self.root, f"{_DATABASE}{side}") for side in _DATABASE_SIDES),
            *(os.path.join(self.root, folder, KEYRING_FILENAME) for folder in _KEYRING_DIRS),
        )

    @functools.cached_property
    def _blobs(self) -> BlobStore:
        return BlobStore(self.root / "blobs")

    def _walk(self) -> Iterator[os.stat_result]:
        seen = 0
        stack = [self.root]
        while stack and seen < MAX_WALK:
            folder = stack.pop()
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        seen += 1
                        if seen > MAX_WALK:
                            return
                        if entry.is_dir(follow_symlinks=False):
                            if Path(entry.path) != self.root / "blobs":
                                stack.append(Path(entry.path))
                        elif entry.is_file(follow_symlinks=False):
                            yield entry.stat(follow_symlinks=False)
            except OSError:
                continue

    def same_device(self, info: os.stat_result) -> bool:
        try:
            return os.stat(self.root).st_dev == info.st_dev
        except OSError:
            return False  # no data directory: nothing of it to protect

    def holds(self, info: os.stat_result, *, content: bytes | None = None) -> bool:
        """True when the opened file ``info`` is one of the data directory's files;
        ``content``, the bytes read from it, lets the blob that holds them be compared."""
        if not self.same_device(info):
            return False
        identity = (info.st_dev, info.st_ino)

        def same(path: str | Path) -> bool:
            try:
                other = os.stat(path, follow_symlinks=False)
            except (OSError, ValueError):
                return False
            return (other.st_dev, other.st_ino) == identity

        if any(same(path) for path in self._named):
            return True
        if content is not None and same(
                self._blobs.path_for(hashlib.sha256(content).hexdigest())):
            return True
        if info.st_nlink > 1:
            return any((o.st_dev, o.st_ino) == identity for o in self._walk())
        return False


def refusal_reason(info: os.stat_result, data: DataFiles | None, *,
                   allow_hard_links: bool, content: bytes | None = None) -> str | None:
    """``"data_directory"``, ``"hard_link"`` or None for an opened regular file's
    ``fstat``. Ask before reading (cheap) and again with the ``content`` read (the blob
    check hashes it, only when the file is on the data directory's device)."""
    if data is not None and data.holds(info, content=content):
        return "data_directory"
    if info.st_nlink > 1 and not allow_hard_links:
        return "hard_link"
    return None
