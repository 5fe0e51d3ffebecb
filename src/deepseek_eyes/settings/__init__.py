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

One module per part of the runtime (``base``, ``vision``, ``llm``, ``terminal``, ``mcp``,
``browser``, ``desktop``, ``telemetry``, ``store``);
this package holds the root :class:`Settings`, loading and the data directory, and
re-exports every model so callers import from ``deepseek_eyes.settings`` alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs
from pydantic import BaseModel, Field, ValidationError

from deepseek_eyes.errors import ConfigError
from deepseek_eyes.settings.base import (
    APP_NAME,
    CONFIG_FILENAME,
    DEEPSEEK_ROUTE,
    ENV_HOME,
    OptionalSecret,
    Secret,
    SecretRef,
    Strict,
    is_loopback_host,
    is_loopback_url_host,
)
from deepseek_eyes.settings.browser import BrowserSettings, VisualMode
from deepseek_eyes.settings.desktop import DesktopSettings
from deepseek_eyes.settings.llm import (
    GatewaySettings,
    LLMModelSettings,
    LLMSettings,
    RuntimeSettings,
)
from deepseek_eyes.settings.mcp import (
    McpAuthorizationCodeSettings,
    McpOAuthSettings,
    McpSelectors,
    McpServerSettings,
    McpSettings,
)
from deepseek_eyes.settings.store import (
    ENV_STATE_PASSWORD,
    ENV_STATE_URL,
    StateUnavailable,
    StoreSettings,
)
from deepseek_eyes.settings.suggest import closest_key
from deepseek_eyes.settings.telemetry import TelemetrySettings
from deepseek_eyes.settings.terminal import TerminalSettings
from deepseek_eyes.settings.vision import (
    BoxConvention,
    DeepSeekRouteSettings,
    Delivery,
    ImageSettings,
    LocalRouteSettings,
    RouteSettings,
    VisionSettings,
)

__all__ = [
    "CONFIG_FILENAME",
    "DEEPSEEK_ROUTE",
    "ENV_HOME",
    "ENV_STATE_PASSWORD",
    "ENV_STATE_URL",
    "BoxConvention",
    "BrowserSettings",
    "DeepSeekRouteSettings",
    "Delivery",
    "DesktopSettings",
    "GatewaySettings",
    "ImageSettings",
    "LLMModelSettings",
    "LLMSettings",
    "LoadedSettings",
    "LocalRouteSettings",
    "McpAuthorizationCodeSettings",
    "McpOAuthSettings",
    "McpSelectors",
    "McpServerSettings",
    "McpSettings",
    "OptionalSecret",
    "RouteSettings",
    "RuntimeSettings",
    "Secret",
    "SecretRef",
    "Settings",
    "StateUnavailable",
    "StorageSettings",
    "StoreSettings",
    "TelemetrySettings",
    "TerminalSettings",
    "VisionSettings",
    "VisualMode",
    "config_search_path",
    "data_home",
    "format_validation_errors",
    "is_loopback_host",
    "is_loopback_url_host",
    "load_settings",
    "validate_settings_file",
    "validate_settings_text",
]


class StorageSettings(Strict):
    home: Path | None = Field(
        default=None,
        description="Data directory; the DEEPSEEK_EYES_HOME environment variable wins over it.",
    )


