"""Receipts: signatures over canonical bytes, tamper detection, rotation, chain, export."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.errors import ReceiptError
from deepseek_eyes.terminal.receipts.chain import (
    HEAD_FILENAME,
    HEAD_SLOT_BYTES,
    SHARE_MARKER,
    ReceiptLog,
    head_file_bytes,
    head_slot,
    load_head,
    loads_strict,
    make_head,
    parse_receipts,
    read_log,
    receipt_hash,
    share_export,
    sign_receipt,
    verify_chain,
    verify_head,
    verify_receipt,
)
from deepseek_eyes.terminal.receipts.keyring import Keyring, key_id
from terminal.support import ServiceFactory, receipt_body

pytestmark = pytest.mark.anyio


async def _receipts(make_service: ServiceFactory, n: int = 1) -> list[dict[str, Any]]:
    service = make_service(mode="read-only")
    out = []
    for _ in range(n):
        plan = service.plan(argv=["cat", "a.txt"])
        out.append(await service.execute(plan["session_id"], plan["plan_id"]))
    return out


async def test_any_changed_byte_fails_verification(
    make_service: ServiceFactory, keyring: Keyring
) -> None:
    (receipt,) = await _receipts(make_service)
    text = json.dumps(receipt, sort_keys=True)
    verify_receipt(json.loads(text), keyring)
    signature_at = text.index('"signature"')
    tried = 0
    for i in range(len(text)):
        if signature_at <= i < signature_at + 200:
            continue  # flipping the signature's own bytes is covered below
        ch = text[i]
        replacement = {"a": "b", "0": "1", "1": "2", "e": "f", "t": "u"}.get(ch)
        if replacement is None:
            continue
        tampered = text[:i] + replacement + text[i + 1 :]
        try:
            candidate = json.loads(tampered)
        except ValueError:
            continue
        if candidate == receipt:
            continue
        with pytest.raises(ReceiptError):
            verify_receipt(candidate, keyring)
        tried += 1
    assert tried > 200
    bad_sig = json.loads(text)
    bad_sig["signature"]["value"] = "0" * 64
    with pytest.raises(ReceiptError) as err:
        verify_receipt(bad_sig, keyring)
    assert err.value.code == "TERMINAL_RECEIPT_INVALID"


def _reference_bytes(value: object) -> bytes:
    """Canonical JSON spelled out with the stdlib, independent of the signing code."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


async def test_signing_and_hashing_keep_their_bytes(tmp_path: Path, keyring: Keyring) -> None:
    """The signature covers, and the chain hashes, the canonical bytes, byte for byte; keys
    on either side of ``signature`` (and none on one side) and non-ASCII text included."""
    odd = {"text": "caf\u00e9 \u2028 \x7f \U0001f600", "n": [1.5, -0.0, 10**20]}
    bodies = [receipt_body() | {"stdout": odd}, {"a": odd, "signatur": 1, "signaturf": 2},
              {"signature_": odd, "z": None}, {"a": 1}, {"zz": 2}]
    for body in bodies:
        signed = sign_receipt(body, keyring)
        assert "signature" not in body
        unsigned = {k: v for k, v in signed.items() if k != "signature"}
        assert unsigned == body
        kid, value = keyring.sign(_reference_bytes(unsigned))
        assert signed["signature"] == {"alg": "HMAC-SHA256", "key_id": kid, "value": value}
        assert receipt_hash(signed) == "sha256:" + hashlib.sha256(
            _reference_bytes(signed)).hexdigest()
    log = ReceiptLog(tmp_path / "r", keyring)
    first, first_hash = log.append_hashed(receipt_body() | {"stdout": odd})
    second = log.append(receipt_body())
    log.close()
    assert first_hash == receipt_hash(first) == second["previous_hash"]
    lines = (tmp_path / "r" / "receipts.jsonl").read_bytes().split(b"\n")
    assert lines[0] == json.dumps(first, ensure_ascii=False, separators=(",", ":")).encode()


async def test_malformed_receipts_are_refused(keyring: Keyring) -> None:
    for bad in ([], {"schema": "x"}, {"signature": {}}):
        with pytest.raises(ReceiptError) as err:
            verify_receipt(bad, keyring)
        assert err.value.code == "TERMINAL_RECEIPT_INVALID"


