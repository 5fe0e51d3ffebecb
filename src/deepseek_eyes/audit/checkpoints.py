"""Signed checkpoints of the audit chain: ``(seq, hash, ts)`` under an HMAC key.

A checkpoint says "the chain had this entry, with this hash, as its head at this time".
Stored checkpoints let :mod:`.verify` notice a chain rewritten under them; a checkpoint
*pinned* somewhere an attacker cannot reach (printed, mailed, kept by a monitoring system)
also catches the one thing the database alone cannot: the newest entries cut off together
with the checkpoints after them.

The pinned form is one line, ``seq:hash:ts:key_id:mac``, what ``audit checkpoint`` prints
and ``audit verify --checkpoint`` takes. Checkpoints are written when a data home closes
with new entries, after every runtime turn, and on ``audit checkpoint``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from deepseek_eyes.errors import AuditError
from deepseek_eyes.store.chain import canonical_bytes
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.keyring import Keyring

__all__ = ["Checkpoint", "checkpoint_if_new", "head", "sign_checkpoint", "stored_checkpoints"]


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    hash: str
    ts: float
    key_id: str
    mac: str

    @staticmethod
    def signed_bytes(seq: int, value: str, ts: float) -> bytes:
        return canonical_bytes({
            "v": 1, "type": "deepseekeyes.audit.checkpoint", "seq": seq, "hash": value,
            "ts": ts,
        })

    def token(self) -> str:
        return f"{self.seq}:{self.hash}:{self.ts!r}:{self.key_id}:{self.mac}"

    @classmethod
    def parse(cls, token: str) -> Checkpoint:
        """A pinned checkpoint line.

        Raises:
            AuditError: ``AUDIT_CHECKPOINT_INVALID`` when it is not one.
        """
        parts = token.strip().split(":")
        try:
            if len(parts) != 5:
                raise ValueError("five fields")
            seq, value, ts, kid, mac = int(parts[0]), parts[1], float(parts[2]), parts[3], parts[4]
            if seq < 1 or len(value) != 64 or len(mac) != 64 or not kid.startswith("k1-"):
                raise ValueError("field shapes")
            int(value, 16)
            int(mac, 16)
        except ValueError as exc:
            raise AuditError(
                "a checkpoint is seq:hash:ts:key_id:mac, as `audit checkpoint` prints it",
                code="AUDIT_CHECKPOINT_INVALID") from exc
        return cls(seq, value, ts, kid, mac)

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "token": self.token()}

    def check_signature(self, keyring: Keyring) -> bool:
        """Whether the MAC is right (raises ``AUDIT_KEY_UNKNOWN`` for an unknown key)."""
        return keyring.verify(self.signed_bytes(self.seq, self.hash, self.ts), self.key_id,
                              self.mac)


def head(db: Database) -> tuple[int, str] | None:
    row = db.query_one("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1")
    return (int(row["seq"]), str(row["hash"])) if row else None


def stored_checkpoints(db: Database) -> list[Checkpoint]:
    return [
        Checkpoint(int(r["seq"]), str(r["hash"]), float(r["ts"]), str(r["key_id"]),
                   str(r["mac"]))
        for r in db.query("SELECT seq, hash, ts, key_id, mac FROM chain_checkpoints ORDER BY id")
    ]


def sign_checkpoint(db: Database, keyring: Keyring, *, ts: float | None = None,
                    tip: tuple[int, str] | None = None) -> Checkpoint:
    """Sign the chain's head (``tip``, when the caller just read it) and store the
    checkpoint.

    Raises:
        AuditError: ``AUDIT_CHAIN_BROKEN`` when the chain is empty.
    """
    if tip is None:
        db.flush()
        tip = head(db)
    if tip is None:
        raise AuditError("the audit chain is empty: nothing to checkpoint",
                         code="AUDIT_CHAIN_BROKEN")
    seq, value = tip
    when = time.time() if ts is None else ts
    kid, mac = keyring.sign(Checkpoint.signed_bytes(seq, value, when))
    db.execute(
        "INSERT INTO chain_checkpoints (seq, hash, ts, key_id, mac) VALUES (?,?,?,?,?)",
        (seq, value, when, kid, mac),
    )
    return Checkpoint(seq, value, when, kid, mac)


def checkpoint_if_new(
    db: Database, keyring: Keyring
) -> tuple[tuple[int, str] | None, Checkpoint | None]:
    """The chain's head (None when empty), and a new checkpoint of it when the chain grew
    since the last one."""
    db.flush()
    tip = head(db)
    if tip is None:
        return None, None
    row = db.query_one("SELECT MAX(seq) AS seq FROM chain_checkpoints")
    if row is not None and row["seq"] is not None and int(row["seq"]) >= tip[0]:
        return tip, None
    return tip, sign_checkpoint(db, keyring, tip=tip)
