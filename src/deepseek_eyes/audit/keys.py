"""The audit keyring: the HMAC keys that sign checkpoints of the chain.

It lives in ``<data home>/audit/keyring.json`` (0600, in a 0700 directory; see
:mod:`deepseek_eyes.store.keyring`). The terminal's policy refuses every path under the
data home to planned commands, so a command the model plans can neither read nor replace
it. Key ids are derived in their own domain, so one key never has two uses' ids.
"""

from __future__ import annotations

from pathlib import Path

from deepseek_eyes.errors import AuditError
from deepseek_eyes.store.keyring import Keyring, KeyringKind

__all__ = ["AUDIT_KEYS", "AuditKeyring", "audit_directory"]

AUDIT_KEYS = KeyringKind(
    domain=b"deepseek-eyes audit checkpoint key",
    label="the audit keyring",
    signs="audit checkpoints",
    error=AuditError,
    invalid="AUDIT_KEYRING_INVALID",
    exposed="AUDIT_KEYRING_EXPOSED",
    unknown="AUDIT_KEY_UNKNOWN",
)


class AuditKeyring(Keyring):
    kind = AUDIT_KEYS


def audit_directory(home_root: Path) -> Path:
    return home_root / "audit"