async def test_key_rotation_keeps_old_receipts_verifiable(tmp_path: Path) -> None:
    ring = Keyring.load_or_create(tmp_path / "keys")
    assert (tmp_path / "keys" / "keyring.json").stat().st_mode & 0o777 == 0o600
    log = ReceiptLog(tmp_path / "r", ring)
    old = log.append(receipt_body())
    old_id = ring.active_id
    new_id = ring.rotate()
    assert new_id != old_id
    assert ring.ids() == [new_id, old_id]
    new = log.append(receipt_body())
    log.close()
    assert new["signature"]["key_id"] == new_id
    reloaded = Keyring.load_or_create(tmp_path / "keys")
    verify_receipt(old, reloaded)
    verify_receipt(new, reloaded)
    verify_chain([old, new], reloaded)
    with pytest.raises(ReceiptError) as err:
        verify_receipt(old, Keyring([b"z" * 32]))
    assert err.value.code == "TERMINAL_RECEIPT_KEY_UNKNOWN"
    assert key_id(b"z" * 32).startswith("k1-")
    assert "z" * 8 not in key_id(b"z" * 32)


async def test_chain_detects_removal_and_reordering(
    make_service: ServiceFactory, keyring: Keyring
) -> None:
    a, b, c = await _receipts(make_service, 3)
    verify_chain([a, b, c], keyring)
    for broken in ([a, c], [b, a, c], [a, b, b]):
        with pytest.raises(ReceiptError) as err:
            verify_chain(broken, keyring)
        assert err.value.code == "TERMINAL_RECEIPT_CHAIN_BROKEN"


async def test_share_export_redacts_and_is_signed_again(
    make_service: ServiceFactory, keyring: Keyring
) -> None:
    (receipt,) = await _receipts(make_service)
    export = share_export(receipt, keyring)
    assert export["sharing_redacted"] is True
    assert export["command"]["argv"] == [SHARE_MARKER]
    assert export["command"]["cwd"] == SHARE_MARKER
    assert export["stdout"]["text"] == SHARE_MARKER
    assert export["stderr"]["text"] == SHARE_MARKER
    assert export["stdout"]["sha256"] == receipt["stdout"]["sha256"]
    assert "alpha" not in json.dumps(export)
    assert export["signature"]["value"] != receipt["signature"]["value"]
    verify_receipt(export, keyring)
    export["sharing_redacted"] = False
    with pytest.raises(ReceiptError):
        verify_receipt(export, keyring)


async def test_log_resumes_its_chain(tmp_path: Path, keyring: Keyring) -> None:
    log = ReceiptLog(tmp_path / "r", keyring)
    first = log.append(receipt_body())
    log.close()
    log = ReceiptLog(tmp_path / "r", keyring)
    second = log.append(receipt_body())
    log.close()
    assert second["sequence"] == first["sequence"] + 1
    verify_chain([first, second], keyring)
    log = ReceiptLog(tmp_path / "r", keyring)
    assert log.get(second["receipt_id"]) == second
    log.close()
    reopened = ReceiptLog(tmp_path / "r", keyring)
    with pytest.raises(ReceiptError) as err:
        reopened.get("../etc")
    assert err.value.code == "TERMINAL_RECEIPT_NOT_FOUND"
    assert [r["receipt_id"] for r in reopened.recent()] == [first["receipt_id"],
                                                           second["receipt_id"]]
    reopened.close()




# -- the signed head: cuts at either end --------------------------------------------------


def _log_with(directory: Path, keyring: Keyring, n: int) -> list[dict[str, Any]]:
    log = ReceiptLog(directory, keyring)
    try:
        return [log.append(receipt_body()) for _ in range(n)]
    finally:
        log.close()


def _code(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ReceiptError) as err:
        fn(*args, **kwargs)
    return err.value.code


def test_a_chain_cut_at_the_start_is_refused_without_a_head(
    tmp_path: Path, keyring: Keyring
) -> None:
    _, b, c = _log_with(tmp_path / "r", keyring, 3)
    with pytest.raises(ReceiptError) as err:
        verify_chain([b, c], keyring)
    assert err.value.code == "TERMINAL_RECEIPT_CHAIN_BROKEN"
    assert "cut from the start" in err.value.message
    verify_chain([b, c], keyring, from_start=False)  # a segment, when that is what is meant
    # receipt 1 re-linked to look like a start is a forgery: its signature no longer matches
    forged = dict(b, previous_hash=None)
    assert _code(verify_chain, [forged, c], keyring) == "TERMINAL_RECEIPT_INVALID"


