"""Settings of the vision bridge: image intake limits, routes and the router's policy."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from deepseek_eyes.settings.base import (
    DEEPSEEK_ROUTE,
    LOCAL_ROUTE,
    ROUTE_NAME,
    OptionalSecret,
    Secret,
    Strict,
    is_loopback_url,
)

__all__ = [
    "BoxConvention",
    "DeepSeekRouteSettings",
    "Delivery",
    "ImageFormat",
    "ImageSettings",
    "LocalRouteSettings",
    "RouteSettings",
    "VisionServeSettings",
    "VisionSettings",
]

ImageFormat = Literal["PNG", "JPEG", "WEBP", "GIF", "BMP"]


class ImageSettings(Strict):
    max_bytes: int = Field(default=20 * 1024 * 1024, gt=0, le=1024 * 1024 * 1024)
    # Pillow itself refuses images over ~89 MP (its bomb warning is an error here).
    max_pixels: int = Field(default=40_000_000, gt=0, le=89_000_000)
    # Checked from the header before any pixel is decoded: width × height × the bytes per
    # pixel Pillow stores for the decoded mode (1, 2 or 4; RGB is stored as 4). 128 MiB
    # admits a 33 MP RGB photo (a 24 MP one with room to spare) or 134 MP of 8-bit gray.
    max_decoded_bytes: int = Field(default=128 * 1024 * 1024, ge=1024 * 1024,
                                   le=2 * 1024 * 1024 * 1024)
    formats: tuple[ImageFormat, ...] = ("PNG", "JPEG", "WEBP", "GIF", "BMP")


BoxConvention = Literal["auto", "xywh-normalized", "xyxy-pixels", "xyxy-1000", "yxyx-1000"]


class RouteSettings(Strict):
    """One vision route: an OpenAI-compatible multimodal endpoint, or the local engine."""

    name: str = Field(pattern=ROUTE_NAME)
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
    thinking: Literal["enabled", "disabled"] | None = Field(
        default=None,
        description="Sent as thinking = {type = ...} (DeepSeek's switch); unset: not sent.",
    )
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
                and not is_loopback_url(self.base_url)
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


class LocalRouteSettings(Strict):
    min_confidence: float = Field(
        default=0.6, ge=0, le=1, description="Lines below this become uncertainties."
    )
    threads: int | None = Field(default=None, ge=1, le=64)
    layout: bool = Field(
        default=True,
        description="Type the page's regions (title, text, figure, table, ...) and read them "
                    "in order with the bundled layout model: about a quarter of an OCR "
                    "read's time more.",
    )


class VisionServeSettings(Strict):
    """``vision serve``: the eyes as an MCP server (stdio, or HTTP behind a bearer token)."""

    roots: tuple[Path, ...] = Field(
        default=(), description="Directories whose images `see` may read (also --root)."
    )
    allow_hard_links: bool = Field(
        default=False,
        description="Serve files with more than one hard link from the roots (a hard link "
                    "can name any file of its file system); the data directory's own files "
                    "are refused either way.",
    )
    token: Secret | None = Field(
        default=None, description="Bearer token of `vision serve --http` (a secret "
                                  "reference; else DEEPSEEK_EYES_VISION_TOKEN)."
    )
    host: str = Field(default="127.0.0.1", description="HTTP bind address.")
    port: int = Field(default=8768, ge=0, le=65535)
    allowed_hosts: tuple[str, ...] = Field(
        default=(), description="Extra Host header values accepted over HTTP (host:port)."
    )
    allowed_origins: tuple[str, ...] = Field(
        default=(), description="Extra Origin values accepted over HTTP (scheme://host:port)."
    )
    rate_limit_per_minute: int = Field(default=600, ge=1, le=100_000)
    # A data: URL carries the image base64-encoded (4/3 of image.max_bytes) plus JSON-RPC.
    max_body_bytes: int = Field(default=32 * 1024 * 1024, ge=1024, le=2 * 1024 * 1024 * 1024)
    max_listed_evidence: int = Field(
        default=1000, ge=1, le=100_000, description="Evidence records resources/list offers."
    )
    http_client_roots: bool = Field(
        default=False,
        description="Over HTTP, also serve the roots a client offers. Off: a remote client's "
                    "file:// roots name its own disk, not this one (stdio always honours them).",
    )


class DeepSeekRouteSettings(Strict):
    """The built-in ``deepseek`` vision route: a seeing DeepSeek model on the ``[llm]``
    upstream, with the ``[llm]`` key (no second key)."""

    enabled: bool = Field(
        default=True,
        description="Build the route when the [llm] key resolves (or the upstream takes "
        "none); off: never.",
    )
    model: str = Field(default="deepseek-flash", min_length=1, max_length=200)
    timeout: float = Field(default=60.0, gt=0, le=600)
    thinking: Literal["enabled", "disabled"] | None = Field(
        default="disabled",
        description="Sent as thinking = {type = ...}: evidence needs no reasoning tokens.",
    )


Delivery = Literal["auto", "evidence", "both"]


class VisionSettings(Strict):
    route: str | None = Field(default=None, description="The explicitly selected route.")
    delivery: Delivery = Field(
        default="auto",
        description="How images reach the final model: auto sends a seeing model the "
        "pixels and a blind one validated evidence; evidence always sends evidence text; "
        "both sends a seeing model the pixels and the evidence together.",
    )
    deepseek: DeepSeekRouteSettings = Field(default_factory=DeepSeekRouteSettings)
    route_priority: tuple[str, ...] = ()
    auto_detect: bool = Field(
        default=False,
        description="Also try the [llm] endpoint's models that declare both text and image "
        "input (llm.models entries, else their /models metadata), after every configured "
        "route.",
    )
    health_ttl: float = Field(default=300.0, ge=0, le=86400)
    failure_cooldown: float = Field(default=60.0, ge=0, le=86400)
    failover_attempts: int = Field(default=2, ge=0, le=16)
    probe: bool = True
    probe_ttl: float = Field(default=86400.0, ge=0, le=30 * 86400)
    attempts_max_rows: int = Field(default=50_000, ge=100, le=10_000_000)
    routes: tuple[RouteSettings, ...] = ()
    local: LocalRouteSettings = Field(default_factory=LocalRouteSettings)
    serve: VisionServeSettings = Field(default_factory=VisionServeSettings)

    @model_validator(mode="after")
    def _names(self) -> VisionSettings:
        seen: set[str] = set()
        for route in self.routes:
            if route.name in seen:
                raise PydanticCustomError(
                    "duplicate_route", "route name '{name}' is used twice", {"name": route.name}
                )
            seen.add(route.name)
        known = seen | {LOCAL_ROUTE, DEEPSEEK_ROUTE}
        for name in (self.route, *self.route_priority):
            if name is not None and name not in known:
                raise PydanticCustomError(
                    "unknown_route", "route '{name}' is not defined in vision.routes",
                    {"name": name},
                )
        return self
