"""HMAC keys for receipts: one signs, every key on the ring verifies.

Keys come from settings (``terminal.receipt_keys``, each an ``{ env = "NAME" }`` reference;
the first signs) or, when none are configured, from a private keyring file in the data
directory that is created with a fresh 256-bit key on first use. Rotation puts a new key in
front and keeps the old ones, so receipts signed before a rotation still verify.

A receipt names its key by a *key id*: a truncated SHA-256 of a domain string and the key.
It identifies the key without revealing anything useful about it; the key itself never
leaves this module except to compute an HMAC.

Whoever can read the keyring file can forge receipts, and whoever can replace it can make
the server sign with a key they know. So its directory is made private (0700: group and
other bits are removed from an existing one, which is ours and holds nothing others need),
the file is written 0600, and a keyring file that group or others can read or write, or
that another user owns, is *refused* (``TERMINAL_KEYRING_EXPOSED``) instead of quietly
tightened: the key may already be known, and only the operator can judge that.
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
from dataclasses import dataclass
from pathlib import Path

from deepseek_eyes.errors import ReceiptError

__all__ = ["KEYRING_FILENAME", "Keyring", "key_id", "private_directory"]

KEYRING_FILENAME = "keyring.json"
MIN_KEY_BYTES = 32


def private_directory(directory: Path) -> None:
    """Create ``directory`` (0700), or take group and other access away from an existing one.

    Raises:
        ReceiptError: ``TERMINAL_KEYRING_EXPOSED`` when it cannot be made private.
    """
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(directory.stat().st_mode)
        if mode & 0o077:
            os.chmod(directory, mode & 0o700)
    except OSError as exc:
        raise ReceiptError(
            f"{directory} is open to other users and cannot be made private",
            code="TERMINAL_KEYRING_EXPOSED", details={"path": str(directory)},
        ) from exc


def key_id(key: bytes) -> str:
    digest = hashlib.sha256(b"deepseek-eyes terminal receipt key\x00" + key).hexdigest()
    return "k1-" + digest[:24]


@dataclass
class Keyring:
    """Ordered keys; ``keys[0]`` signs. ``path`` is set when the ring lives in a file."""

    keys: list[bytes]
    path: Path | None = None

    def __post_init__(self) -> None:
        if not self.keys:
            raise ReceiptError("a keyring needs at least one key", code="TERMINAL_KEYRING_INVALID")
        for key in self.keys:
            if len(key) < MIN_KEY_BYTES:
                raise ReceiptError(
                    f"receipt keys must be at least {MIN_KEY_BYTES} bytes",
                    code="TERMINAL_KEYRING_INVALID",
                )

    @property
    def active_id(self) -> str:
        return key_id(self.keys[0])

    def ids(self) -> list[str]:
        return [key_id(k) for k in self.keys]

    def sign(self, data: bytes) -> tuple[str, str]:
        """``(key id, hex HMAC-SHA256)`` of ``data`` under the active key."""
        return self.active_id, hmac.new(self.keys[0], data, hashlib.sha256).hexdigest()

    def verify(self, data: bytes, kid: str, value: str) -> bool:
        """Whether ``value`` is the HMAC of ``data`` under the key named ``kid``.

        Raises:
            ReceiptError: ``TERMINAL_RECEIPT_KEY_UNKNOWN`` when no key has that id.
        """
        for key in self.keys:  # compare_digest refuses non-ASCII text; no key id has any
            if kid.isascii() and hmac.compare_digest(key_id(key), kid):
                if not value.isascii():
                    return False
                expected = hmac.new(key, data, hashlib.sha256).hexdigest()
                return hmac.compare_digest(expected, value)
        raise ReceiptError(
            "the receipt was signed with a key that is not on this keyring",
            code="TERMINAL_RECEIPT_KEY_UNKNOWN",
            details={"key_id": kid, "known": self.ids()},
        )

    # -- the file ---------------------------------------------------------------------------

    @classmethod
    def from_secrets(cls, values: list[str]) -> Keyring:
        return cls([v.encode("utf-8") for v in values])

    @classmethod
    def load_or_create(cls, directory: Path) -> Keyring:
        """The keyring in ``directory``, created with one fresh key when absent.

        Raises:
            ReceiptError: ``TERMINAL_KEYRING_INVALID`` for an unreadable or malformed file.
        """
        private_directory(directory)
        path = directory / KEYRING_FILENAME
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            ring = cls([secrets.token_bytes(32)], path)
            ring.save()
            return ring
        except OSError as exc:
            raise ReceiptError(
                f"the receipt keyring {path} cannot be read (a symbolic link is refused)",
                code="TERMINAL_KEYRING_INVALID", details={"path": str(path)},
            ) from exc
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            mode = stat.S_IMODE(info.st_mode)
            if mode & 0o077 or info.st_uid != os.geteuid():
                raise ReceiptError(
                    f"the receipt keyring {path} is open to other users (mode {mode:04o}, "
                    f"owner uid {info.st_uid}): whoever could read it can forge receipts. If "
                    f"no one else can have read it, run chmod 600 {path}; otherwise move it "
                    "and the receipts directory aside to start over with a fresh key",
                    code="TERMINAL_KEYRING_EXPOSED",
                    details={"path": str(path), "mode": f"{mode:04o}", "uid": info.st_uid},
                )
            raw_bytes = fh.read()
        try:
            raw = json.loads(raw_bytes)
            keys = [base64.b64decode(item["key"], validate=True) for item in raw["keys"]]
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise ReceiptError(
                f"the receipt keyring {path} cannot be read",
                code="TERMINAL_KEYRING_INVALID",
                details={"path": str(path)},
            ) from exc
        return cls(keys, path)

    def rotate(self) -> str:
        """Put a fresh key in front (it signs from now on); returns its id."""
        self.keys.insert(0, secrets.token_bytes(32))
        self.save()
        return self.active_id

    def save(self) -> None:
        if self.path is None:
            raise ReceiptError(
                "keys from settings are rotated in the settings, not here",
                code="TERMINAL_KEYRING_INVALID",
            )
        private_directory(self.path.parent)
        body = {
            "version": 1,
            "saved_at": time.time(),
            "keys": [
                {"id": key_id(k), "key": base64.b64encode(k).decode("ascii")} for k in self.keys
            ],
        }
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)  # a stale temporary file keeps its old mode
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(body, fh)
            os.replace(tmp, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
