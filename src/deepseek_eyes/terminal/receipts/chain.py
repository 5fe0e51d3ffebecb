"""Receipts: the signed, chained record of every finished execution.

A receipt (schema ``1.0``) says what ran (real executable and its SHA-256, argv, cwd, the
*names* of the environment variables), under which mode and policy decision (and the plan's
hash), who approved it, when it started and ended, how it ended, and bounded stdout/stderr
with their hashes and truncation flags.

Signing: the receipt without its ``signature`` field is serialized canonically (sorted keys,
no whitespace, UTF-8) and signed with HMAC-SHA256; the signature names its key by id
(:mod:`.keyring`). Chaining: each receipt carries a ``sequence`` number and the hash of the
receipt before it (``previous_hash``); the chain starts at sequence 1 with no previous hash,
so a receipt removed from the start or the middle, or a reordering, is visible.

Links alone cannot show that receipts were cut off the *end* of the log: a shorter chain is
still a valid chain. So the log keeps a signed **head** next to it (``head.jsonl``, schema
``deepseek-eyes/terminal-receipt-head``): the last sequence number, the last receipt's hash
(what the next receipt will chain to), the first receipt's hash and when it was written,
signed like a receipt. It is rewritten after every append, in place and without fsync, in
one of two fixed-width slots (:func:`parse_head_file`, :class:`ReceiptLog`), so appending
stays cheap and a torn write always leaves one whole head. A verifier given the head checks
that the log ends exactly at the receipt it names; a head exported earlier and kept
elsewhere ("pinned") must still be found in the log at its sequence with its hash — the
only defence against someone who cuts the log and puts back an older genuine head.

Reading is strict: a receipt or head with a duplicate key (at any depth) or a ``NaN`` or
``Infinity`` constant is refused, because two readers could otherwise see two different
receipts in bytes that verify.

The share export replaces command, cwd, argv, stdout and stderr (and the policy reasons,
which quote arguments) with markers, sets ``sharing_redacted: true``, records the hash of the
receipt it came from, and is signed again; it verifies on its own but is not part of the
chain.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import re
import stat
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from deepseek_eyes import canonical_json
from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import ReceiptError
from deepseek_eyes.store.failures import guarded
from deepseek_eyes.terminal.receipts.keyring import Keyring, private_directory
from deepseek_eyes.terminal.records import Receipt, ReceiptHead, Signature

__all__ = [
    "HEAD_FILENAME",
    "HEAD_SCHEMA",
    "HEAD_SCHEMA_VERSION",
    "HEAD_SLOT_BYTES",
    "RECEIPT_SCHEMA",
    "RECEIPT_SCHEMA_VERSION",
    "SHARE_MARKER",
    "ReceiptLog",
    "canonical_bytes",
    "head_file_bytes",
    "head_slot",
    "load_head",
    "loads_strict",
    "make_head",
    "parse_head_file",
    "parse_receipts",
    "read_log",
    "receipt_hash",
    "share_export",
    "sign_receipt",
    "snapshot_head",
    "verify_chain",
    "verify_head",
    "verify_receipt",
]

RECEIPT_SCHEMA = "deepseek-eyes/terminal-receipt"
RECEIPT_SCHEMA_VERSION = "1.0"
HEAD_SCHEMA = "deepseek-eyes/terminal-receipt-head"
HEAD_SCHEMA_VERSION = "1.0"
HEAD_FILENAME = "head.jsonl"
HEAD_SLOT_BYTES = 1024
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
_HEAD_FIELDS: dict[str, type | tuple[type, ...]] = {
    "schema": str, "schema_version": str, "sequence": int,
    "last_hash": (str, type(None)), "first_hash": (str, type(None)), "written_at": str,
    "signature": dict,
}
_SIGNATURE_FIELDS = {"alg", "key_id", "value"}
_HASH = re.compile(r"sha256:[0-9a-f]{64}")
_HMAC_HEX = re.compile(r"[0-9a-f]{64}")
_KEY_ID = re.compile(r"[\x21-\x7e]{1,128}")
# A receipt's line in the log: compact, keys in the order they were built (not canonical;
# the signature covers the canonical bytes). One encoder, as json.dumps would build per call.
_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


# -- strict JSON --------------------------------------------------------------------------


class _Refused(Exception):
    """A strictness violation raised from inside the JSON decoder's hooks (not a
    ValueError, so ``json.loads`` lets it through unchanged)."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> JsonObject:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"the key {key!r} appears twice in one object")
            seen.add(key)
    return out


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_pairs, parse_constant=_no_constant)


