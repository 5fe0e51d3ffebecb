"""The data directory: one SQLite database, the blob store and the artifacts folder.

Everything the runtime persists lives under one directory (``DEEPSEEK_EYES_HOME``), created
private to the user, so a test or a second profile is just another directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from deepseek_eyes.audit import AuditLog
from deepseek_eyes.errors import StoreError
from deepseek_eyes.settings import Settings, data_home
from deepseek_eyes.store.blobs import BlobStore
from deepseek_eyes.store.db import Database
from deepseek_eyes.usage import UsageTracker

__all__ = ["DataHome"]


class DataHome:
    def __init__(self, root: Path) -> None:
        try:
            root.mkdir(parents=True, exist_ok=True)
            os.chmod(root, 0o700)
        except OSError as exc:
            raise StoreError(
                f"cannot create the data directory {root}: {exc.strerror or exc}",
                code="STORE_WRITE_FAILED",
            ) from exc
        self.root = root
        self.db = Database(root / "eyes.db")
        self.blobs = BlobStore(root / "blobs")
        self.artifacts = root / "artifacts"
        self.usage = UsageTracker(self.db)
        self.audit = AuditLog(self.db)

    @classmethod
    def open(cls, settings: Settings) -> DataHome:
        return cls(data_home(settings))

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> DataHome:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
