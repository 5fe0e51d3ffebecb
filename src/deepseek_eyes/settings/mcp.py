"""Settings of the MCP host: servers, selectors, OAuth, exposure budgets.

Validation follows the seed's list: unique bounded ids, names unique case-insensitively,
stdio and HTTP fields never mixed, env and header values only as references,
credential-looking commands and arguments, URL user info and credential query, matrix and
fragment keys refused (the checks of :mod:`deepseek_eyes.settings.credentials`, the same ones
``mcp register`` and ``mcp import`` run, so a file edited by hand is refused as it loads),
HTTPS except for explicit loopback hosts (every spelling the seed lists: ``localhost`` and
names under ``.localhost``, ``127/8``, ``::1``, and IPv4-mapped or -compatible loopback),
OAuth only on HTTP with env-referenced client credentials.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    BeforeValidator,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from deepseek_eyes.settings.base import (
    Secret,
    Strict,
    is_loopback_url_host,
)
from deepseek_eyes.settings.credentials import argument_credential, url_credential

__all__ = ["McpOAuthSettings", "McpSelectors", "McpServerSettings", "McpSettings", "Selector"]

_MCP_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
_SELECTOR = re.compile(r"^[^\s*]{1,256}\*?$")
def _selector(value: str) -> str:
    if not _SELECTOR.match(value):
        raise PydanticCustomError(
            "mcp_selector",
            "selector '{value}' must be a name or a prefix followed by one trailing * "
            "(a bare * is not allowed)",
            {"value": value},
        )
    return value


Selector = Annotated[str, BeforeValidator(lambda v: _selector(v) if isinstance(v, str) else v)]


class McpSelectors(Strict):
    """Exact names (tools, prompts) or URIs (resources, templates); ``prefix*`` matches a prefix."""

    tools: tuple[Selector, ...] = Field(default=(), max_length=1024)
    resources: tuple[Selector, ...] = Field(default=(), max_length=1024)
    prompts: tuple[Selector, ...] = Field(default=(), max_length=1024)


class McpOAuthSettings(Strict):
    """OAuth 2.1 client_credentials for one Streamable HTTP server; tokens live in memory."""

    client_id: Secret
    client_secret: Secret
    scope: str | None = Field(default=None, max_length=1024)
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = (
        "client_secret_basic"  # noqa: S105 -- a method name, not a password
    )
    issuer: str | None = Field(
        default=None, max_length=2048,
        description="Pin the authorization server (https URL) that may receive the credentials; "
        "unset: the one the protected resource names.",
    )

    @field_validator("issuer")
    @classmethod
    def _https_issuer(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme != "https" and not (
            parts.scheme == "http" and is_loopback_url_host(parts.hostname or "")
        ):
            raise PydanticCustomError(
                "mcp_issuer", "issuer must be an https:// URL (plain http only for loopback)"
            )
        return value


class McpServerSettings(Strict):
    """One ``[[mcp.servers]]`` entry: a stdio command or a Streamable HTTP endpoint."""

    id: str = Field(description="Stable id: 1-32 of a-z 0-9 _ -, starting with a letter/digit.")
    name: str | None = Field(default=None, min_length=1, max_length=100)
    transport: Literal["stdio", "streamable-http"]
    command: str | None = Field(default=None, min_length=1, max_length=4096)
    args: tuple[str, ...] = Field(default=(), max_length=256)
    env: dict[str, Secret] = Field(default_factory=dict, max_length=128)
    cwd: Path | None = None
    url: str | None = Field(default=None, max_length=2048)
    headers: dict[str, Secret] = Field(default_factory=dict, max_length=64)
    oauth: McpOAuthSettings | None = None
    enabled: bool = True
    tools_enabled: bool = True
    resources_enabled: bool = False
    prompts_enabled: bool = False
    allow: McpSelectors = McpSelectors()
    deny: McpSelectors = McpSelectors()
    risk_policy: Literal["allow", "read-only"] = "allow"
    protocol: Literal["auto", "legacy", "2026-07-28"] = Field(
        default="auto",
        description="auto: try the stateless revision, fall back to the handshake (the era "
        "found is remembered for reconnects); or pin one.",
    )
    connect_timeout: float = Field(default=30.0, gt=0, le=600)
    call_timeout: float = Field(default=60.0, gt=0, le=3600)
    max_instruction_chars: int = Field(default=4096, ge=0, le=65536)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _MCP_ID.match(value) or "__" in value:
            raise PydanticCustomError(
                "mcp_id", "id must be 1-32 of a-z 0-9 _ - (no double underscore)"
            )
        return value

    @model_validator(mode="after")
    def _no_literal_credentials(self) -> McpServerSettings:
        # After the fields, so that "--api-key V" is judged with the argument after it and
        # the command; the message names the position and the option, never the value.
        found = argument_credential(self.command, self.args)
        if found is not None:
            field = "command" if found.position == 0 else f"args[{(found.position or 1) - 1}]"
            raise PydanticCustomError(
                "mcp_credential",
                "{field}: {finding}; a credential on a command line is visible to every user "
                "of this machine: let the server read it from its environment, set in env "
                "as {example}",
                {"field": field, "finding": str(found), "example": '{ env = "NAME" }'},
            )
        return self

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PydanticCustomError("mcp_url", "url must be an http(s) URL with a host")
        if parts.username is not None or parts.password is not None or "@" in parts.netloc:
            raise PydanticCustomError("mcp_url", "url must not carry user information")
        found = url_credential(value)
        if found is not None:
            raise PydanticCustomError(
                "mcp_url", "url {finding} (a credential); send it in a header set to "
                "{example} instead", {"finding": found, "example": '{ env = "NAME" }'},
            )
        if parts.scheme == "http" and not is_loopback_url_host(parts.hostname):
            raise PydanticCustomError(
                "mcp_url", "url must use https:// (plain http only for loopback hosts)"
            )
        return value

    @model_validator(mode="after")
    def _transport_fields(self) -> McpServerSettings:
        stdio = {"command": self.command, "args": self.args, "env": self.env, "cwd": self.cwd}
        http = {"url": self.url, "headers": self.headers, "oauth": self.oauth}
        own, other = (stdio, http) if self.transport == "stdio" else (http, stdio)
        mixed = sorted(k for k, v in other.items() if v)
        if mixed:
            raise PydanticCustomError(
                "mcp_transport", "a {transport} server takes no {fields}",
                {"transport": self.transport, "fields": ", ".join(mixed)},
            )
        needed = "command" if self.transport == "stdio" else "url"
        if not own[needed]:
            raise PydanticCustomError(
                "mcp_transport", "a {transport} server needs {field}",
                {"transport": self.transport, "field": needed},
            )
        if self.oauth is not None and any(h.lower() == "authorization" for h in self.headers):
            raise PydanticCustomError(
                "mcp_oauth", "an OAuth server takes no Authorization header"
            )
        return self

    @property
    def display_name(self) -> str:
        return self.name or self.id


class McpSettings(Strict):
    """The MCP host: which servers connect, and the budgets every exposure shares."""

    enabled: bool = True
    servers: tuple[McpServerSettings, ...] = Field(default=(), max_length=64)
    max_tools: int = Field(default=128, ge=0, le=1024, description="Exposed tools, all servers.")
    max_schema_tokens: int = Field(
        default=32_000, ge=0, le=1_000_000, description="Estimated tokens of exposed schemas."
    )
    max_result_chars: int = Field(
        default=16_000, ge=256, le=4_000_000, description="Preview of one result in context."
    )
    persist_results: bool = Field(
        default=True,
        description="Keep a cut or non-text result whole as an artifact (its digest ends the "
        "cut preview); false: nothing is written, and the preview says the rest was not kept.",
    )
    max_external_calls_per_run: int = Field(
        default=64, ge=0, le=100_000, description="Tool, read and prompt calls per run; 0: no cap."
    )
    discover_timeout: float = Field(
        default=3.0, gt=0, le=60,
        description="Seconds the stateless-revision probe may wait before the handshake.",
    )
    audit_ring: int = Field(default=256, ge=16, le=65536)

    @model_validator(mode="after")
    def _unique(self) -> McpSettings:
        ids: set[str] = set()
        names: set[str] = set()
        for server in self.servers:
            if server.id in ids:
                raise PydanticCustomError(
                    "mcp_duplicate", "server id '{id}' is used twice", {"id": server.id}
                )
            ids.add(server.id)
            folded = server.display_name.casefold()
            if folded in names:
                raise PydanticCustomError(
                    "mcp_duplicate", "server name '{name}' is used twice (case-insensitive)",
                    {"name": server.display_name},
                )
            names.add(folded)
        return self