def test_the_head_follows_every_append_and_catches_a_cut_at_the_end(
    tmp_path: Path, keyring: Keyring
) -> None:
    directory = tmp_path / "r"
    log = ReceiptLog(directory, keyring)
    assert log.head()["sequence"] == 0
    receipts = []
    heads = []
    for n in range(1, 5):
        receipts.append(log.append(receipt_body()))
        head = log.head()
        assert head["sequence"] == n
        assert head["last_hash"] == receipt_hash(receipts[-1])
        assert head["first_hash"] == receipt_hash(receipts[0])
        heads.append(head)
    log.close()
    head = load_head(directory / HEAD_FILENAME, keyring)
    assert head == heads[-1]
    verify_chain(receipts, keyring, head=head)
    for cut in (receipts[:-1], receipts[:1], []):
        with pytest.raises(ReceiptError) as err:
            verify_chain(cut, keyring, head=head)
        assert err.value.code == "TERMINAL_RECEIPT_CHAIN_BROKEN"
        assert "cut from the end" in err.value.message
    # --head is exact: a log that goes on past it (a stale or put-back head) is refused ...
    with pytest.raises(ReceiptError) as err:
        verify_chain(receipts, keyring, head=heads[1])
    assert err.value.code == "TERMINAL_RECEIPT_CHAIN_BROKEN"
    assert "goes on past" in err.value.message
    # ... a pinned head only has to be in the chain, with its hash
    verify_chain(receipts, keyring, pinned=[heads[1], heads[0]])
    verify_chain(receipts, keyring, head=heads[-1], pinned=[heads[1]])
    assert _code(verify_chain, receipts[:1], keyring, pinned=[heads[1]]) == (
        "TERMINAL_RECEIPT_CHAIN_BROKEN"
    )
    other = _log_with(tmp_path / "other", keyring, 4)
    assert _code(verify_chain, other, keyring, pinned=[heads[1]]) == (
        "TERMINAL_RECEIPT_CHAIN_BROKEN"
    )
    assert _code(verify_chain, other, keyring, head=head) == "TERMINAL_RECEIPT_CHAIN_BROKEN"


def test_a_forged_or_edited_head_is_refused(tmp_path: Path, keyring: Keyring) -> None:
    directory = tmp_path / "r"
    receipts = _log_with(directory, keyring, 3)
    path = directory / HEAD_FILENAME
    good = path.read_bytes()
    newest = load_head(path, keyring)
    older = json.loads(good[:HEAD_SLOT_BYTES] if newest["sequence"] % 2 else
                       good[HEAD_SLOT_BYTES:])
    assert older["sequence"] == 2

    def refused(data: bytes, ring: Keyring = keyring) -> str:
        bad = tmp_path / "bad.jsonl"
        bad.write_bytes(data)
        return _code(load_head, bad, ring, attempts=1)

    # an edited field (the attacker cut receipt 3 and says the chain ends at 2)
    edited = dict(newest, sequence=2, last_hash=older["last_hash"])
    assert refused(head_file_bytes(edited, None)) == "TERMINAL_RECEIPT_INVALID"
    # a head re-signed with a key of the attacker's
    attacker = Keyring([b"a" * 32])
    forged = make_head(2, older["last_hash"], older["first_hash"], attacker)
    assert refused(head_file_bytes(forged, make_head(1, "sha256:" + "0" * 64,
                                                     older["first_hash"], attacker))) == (
        "TERMINAL_RECEIPT_KEY_UNKNOWN"
    )
    # the genuine older head made to look newest: newest slot blanked, or overwritten by it
    blank = b" " * (HEAD_SLOT_BYTES - 1) + b"\n"
    slot = newest["sequence"] % 2
    dropped = bytearray(good)
    dropped[slot * HEAD_SLOT_BYTES:(slot + 1) * HEAD_SLOT_BYTES] = blank
    assert refused(bytes(dropped)) == "TERMINAL_RECEIPT_INVALID"
    copied = head_slot(older) * 2
    assert refused(copied) == "TERMINAL_RECEIPT_INVALID"
    assert refused(head_slot(older)) == "TERMINAL_RECEIPT_INVALID"
    assert refused(json.dumps(older).encode()) == "TERMINAL_RECEIPT_INVALID"
    # a duplicate key or a NaN inside a slot
    text = head_slot(newest).decode()
    dup = text.replace('{"first_hash"', '{"sequence":2,"first_hash"', 1)
    slots = [good[:HEAD_SLOT_BYTES], good[HEAD_SLOT_BYTES:]]
    slots[slot] = dup.strip().encode().ljust(HEAD_SLOT_BYTES - 1) + b"\n"
    assert refused(b"".join(slots)) == "TERMINAL_RECEIPT_INVALID"
    with pytest.raises(ReceiptError) as err:
        verify_head(loads_strict(dup.strip(), what="the head"), keyring)
    assert err.value.code == "TERMINAL_RECEIPT_INVALID"
    assert "twice" in err.value.message
    with pytest.raises(ReceiptError):
        loads_strict(text.strip().replace('"sequence":3', '"sequence":NaN'))
    # and the genuine file still verifies against the genuine log
    verify_chain(receipts, keyring, head=load_head(path, keyring))


