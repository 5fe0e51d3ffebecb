"""The receipt keyring: HMAC keys for the terminal's receipts (:mod:`deepseek_eyes.store.keyring`).

Keys come from settings (``terminal.receipt_keys``, each an ``{ env = "NAME" }`` reference;
the first signs) or, when none are configured, from a private keyring file in the terminal's
data directory. Key ids keep the domain receipts have always used, so receipts signed before
the keyring moved to the store layer still verify.
"""

from __future__ import annotations

from pathlib import Path

from deepseek_eyes.errors import ReceiptError
from deepseek_eyes.store.keyring import KEYRING_FILENAME, KeyringKind
from deepseek_eyes.store.keyring import Keyring as _Keyring

__all__ = ["KEYRING_FILENAME", "RECEIPT_KEYS", "Keyring", "key_id", "private_directory"]

RECEIPT_KEYS = KeyringKind(
    domain=b"deepseek-eyes terminal receipt key",
    label="the receipt keyring",
    signs="receipts",
    error=ReceiptError,
    invalid="TERMINAL_KEYRING_INVALID",
    exposed="TERMINAL_KEYRING_EXPOSED",
    unknown="TERMINAL_RECEIPT_KEY_UNKNOWN",
)


class Keyring(_Keyring):
    kind = RECEIPT_KEYS


def key_id(key: bytes) -> str:
    return RECEIPT_KEYS.key_id(key)


def private_directory(directory: Path) -> None:
    """Create ``directory`` (0700) or make it private (``TERMINAL_KEYRING_EXPOSED``)."""
    RECEIPT_KEYS.private_directory(directory)
