from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from deepseek_eyes.errors import StoreError
from deepseek_eyes.store.blobs import BlobStore


def test_put_is_content_addressed_and_idempotent(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    ref = store.put(b"hello")
    assert ref.sha256 == hashlib.sha256(b"hello").hexdigest()
    assert ref.uri == f"sha256:{ref.sha256}"
    assert store.put(b"hello") == ref
    assert store.get(ref.sha256) == b"hello"
    leftovers = list((tmp_path / "blobs").rglob(".tmp-*"))
    assert leftovers == []


def test_a_blob_lives_under_two_fan_out_directories(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"x").hexdigest()
    for root in (tmp_path / "blobs", Path("blobs"), Path(".")):
        path = BlobStore(root).path_for(digest)
        assert path == root / digest[:2] / digest[2:4] / digest
        assert type(path) is type(root)


def test_corruption_is_detected(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    ref = store.put(b"original")
    path = store.path_for(ref.sha256)
    path.chmod(0o644)
    path.write_bytes(b"changed")
    with pytest.raises(StoreError) as info:
        store.get(ref.sha256)
    assert info.value.code == "STORE_BLOB_CORRUPT"


def test_missing_and_malformed_addresses(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    with pytest.raises(StoreError) as info:
        store.get("0" * 64)
    assert info.value.code == "STORE_BLOB_MISSING"
    with pytest.raises(StoreError):
        store.path_for("../../etc/passwd")


def test_write_failure_leaves_nothing(tmp_path: Path) -> None:
    # A file where the fan-out directory belongs makes the write fail even for root.
    root = tmp_path / "blobs"
    root.mkdir()
    digest = hashlib.sha256(b"data").hexdigest()
    (root / digest[:2]).write_bytes(b"in the way")
    store = BlobStore(root)
    with pytest.raises(StoreError) as info:
        store.put(b"data")
    assert info.value.code == "STORE_WRITE_FAILED"
    assert sorted(p.name for p in root.rglob("*")) == [digest[:2]]
