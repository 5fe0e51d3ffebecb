"""Settings of the MCP host: servers, selectors, OAuth, exposure budgets.

Validation follows the seed's list: unique bounded ids, names unique case-insensitively,
stdio and HTTP fields never mixed, env and header values only as references,
credential-looking commands and arguments, URL user info and credential query, matrix and
fragment keys refused (the checks of :mod:`deepseek_eyes.settings.credentials`, the same ones
``mcp register`` and ``mcp import`` run, so a file edited by hand is refused as it loads),
HTTPS except for explicit loopback hosts (every spelling the seed lists: ``localhost`` and
names under ``.localhost``, ``127/8``, ``::1``, and IPv4-mapped or -compatible loopback),
OAuth only on HTTP with env-referenced client credentials (a private key for
``private_key_jwt`` also as a file only its owner may read).

``oauth`` is one of two grants, told apart by ``type``: ``client_credentials`` (the default,
so entries written before the authorization-code grant existed still load) and
``authorization_code`` (a person signs in with ``deepseek-eyes mcp login``; the client is
registered dynamically, named by a client ID metadata document, or pre-registered).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
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

__all__ = ["AskSelector", "McpAuthorizationCodeSettings", "McpOAuthSettings", "McpSelectors",
           "McpServerSettings", "McpSettings", "Selector"]

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


def _ask_selector(value: str) -> str:
    # Unlike allow, a bare * is fine here: asking a person first only ever withholds.
    return value if value == "*" else _selector(value)


#: A tool name, a prefix followed by ``*``, or ``*`` alone (every tool of the server).
AskSelector = Annotated[
    str, BeforeValidator(lambda v: _ask_selector(v) if isinstance(v, str) else v)]


class McpSelectors(Strict):
    """Exact names (tools, prompts) or URIs (resources, templates); ``prefix*`` matches a prefix."""

    tools: tuple[Selector, ...] = Field(default=(), max_length=1024)
    resources: tuple[Selector, ...] = Field(default=(), max_length=1024)
    prompts: tuple[Selector, ...] = Field(default=(), max_length=1024)


def _https_or_loopback(value: str | None, field: str) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme != "https" and not (
        parts.scheme == "http" and is_loopback_url_host(parts.hostname or "")
    ):
        raise PydanticCustomError(
            "mcp_issuer", "{field} must be an https:// URL (plain http only for loopback)",
            {"field": field},
        )
    return value


#: JWS algorithms a ``private_key_jwt`` client assertion may be signed with (asymmetric only:
#: an HMAC "assertion" would be a shared secret by another name).
SigningAlgorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                           "ES256", "ES384", "ES512", "EdDSA"]


class McpOAuthSettings(Strict):
    """OAuth 2.1 client_credentials for one Streamable HTTP server; tokens live in memory.

    The client authenticates at the token endpoint with its secret (``client_secret_basic``,
    ``client_secret_post``) or with a JWT it signs with its private key (``private_key_jwt``,
    RFC 7523 section 2.2): the key is an env reference holding the PEM (``private_key``) or
    a PEM file only its owner may read (``private_key_file``, mode 0600 or stricter).
    """

    type: Literal["client_credentials"] = "client_credentials"
    client_id: Secret
    client_secret: Secret | None = None
    scope: str | None = Field(default=None, max_length=1024)
    token_endpoint_auth_method: Literal[
        "client_secret_basic", "client_secret_post", "private_key_jwt"
    ] = "client_secret_basic"  # noqa: S105 -- a method name, not a password
    private_key: Secret | None = Field(
        default=None, description="private_key_jwt: the PEM private key, as { env = \"NAME\" }.")
    private_key_file: Path | None = Field(
        default=None, description="private_key_jwt: a PEM private key file (mode 0600).")
    key_id: str | None = Field(
        default=None, min_length=1, max_length=256,
        description="private_key_jwt: the key's id, sent as the assertion's kid header.")
    signing_algorithm: SigningAlgorithm = Field(
        default="RS256", description="private_key_jwt: the JWS algorithm of the assertion.")
    issuer: str | None = Field(
        default=None, max_length=2048,
        description="Pin the authorization server (https URL) that may receive the credentials; "
        "unset: the one the protected resource names.",
    )

    @field_validator("issuer")
    @classmethod
    def _https_issuer(cls, value: str | None) -> str | None:
        return _https_or_loopback(value, "issuer")

    @field_validator("private_key_file")
    @classmethod
    def _absolute_key_file(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        value = value.expanduser()
        if not value.is_absolute():
            raise PydanticCustomError(
                "mcp_oauth", "private_key_file must be an absolute path (or start with ~)")
        return value

    @model_validator(mode="after")
    def _one_way_to_authenticate(self) -> McpOAuthSettings:
        keys = [k for k in (self.private_key, self.private_key_file) if k is not None]
        if self.token_endpoint_auth_method == "private_key_jwt":  # noqa: S105 -- a method name
            if len(keys) != 1:
                raise PydanticCustomError(
                    "mcp_oauth", "private_key_jwt needs exactly one of private_key "
                    "({ env = \"NAME\" }) and private_key_file")
            if self.client_secret is not None:
                raise PydanticCustomError(
                    "mcp_oauth", "private_key_jwt takes no client_secret")
            return self
        if self.client_secret is None:
            raise PydanticCustomError(
                "mcp_oauth", "token_endpoint_auth_method {method} needs client_secret",
                {"method": self.token_endpoint_auth_method})
        if keys or self.key_id is not None or "signing_algorithm" in self.model_fields_set:
            raise PydanticCustomError(
                "mcp_oauth", "private_key, private_key_file, key_id and signing_algorithm are "
                "for token_endpoint_auth_method private_key_jwt")
        return self

    def secret_refs(self) -> tuple[Secret, ...]:
        """The references a connection resolves (and a redactor scrubs)."""
        return tuple(ref for ref in (self.client_id, self.client_secret, self.private_key)
                     if ref is not None)


class McpAuthorizationCodeSettings(Strict):
    """OAuth 2.1 authorization code with PKCE: a person signs in once (``mcp login``).

    The client is, in order of preference: pre-registered (``client_id``, and
    ``client_secret`` for a confidential client), named by a client ID metadata document
    (``client_metadata_url``, used when the authorization server supports it), or registered
    dynamically (RFC 7591) at sign-in. Tokens are kept in the data directory's token store.
    """

    type: Literal["authorization_code"]
    client_id: Secret | None = None
    client_secret: Secret | None = None
    token_endpoint_auth_method: Literal[
        "none", "client_secret_basic", "client_secret_post"
    ] | None = Field(
        default=None,
        description="Pre-registered client: how it authenticates at the token endpoint "
        "(default: client_secret_basic with a secret, none without).",
    )
    client_metadata_url: str | None = Field(
        default=None, max_length=2048,
        description="An https URL with a path: the client ID metadata document to use as "
        "client_id where the authorization server supports it.",
    )
    scope: str | None = Field(
        default=None, max_length=1024,
        description="Scopes to ask for besides those the server's challenge or metadata name.",
    )
    client_name: str = Field(default="DeepSeekEyes", min_length=1, max_length=100)
    redirect_port: int | None = Field(
        default=None, ge=1024, le=65535,
        description="Fixed loopback port of the sign-in redirect (for a client registered "
        "with one exact redirect URI); unset: an ephemeral port.",
    )

    @field_validator("client_metadata_url")
    @classmethod
    def _cimd_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/"):
            raise PydanticCustomError(
                "mcp_cimd", "client_metadata_url must be an https:// URL with a path"
            )
        return value

    def secret_refs(self) -> tuple[Secret, ...]:
        """The references a connection resolves (and a redactor scrubs)."""
        return tuple(ref for ref in (self.client_id, self.client_secret) if ref is not None)

    @model_validator(mode="after")
    def _client(self) -> McpAuthorizationCodeSettings:
        if self.client_secret is not None and self.client_id is None:
            raise PydanticCustomError("mcp_oauth", "client_secret needs client_id")
        if self.token_endpoint_auth_method is not None and self.client_id is None:
            raise PydanticCustomError(
                "mcp_oauth", "token_endpoint_auth_method is for a pre-registered client_id"
            )
        secret_method = self.token_endpoint_auth_method in (
            "client_secret_basic", "client_secret_post")
        if secret_method and self.client_secret is None:
            raise PydanticCustomError(
                "mcp_oauth", "token_endpoint_auth_method {method} needs client_secret",
                {"method": self.token_endpoint_auth_method},
            )
        public = self.token_endpoint_auth_method == "none"  # noqa: S105 -- a method name
        if public and self.client_secret is not None:
            raise PydanticCustomError(
                "mcp_oauth", "token_endpoint_auth_method none takes no client_secret"
            )
        return self


def _grant(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("type", "client_credentials"))
    return str(getattr(value, "type", "client_credentials"))


McpOAuth = Annotated[
    Annotated[McpOAuthSettings, Tag("client_credentials")]
    | Annotated[McpAuthorizationCodeSettings, Tag("authorization_code")],
    Discriminator(_grant),
]


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
    oauth: McpOAuth | None = None
    enabled: bool = True
    tools_enabled: bool = True
    resources_enabled: bool = False
    prompts_enabled: bool = False
    allow: McpSelectors = Field(default_factory=McpSelectors)
    deny: McpSelectors = Field(default_factory=McpSelectors)
    ask: tuple[AskSelector, ...] = Field(
        default=(), max_length=1024,
        description="Tools that wait for a person's approval before each call (a name, a "
        "prefix*, or * for all); answered in the web console's Approvals or at chat's "
        "terminal.",
    )
    risk_policy: Literal["allow", "read-only"] = "allow"
    tool_mode: Literal["native", "code", "both"] | None = Field(
        default=None,
        description="How this server's tools reach the model: as functions (native), "
        "through Code Mode's run_code (code), or both; unset: runtime.tool_mode.",
    )
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
    ask_timeout: float = Field(
        default=120.0, gt=0, le=3600,
        description="Seconds an ask-first tool call waits for a person before it is refused "
        "(MCP_APPROVAL_TIMEOUT).",
    )

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
