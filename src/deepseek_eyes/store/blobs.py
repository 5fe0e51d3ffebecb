"""Content-addressed blob store: every blob lives at the SHA-256 of its exact bytes.

Writes are atomic (private temp file in the same directory, fsync, ``os.replace``), so a
reader sees either nothing or the whole blob. A blob is immutable: writing the same bytes
again is a no-op, and reads can verify the hash so silent disk corruption is caught.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from deepseek_eyes.errors import StoreError
from deepseek_eyes.store.files import write_file_atomic

__all__ = ["BlobRef", "BlobStore", "sha256_hex"]

_HEX = re.compile(r"^[0-9a-f]{64}$")


def sha256_hex(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class BlobRef:
    """A stored blob: its SHA-256 (its name) and its size in bytes."""

    sha256: str
    size: int

    @property
    def uri(self) -> str:
        return f"sha256:{self.sha256}"


class BlobStore:
    """Blobs under ``root/ab/cd/<hex>``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, sha256: str) -> Path:
        if not _HEX.match(sha256):
            raise StoreError(
                "not a SHA-256 hex digest", code="STORE_BLOB_MISSING", details={"sha256": sha256}
            )
        # One path parsed from a joined string: three joins parsed three paths (a check of
        # every file a served root hands out looks its blob up).
        return Path(os.path.join(self.root, sha256[:2], sha256[2:4], sha256))

    def contains(self, sha256: str) -> bool:
        return self.path_for(sha256).is_file()

    def put(self, data: bytes, *, sha256: str | None = None) -> BlobRef:
        """Store ``data``; ``sha256`` may be passed when the caller already hashed it.

        Raises:
            StoreError: ``STORE_FULL`` (no space), ``STORE_READ_ONLY`` or
                ``STORE_WRITE_FAILED`` when the write cannot complete; nothing is left.
        """
        digest = sha256 or sha256_hex(data)
        target = self.path_for(digest)
        if target.is_file():
            return BlobRef(digest, len(data))
        try:
            write_file_atomic(target, data, mode=0o444)
        except StoreError as exc:
            exc.details["sha256"] = digest
            raise
        return BlobRef(digest, len(data))

    def get(self, sha256: str, *, verify: bool = True) -> bytes:
        """Read a blob back.

        Raises:
            StoreError: ``STORE_BLOB_MISSING`` or, with ``verify``, ``STORE_BLOB_CORRUPT``.
        """
        try:
            data = self.path_for(sha256).read_bytes()
        except FileNotFoundError as exc:
            raise StoreError(
                "blob not found", code="STORE_BLOB_MISSING", details={"sha256": sha256}
            ) from exc
        if verify and sha256_hex(data) != sha256:
            raise StoreError(
                "blob no longer matches its address",
                code="STORE_BLOB_CORRUPT",
                details={"sha256": sha256},
            )
        return data

    def close(self) -> None:
        """Nothing to close for files (a database-backed store closes its connection)."""
