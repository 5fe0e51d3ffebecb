"""HMAC keyrings: one key signs, every key on the ring verifies.

Two things sign with keys of their own: the terminal's receipts and the audit chain's
checkpoints. Each uses a :class:`Keyring` subclass that names its :class:`KeyringKind` —
the domain its key ids are derived in, the words its messages use and the error codes it
raises — so the file handling below exists once.

Keys come from settings (each an environment reference; the first signs) or, when none are
configured, from a private keyring file in the data directory, created with a fresh 256-bit
key on first use. Rotation puts a new key in front and keeps the old ones, so what was
signed before a rotation still verifies.

Several processes share a data directory (``serve``, ``ask``, ``audit``), so the file is
only ever replaced whole: each writer writes its own temporary file and renames it into
place. The first creation *links* it into place, which fails when another process created
the file first; the loser then reads the winner's key, so two processes opening a fresh
directory at once end up with one key, the one in the file. Rotations re-read and rewrite
the file under an exclusive lock (``keyring.json.lock``), so two at once keep both keys.

A signature names its key by a *key id*: a truncated SHA-256 of the kind's domain string
and the key. It identifies the key without revealing anything useful about it; the key
itself never leaves this module except to compute an HMAC.

Whoever can read a keyring file can forge signatures, and whoever can replace it can make
us sign with a key they know. So its directory is made private (0700: group and other bits
are removed from an existing one, which is ours and holds nothing others need), the file is
written 0600, and a keyring file that group or others can read or write, or that another
user owns, is *refused* instead of quietly tightened: the key may already be known, and
only the operator can judge that. The terminal's policy refuses every path in the data
directory to planned commands, so a command the model plans cannot read a keyring either.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Self

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.store.failures import guarded, store_error

__all__ = ["KEYRING_FILENAME", "Keyring", "KeyringKind", "OpenedOnUse"]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created 0600) for the block; where there is no
    ``fcntl`` (Windows) the block runs unlocked, as before there was a lock."""
    try:
        import fcntl
    except ModuleNotFoundError:
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)

KEYRING_FILENAME = "keyring.json"
MIN_KEY_BYTES = 32


@dataclass(frozen=True)
class KeyringKind:
    """What one family of signatures calls its keys, and how it fails."""

    domain: bytes  # key ids are derived in this domain, so one key never has two uses' ids
    label: str  # "the receipt keyring"
    signs: str  # "receipts": what a leaked key lets someone forge
    error: type[DeepSeekEyesError]
    invalid: str  # code: unreadable or malformed file, bad key
    exposed: str  # code: open to other users
    unknown: str  # code: a signature names a key not on the ring

    def key_id(self, key: bytes) -> str:
        return "k1-" + hashlib.sha256(self.domain + b"\x00" + key).hexdigest()[:24]

    def fail(self, code: str, message: str, **details: object) -> DeepSeekEyesError:
        return self.error(message, code=code, details=dict(details))

    def private_directory(self, directory: Path) -> None:
        """Create ``directory`` (0700), or take group and other access away from it."""
        with guarded(f"cannot create {directory}", directory):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            mode = stat.S_IMODE(directory.stat().st_mode)
            if mode & 0o077:
                os.chmod(directory, mode & 0o700)
        except OSError as exc:
            raise self.fail(
                self.exposed, f"{directory} is open to other users and cannot be made private",
                path=str(directory),
            ) from exc