def _decode(data: str | bytes) -> Any:
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    return _DECODER.decode(text)


def loads_strict(data: str | bytes, *, what: str = "the receipt") -> Any:
    """Parse JSON, refusing duplicate keys at any depth and ``NaN``/``Infinity``.

    Raises:
        ReceiptError: ``TERMINAL_RECEIPT_INVALID`` for either, or for text that is not JSON.
    """
    try:
        return _decode(data)
    except _Refused as exc:
        raise ReceiptError(f"{what} is refused: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ReceiptError(f"{what} is not JSON") from exc


def parse_receipts(text: str) -> list[Any]:
    """One receipt (or export), a JSON list of them, or JSON lines, parsed strictly.

    JSON lines are split on ``\\n`` only: a receipt's text may hold U+2028 or U+0085, which
    ``str.splitlines`` would treat as line ends.

    Raises:
        ReceiptError: ``TERMINAL_RECEIPT_INVALID`` (see :func:`loads_strict`).
    """
    try:
        loaded = _decode(text)
    except _Refused as exc:
        raise ReceiptError(f"the receipt is refused: {exc}") from None
    except (ValueError, RecursionError):
        return [
            loads_strict(line, what=f"line {number}")
            for number, line in enumerate(text.split("\n"), start=1)
            if line.strip()
        ]
    return loaded if isinstance(loaded, list) else [loaded]


# -- receipts -----------------------------------------------------------------------------


def canonical_bytes(receipt: Mapping[str, object]) -> bytes:
    """The bytes a signature covers: everything but ``signature``, canonically encoded."""
    body = {k: v for k, v in receipt.items() if k != "signature"}
    return canonical_json.dumps_bytes(body)


def receipt_hash(receipt: Mapping[str, object]) -> str:
    """The hash the next receipt chains to: over the canonical bytes *and* the signature."""
    return "sha256:" + canonical_json.sha256_hex(receipt)


def sign_receipt(receipt: Receipt, keyring: Keyring) -> Receipt:
    """``receipt`` with a fresh ``signature`` (the input is not modified)."""
    return _sign(receipt, keyring)[0]


def _sign(receipt: Receipt, keyring: Keyring) -> tuple[Receipt, str]:
    """``receipt`` signed, and its :func:`receipt_hash`, from one canonical encoding.

    Canonical JSON sorts the keys, so the signed receipt's bytes are the unsigned bytes with
    ``"signature":{…}`` between the members that sort before ``signature`` and those after:
    encoding the two halves once gives both the bytes the signature covers and the bytes the
    chain hashes, byte for byte what :func:`canonical_bytes` and :func:`receipt_hash` give
    (``tests/terminal/test_receipts.py`` holds them to it).
    """
    out = receipt.copy()
    out.pop("signature", None)
    before = canonical_json.dumps({k: v for k, v in out.items() if k < "signature"})[1:-1]
    after = canonical_json.dumps({k: v for k, v in out.items() if k > "signature"})[1:-1]
    kid, value = keyring.sign(_members(before, after))
    signature = _signature(kid, value)
    out["signature"] = signature
    signed = _members(before, '"signature":' + canonical_json.dumps(signature), after)
    return out, "sha256:" + hashlib.sha256(signed).hexdigest()


def _members(*members: str) -> bytes:
    """A JSON object's bytes from its members' canonical text (empty ones left out)."""
    return ("{" + ",".join(member for member in members if member) + "}").encode("utf-8")


def _signature(key_id: str, value: str) -> Signature:
    return {"alg": "HMAC-SHA256", "key_id": key_id, "value": value}


def _type_problems(
    item: Mapping[str, object], fields: Mapping[str, type | tuple[type, ...]]
) -> list[str]:
    problems = []
    for name, kind in fields.items():
        if name not in item:
            problems.append(f"missing field {name}")
        elif not isinstance(item[name], kind) or (
            kind is int and isinstance(item[name], bool)
        ):
            problems.append(f"field {name} has the wrong type")
    return problems


def _signature_problems(sig: Mapping[str, object]) -> list[str]:
    if set(sig) != _SIGNATURE_FIELDS or sig["alg"] != "HMAC-SHA256" or not (
        isinstance(sig["key_id"], str) and _KEY_ID.fullmatch(sig["key_id"])
        and isinstance(sig["value"], str) and _HMAC_HEX.fullmatch(sig["value"])
    ):
        return ["the signature is not exactly an HMAC-SHA256 with key_id and a hex value"]
    return []


def _check_shape(receipt: object) -> Receipt:
    if not isinstance(receipt, dict):
        raise ReceiptError("a receipt must be a JSON object")
    problems = _type_problems(receipt, _REQUIRED)
    if not problems:
        if receipt["schema"] != RECEIPT_SCHEMA:
            problems.append(f"schema is not {RECEIPT_SCHEMA}")
        if receipt["schema_version"] != RECEIPT_SCHEMA_VERSION:
            problems.append(f"schema_version is not {RECEIPT_SCHEMA_VERSION}")
        if receipt["status"] not in STATUSES:
            problems.append("unknown status")
        problems += _signature_problems(receipt["signature"])
    if problems:
        raise ReceiptError(
            "the receipt is malformed", details={"problems": problems[:20]}
        )
    return cast(Receipt, receipt)  # its fields checked above, the rest by its signature


def _check_signature(item: Receipt | ReceiptHead, keyring: Keyring, what: str) -> None:
    sig = item["signature"]
    try:
        data = canonical_bytes(item)
    except ValueError as exc:  # NaN, lone surrogates or other values JSON cannot carry
        raise ReceiptError(f"{what} holds values JSON cannot carry") from exc
    if not keyring.verify(data, sig["key_id"], sig["value"]):
        raise ReceiptError(
            f"{what}'s signature does not match its contents",
            details={"receipt_id": cast(Mapping[str, object], item).get("receipt_id"),
                     "key_id": sig["key_id"]},
        )


def verify_receipt(receipt: object, keyring: Keyring) -> Receipt:
    """Check a receipt or share export; return it when its signature matches.

    Raises:
        ReceiptError: ``TERMINAL_RECEIPT_INVALID`` (malformed, or the signature does not
            match: any changed byte), ``TERMINAL_RECEIPT_KEY_UNKNOWN``.
    """
    checked = _check_shape(receipt)
    _check_signature(checked, keyring, "the receipt")
    return checked


def _broken(message: str, **details: Any) -> ReceiptError:
    return ReceiptError(message, code="TERMINAL_RECEIPT_CHAIN_BROKEN", details=details)


def verify_chain(
    receipts: Sequence[Receipt],
    keyring: Keyring,
    *,
    head: object = None,
    pinned: Sequence[object] = (),
    from_start: bool = True,
) -> None:
    """Verify each receipt, the links between consecutive ones, and the chain's ends.

    ``from_start`` (the default): the first receipt must be sequence 1 with no previous hash,
    so receipts cut off the start are seen. ``head``: a signed head (:func:`verify_head`);
    the last receipt must be exactly the one it names, so receipts cut off the end are seen,
    and a log that goes on past it is refused too (the head is stale, or an older one was put
    back). ``pinned``: heads exported earlier; each must name a receipt that is in the chain
    at its sequence with its hash, and receipts after it are allowed.

    Raises:
        ReceiptError: as :func:`verify_receipt` and :func:`verify_head`, or
            ``TERMINAL_RECEIPT_CHAIN_BROKEN``.
    """
    previous: Receipt | None = None
    for receipt in receipts:
        verify_receipt(receipt, keyring)
        if receipt["sharing_redacted"]:
            raise _broken("a share export is not part of the chain")
        sequence = receipt["sequence"]
        if sequence < 1 or (sequence == 1) != (receipt["previous_hash"] is None):
            raise _broken(
                f"receipt {sequence} is not a link of a chain that starts at sequence 1 "
                "with no previous hash", sequence=sequence,
            )
        if previous is None:
            if from_start and sequence != 1:
                raise _broken(
                    f"the chain starts at sequence {sequence}, not 1: receipts were cut "
                    "from the start", first_sequence=sequence,
                )
        else:
            if sequence != previous["sequence"] + 1:
                raise _broken(f"receipt {sequence} follows {previous['sequence']}",
                              sequence=sequence)
            if receipt["previous_hash"] != receipt_hash(previous):
                raise _broken(f"receipt {sequence} does not chain to the one before it",
                              sequence=sequence)
        previous = receipt
    if head is not None:
        _check_head_in_chain(receipts, verify_head(head, keyring), exact=True)
    for pin in pinned:
        _check_head_in_chain(receipts, verify_head(pin, keyring), exact=False)


def _check_head_in_chain(
    receipts: Sequence[Receipt], head: ReceiptHead, *, exact: bool
) -> None:
    """``receipts`` already verified as a chain; ``head`` already verified."""
    wanted = head["sequence"]
    which = "signed head" if exact else "pinned head"
    last = receipts[-1]["sequence"] if receipts else 0
    if wanted > last:
        raise _broken(
            f"the log ends at sequence {last} but its {which} names sequence {wanted}: "
            "receipts were cut from the end", last_sequence=last, head_sequence=wanted,
        )
    if wanted > 0:
        base = receipts[0]["sequence"]
        if wanted < base:
            raise _broken(f"the {which} names sequence {wanted}, before the first receipt "
                          f"given ({base})", head_sequence=wanted)
        named = receipts[wanted - base]
        if receipt_hash(named) != head["last_hash"]:
            raise _broken(
                f"receipt {wanted} is not the one the {which} names: the log was rewritten "
                "or the head belongs to another log", head_sequence=wanted,
            )
        if base == 1 and receipt_hash(receipts[0]) != head["first_hash"]:
            raise _broken(f"receipt 1 is not the one the {which} names", head_sequence=wanted)
    if exact and wanted < last:
        raise _broken(
            f"the log goes on past its signed head (sequence {wanted}, last {last}): the head "
            "is stale or an older head was put back", last_sequence=last, head_sequence=wanted,
        )


# -- the head -----------------------------------------------------------------------------


def _iso_now() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def make_head(
    sequence: int, last_hash: str | None, first_hash: str | None, keyring: Keyring
) -> ReceiptHead:
    """The signed head of a chain whose last receipt is number ``sequence`` (0: none yet),
    hashing to ``last_hash``, and whose receipt 1 hashes to ``first_hash``."""
    head: ReceiptHead = {
        "schema": HEAD_SCHEMA, "schema_version": HEAD_SCHEMA_VERSION,
        "sequence": sequence, "last_hash": last_hash, "first_hash": first_hash,
        "written_at": _iso_now(),
    }
    kid, value = keyring.sign(canonical_bytes(head))
    head["signature"] = _signature(kid, value)
    return head


def verify_head(head: object, keyring: Keyring) -> ReceiptHead:
    """Check one signed head's shape and signature; return it.

    Raises:
        ReceiptError: ``TERMINAL_RECEIPT_INVALID`` (malformed or forged),
            ``TERMINAL_RECEIPT_KEY_UNKNOWN``.
    """
    if not isinstance(head, dict):
        raise ReceiptError("a receipt chain head must be a JSON object")
    problems = _type_problems(head, _HEAD_FIELDS)
    if not problems:
        unknown = sorted(set(head) - set(_HEAD_FIELDS))
        if unknown:
            problems.append(f"unknown fields {unknown}")
        if head["schema"] != HEAD_SCHEMA or head["schema_version"] != HEAD_SCHEMA_VERSION:
            problems.append(f"not a {HEAD_SCHEMA} {HEAD_SCHEMA_VERSION}")
        hashes = (head["last_hash"], head["first_hash"])
        if head["sequence"] < 0:
            problems.append("sequence is negative")
        elif head["sequence"] == 0 and hashes != (None, None):
            problems.append("an empty chain's head names receipts")
        elif head["sequence"] > 0 and not all(
            isinstance(h, str) and _HASH.fullmatch(h) for h in hashes
        ):
            problems.append("last_hash and first_hash must be sha256: hashes")
        problems += _signature_problems(head["signature"])
    if problems:
        raise ReceiptError("the receipt chain head is malformed",
                           details={"problems": problems[:20]})
    checked = cast(ReceiptHead, head)  # exactly its fields, checked above
    _check_signature(checked, keyring, "the receipt chain head")
    return checked


def head_slot(head: ReceiptHead) -> bytes:
    """One slot of a head file: the head as compact JSON, padded to a fixed width."""
    data = canonical_json.ASCII.dumps_bytes(head)
    if len(data) >= HEAD_SLOT_BYTES:
        raise ReceiptError("a receipt chain head does not fit its slot")
    return data.ljust(HEAD_SLOT_BYTES - 1) + b"\n"


def head_file_bytes(newest: ReceiptHead, older: ReceiptHead | None) -> bytes:
    """A whole head file: each head in the slot of its sequence's parity."""
    slots = [b" " * (HEAD_SLOT_BYTES - 1) + b"\n"] * 2
    for head in (older, newest):
        if head is not None:
            slots[head["sequence"] % 2] = head_slot(head)
    return b"".join(slots)


def parse_head_file(data: bytes, keyring: Keyring, where: str) -> ReceiptHead:
    """The newest head of a head file, after checking both slots.

    A head file is two lines of ``HEAD_SLOT_BYTES`` bytes. Each holds a signed head (or,
    only while the newest head is sequence 0, spaces), in the line of its sequence's parity,
    and the two sequences are consecutive. So the file always carries the newest head and the
    one before it, and a head cannot be dropped, swapped or duplicated to make an older one
    look newest: that would need the head two steps back, which the newest overwrote.

    Raises:
        ReceiptError: ``TERMINAL_RECEIPT_INVALID`` (malformed, forged, slots inconsistent),
            ``TERMINAL_RECEIPT_KEY_UNKNOWN``.
    """
    size = HEAD_SLOT_BYTES
    if len(data) != 2 * size or data[size - 1 : size] != b"\n" or data[-1:] != b"\n":
        raise ReceiptError(f"{where} is not a receipt chain head file "
                           f"(two lines of {size} bytes)", details={"bytes": len(data)})
    slots: list[ReceiptHead | None] = []
    for index in (0, 1):
        raw = data[index * size : (index + 1) * size].strip()
        if not raw:
            slots.append(None)
            continue
        head = verify_head(loads_strict(raw, what=f"line {index + 1} of {where}"), keyring)
        if head["sequence"] % 2 != index:
            raise ReceiptError(f"line {index + 1} of {where} holds head {head['sequence']}, "
                               "which belongs in the other line")
        slots.append(head)
    present = [head for head in slots if head is not None]
    if not present:
        raise ReceiptError(f"{where} holds no receipt chain head")
    newest = max(present, key=lambda head: int(head["sequence"]))
    if len(present) == 1 and newest["sequence"] != 0:
        raise ReceiptError(f"{where} lacks the head before head {newest['sequence']}")
    if len(present) == 2 and abs(present[0]["sequence"] - present[1]["sequence"]) != 1:
        raise ReceiptError(f"the two heads in {where} are not consecutive")
    return newest


def load_head(path: Path, keyring: Keyring, *, attempts: int = 3) -> ReceiptHead:
    """The newest head of the head file at ``path``; see :func:`snapshot_head`."""
    return snapshot_head(path, keyring, attempts=attempts)[0]


def snapshot_head(
    path: Path, keyring: Keyring, *, attempts: int = 3
) -> tuple[ReceiptHead, bytes]:
    """The newest head of the head file at ``path`` (:func:`parse_head_file`) and the
    file's bytes as read.

    The file may be a live log's, rewritten in place while it is read; a read that fails is
    tried again (``attempts`` in all) before the failure is reported.

    Raises:
        ReceiptError: ``TERMINAL_RECEIPT_NOT_FOUND`` (no such file), as
            :func:`parse_head_file`, or ``TERMINAL_RECEIPT_INVALID`` (unreadable).
    """
    for attempt in range(attempts):
        data = _read_bytes(path, "receipt chain head")
        try:
            return parse_head_file(data, keyring, str(path)), data
        except ReceiptError:
            if attempt + 1 >= attempts:
                raise
            time.sleep(0.01)
    raise AssertionError("unreachable")  # pragma: no cover


def _read_bytes(path: Path, what: str) -> bytes:
    """Raises:
        ReceiptError: ``TERMINAL_RECEIPT_NOT_FOUND`` (no such file) or
            ``TERMINAL_RECEIPT_INVALID`` (unreadable).
    """
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ReceiptError(f"there is no {what} at {path}",
                           code="TERMINAL_RECEIPT_NOT_FOUND") from None
    except OSError as exc:
        raise ReceiptError(f"the {what} {path} cannot be read") from exc


def read_log(path: Path) -> list[Receipt]:
    """The receipts of a live log, read-only: every complete line, parsed strictly.

    A last line without its newline is an append still being written and is left out.

    Raises:
        ReceiptError: ``TERMINAL_RECEIPT_NOT_FOUND``, ``TERMINAL_RECEIPT_INVALID``.
    """
    data = _read_bytes(path, "receipt log")
    lines = data.split(b"\n")[:-1]  # the part after the last newline is not a whole line
    out: list[Receipt] = []  # parsed, not verified: verify_chain checks them
    for number, raw in enumerate(lines, start=1):
        item = loads_strict(raw, what=f"line {number} of {path}")
        if not isinstance(item, dict):
            raise ReceiptError(f"line {number} of {path} is not a receipt")
        out.append(cast(Receipt, item))
    return out


def share_export(receipt: object, keyring: Keyring) -> Receipt:
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


# -- the log ------------------------------------------------------------------------------


def _private_file(fd: int) -> None:
    """Take group and other access away from an open file of ours."""
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    if mode & 0o077:
        os.fchmod(fd, mode & 0o700)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class ReceiptLog:
    """Receipts on disk as JSON lines, append-only, and the signed head of the chain.

    ``<dir>/receipts.jsonl`` holds one signed receipt per line, in sequence order;
    ``<dir>/head.jsonl`` the signed head in two fixed-width slots (:func:`parse_head_file`).
    The directory is 0700 and both files 0600 (tightened when found looser).

    The log is read once at start, then only appended to. An append is one ``write`` of the
    receipt's line, then one ``pwrite`` of the new head over the slot of its parity: no
    file is created or renamed and nothing is synced. (Replacing a file by rename costs a
    forced writeback on ext4 — measured at 0.3 to 0.9 ms, as much as the rest of an
    execution — which is why the head is not a file replaced per append.) A crash can lose
    the newest head but never both slots, so the head is never ahead of the log and at most
    one receipt behind it. Appends are serialized by a lock, so sequence numbers never repeat
    within a process.

    At start the log must agree with its head: every line a receipt, sequences 1, 2, … in
    order, the receipt at the head's sequence (and receipt 1) the one it names. A log that
    ends before its head, or holds another receipt there, was cut or rewritten: the log
    refuses to open (``TERMINAL_RECEIPT_CHAIN_BROKEN``) rather than sign a new head over the
    damage. Receipts after the head (a crash between the append and the head's write) must
    verify and link, and the head is brought up to date. A missing head (a log from before
    heads, or a deleted one) is written for the log as found, after every receipt in it is
    verified: only a head exported and kept elsewhere shows what was there before. A last
    line without its newline (a torn write) is cut off.
    """

    FILENAME = "receipts.jsonl"
    HEAD_FILENAME = HEAD_FILENAME

    def __init__(self, directory: Path, keyring: Keyring) -> None:
        self.directory = directory
        self.keyring = keyring
        self._lock = threading.Lock()
        private_directory(directory)
        self.path = directory / self.FILENAME
        self.head_path = directory / self.HEAD_FILENAME
        self._sequence = 0
        self._head: str | None = None  # the last receipt's hash: the next previous_hash
        self._before: str | None = None  # the hash of the receipt before the last
        self._first_hash: str | None = None
        self._offsets: dict[str, int] = {}
        self._order: list[str] = []
        self._size = 0
        self._head_fd = -1
        stored = self._load_head()
        behind = self._index(stored)
        # A full disk is the store's STORE_FULL (still an OSError), as everywhere the data
        # directory is written.
        with guarded(f"cannot open the receipt log {self.path}", self.path):
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                               | os.O_CLOEXEC, 0o600)
            try:
                _private_file(self._fd)
                if os.fstat(self._fd).st_size != self._size:
                    os.ftruncate(self._fd, self._size)  # a torn last line
                if stored is None or behind:
                    self._rewrite_head()
                else:
                    self._head_fd = os.open(self.head_path,
                                            os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                    _private_file(self._head_fd)
            except BaseException:
                self.close()
                raise

    def _load_head(self) -> ReceiptHead | None:
        try:
            fd = os.open(self.head_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ReceiptError(f"the receipt chain head {self.head_path} cannot be read",
                               details={"path": str(self.head_path)}) from exc
        with os.fdopen(fd, "rb") as fh:
            data = fh.read()
        return parse_head_file(data, self.keyring, str(self.head_path))

    def _lines(self) -> Iterator[bytes]:
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - closed by the with below
        except FileNotFoundError:
            return
        with fh:
            yield from fh

    def _index(self, stored: ReceiptHead | None) -> int:
        """Index the log and check it against its stored head (see the class docstring).

        Returns how many receipts follow the stored head (all of them when there is none);
        those are verified and their links checked here.
        """
        head_sequence = stored["sequence"] if stored else 0
        behind = 0
        before: Mapping[str, object] | None = None  # hashed only where needed: opening
        last: Mapping[str, object] | None = None  # stays cheap
        for number, raw in enumerate(self._lines(), start=1):
            if not raw.endswith(b"\n"):
                break  # a torn write: cut off by the caller
            item = loads_strict(raw, what=f"line {number} of {self.path}")
            if not (isinstance(item, dict) and isinstance(item.get("receipt_id"), str)
                    and item.get("sequence") == number):
                raise _broken(
                    f"line {number} of {self.path} is not receipt {number}: the log was "
                    "cut or rewritten; move the receipts directory aside to start a new "
                    "chain", line=number, path=str(self.path),
                )
            if number == 1:
                self._first_hash = receipt_hash(item)
            if stored is not None and number == head_sequence and (
                receipt_hash(item) != stored["last_hash"]
                or self._first_hash != stored["first_hash"]
            ):
                raise _broken(
                    f"receipt {number} of {self.path} is not the one its signed head "
                    "names: the log was rewritten", path=str(self.path),
                )
            if number > head_sequence:
                verify_receipt(item, self.keyring)
                link = None if last is None else receipt_hash(last)
                if item["previous_hash"] != link:
                    raise _broken(f"receipt {number} of {self.path} does not chain to the "
                                  "one before it", path=str(self.path))
                behind += 1
            self._offsets[item["receipt_id"]] = self._size
            self._order.append(item["receipt_id"])
            self._size += len(raw)
            self._sequence = number
            before, last = last, item
        self._head = None if last is None else receipt_hash(last)
        self._before = None if before is None else receipt_hash(before)
        if self._sequence < head_sequence:
            raise _broken(
                f"the receipt log ends at sequence {self._sequence} but its signed head names "
                f"sequence {head_sequence}: receipts were cut from the end; move the receipts "
                "directory aside to start a new chain",
                last_sequence=self._sequence, head_sequence=head_sequence,
            )
        return behind

    def _current_head(self) -> ReceiptHead:
        return make_head(self._sequence, self._head, self._first_hash, self.keyring)

    def _rewrite_head(self) -> None:
        """Write a whole head file (the newest head and the one before) and swap it in."""
        older = None
        if self._sequence > 0:
            first = self._first_hash if self._sequence > 1 else None
            older = make_head(self._sequence - 1, self._before, first, self.keyring)
        data = head_file_bytes(self._current_head(), older)
        tmp = self.directory / (self.HEAD_FILENAME + ".tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, self.head_path)
        if self._head_fd >= 0:
            os.close(self._head_fd)
        self._head_fd = os.open(self.head_path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def _write_head(self) -> None:
        slot = head_slot(self._current_head())
        if os.pwrite(self._head_fd, slot, (self._sequence % 2) * HEAD_SLOT_BYTES) != len(slot):
            raise OSError("short write to the receipt chain head")

    def append(self, body: Receipt) -> Receipt:
        """Chain, sign and store ``body``, then move the head; returns the signed receipt.

        Raises:
            OSError: as :meth:`append_hashed`.
        """
        return self.append_hashed(body)[0]

    def append_hashed(self, body: Receipt) -> tuple[Receipt, str]:
        """:meth:`append`, and the signed receipt's :func:`receipt_hash` (the log computes
        it to chain the next receipt; a caller that records it need not encode again).

        Raises:
            StoreError: (an ``OSError``; ``STORE_FULL`` for a full disk) the receipt could
                not be written (the log is left as it was) or the head could not be (the
                receipt is stored; the next start repairs the head).
        """
        with self._lock:
            receipt = body.copy()
            receipt["sequence"] = self._sequence + 1
            receipt["previous_hash"] = self._head
            signed, signed_hash = _sign(receipt, self.keyring)
            line = _LINE_ENCODER.encode(signed).encode()
            offset = self._size
            try:
                with guarded(f"cannot write the receipt log {self.path}", self.path):
                    _write_all(self._fd, line + b"\n")
            except BaseException:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, offset)  # never leave a torn line to append after
                raise
            self._size = offset + len(line) + 1
            self._offsets[signed["receipt_id"]] = offset
            self._order.append(signed["receipt_id"])
            self._sequence = signed["sequence"]
            self._before, self._head = self._head, signed_hash
            if self._sequence == 1:
                self._first_hash = self._head
            with guarded(f"cannot write the receipt head {self.head_path}", self.head_path):
                self._write_head()
            return signed, signed_hash

    def head(self) -> ReceiptHead:
        """The newest head as stored in the head file."""
        with self._lock:
            return load_head(self.head_path, self.keyring, attempts=1)

    def get(self, receipt_id: str) -> Receipt:
        """Raises:
            ReceiptError: ``TERMINAL_RECEIPT_NOT_FOUND``, ``TERMINAL_RECEIPT_INVALID`` (the
                stored line is not a JSON object read strictly).
        """
        offset = self._offsets.get(receipt_id) if isinstance(receipt_id, str) else None
        if offset is None:
            raise ReceiptError("no receipt has that id", code="TERMINAL_RECEIPT_NOT_FOUND")
        with open(self.path, "rb") as fh:
            fh.seek(offset)
            loaded = loads_strict(fh.readline(), what=f"the stored receipt {receipt_id}")
        if not isinstance(loaded, dict):
            raise ReceiptError(f"the stored receipt {receipt_id} is not a JSON object")
        return cast(Receipt, loaded)  # a line this log wrote, read back strictly

    def recent(self, limit: int = 50) -> list[Receipt]:
        return [self.get(rid) for rid in self._order[-limit:]]

    def close(self) -> None:
        with self._lock:
            for name in ("_fd", "_head_fd"):
                fd = getattr(self, name, -1)
                if fd >= 0:
                    os.close(fd)
                    setattr(self, name, -1)
