"""Settings of the final model, the turn runtime and the OpenAI-compatible gateway."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import (
    Field,
    field_validator,
)

from deepseek_eyes.settings.base import (
    ENV_LLM_BASE_URL,
    OptionalSecret,
    SecretRef,
    Strict,
)
from deepseek_eyes.settings.vision import RouteSettings

__all__ = [
    "GatewaySettings", "LLMModelSettings", "LLMSettings", "ReasoningEffort", "RuntimeSettings",
]


#: The ``reasoning_effort`` values DeepSeek accepts (it maps them onto low, high and max).
ReasoningEffort = Literal["minimal", "low", "medium", "high", "xhigh", "max", "ultra"]


class LLMModelSettings(Strict):
    id: str = Field(min_length=1, max_length=200)
    input: tuple[Literal["text", "image"], ...] = ("text",)
    thinking: Literal["enabled", "disabled"] | None = Field(
        default=None,
        description="Sent as thinking = {type = ...} when a request names none; unset: the "
        "model's own default (DeepSeek's V4 models think by default).",
    )
    reasoning_effort: ReasoningEffort | None = Field(
        default=None, description="Sent when a request names none."
    )


def _default_llm_base_url() -> str:
    # With no settings file, the environment names the upstream (DEEPSEEK_BASE_URL).
    return os.environ.get(ENV_LLM_BASE_URL) or "https://api.deepseek.com"


class LLMSettings(Strict):
    """The final-answer endpoint (DeepSeek by default). Model names come from ``model``,
    ``models`` and the endpoint's ``/models``, never from a list in the code. Its
    image-capable models can serve vision when ``vision.auto_detect`` is on."""

    base_url: str = Field(
        default_factory=_default_llm_base_url,
        description="The upstream's base URL; when the file does not set it, "
                    "DEEPSEEK_BASE_URL does, else DeepSeek's own.",
    )
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
    max_retries: int = Field(
        default=2, ge=0, le=10,
        description="Extra attempts after a busy answer (429, 500, 502, 503, 504) or a "
        "connection failure, with backoff and Retry-After honoured.",
    )
    max_retry_after: float = Field(
        default=60.0, ge=0, le=600,
        description="Longest Retry-After honoured; a server asking for more is not retried.",
    )
    sight_probe: bool = Field(
        default=True,
        description="When the settings do not say whether a model takes images (a "
        "[[llm.models]] input), ask the model itself once with the pixel probe and keep the "
        "verdict for sight_ttl; off: decide from /models and the known-models table alone.",
    )
    sight_ttl: float = Field(
        default=86400.0, ge=60, le=30 * 86400,
        description="Seconds a learned verdict (a probe, an upstream's refusal of image "
        "parts) is kept before the model is asked again, so a model that gains sight is "
        "noticed.",
    )
    thinking_fallback: Literal["refuse", "disable"] = Field(
        default="refuse",
        description="A history whose tool-call messages lack reasoning we cannot restore, in "
        "thinking mode: refuse it (LLM_REASONING_MISSING), or send it with thinking disabled.",
    )

    @property
    def base_url_source(self) -> str:
        """What supplied :attr:`base_url`, for a message that says what to change."""
        if "base_url" in self.model_fields_set:
            return "the setting llm.base_url"
        if os.environ.get(ENV_LLM_BASE_URL):
            return f"the variable {ENV_LLM_BASE_URL}"
        return f"the default; set llm.base_url or {ENV_LLM_BASE_URL} to change it"

    def model_settings(self, model_id: str) -> LLMModelSettings | None:
        return next((m for m in self.models if m.id == model_id), None)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return RouteSettings._http_url(value) or value


class RuntimeSettings(Strict):
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
    tool_sources: tuple[Literal["look", "mcp", "terminal", "browser", "desktop"], ...] = Field(
        default=("look", "mcp"),
        description="Where the final model's tools come from; the terminal, the browser and "
                    "the desktop only when listed.",
    )
    tool_risk: Literal["all", "read-only"] = Field(
        default="all", description="read-only: offer only tools that read."
    )
    max_tools: int = Field(default=64, ge=1, le=512, description="Tools offered per model call.")
    max_tool_schema_tokens: int = Field(
        default=24_000, ge=256, le=400_000,
        description="Estimated tokens of the tool definitions offered per model call.",
    )
    tool_mode: Literal["native", "code", "both"] = Field(
        default="native",
        description="MCP tools as functions (native), or through Code Mode: tools_search "
        "and run_code, a Python program run in a bubblewrap sandbox (code), or both; "
        "mcp.servers[].tool_mode overrides it per server.",
    )
    code_timeout: float = Field(
        default=30.0, gt=0, le=600,
        description="Seconds a Code Mode program may run (its nested tool calls included).",
    )
    code_cpu_seconds: int = Field(default=10, ge=1, le=600,
                                  description="CPU seconds a Code Mode program may use.")
    code_memory_mb: int = Field(default=512, ge=64, le=16_384,
                                description="Address space of a Code Mode program, MiB.")
    code_max_output_bytes: int = Field(
        default=16_384, ge=256, le=1_048_576,
        description="Bytes a Code Mode program may print (stdout; stderr alike); past "
        "them it is stopped.",
    )
    approval_timeout: float = Field(
        default=300.0, gt=0, le=86_400,
        description="Seconds a plan that needs approval waits for a person.",
    )
    native_history_images: int = Field(
        default=0, ge=0, le=64,
        description="Native-vision turns: earlier images sent again as pixels (the most "
        "recent first); the others become a one-line reference.",
    )
    history_evidence: Literal["full", "pointer"] = Field(
        default="full",
        description="Images of earlier messages: their full evidence where it was (a stable, "
        "cached request prefix), or a pointer the model can look at again (fewer tokens).",
    )


    @field_validator("tool_sources")
    @classmethod
    def _unique_sources(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("each tool source may be listed once")
        return value


class GatewaySettings(Strict):
    """``deepseek-eyes serve``: the OpenAI-compatible HTTP gateway."""

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    api_key: OptionalSecret = SecretRef(env="DEEPSEEK_EYES_GATEWAY_KEY")
    max_body_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024,
        description="Bytes a whole request body may hold, base64 images included.",
    )
    max_text_bytes: int = Field(
        default=8 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024,
        description="Bytes of a request body that are not base64 image data (the text, the "
        "JSON around it): what a body costs in memory once parsed grows with these.",
    )
    max_body_nodes: int = Field(
        default=250_000, ge=1000, le=100_000_000,
        description="JSON values a request body may hold, counted before it is parsed.",
    )
    allow_image_urls: bool = Field(
        default=True, description="Fetch http(s) image_url parts from public addresses, as "
        "OpenAI's API does (off: data URLs only)."
    )
    image_url_timeout: float = Field(default=10.0, gt=0, le=120)
    allow_private_image_urls: bool = Field(
        default=False,
        description="Also fetch image URLs on loopback/private addresses (SSRF risk).",
    )
    max_concurrent_turns: int = Field(default=64, ge=1, le=4096)
    claude_models: dict[str, str] = Field(
        default_factory=lambda: {"claude-opus*": "deepseek-v4-pro", "claude*": "deepseek-flash"},
        description="The DeepSeek model a claude-* name asks for on /v1/messages (patterns, "
        "first match wins; other names pass as they are).",
    )
    anthropic_ping_seconds: float = Field(
        default=5.0, ge=0.05, le=60,
        description="On a streamed /v1/messages answer, seconds without an event before a "
        "ping is sent (Anthropic's clients expect them while the model thinks).",
    )
    continue_by_history: bool = Field(
        default=True,
        description="A request with no session header whose history extends a stored "
        "conversation (of the same gateway key) continues that session.",
    )
    idempotency_ttl: float = Field(
        default=86400.0, ge=60, le=30 * 86400,
        description="Seconds an answer is kept for replay under its Idempotency-Key.",
    )
    allowed_hosts: tuple[str, ...] = Field(
        default=(), description="Extra Host header values accepted (host:port, host:*); "
        "loopback names always are on a loopback bind."
    )
    allowed_origins: tuple[str, ...] = Field(
        default=(), description="Origins of web pages that may call the gateway "
        "(scheme://host:port); none by default, so no web page can."
    )
    rate_limit_per_minute: int = Field(
        default=1200, ge=1, le=1_000_000,
        description="Requests per minute per key (per client address without a key).",
    )
    body_timeout: float = Field(
        default=30.0, gt=0, le=600,
        description="Seconds a request body may take to arrive in full (408 after).",
    )
    drain_timeout: float = Field(
        default=30.0, gt=0, le=3600,
        description="At SIGTERM or SIGINT, seconds running requests may go on (from when "
        "the gateway stops taking work, after drain_delay) before they are ended with "
        "GATEWAY_SHUTTING_DOWN (a second signal ends them at once).",
    )
    drain_delay: float = Field(
        default=5.0, ge=0, le=300,
        description="At SIGTERM, seconds /readyz answers 503 while every other request is "
        "still served, so a load balancer takes the gateway out first (at least its check "
        "interval times its fall count); skipped when /readyz was not asked in the last "
        "60 s (no balancer watches) and on SIGINT. 0: stop taking work at once.",
    )
    server_timing: bool = Field(
        default=False,
        description="Answer every request with a Server-Timing header: its time by stage "
        "(http, parse, admission, vision, store, prepare, upstream, answer, seal), to the "
        "first chunk for a stream.",
    )
    readiness_timeout: float = Field(
        default=2.0, gt=0, le=60,
        description="Seconds each /readyz check (database, upstream, shared state) may take "
        "before it fails with GATEWAY_CHECK_TIMEOUT.",
    )
    readiness_upstream_ttl: float = Field(
        default=15.0, ge=0, le=3600,
        description="Seconds /readyz reuses its verdict on the upstream (one GET /models, "
        "never a model call); a failed verdict is checked again after 2 s at most.",
    )
    metrics: bool = Field(
        default=True,
        description="Serve Prometheus metrics at /metrics (behind the gateway key when one "
        "is set).",
    )
    metrics_open_on_loopback: bool = Field(
        default=False,
        description="Let /metrics be read without the gateway key from a loopback address "
        "(a scraper on this machine). Leave off when a proxy on this machine forwards "
        "outside traffic: it arrives from loopback too.",
    )