class Settings(Strict):
    storage: StorageSettings = Field(default_factory=StorageSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    image: ImageSettings = Field(default_factory=ImageSettings)
    vision: VisionSettings = Field(default_factory=VisionSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    terminal: TerminalSettings = Field(default_factory=TerminalSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    browser: BrowserSettings = Field(default_factory=BrowserSettings)
    desktop: DesktopSettings = Field(default_factory=DesktopSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)

    @classmethod
    def defaults(cls) -> Settings:
        """Every default, as ``Settings()`` has them, each section built on first access.

        With no settings file there is nothing to validate, yet building every section's
        model (their validators are built on first use, ``defer_build``) was about a tenth
        of a cached ``see``, which reads three sections of twelve. What reads the whole
        (dumping, comparing, copying, pickling) builds every section first, so it sees
        exactly ``Settings()``.
        """
        instance = cls.__new__(cls)
        object.__setattr__(instance, "__dict__", {})
        object.__setattr__(instance, "__pydantic_fields_set__", set())
        object.__setattr__(instance, "__pydantic_extra__", None)
        object.__setattr__(instance, "__pydantic_private__", None)
        return instance

    def _built(self) -> Settings:
        """Every section of a :meth:`defaults` instance built (no-op once they are)."""
        missing = [name for name in type(self).model_fields if name not in self.__dict__]
        for name in missing:
            getattr(self, name)
        return self

    if not TYPE_CHECKING:  # only for a section a `defaults()` instance has not built yet

        def __getattr__(self, name: str) -> Any:
            field = type(self).model_fields.get(name)
            if field is None or field.default_factory is None or name in self.__dict__:
                return super().__getattr__(name)
            value = field.default_factory()
            self.__dict__[name] = value
            return value

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        return super(Settings, self._built()).model_dump(**kwargs)

    def model_dump_json(self, **kwargs: Any) -> str:
        return super(Settings, self._built()).model_dump_json(**kwargs)

    def model_copy(self, **kwargs: Any) -> Settings:
        return super(Settings, self._built()).model_copy(**kwargs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Settings):
            other._built()
        return super(Settings, self._built()).__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # unhashable as before: sections hold dicts

    def __iter__(self) -> Any:
        return super(Settings, self._built()).__iter__()

    def __repr_args__(self) -> Any:
        return super(Settings, self._built()).__repr_args__()

    def __copy__(self) -> Settings:
        return super(Settings, self._built()).__copy__()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Settings:
        return super(Settings, self._built()).__deepcopy__(memo)

    def __getstate__(self) -> dict[Any, Any]:
        return super(Settings, self._built()).__getstate__()


@dataclass(frozen=True)
class LoadedSettings:
    """The validated settings and the file they came from."""

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


def format_validation_errors(
    error: ValidationError, model: type[BaseModel] | None = None
) -> list[dict[str, str]]:
    """Each pydantic error as ``{"path": "vision.routes[0].api_key", "message": ...}``.

    With ``model`` (the one validated), an unknown key's message names the closest known
    key at its level: ``did you mean `route_priority`?``.
    """
    out: list[dict[str, str]] = []
    for item in error.errors(include_url=False, include_input=False):
        # Union/Annotated wrappers add type names to the location; keep only real keys.
        loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and p[:1].isupper()))
        message = item["msg"]
        if model is not None and item["type"] == "extra_forbidden":
            suggestion = closest_key(model, loc)
            if suggestion is not None:
                message += f"; did you mean `{suggestion}`?"
        out.append({"path": _location(loc), "message": message})
    return out


def _parse(path: Path) -> Settings:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(
            f"settings file {path} does not exist", code="CONFIG_NOT_FOUND",
            details={"path": str(path)},
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"settings file {path} cannot be read: {exc}", code="CONFIG_UNREADABLE",
            details={"path": str(path)},
        ) from exc
    return validate_settings_text(text, path)


def validate_settings_text(text: str, path: Path) -> Settings:
    """Validate the text of the file at ``path`` (named in errors) exactly as
    :func:`load_settings` would; for a reader that judges the bytes it hashed (the settings
    watch), not whatever the file holds a moment later.

    Raises:
        ConfigError: ``CONFIG_UNREADABLE`` for bad TOML, ``CONFIG_INVALID`` with every
            error's path.
    """
    import tomllib  # here: with no settings file (a cached `see`), no parser is loaded

    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"settings file {path} cannot be read: {exc}", code="CONFIG_UNREADABLE",
            details={"path": str(path)},
        ) from exc
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        errors = format_validation_errors(exc, Settings)
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
    return LoadedSettings(Settings.defaults(), None)


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