@dataclass
class Keyring:
    """Ordered keys; ``keys[0]`` signs. ``path`` is set when the ring lives in a file."""

    kind: ClassVar[KeyringKind]
    keys: list[bytes]
    path: Path | None = None

    def __post_init__(self) -> None:
        if not self.keys:
            raise self.kind.fail(self.kind.invalid, f"{self.kind.label} needs at least one key")
        for key in self.keys:
            if len(key) < MIN_KEY_BYTES:
                raise self.kind.fail(
                    self.kind.invalid, f"keys must be at least {MIN_KEY_BYTES} bytes")

    @property
    def active_id(self) -> str:
        return self.kind.key_id(self.keys[0])

    def ids(self) -> list[str]:
        return [self.kind.key_id(k) for k in self.keys]

    def sign(self, data: bytes) -> tuple[str, str]:
        """``(key id, hex HMAC-SHA256)`` of ``data`` under the active key."""
        return self.active_id, hmac.new(self.keys[0], data, hashlib.sha256).hexdigest()

    def verify(self, data: bytes, kid: str, value: str) -> bool:
        """Whether ``value`` is the HMAC of ``data`` under the key named ``kid``.

        Raises:
            DeepSeekEyesError: the kind's ``unknown`` code when no key has that id.
        """
        for key in self.keys:  # compare_digest refuses non-ASCII text; no key id has any
            if kid.isascii() and hmac.compare_digest(self.kind.key_id(key), kid):
                if not value.isascii():
                    return False
                expected = hmac.new(key, data, hashlib.sha256).hexdigest()
                return hmac.compare_digest(expected, value)
        raise self.kind.fail(
            self.kind.unknown,
            f"signed with a key that is not on {self.kind.label}",
            key_id=kid, known=self.ids(),
        )

    # -- the file ---------------------------------------------------------------------------

    @classmethod
    def from_secrets(cls, values: list[str]) -> Self:
        return cls([v.encode("utf-8") for v in values])

    @classmethod
    def load_or_create(cls, directory: Path) -> Self:
        """The keyring in ``directory``, created with one fresh key when absent.

        Raises:
            DeepSeekEyesError: the kind's ``invalid`` or ``exposed`` code.
            StoreError: ``STORE_FULL``, ``STORE_READ_ONLY`` or ``STORE_WRITE_FAILED`` when
                a new keyring cannot be written.
        """
        kind = cls.kind
        kind.private_directory(directory)
        path = directory / KEYRING_FILENAME
        ring = cls._read(path)
        if ring is not None:
            return ring
        # Created whole or not at all, once: the new key is written to a temporary file of
        # this process's own and linked into place, which fails when another process got
        # there first; the loser then reads the winner's key, so no process ever signs
        # with a key that is not in the file.
        ring = cls([secrets.token_bytes(32)], path)
        tmp = ring._write_temporary()
        try:
            os.link(tmp, path)
        except FileExistsError:
            winner = cls._read(path)
            if winner is None:  # removed again at once: nothing sane to sign with
                raise kind.fail(kind.invalid, f"{kind.label} {path} vanished as it was made",
                                path=str(path)) from None
            return winner
        except OSError as exc:
            raise store_error(exc, f"cannot create {kind.label} {path}", path) from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        return ring

    @classmethod
    def read_only(cls, directory: Path) -> Self | None:
        """The keyring in ``directory``, or None when there is none; nothing is created,
        tightened or written (what a verifier needs: it must not make itself a key).

        Raises:
            DeepSeekEyesError: the kind's ``invalid`` or ``exposed`` code, as
                :meth:`load_or_create` (a directory others can write is exposed too: they
                could put a keyring of their own there).
        """
        try:
            mode = stat.S_IMODE(directory.stat().st_mode)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise cls.kind.fail(cls.kind.invalid, f"{directory} cannot be read",
                                path=str(directory)) from exc
        if mode & 0o022:
            raise cls.kind.fail(
                cls.kind.exposed,
                f"{directory} can be written by other users (mode {mode:04o}): whoever could "
                f"write it can replace {cls.kind.label}", path=str(directory),
                mode=f"{mode:04o}")
        return cls._read(directory / KEYRING_FILENAME)

    @classmethod
    def _read(cls, path: Path) -> Self | None:
        """The keyring file at ``path``, None when absent; refused when exposed."""
        kind = cls.kind
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise kind.fail(
                kind.invalid, f"{kind.label} {path} cannot be read (a symbolic link is refused)",
                path=str(path),
            ) from exc
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            mode = stat.S_IMODE(info.st_mode)
            if mode & 0o077 or info.st_uid != os.geteuid():
                raise kind.fail(
                    kind.exposed,
                    f"{kind.label} {path} is open to other users (mode {mode:04o}, owner uid "
                    f"{info.st_uid}): whoever could read it can forge {kind.signs}. If no one "
                    f"else can have read it, run chmod 600 {path}; otherwise move it and what "
                    "it signed aside to start over with a fresh key",
                    path=str(path), mode=f"{mode:04o}", uid=info.st_uid,
                )
            raw_bytes = fh.read()
        try:
            raw = json.loads(raw_bytes)
            keys = [base64.b64decode(item["key"], validate=True) for item in raw["keys"]]
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise kind.fail(kind.invalid, f"{kind.label} {path} cannot be read",
                            path=str(path)) from exc
        return cls(keys, path)

    def rotate(self) -> str:
        """Put a fresh key in front (it signs from now on); returns its id.

        The file is re-read and rewritten under an exclusive lock (``keyring.lock``), so two
        rotations at once each add their key and neither loses the other's."""
        if self.path is None:
            self.save()  # refused with the kind's message
        assert self.path is not None
        with _locked(self.path.with_name(KEYRING_FILENAME + ".lock")):
            current = type(self)._read(self.path)
            if current is not None:
                self.keys = list(current.keys)
            self.keys.insert(0, secrets.token_bytes(32))
            self.save()
        return self.active_id

    def save(self) -> None:
        """Raises:
            StoreError: ``STORE_FULL``, ``STORE_READ_ONLY`` or ``STORE_WRITE_FAILED``."""
        if self.path is None:
            raise self.kind.fail(
                self.kind.invalid, "keys from settings are rotated in the settings, not here")
        tmp = self._write_temporary()
        try:
            with guarded(f"cannot write {self.kind.label} {self.path}", self.path):
                os.replace(tmp, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def _write_temporary(self) -> Path:
        """The keyring written whole to a new 0600 file beside its path, named for this
        process and never shared (``O_EXCL``): two writers never write into one file."""
        assert self.path is not None
        self.kind.private_directory(self.path.parent)
        body = {
            "version": 1,
            "saved_at": time.time(),
            "keys": [
                {"id": self.kind.key_id(k), "key": base64.b64encode(k).decode("ascii")}
                for k in self.keys
            ],
        }
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
        with guarded(f"cannot write {self.kind.label} {self.path}", self.path):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump(body, fh)
                    fh.flush()
                    os.fsync(fh.fileno())
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
                raise
        return tmp


class OpenedOnUse:
    """A keyring given, or how to open it: then it is opened (created, the first time)
    when it is first used, so a process that never signs writes no keyring."""

    def __init__(self, keyring: Keyring | Callable[[], Keyring]) -> None:
        self._keyring = keyring if isinstance(keyring, Keyring) else None
        self._open = None if isinstance(keyring, Keyring) else keyring

    def get(self) -> Keyring:
        if self._keyring is None:
            assert self._open is not None
            self._keyring = self._open()
        return self._keyring
