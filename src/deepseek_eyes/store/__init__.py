"""Foundation storage: the content-addressed blob store and the SQLite database."""

from deepseek_eyes.store.blobs import BlobRef, BlobStore, sha256_hex
from deepseek_eyes.store.db import Database

__all__ = ["BlobRef", "BlobStore", "Database", "sha256_hex"]
