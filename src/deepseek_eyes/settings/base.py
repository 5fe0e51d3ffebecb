"""What every settings model shares: strict models, secret references, host checks.

Secrets exist only as ``{ env = "NAME" }`` references (:class:`SecretRef`); a literal
string where a secret belongs is a validation error, so a key never reaches a settings file,
a log line or the audit. References resolve at connection time.
"""

from __future__ import annotations

import ipaddress
import os
import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
)
from pydantic_core import PydanticCustomError

from deepseek_eyes.errors import ConfigError

__all__ = [
    "APP_NAME",
    "CONFIG_FILENAME",
    "DEEPSEEK_ROUTE",
    "ENV_HOME",
    "ENV_LLM_BASE_URL",
    "LOCAL_ROUTE",
    "ROUTE_NAME",
    "OptionalSecret",
    "Secret",
    "SecretRef",
    "Strict",
    "is_loopback_host",
    "is_loopback_url",
    "is_loopback_url_host",
]

CONFIG_FILENAME = "deepseek-eyes.toml"
ENV_HOME = "DEEPSEEK_EYES_HOME"
ENV_LLM_BASE_URL = "DEEPSEEK_BASE_URL"
APP_NAME = "deepseek-eyes"
LOCAL_ROUTE = "local"
#: The built-in route to a seeing DeepSeek model on the [llm] upstream (vision.deepseek).
DEEPSEEK_ROUTE = "deepseek"

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
ROUTE_NAME = r"^[a-z0-9][a-z0-9._/-]{0,63}$"


class Strict(BaseModel):
    """Forbids unknown keys (a typo is an error with its path) and is immutable.

    A model's validator is built when it first validates (``defer_build``), not when its
    class is made: every command imports all the settings models, most read a few of them,
    and a section's default is a factory (never an instance made at import) for the same
    reason. The validation itself is the same either way.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, str_strip_whitespace=True, defer_build=True
    )


class SecretRef(Strict):
    """A secret named by the environment variable that holds it."""

    env: str = Field(description="Name of the environment variable holding the secret.")

    @field_validator("env")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _ENV_NAME.match(value):
            raise PydanticCustomError("env_name", "not a valid environment variable name")
        return value

    def resolve(self, environ: os._Environ[str] | dict[str, str] | None = None) -> str:
        """Return the secret's value.

        Raises:
            ConfigError: ``CONFIG_ENV_MISSING`` when the variable is unset or empty.
        """
        env = os.environ if environ is None else environ
        value = env.get(self.env, "")
        if not value:
            raise ConfigError(
                f"environment variable {self.env} is not set",
                code="CONFIG_ENV_MISSING",
                details={"env": self.env},
            )
        return value

    def is_set(self) -> bool:
        return bool(os.environ.get(self.env))


def _refuse_literal_secret(value: Any) -> Any:
    if value is False:
        return None  # `api_key = false`: this endpoint takes no key (a local server)
    if isinstance(value, str):
        raise PydanticCustomError(
            "literal_secret",
            "a literal secret is not allowed here; reference it as {example} and set NAME in "
            "the environment",
            {"example": '{ env = "NAME" }'},
        )
    return value


Secret = Annotated[SecretRef, BeforeValidator(_refuse_literal_secret)]
#: A secret that may also be absent: omitted, or ``false`` for an endpoint that takes none.
OptionalSecret = Annotated[SecretRef | None, BeforeValidator(_refuse_literal_secret)]


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP address (the only hosts plain http may carry a key to,
    and the only ones a server may listen on without one)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_LOCALHOST_NAME = re.compile(r"^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.){1,16}localhost\Z")


def is_loopback_url_host(host: str) -> bool:
    """A URL host (``urlsplit(url).hostname``: lower case, no brackets) that names this
    machine, in every spelling the MCP seed allows plain http to: :func:`is_loopback_host`,
    a name under ``.localhost`` (RFC 6761 reserves the whole zone for loopback), and an
    IPv6 address carrying an IPv4 loopback one, mapped (``::ffff:127.0.0.1``,
    ``::ffff:7f00:1``) or compatible (``::127.0.0.1``).

    Only for a server's URL: a bind address (:func:`is_loopback_host`) is not widened, as
    a listener on ``foo.localhost`` would rest on a resolver to keep RFC 6761.
    """
    if is_loopback_host(host) or _LOCALHOST_NAME.match(host):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if not isinstance(address, ipaddress.IPv6Address):
        return False
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    packed = address.packed
    return packed[:12] == bytes(12) and ipaddress.IPv4Address(packed[12:]).is_loopback


def is_loopback_url(url: str) -> bool:
    return is_loopback_host(urlsplit(url).hostname or "")
