"""The data directory: one SQLite database, the blob store and the artifacts folder.

Everything the runtime persists lives under one directory (``DEEPSEEK_EYES_HOME``), created
private to the user, so a test or a second profile is just another directory.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from deepseek_eyes.audit import AuditLog
from deepseek_eyes.audit.checkpoints import checkpoint_if_new, head
from deepseek_eyes.audit.keys import AuditKeyring, audit_directory
from deepseek_eyes.audit.records import Seal
from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.settings import Settings, data_home
from deepseek_eyes.settings.store import ENV_DATABASE_URL
from deepseek_eyes.stages import stage
from deepseek_eyes.store.blobs import BlobStore
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.failures import check_writable, guarded
from deepseek_eyes.usage import UsageTracker

__all__ = ["DataHome"]

log = logging.getLogger(__name__)


class DataHome:
    def __init__(self, root: Path, *, database_url: str | None = None,
                 database_password: str | None = None, blobs_url: str | None = None,
                 database_pool_size: int | None = None) -> None:
        """Open (creating it when absent) the data directory at ``root`` for the runtime,
        which writes to it; its tables in the PostgreSQL database at ``database_url``
        (else at ``DEEPSEEK_EYES_DATABASE_URL``) when one is given, else in ``eyes.db``.

        Raises:
            StoreError: ``STORE_READ_ONLY`` for a directory that cannot be written (a
                read-only copy or mount: only the commands that read work there),
                ``STORE_FULL`` or ``STORE_WRITE_FAILED``.
        """
        with guarded(f"cannot create the data directory {root}", root):
            root.mkdir(parents=True, exist_ok=True)
            # Only when it is not private yet: a chmod is a write, refused on a read-only
            # mount even when it would change nothing.
            if stat.S_IMODE(root.stat().st_mode) != 0o700:
                os.chmod(root, 0o700)
        # Here, not at the first write: SQLite opens a database it cannot write read-only.
        check_writable([root, *(root / f"eyes.db{end}" for end in ("", "-wal", "-shm"))],
                       f"cannot open the data directory {root} to write")
        self.root = root
        url = database_url or os.environ.get(ENV_DATABASE_URL) or None
        #: Where the tables are (None: eyes.db here); read-only walks (verify, export)
        #: open the same database.
        self.database_url = url
        self.database_password = database_password
        self.db = Database(root / "eyes.db", url=url, password=database_password,
                           pool_size=database_pool_size)
        self.db.audit_keys = self.audit_keys  # retention cuts sign in their transaction
        self.blobs = BlobStore(root / "blobs")
        if blobs_url:  # in PostgreSQL (store/pg_blobs.py; psycopg only when asked for)
            from deepseek_eyes.store.pg_blobs import PgBlobStore

            self.blobs = PgBlobStore(root / "blobs", blobs_url, password=database_password,
                                     pool_size=database_pool_size)
        self.artifacts = root / "artifacts"
        self.usage = UsageTracker(self.db)
        self.audit = AuditLog(self.db)
        self._audit_keys: AuditKeyring | None = None

    def audit_keys(self) -> AuditKeyring:
        """The audit keyring (``<home>/audit/keyring.json``), created on first use."""
        if self._audit_keys is None:
            self._audit_keys = AuditKeyring.load_or_create(audit_directory(self.root))
        return self._audit_keys

    def seal(self) -> Seal | None:
        """Sign a checkpoint when the audit chain grew since the last one; returns the
        chain's head, with the new checkpoint's pinnable line, or None for an empty chain.

        A checkpoint that cannot be signed (an exposed or broken keyring) is logged and named
        in the result (``checkpoint_error``), never raised: the records are already on the
        chain, and an answer must not be lost for want of its seal.

        A fresh object each call (the turn's outcome keeps it).
        """
        error: str | None = None
        try:
            with stage("seal"):
                tip, checkpoint = checkpoint_if_new(self.db, self.audit_keys())
        except DeepSeekEyesError as exc:
            log.warning("the audit chain was not checkpointed: %s (%s)", exc.message, exc.code)
            tip, checkpoint, error = head(self.db), None, exc.code
        if tip is None:
            return None
        out: Seal = {"seq": tip[0], "hash": tip[1]}
        if checkpoint is not None:
            out["checkpoint"] = checkpoint.token()
        if error is not None:
            out["checkpoint_error"] = error
        return out

    @classmethod
    def open(cls, settings: Settings) -> DataHome:
        """Raises:
            StoreError: as the constructor; ConfigError: ``CONFIG_ENV_MISSING`` for a
                database password whose variable is unset."""
        return cls(data_home(settings), database_url=settings.store.url(),
                   database_password=settings.store.password(),
                   blobs_url=settings.store.blobs(),
                   database_pool_size=settings.store.database_pool_size)

    def close(self) -> None:
        try:
            self.seal()
        finally:
            self.db.close()
            self.blobs.close()

    def __enter__(self) -> DataHome:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
