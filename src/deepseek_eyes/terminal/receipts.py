"""Receipts: the signed, chained record of every finished execution.

A receipt (schema ``1.0``) says what ran (real executable and its SHA-256, argv, cwd, the
*names* of the environment variables), under which mode and policy decision (and the plan's
hash), who approved it, when it started and ended, how it ended, and bounded stdout/stderr
with their hashes and truncation flags.

Signing: the receipt without its ``signature`` field is serialized canonically (sorted keys,
no whitespace, UTF-8) and signed with HMAC-SHA256; the signature names its key by id
(:mod:`.keyring`). Chaining: each receipt carries a ``sequence`` number and the hash of the
receipt before it (``previous_hash``), so a removed or reordered receipt is visible.

The share export replaces command, cwd, argv, stdout and stderr (and the policy reasons,
which quote arguments) with markers, sets ``sharing_redacted: true``, records the hash of the
receipt it came from, and is signed again; it verifies on its own but is not part of the
chain.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from deepseek_eyes.errors import ReceiptError
from deepseek_eyes.terminal.keyring import Keyring

__all__ = [
    "RECEIPT_SCHEMA",
    "RECEIPT_SCHEMA_VERSION",
    "SHARE_MARKER",
    "ReceiptLog",
    "canonical_bytes",
    "receipt_hash",
    "share_export",
    "sign_receipt",
    "verify_chain",
    "verify_receipt",
]

RECEIPT_SCHEMA = "deepseek-eyes/terminal-receipt"
RECEIPT_SCHEMA_VERSION = "1.0"
SHARE_MARKER = "[REDACTED:share]"
STATUSES = ("completed", "failed", "timed_out", "cancelled", "expired", "spawn_failed")
_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "schema": str, "schema_version": str, "receipt_id": str, "sequence": int,
    "previous_hash": (str, type(None)), "session_id": str, "plan_id": str, "plan_hash": str,
    "mode": str, "command": dict, "policy": dict, "approval": dict, "sandbox": dict,
    "started_at": str, "ended_at": str, "duration_ms": (int, float), "status": str,
    "exit_code": (int, type(None)), "signal": (str, type(None)), "stdout": dict,
    "stderr": dict, "redactions": int, "sharing_redacted": bool, "signature": dict,
}


def canonical_bytes(receipt: dict[str, Any]) -> bytes:
    """The bytes a signature covers: everything but ``signature``, canonically encoded."""
    body = {k: v for k, v in receipt.items() if k != "signature"}
    return json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def receipt_hash(receipt: dict[str, Any]) -> str:
    """The hash the next receipt chains to: over the canonical bytes *and* the signature."""
    data = json.dumps(
        receipt, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")
    return "sha256:" + hashlib.sha256(data).hexdigest()


def sign_receipt(receipt: dict[str, Any], keyring: Keyring) -> dict[str, Any]:
    """``receipt`` with a fresh ``signature`` (the input is not modified)."""
    out = dict(receipt)
    out.pop("signature", None)
    kid, value = keyring.sign(canonical_bytes(out))
    out["signature"] = {"alg": "HMAC-SHA256", "key_id": kid, "value": value}
    return out


def _check_shape(receipt: object) -> dict[str, Any]:
    if not isinstance(receipt, dict):
        raise ReceiptError("a receipt must be a JSON object")
    problems = []
    for name, kind in _REQUIRED.items():
        if name not in receipt:
            problems.append(f"missing field {name}")
        elif not isinstance(receipt[name], kind) or (
            kind is int and isinstance(receipt[name], bool)
        ):
            problems.append(f"field {name} has the wrong type")
    if not problems:
        if receipt["schema"] != RECEIPT_SCHEMA:
            problems.append(f"schema is not {RECEIPT_SCHEMA}")
        if receipt["schema_version"] != RECEIPT_SCHEMA_VERSION:
            problems.append(f"schema_version is not {RECEIPT_SCHEMA_VERSION}")
        if receipt["status"] not in STATUSES:
            problems.append("unknown status")
        sig = receipt["signature"]
        if sig.get("alg") != "HMAC-SHA256" or not isinstance(sig.get("key_id"), str) or (
            not isinstance(sig.get("value"), str)
        ):
            problems.append("the signature is not an HMAC-SHA256 with key_id and value")
    if problems:
        raise ReceiptError(
            "the receipt is malformed", details={"problems": problems[:20]}
        )
    return receipt


def verify_receipt(receipt: object, keyring: Keyring) -> dict[str, Any]:
    """Check a receipt or share export; return it when its signature matches.

    Raises:
        ReceiptError: ``TERMINAL_RECEIPT_INVALID`` (malformed, or the signature does not
            match: any changed byte), ``TERMINAL_RECEIPT_KEY_UNKNOWN``.
    """
    checked = _check_shape(receipt)
    sig = checked["signature"]
    try:
        data = canonical_bytes(checked)
    except ValueError as exc:  # NaN or other non-JSON values
        raise ReceiptError("the receipt holds values JSON cannot carry") from exc
    if not keyring.verify(data, sig["key_id"], sig["value"]):
        raise ReceiptError(
            "the receipt's signature does not match its contents",
            details={"receipt_id": checked.get("receipt_id"), "key_id": sig["key_id"]},
        )
    return checked


def verify_chain(receipts: list[dict[str, Any]], keyring: Keyring) -> None:
    """Verify each receipt and the links between consecutive ones.

    Raises:
        ReceiptError: as :func:`verify_receipt`, or ``TERMINAL_RECEIPT_CHAIN_BROKEN``.
    """
    previous: dict[str, Any] | None = None
    for receipt in receipts:
        verify_receipt(receipt, keyring)
        if receipt["sharing_redacted"]:
            raise ReceiptError(
                "a share export is not part of the chain", code="TERMINAL_RECEIPT_CHAIN_BROKEN"
            )
        if previous is not None:
            if receipt["sequence"] != previous["sequence"] + 1:
                raise ReceiptError(
                    f"receipt {receipt['sequence']} follows {previous['sequence']}",
                    code="TERMINAL_RECEIPT_CHAIN_BROKEN",
                )
            if receipt["previous_hash"] != receipt_hash(previous):
                raise ReceiptError(
                    f"receipt {receipt['sequence']} does not chain to the one before it",
                    code="TERMINAL_RECEIPT_CHAIN_BROKEN",
                )
        previous = receipt


def share_export(receipt: dict[str, Any], keyring: Keyring) -> dict[str, Any]:
    """A copy fit to share: command, cwd, argv, output and reasons replaced, signed again.

    Raises:
        ReceiptError: the source receipt does not verify.
    """
    source = verify_receipt(receipt, keyring)
    out = copy.deepcopy(source)
    command = out["command"]
    command["argv"] = [SHARE_MARKER]
    command["display"] = SHARE_MARKER
    command["cwd"] = SHARE_MARKER
    for stream in ("stdout", "stderr"):
        out[stream]["text"] = SHARE_MARKER
    out["policy"]["reasons"] = [SHARE_MARKER]
    out["sharing_redacted"] = True
    out["source_receipt_hash"] = receipt_hash(source)
    return sign_receipt(out, keyring)


class ReceiptLog:
    """Receipts on disk as JSON lines, append-only, and the head of the chain.

    ``<dir>/receipts.jsonl`` holds one signed receipt per line, in sequence order. The file
    is read once at start (to find the head and index the ids), then only appended to:
    one ``write`` per receipt, no directory entry created, so signing a receipt stays cheap.
    Appends are serialized by a lock so sequence numbers never repeat within a process.
    """

    FILENAME = "receipts.jsonl"

    def __init__(self, directory: Path, keyring: Keyring) -> None:
        self.directory = directory
        self.keyring = keyring
        self._lock = threading.Lock()
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / self.FILENAME
        self._sequence = 0
        self._head: str | None = None
        self._offsets: dict[str, int] = {}
        self._order: list[str] = []
        if self.path.exists():
            self._index()
        self._file = open(self.path, "ab")  # noqa: SIM115 - held open for appends

    def _index(self) -> None:
        offset = 0
        last: dict[str, Any] | None = None
        with open(self.path, "rb") as fh:
            for raw in fh:  # bounded by the file; a torn last line is ignored
                try:
                    item = json.loads(raw)
                except ValueError:
                    break
                self._offsets[item["receipt_id"]] = offset
                self._order.append(item["receipt_id"])
                offset += len(raw)
                last = item
        if last is not None:
            self._sequence = int(last["sequence"])
            self._head = receipt_hash(last)

    def append(self, body: dict[str, Any]) -> dict[str, Any]:
        """Chain, sign and store ``body``; returns the signed receipt."""
        with self._lock:
            receipt = dict(body)
            receipt["sequence"] = self._sequence + 1
            receipt["previous_hash"] = self._head
            signed = sign_receipt(receipt, self.keyring)
            line = json.dumps(signed, ensure_ascii=False, separators=(",", ":")).encode()
            offset = self._file.tell()
            self._file.write(line + b"\n")
            self._file.flush()
            self._offsets[signed["receipt_id"]] = offset
            self._order.append(signed["receipt_id"])
            self._sequence = signed["sequence"]
            self._head = receipt_hash(signed)
            return signed

    def get(self, receipt_id: str) -> dict[str, Any]:
        """Raises:
            ReceiptError: ``TERMINAL_RECEIPT_NOT_FOUND``.
        """
        offset = self._offsets.get(receipt_id) if isinstance(receipt_id, str) else None
        if offset is None:
            raise ReceiptError("no receipt has that id", code="TERMINAL_RECEIPT_NOT_FOUND")
        with open(self.path, "rb") as fh:
            fh.seek(offset)
            loaded: dict[str, Any] = json.loads(fh.readline())
        return loaded

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        return [self.get(rid) for rid in self._order[-limit:]]

    def close(self) -> None:
        self._file.close()
