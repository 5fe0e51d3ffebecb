"""``[telemetry]``: OpenTelemetry traces, off unless configured.

Traces are exported over OTLP/HTTP (protobuf) when ``enabled`` is true or when the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` variables are set
(``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none`` turn them off whatever the
file says). The endpoint in the file may not carry credentials (user info or a query): an
exporter's headers, such as an authorization token, come from ``OTEL_EXPORTER_OTLP_HEADERS``
only, read by the exporter itself, so a token never reaches this file.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from deepseek_eyes.settings.base import Strict

__all__ = ["TelemetrySettings"]


class TelemetrySettings(Strict):
    """OpenTelemetry traces of the gateway (``serve``)."""

    enabled: bool = Field(
        default=False,
        description="Export traces over OTLP/HTTP even when no OTEL_EXPORTER_OTLP_* endpoint "
        "variable is set (then to endpoint, or the exporter's default, "
        "http://localhost:4318/v1/traces).",
    )
    endpoint: str | None = Field(
        default=None,
        description="The OTLP/HTTP traces URL (http://host:4318/v1/traces); "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT wins over it. No credentials: headers come "
        "from OTEL_EXPORTER_OTLP_HEADERS.",
    )
    service_name: str = Field(
        default="deepseek-eyes", min_length=1, max_length=100,
        description="The service.name resource attribute (OTEL_SERVICE_NAME wins over it).",
    )
    sample_ratio: float = Field(
        default=1.0, ge=0, le=1,
        description="The share of new traces recorded (parent-based: a request that "
        "arrives with a sampled traceparent is always recorded).",
    )

    @field_validator("endpoint")
    @classmethod
    def _plain_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PydanticCustomError("telemetry_endpoint", "must be an http(s) URL")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise PydanticCustomError(
                "telemetry_endpoint",
                "may not carry credentials, a query or a fragment (put headers in "
                "OTEL_EXPORTER_OTLP_HEADERS)")
        return value
