"""OpenTelemetry traces: off unless configured, and then spans with no secret and no content.

The one public surface every layer imports (:mod:`.tracing`: whether traces are on, a span,
the trace context for an outgoing request) and the attribute names it writes
(:mod:`.conventions`: the GenAI and MCP semantic conventions in their latest experimental
form). Foundation: it knows nothing of the runtime; ``serve`` turns it on from ``[telemetry]``
and the standard ``OTEL_*`` variables (:func:`.setup.start`).
"""

from deepseek_eyes.telemetry.tracing import (
    active,
    client_span,
    detached_span,
    fail,
    install,
    server_span,
    span,
    trace_meta,
    uninstall,
)

__all__ = [
    "active",
    "client_span",
    "detached_span",
    "fail",
    "install",
    "server_span",
    "span",
    "trace_meta",
    "uninstall",
]
