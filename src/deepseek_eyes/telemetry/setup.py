"""Turning traces on for a process: when, where to, and stopping them within a bound.

Traces are on when ``[telemetry] enabled`` is true or an OTLP endpoint variable is set
(``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``), and off,
whatever else says, under ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``.
Where to: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else ``[telemetry] endpoint``, else
``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``, else the exporter's default
(``http://localhost:4318/v1/traces``): the standard variables' order, with the file's
endpoint where a traces-specific setting belongs. The exporter reads its headers
(``OTEL_EXPORTER_OTLP_HEADERS``) and TLS variables itself; none of them passes through here.

Spans are batched and exported off the request path (the SDK's batch processor, its own
thread); the export's timeout is bounded (:data:`EXPORT_TIMEOUT_S` unless
``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` / ``OTEL_EXPORTER_OTLP_TIMEOUT`` says), so a
collector that is down delays the stop of ``serve`` by that much at most, never a request.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from deepseek_eyes.telemetry.tracing import install, uninstall

__all__ = ["EXPORT_TIMEOUT_S", "TraceSettings", "start", "stop", "wanted"]

#: Seconds one export may take unless the standard variables say.
EXPORT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class TraceSettings:
    """``[telemetry]`` as this package needs it (it is below the settings package)."""

    enabled: bool = False
    endpoint: str | None = None
    service_name: str = "deepseek-eyes"
    sample_ratio: float = 1.0


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def wanted(settings: TraceSettings, environ: Mapping[str, str] | None = None) -> bool:
    """Whether traces should be on for these settings and this environment."""
    env = os.environ if environ is None else environ
    if _true(env.get("OTEL_SDK_DISABLED")):
        return False
    if (env.get("OTEL_TRACES_EXPORTER") or "").strip().lower() == "none":
        return False
    return settings.enabled or bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                                    or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def _endpoint(settings: TraceSettings, env: Mapping[str, str]) -> str | None:
    """The traces URL, or None for the exporter's own resolution (the generic variable,
    then its default)."""
    return env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or settings.endpoint or None


def _timeout(env: Mapping[str, str]) -> float | None:
    if env.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or env.get("OTEL_EXPORTER_OTLP_TIMEOUT"):
        return None  # the exporter reads them
    return EXPORT_TIMEOUT_S


def start(settings: TraceSettings, environ: Mapping[str, str] | None = None) -> bool:
    """Install a tracer provider exporting over OTLP/HTTP when :func:`wanted`; returns
    whether traces are on."""
    env = os.environ if environ is None else environ
    if not wanted(settings, env):
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    name = env.get("OTEL_SERVICE_NAME") or settings.service_name
    provider = TracerProvider(
        resource=Resource.create({"service.name": name}),
        sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)),
    )
    exporter = OTLPSpanExporter(endpoint=_endpoint(settings, env), timeout=_timeout(env))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    install(provider)
    return True


def stop() -> None:
    """Stop recording, export what is batched (bounded by the export timeout), shut down."""
    provider = uninstall()
    if provider is not None:
        provider.shutdown()
