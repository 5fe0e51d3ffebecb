"""The shared short-lived state one process uses, opened from ``[store]``.

One object per process (the runtime opens it; the gateway's security layer, its
readiness check and the vision router's single flight use it) with one implementation
per concern: rate limits (:mod:`.limits`, :mod:`.buckets`) and single-flight leases
(:mod:`.leases`), local or on Redis. Route health, circuits and probe verdicts are not
here: they are rows of the database every replica shares already
(:mod:`deepseek_eyes.vision.routing.state`), read afresh on every decision.

``DEEPSEEK_EYES_STATE_URL`` wins over ``store.state_url``; the password comes from
``store.state_password`` (an ``{ env = … }`` reference) or ``DEEPSEEK_EYES_STATE_PASSWORD``,
is handed to the client and kept nowhere else (never logged, never in an error).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from deepseek_eyes.errors import ConfigError
from deepseek_eyes.settings.store import (
    ENV_STATE_PASSWORD,
    ENV_STATE_URL,
    StateTarget,
    StateUnavailable,
    StoreSettings,
    parse_state_url,
)
from deepseek_eyes.store.state.buckets import TokenBuckets
from deepseek_eyes.store.state.connection import RedisConnection
from deepseek_eyes.store.state.leases import FlightLeases, LocalLeases, RedisLeases
from deepseek_eyes.store.state.limits import Limiter, RedisRateLimiter

__all__ = ["SharedState", "open_shared_state", "state_target"]


class SharedState:
    """Rate limits and leases on one backend: ``"local"`` or ``"redis"``."""

    def __init__(self, *, unavailable: StateUnavailable = "local",
                 connection: RedisConnection | None = None,
                 lease_ttl: float = 15.0) -> None:
        self.unavailable = unavailable
        self.connection = connection
        self.leases: FlightLeases = (
            LocalLeases(lease_ttl) if connection is None
            else RedisLeases(connection, ttl=lease_ttl))

    @property
    def backend(self) -> Literal["local", "redis"]:
        return "local" if self.connection is None else "redis"

    @property
    def display(self) -> str:
        """Where the state lives, fit for a log line (never a password)."""
        return "local" if self.connection is None else self.connection.display

    def rate_limiter(self, per_minute: int, *, namespace: str) -> Limiter:
        """A limiter of ``per_minute`` requests per client key: this process's buckets on
        the local backend, buckets shared by every replica on Redis (``namespace`` keeps
        two limiters' buckets apart)."""
        if self.connection is None:
            return TokenBuckets(per_minute)
        return RedisRateLimiter(self.connection, per_minute, namespace=namespace,
                                unavailable=self.unavailable)

    async def ping(self) -> None:
        """One round trip to the shared state (nothing on the local backend).

        Raises:
            StoreError: ``STORE_STATE_UNAVAILABLE`` or ``STORE_STATE_AUTH_FAILED``.
        """
        if self.connection is not None:
            await self.connection.ping()

    async def aclose(self) -> None:
        if self.connection is not None:
            await self.connection.aclose()


def state_target(settings: StoreSettings,
                 environ: Mapping[str, str] | None = None) -> StateTarget:
    """Where the shared state lives: ``DEEPSEEK_EYES_STATE_URL``, else ``store.state_url``.

    Raises:
        ConfigError: ``CONFIG_STATE_URL_INVALID`` for a bad variable (the file's value was
            checked when the settings loaded).
    """
    env = os.environ if environ is None else environ
    from_env = env.get(ENV_STATE_URL, "").strip()
    if not from_env:
        return parse_state_url(settings.state_url)
    try:
        return parse_state_url(from_env)
    except ValueError as exc:
        raise ConfigError(f"{ENV_STATE_URL} {exc}", code="CONFIG_STATE_URL_INVALID",
                          details={"env": ENV_STATE_URL}) from None


def open_shared_state(settings: StoreSettings,
                      environ: Mapping[str, str] | None = None) -> SharedState:
    """The shared state ``settings`` (and the environment) name. Nothing is connected
    here: the first command connects, in the loop that sends it.

    Raises:
        ConfigError: ``CONFIG_STATE_URL_INVALID``; ``CONFIG_ENV_MISSING`` for a
            ``state_password`` reference whose variable is unset.
        StoreError: ``STORE_STATE_BACKEND_MISSING`` (Redis named, ``redis`` absent).
    """
    env = os.environ if environ is None else environ
    target = state_target(settings, env)
    if target.kind == "local":
        return SharedState(unavailable=settings.state_unavailable,
                           lease_ttl=settings.flight_lease_ttl)
    if settings.state_password is not None:
        password: str | None = settings.state_password.resolve(dict(env))
    else:
        password = env.get(ENV_STATE_PASSWORD) or None
    connection = RedisConnection(target, password=password, timeout=settings.state_timeout)
    return SharedState(unavailable=settings.state_unavailable, connection=connection,
                       lease_ttl=settings.flight_lease_ttl)
