"""``[store]``: where the store keeps its tables when not in the data directory.

Without ``database_url`` (and without ``DEEPSEEK_EYES_DATABASE_URL``) nothing changes: the
store is the SQLite database in the data directory. With it, every table lives in that
PostgreSQL database (store/postgres.py) and several processes or machines share one store
and one audit chain; the data directory still holds the blobs, the keyrings and the
artifacts.

The URL may not carry a password: a password comes from an environment reference
(``database_password = { env = "NAME" }``, resolved when connecting) or from libpq's own
``PGPASSWORD`` / ``~/.pgpass``, so it never reaches this file, a log line or the audit.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from deepseek_eyes.settings.base import OptionalSecret, Strict

__all__ = ["ENV_BLOBS_URL", "ENV_DATABASE_URL", "StoreSettings", "check_database_url"]

#: Win over ``[store] database_url`` and ``blobs_url``.
ENV_DATABASE_URL = "DEEPSEEK_EYES_DATABASE_URL"
ENV_BLOBS_URL = "DEEPSEEK_EYES_BLOBS_URL"


def check_database_url(value: str) -> str:
    """``value`` when it is a PostgreSQL URL without a password.

    Raises:
        ValueError: for anything else (the message says which).
    """
    parts = urlsplit(value)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError("must be a postgresql:// URL")
    if parts.password is not None:
        raise ValueError(
            "may not carry a password: use database_password = { env = \"NAME\" } or "
            "PGPASSWORD")
    return value


class StoreSettings(Strict):
    """The store's database (the SQLite file in the data directory by default)."""

    database_url: str | None = Field(
        default=None,
        description="A PostgreSQL database for every table (postgresql://user@host:5432/db), "
        "instead of the SQLite file in the data directory; DEEPSEEK_EYES_DATABASE_URL wins "
        "over it. No password in the URL.",
    )
    database_password: OptionalSecret = Field(
        default=None,
        description="The database password, as an environment reference "
        "({ env = \"NAME\" }); without it libpq's PGPASSWORD or ~/.pgpass apply.",
    )

    blobs_url: str | None = Field(
        default=None,
        description="Where blobs (images, screenshots) go instead of the data directory's "
        "blobs/ folder: \"database\" (the store's PostgreSQL database) or a postgresql:// "
        "URL (no password); DEEPSEEK_EYES_BLOBS_URL wins over it. Object storage (S3) is "
        "not supported yet.",
    )

    @field_validator("database_url", "blobs_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is None or value == "database":
            return value
        try:
            return check_database_url(value)
        except ValueError as exc:
            raise PydanticCustomError("store_database_url", str(exc)) from None

    def url(self) -> str | None:
        """The database URL in effect: the environment's, then the file's; None for the
        SQLite data directory."""
        return os.environ.get(ENV_DATABASE_URL) or self.database_url

    def blobs(self) -> str | None:
        """The PostgreSQL URL blobs go to, or None for the data directory's files.

        Raises:
            ConfigError: ``CONFIG_INVALID`` for ``"database"`` without a database URL.
        """
        value = os.environ.get(ENV_BLOBS_URL) or self.blobs_url
        if value == "database":
            value = self.url()
            if value is None:
                from deepseek_eyes.errors import ConfigError

                raise ConfigError('store.blobs_url = "database" needs store.database_url',
                                  code="CONFIG_INVALID")
        return value

    def password(self) -> str | None:
        """The password from its environment reference (None: libpq's own sources).

        Raises:
            ConfigError: ``CONFIG_ENV_MISSING`` when the referenced variable is unset.
        """
        return None if self.database_password is None else self.database_password.resolve()
