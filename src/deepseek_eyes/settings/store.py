"""``[store]``: where the store keeps its tables and the state replicas share.

Without ``database_url`` (and without ``DEEPSEEK_EYES_DATABASE_URL``) nothing changes: the
store is the SQLite database in the data directory. With it, every table lives in that
PostgreSQL database (store/postgres.py) and several processes or machines share one store
and one audit chain; the data directory still holds the blobs (unless ``blobs_url`` says
otherwise), the keyrings and the artifacts.

``state_url`` names the shared short-lived state (rate limits, single-flight leases):
``"local"`` (the default: this process and its database, exactly the single-process
behaviour) or ``redis://host:port/db`` (``rediss://`` for TLS). Each URL's environment
variable (``DEEPSEEK_EYES_DATABASE_URL``, ``_BLOBS_URL``, ``_STATE_URL``) wins over the file.

No URL may carry a password: one with a password is refused (the settings error names the
key). The database's comes from ``database_password = { env = "NAME" }`` (resolved when
connecting) or libpq's own ``PGPASSWORD`` / ``~/.pgpass``; Redis's from ``state_password =
{ env = "NAME" }`` or ``DEEPSEEK_EYES_STATE_PASSWORD`` (the way ``redis-cli`` reads
``REDISCLI_AUTH``). So a password never reaches this file, a log line or the audit. The
state URL's checks live here (:func:`parse_state_url`), which the environment's value passes
too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from deepseek_eyes.settings.base import OptionalSecret, Strict

__all__ = ["ENV_BLOBS_URL", "ENV_DATABASE_URL", "ENV_STATE_PASSWORD", "ENV_STATE_URL",
           "SECRET_PARAMETERS", "StateTarget", "StateUnavailable", "StoreSettings",
           "check_database_url",
           "parse_state_url"]

#: Win over ``[store] database_url``, ``blobs_url`` and ``state_url``.
ENV_DATABASE_URL = "DEEPSEEK_EYES_DATABASE_URL"
ENV_BLOBS_URL = "DEEPSEEK_EYES_BLOBS_URL"
ENV_STATE_URL = "DEEPSEEK_EYES_STATE_URL"
ENV_STATE_PASSWORD = "DEEPSEEK_EYES_STATE_PASSWORD"  # noqa: S105 - a variable's name

StateUnavailable = Literal["local", "fail_closed"]


#: libpq's connection parameters that hold a secret; a URL may name them in its query
#: (``?password=…``, percent-encoded or not), which is a password in the URL all the same.
SECRET_PARAMETERS = frozenset({"password", "sslpassword"})


def check_database_url(value: str) -> str:
    """``value`` when it is a PostgreSQL URL without a password (in its user info or, as
    libpq also reads one, in its query).

    Raises:
        ValueError: for anything else (the message says which).
    """
    parts = urlsplit(value)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError("must be a postgresql:// URL")
    if parts.password is not None or any(
            key.strip().lower() in SECRET_PARAMETERS
            for key, _ in parse_qsl(parts.query, keep_blank_values=True)):
        raise ValueError(
            "may not carry a password: use database_password = { env = \"NAME\" } or "
            "PGPASSWORD")
    return value


@dataclass(frozen=True)
class StateTarget:
    """A parsed ``state_url``: ``kind`` "local", or "redis" with where to reach it. It holds
    no secret, so :meth:`display` may be logged."""

    kind: Literal["local", "redis"]
    host: str = ""
    port: int = 6379
    db: int = 0
    username: str | None = None
    tls: bool = False

    def display(self) -> str:
        """``redis://host:port/db`` (never a password: a URL with one is refused)."""
        if self.kind == "local":
            return "local"
        scheme = "rediss" if self.tls else "redis"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}/{self.db}"


def parse_state_url(value: str) -> StateTarget:
    """The target ``value`` names.

    Raises:
        ValueError: not "local" nor a ``redis://`` / ``rediss://`` URL with a host, a port,
            a database number 0-15, no password, no query and no fragment (the message
            says which; it never repeats the value, which may hold a password).
    """
    text = value.strip()
    if text == "local":
        return StateTarget("local")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ValueError("is not a URL with a valid port") from None
    if parts.scheme not in ("redis", "rediss"):
        raise ValueError('must be "local" or a redis:// (rediss://) URL')
    if parts.password is not None:
        raise ValueError("may not carry a password: set state_password = { env = \"NAME\" } "
                         "or DEEPSEEK_EYES_STATE_PASSWORD")
    if parts.query or parts.fragment:
        raise ValueError("may not carry a query or a fragment")
    if not parts.hostname:
        raise ValueError("needs a host")
    path = parts.path.strip("/")
    if path and not (path.isdigit() and int(path) <= 15):
        raise ValueError("names a database by its number, 0-15 (redis://host:6379/0)")
    return StateTarget("redis", parts.hostname, port or 6379, int(path or 0),
                       parts.username or None, parts.scheme == "rediss")


class StoreSettings(Strict):
    """The store's database (the SQLite file in the data directory by default), its blobs,
    and the short-lived state replicas share (this process by default)."""

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

    database_pool_size: int = Field(
        default=2, ge=1, le=64,
        description="Connections to the PostgreSQL database each open store keeps at most "
        "(one is in use at a time: the store runs its statements one by one; the other "
        "replaces a lost one at once).",
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

    state_url: str = Field(
        default="local",
        description="Shared short-lived state (rate limits, single-flight leases): \"local\" "
        "(this process and its database) or redis://host:port/db (rediss:// for TLS), no "
        "password in it. DEEPSEEK_EYES_STATE_URL wins over it.",
    )
    state_password: OptionalSecret = Field(
        default=None,
        description="The Redis password, as { env = \"NAME\" }; without it "
        "DEEPSEEK_EYES_STATE_PASSWORD is used when set.",
    )
    state_unavailable: StateUnavailable = Field(
        default="local",
        description="What rate limits do while the shared state cannot be reached: \"local\" "
        "limits per replica meanwhile (and /readyz stays ready, its shared_state check "
        "failed); \"fail_closed\" refuses requests with 503 STORE_STATE_UNAVAILABLE (and "
        "/readyz is not ready).",
    )
    state_timeout: float = Field(
        default=0.5, gt=0, le=10,
        description="Seconds one shared-state command may take (connecting included) before "
        "the state counts as unreachable.",
    )
    flight_lease_ttl: float = Field(
        default=15.0, ge=0.2, le=600,
        description="Seconds a single-flight lease on an image's acquisition lives unless "
        "its holder renews it (every third of it while working): how long other replicas "
        "wait for a holder that died before they take over.",
    )

    @field_validator("state_url")
    @classmethod
    def _valid_state_url(cls, value: str) -> str:
        try:
            parse_state_url(value)
        except ValueError as exc:
            raise PydanticCustomError("state_url", "{reason}", {"reason": str(exc)}) from None
        return value
