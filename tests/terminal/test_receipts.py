"""Receipts: signatures over canonical bytes, tamper detection, rotation, chain, export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.errors import ReceiptError
from deepseek_eyes.terminal.keyring import Keyring, key_id
from deepseek_eyes.terminal.receipts import (
    SHARE_MARKER,
    ReceiptLog,
    share_export,
    verify_chain,
    verify_receipt,
)
from terminal.support import ServiceFactory

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


async def test_malformed_receipts_are_refused(keyring: Keyring) -> None:
    for bad in ([], {"schema": "x"}, {"signature": {}}):
        with pytest.raises(ReceiptError) as err:
            verify_receipt(bad, keyring)
        assert err.value.code == "TERMINAL_RECEIPT_INVALID"


async def test_key_rotation_keeps_old_receipts_verifiable(tmp_path: Path) -> None:
    ring = Keyring.load_or_create(tmp_path / "keys")
    assert (tmp_path / "keys" / "keyring.json").stat().st_mode & 0o777 == 0o600
    log = ReceiptLog(tmp_path / "r", ring)
    old = log.append(_body())
    old_id = ring.active_id
    new_id = ring.rotate()
    assert new_id != old_id
    assert ring.ids() == [new_id, old_id]
    new = log.append(_body())
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
    first = log.append(_body())
    log.close()
    log = ReceiptLog(tmp_path / "r", keyring)
    second = log.append(_body())
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


def _body() -> dict[str, Any]:
    import uuid

    return {
        "schema": "deepseek-eyes/terminal-receipt", "schema_version": "1.0",
        "receipt_id": uuid.uuid4().hex, "session_id": "s", "plan_id": "p",
        "plan_hash": "sha256:0", "mode": "read-only", "command": {"argv": ["true"]},
        "policy": {"reasons": []}, "approval": {}, "sandbox": {"kind": "none"},
        "started_at": "t", "ended_at": "t", "duration_ms": 1.0, "status": "completed",
        "exit_code": 0, "signal": None, "stdout": {"text": ""}, "stderr": {"text": ""},
        "redactions": 0, "sharing_redacted": False,
    }


def _code(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ReceiptError) as err:
        fn(*args, **kwargs)
    return err.value.code


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