def test_the_log_refuses_to_open_over_a_cut_and_repairs_a_lagging_head(
    tmp_path: Path, keyring: Keyring
) -> None:
    directory = tmp_path / "r"
    receipts = _log_with(directory, keyring, 3)
    log_path = directory / ReceiptLog.FILENAME
    head_path = directory / HEAD_FILENAME
    whole = log_path.read_bytes()
    lines = whole.splitlines(keepends=True)
    # cut at the end: the head still names receipt 3
    log_path.write_bytes(b"".join(lines[:2]))
    assert _code(ReceiptLog, directory, keyring) == "TERMINAL_RECEIPT_CHAIN_BROKEN"
    log_path.unlink()  # or the whole log removed
    assert _code(ReceiptLog, directory, keyring) == "TERMINAL_RECEIPT_CHAIN_BROKEN"
    # cut at the start
    log_path.write_bytes(b"".join(lines[1:]))
    assert _code(ReceiptLog, directory, keyring) == "TERMINAL_RECEIPT_CHAIN_BROKEN"
    # a receipt replaced by another validly signed one
    other = _log_with(tmp_path / "other", keyring, 3)
    swapped = json.dumps(other[2], ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    log_path.write_bytes(b"".join(lines[:2]) + swapped)
    assert _code(ReceiptLog, directory, keyring) == "TERMINAL_RECEIPT_CHAIN_BROKEN"
    # a crash between an append and its head: the log is one ahead, and that is repaired
    log_path.write_bytes(b"".join(lines[:2]))
    head_path.unlink()
    ReceiptLog(directory, keyring).close()  # a head for the log as found (2 receipts)
    assert load_head(head_path, keyring)["sequence"] == 2
    lagging = head_path.read_bytes()
    log_path.write_bytes(whole)
    log = ReceiptLog(directory, keyring)
    assert log.head()["sequence"] == 3
    fourth = log.append(receipt_body())
    log.close()
    assert head_path.read_bytes() != lagging
    verify_chain([*receipts, fourth], keyring, head=load_head(head_path, keyring))
    # a receipt after the head that does not verify is not adopted
    head_path.write_bytes(lagging)
    log_path.write_bytes(b"".join(lines[:2]) + lines[2].replace(b'"exit_code":0',
                                                                  b'"exit_code":1'))
    assert _code(ReceiptLog, directory, keyring) == "TERMINAL_RECEIPT_INVALID"


def test_a_torn_last_line_is_cut_off_and_the_chain_goes_on(
    tmp_path: Path, keyring: Keyring
) -> None:
    directory = tmp_path / "r"
    first = _log_with(directory, keyring, 2)
    log_path = directory / ReceiptLog.FILENAME
    with open(log_path, "ab") as fh:
        fh.write(b'{"schema":"deepseek-eyes/terminal-rec')  # a write cut short
    more = _log_with(directory, keyring, 2)
    chain = read_log(log_path)
    assert [r["sequence"] for r in chain] == [1, 2, 3, 4]
    verify_chain(chain, keyring, head=load_head(directory / HEAD_FILENAME, keyring))
    assert chain == [*first, *more]


def test_log_files_are_private_whatever_the_umask(tmp_path: Path, keyring: Keyring) -> None:
    old = os.umask(0)
    try:
        directory = tmp_path / "r"
        _log_with(directory, keyring, 1)
        ring_dir = tmp_path / "keys"
        Keyring.load_or_create(ring_dir)
    finally:
        os.umask(old)
    assert _mode(directory) == 0o700
    assert _mode(directory / ReceiptLog.FILENAME) == 0o600
    assert _mode(directory / HEAD_FILENAME) == 0o600
    assert _mode(ring_dir) == 0o700
    assert _mode(ring_dir / "keyring.json") == 0o600
    # files found looser are tightened when the log opens
    for path in (directory, directory / ReceiptLog.FILENAME, directory / HEAD_FILENAME):
        path.chmod(0o755 if path.is_dir() else 0o644)
    ReceiptLog(directory, keyring).close()
    assert _mode(directory) == 0o700
    assert _mode(directory / ReceiptLog.FILENAME) == 0o600
    assert _mode(directory / HEAD_FILENAME) == 0o600


def test_an_exposed_keyring_is_refused_and_its_directory_made_private(tmp_path: Path) -> None:
    ring_dir = tmp_path / "keys"
    first = Keyring.load_or_create(ring_dir)
    path = ring_dir / "keyring.json"
    ring_dir.chmod(0o755)
    assert Keyring.load_or_create(ring_dir).ids() == first.ids()
    assert _mode(ring_dir) == 0o700
    for mode in (0o640, 0o604, 0o620, 0o644):
        path.chmod(mode)
        with pytest.raises(ReceiptError) as err:
            Keyring.load_or_create(ring_dir)
        assert err.value.code == "TERMINAL_KEYRING_EXPOSED"
        assert f"chmod 600 {path}" in err.value.message
    path.chmod(0o600)
    assert Keyring.load_or_create(ring_dir).ids() == first.ids()
    # a symbolic link in place of the file is not followed
    path.rename(tmp_path / "elsewhere.json")
    path.symlink_to(tmp_path / "elsewhere.json")
    assert _code(Keyring.load_or_create, ring_dir) == "TERMINAL_KEYRING_INVALID"


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


# -- strict parsing -----------------------------------------------------------------------


def test_a_duplicate_key_is_refused_where_it_used_to_verify(
    tmp_path: Path, keyring: Keyring
) -> None:
    (receipt,) = _log_with(tmp_path / "r", keyring, 1)
    text = json.dumps(receipt, separators=(",", ":"))
    assert '"exit_code":0' in text
    # the forged value first, the signed one last: plain json.loads keeps the last and verifies
    smuggled = text.replace('"exit_code":0', '"exit_code":1,"exit_code":0', 1)
    verify_receipt(json.loads(smuggled), keyring)  # why strict parsing is needed
    for bad in (
        smuggled,
        text.replace('"text":""', '"text":"rm -rf /","text":""', 1),  # nested
        text.replace('"signature":{', '"signature":{"value":"x",', 1),
        text.replace('"duration_ms":1.0', '"duration_ms":NaN', 1),
        text.replace('"duration_ms":1.0', '"duration_ms":-Infinity', 1),
        "[" * 100_000 + "]" * 100_000,
    ):
        with pytest.raises(ReceiptError) as err:
            parse_receipts(bad)
        assert err.value.code == "TERMINAL_RECEIPT_INVALID"
        with pytest.raises(ReceiptError):
            parse_receipts(text + "\n" + bad + "\n")  # as JSON lines too
    assert parse_receipts(text) == [receipt]
    assert parse_receipts(f"[{text},{text}]") == [receipt, receipt]


def test_the_log_reads_stored_receipts_strictly(tmp_path: Path, keyring: Keyring) -> None:
    directory = tmp_path / "r"
    log = ReceiptLog(directory, keyring)
    receipt = log.append(receipt_body())
    log.close()
    path = directory / ReceiptLog.FILENAME
    line = path.read_bytes()
    path.write_bytes(line.replace(b'"exit_code":0', b'"exit_code":1,"exit_code":0', 1))
    assert _code(ReceiptLog, directory, keyring) == "TERMINAL_RECEIPT_INVALID"
    log = ReceiptLog.__new__(ReceiptLog)  # an index taken before the edit
    log.path, log._offsets = path, {receipt["receipt_id"]: 0}
    assert _code(log.get, receipt["receipt_id"]) == "TERMINAL_RECEIPT_INVALID"


def test_json_lines_split_only_at_newlines(tmp_path: Path, keyring: Keyring) -> None:
    body = receipt_body()
    body["stdout"] = {"text": "a\u2028b\u0085c\u2029d\x1ce"}
    log = ReceiptLog(tmp_path / "r", keyring)
    receipts = [log.append(body), log.append(receipt_body())]
    log.close()
    text = (tmp_path / "r" / ReceiptLog.FILENAME).read_text(encoding="utf-8")
    assert "\u2028" in text  # written raw: str.splitlines would break the line there
    assert parse_receipts(text) == receipts
    verify_chain(parse_receipts(text), keyring)


def test_signature_fields_are_exact(tmp_path: Path, keyring: Keyring) -> None:
    (receipt,) = _log_with(tmp_path / "r", keyring, 1)
    for signature in (
        dict(receipt["signature"], value="\u00e9" * 64),  # compare_digest raised TypeError
        dict(receipt["signature"], value=receipt["signature"]["value"].upper()),
        dict(receipt["signature"], key_id="k1-\u00e9"),
        dict(receipt["signature"], note="unsigned text riding along"),
    ):
        assert _code(verify_receipt, dict(receipt, signature=signature), keyring) == (
            "TERMINAL_RECEIPT_INVALID"
        )


# -- keys -------------------------------------------------------------------------------


def test_a_receipt_resigned_with_another_key_is_refused(
    tmp_path: Path, keyring: Keyring
) -> None:
    receipts = _log_with(tmp_path / "r", keyring, 2)
    attacker = Keyring([b"a" * 32])
    edited = sign_receipt(dict(receipts[1], exit_code=1), attacker)
    assert _code(verify_receipt, edited, keyring) == "TERMINAL_RECEIPT_KEY_UNKNOWN"
    assert _code(verify_chain, [receipts[0], edited], keyring) == "TERMINAL_RECEIPT_KEY_UNKNOWN"
    # the attacker's key id in a receipt signed with ours is a mismatch, not a pass
    relabelled = dict(receipts[1], signature=dict(receipts[1]["signature"],
                                                  key_id=attacker.active_id))
    assert _code(verify_receipt, relabelled, keyring) == "TERMINAL_RECEIPT_KEY_UNKNOWN"


def test_the_chain_and_its_heads_verify_across_a_rotation(tmp_path: Path) -> None:
    ring = Keyring.load_or_create(tmp_path / "keys")
    directory = tmp_path / "r"
    log = ReceiptLog(directory, ring)
    before = [log.append(receipt_body()) for _ in range(2)]
    pinned_before = log.head()
    old_id = ring.active_id
    assert ring.rotate() != old_id
    after = [log.append(receipt_body()) for _ in range(2)]
    log.close()
    assert {r["signature"]["key_id"] for r in before} == {old_id}
    assert {r["signature"]["key_id"] for r in after} == {ring.active_id}
    reloaded = Keyring.load_or_create(tmp_path / "keys")
    head = load_head(directory / HEAD_FILENAME, reloaded)
    assert head["signature"]["key_id"] == reloaded.active_id
    assert pinned_before["signature"]["key_id"] == old_id
    verify_chain([*before, *after], reloaded, head=head, pinned=[pinned_before])
    # the log reopens after the rotation and keeps chaining
    log = ReceiptLog(directory, reloaded)
    fifth = log.append(receipt_body())
    log.close()
    verify_chain([*before, *after, fifth], reloaded,
                 head=load_head(directory / HEAD_FILENAME, reloaded))
    # without the old key, what it signed is unknown, not silently accepted
    only_new = Keyring([reloaded.keys[0]])
    assert _code(verify_chain, [*before, *after], only_new) == "TERMINAL_RECEIPT_KEY_UNKNOWN"
