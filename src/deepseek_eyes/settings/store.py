"""``[store]``: where the state several gateway replicas share lives.

``state_url`` names the shared short-lived state (rate limits, single-flight leases):
``"local"`` (the default: this process and its database, exactly the single-process
behaviour) or ``redis://host:port/db`` (``rediss://`` for TLS). The environment variable
``DEEPSEEK_EYES_STATE_URL`` wins over the file, as the other ``[store]`` URLs' variables do.

A password never sits in the file or in a URL: a URL with one is refused (the settings
error names the key), and the password comes from ``state_password = { env = "NAME" }``
or, when that is absent, from ``DEEPSEEK_EYES_STATE_PASSWORD`` (the way ``redis-cli`` reads
``REDISCLI_AUTH``). The URL's checks live in :mod:`deepseek_eyes.store.state.address`,
which the environment's value passes too; this module only holds the keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from deepseek_eyes.settings.base import OptionalSecret, Strict

__all__ = ["ENV_STATE_PASSWORD", "ENV_STATE_URL", "StateTarget", "StateUnavailable",
           "StoreSettings", "parse_state_url"]

ENV_STATE_URL = "DEEPSEEK_EYES_STATE_URL"
ENV_STATE_PASSWORD = "DEEPSEEK_EYES_STATE_PASSWORD"  # noqa: S105 - a variable's name

StateUnavailable = Literal["local", "fail_closed"]


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
    """Backends of the store shared by replicas (``serve`` behind a balancer)."""

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
