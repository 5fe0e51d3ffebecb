"""One strict settings model for the whole runtime, loaded from ``deepseek-eyes.toml``.

Where a file comes from, in order: ``--config PATH`` (must exist), ``./deepseek-eyes.toml``,
then ``deepseek-eyes.toml`` in the user config dir. No file at all is valid: every field has
a default, and with no route configured the embedded local OCR route serves vision.

Two decisions a newcomer would otherwise undo:

* Secrets exist only as ``{ env = "NAME" }`` references (:class:`SecretRef`). A literal
  string where a secret belongs is a validation error, not a warning, so a key can never
  reach a settings file, a log line or the audit. References resolve at connection time.
* Every model forbids unknown keys. A typo (``failover_atempts``) is an error with its
  path, never a silently ignored setting.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import platformdirs
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from deepseek_eyes.errors import ConfigError

__all__ = [
    "CONFIG_FILENAME",
    "ENV_HOME",
    "GatewaySettings",
    "ImageSettings",
    "LLMModelSettings",
    "LLMSettings",
    "LoadedSettings",
    "LocalRouteSettings",
    "McpOAuthSettings",
    "McpSelectors",
    "McpServerSettings",
    "McpSettings",
    "RouteSettings",
    "RuntimeSettings",
    "SecretRef",
    "Settings",
    "StorageSettings",
    "TerminalSettings",
    "VisionSettings",
    "config_search_path",
    "data_home",
    "format_validation_errors",
    "is_loopback_host",
    "load_settings",
    "validate_settings_file",
]

CONFIG_FILENAME = "deepseek-eyes.toml"
ENV_HOME = "DEEPSEEK_EYES_HOME"
ENV_LLM_BASE_URL = "DEEPSEEK_BASE_URL"
APP_NAME = "deepseek-eyes"
LOCAL_ROUTE = "local"

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_ROUTE_NAME = r"^[a-z0-9][a-z0-9._/-]{0,63}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class SecretRef(_Strict):
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


class StorageSettings(_Strict):
    home: Path | None = Field(
        default=None,
        description="Data directory; the DEEPSEEK_EYES_HOME environment variable wins over it.",
    )


ImageFormat = Literal["PNG", "JPEG", "WEBP", "GIF", "BMP"]


class ImageSettings(_Strict):
    max_bytes: int = Field(default=20 * 1024 * 1024, gt=0, le=1024 * 1024 * 1024)
    # Pillow itself refuses images over ~89 MP (its bomb warning is an error here).
    max_pixels: int = Field(default=40_000_000, gt=0, le=89_000_000)
    formats: tuple[ImageFormat, ...] = ("PNG", "JPEG", "WEBP", "GIF", "BMP")


BoxConvention = Literal["auto", "xywh-normalized", "xyxy-pixels", "xyxy-1000", "yxyx-1000"]


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP address (the only hosts plain http may carry a key to,
    and the only ones a server may listen on without one)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_loopback_url(url: str) -> bool:
    return is_loopback_host(urlsplit(url).hostname or "")


class RouteSettings(_Strict):
    """One vision route: an OpenAI-compatible multimodal endpoint, or the local engine."""

    name: str = Field(pattern=_ROUTE_NAME)
    kind: Literal["openai", "local"] = "openai"
    base_url: str | None = Field(default=None, description="e.g. https://host/v1")
    model: str | None = Field(default=None, min_length=1, max_length=200)
    api_key: OptionalSecret = None
    headers: dict[str, Secret] = Field(default_factory=dict)
    timeout: float = Field(default=60.0, gt=0, le=600)
    connect_timeout: float = Field(default=10.0, gt=0, le=120)
    stream: bool = False
    json_mode: bool = Field(
        default=False, description="Send response_format json_object (not every server has it)."
    )
    max_tokens: int = Field(default=4096, gt=0, le=65536)
    temperature: float = Field(default=0.0, ge=0, le=2)
    health_check: Literal["models", "none"] = "models"
    box_convention: BoxConvention = "auto"
    probe: bool | None = Field(
        default=None, description="Override vision.probe for this route (local is always exempt)."
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not re.match(r"^https?://[^\s/@]+(/[^\s]*)?$", value):
            raise PydanticCustomError(
                "base_url", "must be an http(s) URL without user information"
            )
        return value.rstrip("/")

    @model_validator(mode="after")
    def _kind_fields(self) -> RouteSettings:
        if self.kind == "openai":
            missing = [f for f in ("base_url", "model") if getattr(self, f) is None]
            if missing:
                raise PydanticCustomError(
                    "route_fields",
                    "an openai route needs {missing}",
                    {"missing": " and ".join(missing)},
                )
            if (
                self.base_url
                and self.base_url.startswith("http://")
                and (self.api_key or self.headers)
                and not _is_loopback_url(self.base_url)
            ):
                raise PydanticCustomError(
                    "plain_http_secret",
                    "credentials may only travel over https:// (plain http is allowed for "
                    "loopback hosts)",
                )
        elif self.base_url or self.model or self.api_key or self.headers:
            raise PydanticCustomError(
                "route_fields", "a local route takes no base_url, model, api_key or headers"
            )
        return self


class LocalRouteSettings(_Strict):
    min_confidence: float = Field(
        default=0.6, ge=0, le=1, description="Lines below this become uncertainties."
    )
    threads: int | None = Field(default=None, ge=1, le=64)


class VisionSettings(_Strict):
    route: str | None = Field(default=None, description="The explicitly selected route.")
    route_priority: tuple[str, ...] = ()
    auto_detect: bool = Field(
        default=False, description="Also try llm.models that declare image input."
    )
    health_ttl: float = Field(default=300.0, ge=0, le=86400)
    failure_cooldown: float = Field(default=60.0, ge=0, le=86400)
    failover_attempts: int = Field(default=2, ge=0, le=16)
    probe: bool = True
    probe_ttl: float = Field(default=86400.0, ge=0, le=30 * 86400)
    attempts_max_rows: int = Field(default=50_000, ge=100, le=10_000_000)
    routes: tuple[RouteSettings, ...] = ()
    local: LocalRouteSettings = LocalRouteSettings()

    @model_validator(mode="after")
    def _names(self) -> VisionSettings:
        seen: set[str] = set()
        for route in self.routes:
            if route.name in seen:
                raise PydanticCustomError(
                    "duplicate_route", "route name {name!r} is used twice", {"name": route.name}
                )
            seen.add(route.name)
        known = seen | {LOCAL_ROUTE}
        for name in (self.route, *self.route_priority):
            if name is not None and name not in known:
                raise PydanticCustomError(
                    "unknown_route", "route {name!r} is not defined in vision.routes",
                    {"name": name},
                )
        return self


class LLMModelSettings(_Strict):
    id: str = Field(min_length=1, max_length=200)
    input: tuple[Literal["text", "image"], ...] = ("text",)


def _default_llm_base_url() -> str:
    # With no settings file, the environment names the upstream (DEEPSEEK_BASE_URL).
    return os.environ.get(ENV_LLM_BASE_URL) or "https://api.deepseek.com"


class LLMSettings(_Strict):
    """The final-answer endpoint (DeepSeek by default). Model names come from ``model``,
    ``models`` and the endpoint's ``/models``, never from a list in the code. Its
    image-capable models can serve vision when ``vision.auto_detect`` is on."""

    base_url: str = Field(default_factory=_default_llm_base_url)
    api_key: OptionalSecret = SecretRef(env="DEEPSEEK_API_KEY")
    model: str | None = Field(
        default=None, min_length=1, max_length=200,
        description="Default final model; else the first of models, else of /models.",
    )
    models: tuple[LLMModelSettings, ...] = ()
    timeout: float = Field(default=120.0, gt=0, le=1800)
    connect_timeout: float = Field(default=10.0, gt=0, le=120)
    models_ttl: float = Field(
        default=300.0, ge=0, le=86400, description="Seconds a /models listing is reused."
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return RouteSettings._http_url(value) or value


class RuntimeSettings(_Strict):
    """How a turn is run for the final model."""

    max_rereads_per_turn: int = Field(default=2, ge=0, le=16)
    max_tool_calls_per_turn: int = Field(default=8, ge=0, le=128)
    max_model_calls_per_turn: int = Field(default=6, ge=1, le=64)
    history_budget_tokens: int = Field(
        default=48_000, ge=1000, le=2_000_000,
        description="Estimated tokens of model-facing history; older turns are dropped first.",
    )
    max_images_per_turn: int = Field(
        default=8, ge=1, le=64,
        description="Distinct images a conversation may carry into one turn.",
    )
    history_evidence: Literal["pointer", "full"] = Field(
        default="pointer",
        description="Images of earlier user messages: a pointer the model can look at "
        "again (cheap), or their full evidence every turn.",
    )


class GatewaySettings(_Strict):
    """``deepseek-eyes serve``: the OpenAI-compatible HTTP gateway."""

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    api_key: OptionalSecret = SecretRef(env="DEEPSEEK_EYES_GATEWAY_KEY")
    max_body_bytes: int = Field(default=64 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024)
    allow_image_urls: bool = Field(
        default=False, description="Fetch http(s) image_url parts (off: data URLs only)."
    )
    image_url_timeout: float = Field(default=10.0, gt=0, le=120)
    allow_private_image_urls: bool = Field(
        default=False,
        description="Also fetch image URLs on loopback/private addresses (SSRF risk).",
    )
    max_concurrent_turns: int = Field(default=64, ge=1, le=4096)


TerminalMode = Literal["read-only", "confirm", "trusted"]


class TerminalSettings(_Strict):
    """``deepseek-eyes terminal serve``: the terminal MCP server and its approval console.

    The bearer token is a reference like every secret; ``DEEPSEEK_EYES_TERMINAL_TOKEN`` is
    read when ``token`` is not set. Receipt keys are references too; with none configured a
    private keyring file in the data directory holds generated keys.
    """

    mode: TerminalMode = "confirm"
    workspaces: tuple[Path, ...] = Field(
        default=(), description="Workspace roots; empty means the working directory."
    )
    token: Secret | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8766, ge=0, le=65535)
    allowed_hosts: tuple[str, ...] = Field(
        default=(), description="Extra Host header values accepted (host:port)."
    )
    allowed_origins: tuple[str, ...] = Field(
        default=(), description="Extra Origin values accepted (scheme://host:port)."
    )
    timeout: float = Field(default=60.0, gt=0, le=3600, description="Default command timeout.")
    max_timeout: float = Field(default=600.0, gt=0, le=86400)
    max_output_bytes: int = Field(
        default=1024 * 1024, ge=1024, le=256 * 1024 * 1024,
        description="Bytes of stdout and of stderr kept in a receipt; the rest is truncated.",
    )
    max_sessions: int = Field(default=8, ge=1, le=1024)
    session_idle_timeout: float = Field(default=900.0, gt=0, le=7 * 86400)
    rate_limit_per_minute: int = Field(default=600, ge=1, le=1_000_000)
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    subscriber_queue: int = Field(default=256, ge=4, le=65536)
    sandbox: Literal["auto", "bwrap", "none"] = "auto"
    receipt_keys: tuple[Secret, ...] = Field(
        default=(), description="HMAC keys (first signs, all verify); else the keyring file."
    )
    redact_env: tuple[str, ...] = Field(
        default=(), description="Environment variables whose values are redacted from receipts."
    )
    approvals: Literal["client", "console"] = Field(
        default="client",
        description="Who may approve plans: the MCP client (terminal_approve) or only the console.",
    )


# --- MCP host (capability `deepseek_eyes.mcp`) -------------------------------------------

_MCP_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
_SELECTOR = re.compile(r"^[^\s*]{1,256}\*?$")
#: Argument, header and query names that carry credentials; their values must be references.
_CREDENTIAL_WORDS = re.compile(
    r"(?i)(api[_-]?key|apikey|secret|token|passw(or)?d|authorization|bearer|credential|"
    r"access[_-]?key|private[_-]?key|session[_-]?id|cookie|auth)"
)
_CREDENTIAL_ARG = re.compile(
    r"(?i)^--?[a-z0-9_-]*(api[_-]?key|secret|token|passw(or)?d|credential|auth)[a-z0-9_-]*="
)
_LONG_SECRET = re.compile(r"^(sk|pk|ghp|gho|xox[abp]|AKIA|eyJ)[A-Za-z0-9_\-.]{12,}$")


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


class McpSelectors(_Strict):
    """Exact names (tools, prompts) or URIs (resources, templates); ``prefix*`` matches a prefix."""

    tools: tuple[Selector, ...] = Field(default=(), max_length=1024)
    resources: tuple[Selector, ...] = Field(default=(), max_length=1024)
    prompts: tuple[Selector, ...] = Field(default=(), max_length=1024)


class McpOAuthSettings(_Strict):
    """OAuth 2.1 client_credentials for one Streamable HTTP server; tokens live in memory."""

    client_id: Secret
    client_secret: Secret
    scope: str | None = Field(default=None, max_length=1024)
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = (
        "client_secret_basic"  # noqa: S105 -- a method name, not a password
    )


class McpServerSettings(_Strict):
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

    @field_validator("args")
    @classmethod
    def _args(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for arg in value:
            if _CREDENTIAL_ARG.match(arg) or _LONG_SECRET.match(arg):
                raise PydanticCustomError(
                    "literal_secret",
                    "argument '{arg}' looks like a credential; pass it through env as {example}",
                    {"arg": arg.split("=", 1)[0], "example": '{ env = "NAME" }'},
                )
        return value

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
        for pair in parts.query.split("&"):
            key = pair.split("=", 1)[0]
            if key and _CREDENTIAL_WORDS.search(key):
                raise PydanticCustomError(
                    "mcp_url", "url query key '{key}' looks like a credential; use a header "
                    "with {example} instead", {"key": key, "example": '{ env = "NAME" }'},
                )
        if parts.scheme == "http" and not is_loopback_host(parts.hostname):
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


class McpSettings(_Strict):
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


class Settings(_Strict):
    storage: StorageSettings = StorageSettings()
    image: ImageSettings = ImageSettings()
    vision: VisionSettings = VisionSettings()
    llm: LLMSettings = Field(default_factory=LLMSettings)
    runtime: RuntimeSettings = RuntimeSettings()
    gateway: GatewaySettings = GatewaySettings()
    terminal: TerminalSettings = TerminalSettings()
    mcp: McpSettings = McpSettings()


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    source: Path | None  # None: no file, all defaults


def config_search_path() -> list[Path]:
    """Where a settings file is looked for when ``--config`` is not given."""
    return [
        Path.cwd() / CONFIG_FILENAME,
        Path(platformdirs.user_config_dir(APP_NAME)) / CONFIG_FILENAME,
    ]


def _location(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(root)"


def format_validation_errors(error: ValidationError) -> list[dict[str, str]]:
    """Each pydantic error as ``{"path": "vision.routes[0].api_key", "message": ...}``."""
    out: list[dict[str, str]] = []
    for item in error.errors(include_url=False, include_input=False):
        # Union/Annotated wrappers add type names to the location; keep only real keys.
        loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and p[:1].isupper()))
        out.append({"path": _location(loc), "message": item["msg"]})
    return out


def _parse(path: Path) -> Settings:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(
            f"settings file {path} does not exist", code="CONFIG_NOT_FOUND",
            details={"path": str(path)},
        ) from exc
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(
            f"settings file {path} cannot be read: {exc}", code="CONFIG_UNREADABLE",
            details={"path": str(path)},
        ) from exc
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        errors = format_validation_errors(exc)
        raise ConfigError(
            f"settings file {path} has {len(errors)} error(s)",
            code="CONFIG_INVALID",
            details={"path": str(path), "errors": errors},
        ) from None


def load_settings(config: Path | None = None) -> LoadedSettings:
    """Load the settings the CLI and the runtime use.

    Raises:
        ConfigError: ``CONFIG_NOT_FOUND`` for a missing ``config``, ``CONFIG_UNREADABLE``
            for bad TOML, ``CONFIG_INVALID`` (with every error's path) for bad content.
    """
    if config is not None:
        return LoadedSettings(_parse(config), config)
    for candidate in config_search_path():
        if candidate.is_file():
            return LoadedSettings(_parse(candidate), candidate)
    return LoadedSettings(Settings(), None)


def validate_settings_file(path: Path) -> Settings:
    """Validate one file exactly as :func:`load_settings` would (``config check``)."""
    return _parse(path)


def data_home(settings: Settings) -> Path:
    """The data directory: ``$DEEPSEEK_EYES_HOME``, then ``storage.home``, then the user
    data dir."""
    env = os.environ.get(ENV_HOME)
    if env:
        return Path(env).expanduser()
    if settings.storage.home is not None:
        return settings.storage.home.expanduser()
    return Path(platformdirs.user_data_dir(APP_NAME))
