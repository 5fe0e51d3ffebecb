"""Which files ``vision serve`` may read: the served roots and the path checks.

A path is read only when, with every symlink resolved, it lies inside a served root (one
from ``--root``/``vision.serve.roots``, or one the client offers through MCP roots). With
no root at all, every path is refused (``VISION_PATH_NO_ROOTS``); ``data:`` URLs and stored
images still work.

Why resolve before comparing: ``root/../etc/passwd`` and ``root/link -> /etc`` both *start*
with the root as text. The resolved path is compared by path components, never as a string
prefix (``/srv/img`` must not admit ``/srv/img2``). The file is then opened without
following a final symlink, and on Linux the opened descriptor's own path is checked again,
so a directory swapped for a symlink between the check and the open is still refused.
Only regular files are read (a FIFO would block, a device never end), never more than the
bridge's byte limit plus one.

Paths are judged by identity too (:mod:`deepseek_eyes.store.identity`), on the opened
descriptor's ``fstat``: a regular file with more than one link is refused unless
``vision.serve.allow_hard_links`` is on (a hard link has no other path to resolve: its
second name can be the keyring, the database or another session's blob), and a file that
*is* one of the data directory's files is refused whatever its link count. Both are
``VISION_PATH_OUTSIDE_ROOTS`` with ``reason`` ``hard_link`` or ``data_directory``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote, urlparse

from deepseek_eyes.errors import ImageError, VisionPathError
from deepseek_eyes.store.identity import DataFiles, refusal_reason

__all__ = ["NO_ROOTS", "ServedRoots", "roots_from_uris"]

_PROC_FD = Path("/proc/self/fd")


def roots_from_uris(uris: Iterable[str]) -> list[Path]:
    """The local directories named by ``file://`` root URIs (others are ignored: a root
    this process cannot read as a path grants nothing)."""
    found: list[Path] = []
    for uri in uris:
        parsed = urlparse(uri)
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            continue
        path = Path(unquote(parsed.path))
        if path.is_absolute():
            found.append(Path(os.path.realpath(path)))
    return found


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    """``path == root or path.is_relative_to(root)`` for some root, compared on the parts
    each path keeps: ``is_relative_to`` parses its argument into a new path and raises
    when it is not a prefix (the data directory never is: a raise on every file read),
    five times the cost. A root with no parts (``Path(".")``) holds what
    ``is_relative_to`` says it does: every relative path, no absolute one."""
    parts = path.parts
    return any(parts[:len(root.parts)] == root.parts if root.parts else not path.anchor
               for root in roots)


@dataclass(frozen=True)
class ServedRoots:
    """A set of resolved root directories and the checks a path must pass. ``protected``
    directories are never served, even inside a root: the data directory (keyrings, other
    sessions' blobs), as the terminal's policy keeps it from planned commands."""

    roots: tuple[Path, ...]
    protected: tuple[Path, ...] = ()
    #: The data directory whose files are refused by identity (see the module docstring).
    data: DataFiles | None = None
    allow_hard_links: bool = False

    @classmethod
    def of(cls, paths: Iterable[Path]) -> ServedRoots:
        """Roots resolved once (a root that is itself a symlink serves its target)."""
        unique = dict.fromkeys(Path(os.path.realpath(p.expanduser())) for p in paths)
        return cls(tuple(unique))

    def __add__(self, other: ServedRoots) -> ServedRoots:
        """Both sets of roots, under this one's rules (the server's, over a client's)."""
        return ServedRoots(tuple(dict.fromkeys((*self.roots, *other.roots))),
                           tuple(dict.fromkeys((*self.protected, *other.protected))),
                           self.data or other.data, self.allow_hard_links)

    def protecting(self, paths: Iterable[Path]) -> ServedRoots:
        """These roots, with ``paths`` never served."""
        extra = (Path(os.path.realpath(p)) for p in paths)
        return ServedRoots(self.roots, tuple(dict.fromkeys((*self.protected, *extra))),
                           self.data, self.allow_hard_links)

    def guarding(self, home: Path, *, allow_hard_links: bool = False) -> ServedRoots:
        """These roots, never serving the data directory ``home`` by path or by identity;
        ``allow_hard_links``: serve files with more than one link (still not the data
        directory's own)."""
        protected = self.protecting([home])
        return ServedRoots(protected.roots, protected.protected, DataFiles(home),
                           allow_hard_links)

    def _refused(self, path: Path) -> bool:
        return not _inside(path, self.roots) or _inside(path, self.protected)

    def resolve(self, text: str) -> Path:
        """The resolved path of ``text`` (absolute, or relative to the first root).

        Raises:
            VisionPathError: ``VISION_PATH_NO_ROOTS``, ``VISION_PATH_OUTSIDE_ROOTS``,
                ``VISION_PATH_NOT_FOUND``, ``VISION_PATH_NOT_FILE``.
        """
        if not self.roots:
            raise VisionPathError(
                "no root is served, so no path can be read: start the server with --root "
                "DIR, let the client offer roots, or send a data: URL or a stored sha256",
                code="VISION_PATH_NO_ROOTS",
            )
        given = Path(text).expanduser()
        candidate = given if given.is_absolute() else self.roots[0] / given
        resolved = Path(os.path.realpath(candidate))
        if self._refused(resolved):
            raise VisionPathError(
                f"{text!r} is in the data directory, which is never served"
                if _inside(resolved, self.protected) else
                f"{text!r} lies outside the served roots",
                code="VISION_PATH_OUTSIDE_ROOTS",
                details={"path": text, "roots": [str(r) for r in self.roots]},
            )
        try:
            info = resolved.stat()
        except FileNotFoundError:
            raise VisionPathError(f"no file at {text!r}", code="VISION_PATH_NOT_FOUND",
                                  details={"path": text}) from None
        except OSError as exc:
            raise VisionPathError(f"cannot read {text!r}: {exc.strerror or exc}",
                                  code="VISION_PATH_NOT_FOUND", details={"path": text}) from None
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise VisionPathError(f"{text!r} is {kind}", code="VISION_PATH_NOT_FILE",
                                  details={"path": text})
        return resolved

    def size_hint(self, text: str) -> int:
        """The size of what ``text`` names without any check, or a huge number when it
        cannot be told (the caller then reads in a worker thread)."""
        given = Path(text).expanduser()
        candidate = given if given.is_absolute() or not self.roots else self.roots[0] / given
        try:
            return candidate.stat().st_size
        except (OSError, ValueError):
            return 1 << 62

    def read(self, text: str, max_bytes: int) -> bytes:
        """The bytes of the file at ``text``, checked as :meth:`resolve` says (blocking).

        Raises:
            VisionPathError: as :meth:`resolve`.
            ImageError: ``IMAGE_TOO_LARGE`` over ``max_bytes``.
        """
        resolved = self.resolve(text)
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(resolved, flags)
        except OSError as exc:
            # ELOOP: the final component became a symlink after the check.
            raise VisionPathError(f"cannot open {text!r}: {exc.strerror or exc}",
                                  code="VISION_PATH_NOT_FILE", details={"path": text}) from None
        try:
            with os.fdopen(fd, "rb") as handle:
                data = self._read_open(handle, text, max_bytes)
        except VisionPathError:
            raise  # a PermissionError, hence an OSError: not a read failure
        except OSError as exc:
            raise ImageError(f"cannot read {text!r}: {exc.strerror or type(exc).__name__}",
                             code="IMAGE_UNREADABLE", details={"path": text}) from None
        if len(data) > max_bytes:
            raise _too_large(text, len(data), max_bytes)
        return data

    def _read_open(self, handle: BinaryIO, text: str, max_bytes: int) -> bytes:
        info = os.fstat(handle.fileno())
        opened = _PROC_FD / str(handle.fileno())
        if opened.exists() and self._refused(Path(os.readlink(opened))):
            raise VisionPathError(f"{text!r} moved outside the served roots",
                                  code="VISION_PATH_OUTSIDE_ROOTS", details={"path": text})
        if not stat.S_ISREG(info.st_mode):
            raise VisionPathError(f"{text!r} is not a regular file",
                                  code="VISION_PATH_NOT_FILE", details={"path": text})
        if info.st_size > max_bytes:
            raise _too_large(text, info.st_size, max_bytes)
        self._judge(info, text, None)
        data = handle.read(max_bytes + 1)
        self._judge(info, text, data)
        return data

    def _judge(self, info: os.stat_result, text: str, content: bytes | None) -> None:
        reason = refusal_reason(info, self.data, allow_hard_links=self.allow_hard_links,
                                content=content)
        if reason is None:
            return
        message = (f"{text!r} is a file of the data directory, which is never served"
                   if reason == "data_directory" else
                   f"{text!r} has {info.st_nlink} hard links; a hard link can name any file "
                   "of this file system, so it is not served (vision.serve.allow_hard_links)")
        raise VisionPathError(message, code="VISION_PATH_OUTSIDE_ROOTS",
                              details={"path": text, "reason": reason})


def _too_large(text: str, size: int, limit: int) -> ImageError:
    return ImageError(
        f"the image file {text!r} is {size:,} bytes, over the limit of {limit:,} bytes",
        code="IMAGE_TOO_LARGE", details={"path": text, "size": size, "limit": limit},
    )


#: No root at all: every path is refused.
NO_ROOTS = ServedRoots(())
