"""Spans, when traces are on; nothing at all when they are off.

Decisions a newcomer would otherwise undo:

* **Off costs one global read.** Every helper here first reads the module's tracer and,
  when there is none, returns a shared no-op at once: no OpenTelemetry import (importing
  its API costs ~160 ms, more than the gateway's whole start), no object built, no context
  touched. ``bench/bench_tracing_off.py`` measures a gateway turn with tracing off against
  one with the helpers bypassed.
* **Our own tracer provider, not the process-wide one.** :func:`install` keeps the provider
  here; OpenTelemetry's global provider is left alone, so a library that instruments
  itself (the ``mcp`` SDK makes "MCP send …" spans) does not start exporting because we
  did. Our spans still become the current span of the context, so such a library's
  non-recording spans carry our trace id, and the trace context it injects is ours.
* **No exception text.** A span that ends in an exception records ``error.type`` (our
  stable code, else the exception's class name) and an error status with no description:
  an exception message may quote a prompt, a path or a key, and attributes are exported to
  a collector outside this machine's trust.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span as _OtelSpan
    from opentelemetry.trace import Tracer

__all__ = [
    "AttributeValue",
    "Attributes",
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

AttributeValue = str | bool | int | float | list[str]
Attributes = Mapping[str, AttributeValue | None]
Kind = Literal["internal", "client", "server"]

_TRACER: Tracer | None = None
_PROVIDER: TracerProvider | None = None
_INSTRUMENTATION = "deepseek_eyes"


def active() -> bool:
    """Whether traces are being recorded (a tracer is installed)."""
    return _TRACER is not None


def install(provider: TracerProvider) -> None:
    """Record spans through ``provider`` from now on (``serve`` at start; tests)."""
    global _TRACER, _PROVIDER
    _PROVIDER = provider
    _TRACER = provider.get_tracer(_INSTRUMENTATION)


def uninstall() -> TracerProvider | None:
    """Stop recording; returns the provider that was installed (to flush or shut down)."""
    global _TRACER, _PROVIDER
    provider, _PROVIDER, _TRACER = _PROVIDER, None, None
    return provider


def _clean(attributes: Attributes | None) -> dict[str, AttributeValue]:
    return {k: v for k, v in (attributes or {}).items() if v is not None}


def _kind(kind: Kind) -> Any:
    from opentelemetry.trace import SpanKind

    return {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT,
            "server": SpanKind.SERVER}[kind]


def fail(current: _OtelSpan | None, exc: BaseException | str) -> None:
    """Mark ``current`` failed with ``error.type`` (our code, else the class name) and no
    description. ``exc`` may be the code itself."""
    if current is None:
        return
    from opentelemetry.trace import Status, StatusCode

    if isinstance(exc, str):
        error_type = exc
    else:
        code = getattr(exc, "code", None)
        error_type = code if isinstance(code, str) else type(exc).__qualname__
    current.set_attribute("error.type", error_type)
    current.set_status(Status(StatusCode.ERROR))


@contextlib.contextmanager
def _recorded(tracer: Tracer, name: str, kind: Kind, attributes: Attributes | None,
              context: Any = None) -> Iterator[_OtelSpan]:
    with tracer.start_as_current_span(
            name, context=context, kind=_kind(kind), attributes=_clean(attributes),
            record_exception=False, set_status_on_exception=False) as current:
        try:
            yield current
        except BaseException as exc:
            fail(current, exc)
            raise


def span(name: str, attributes: Attributes | None = None, *,
         kind: Kind = "internal") -> contextlib.AbstractContextManager[_OtelSpan | None]:
    """A span around the block, the current one inside it (None and nothing when off)."""
    tracer = _TRACER
    if tracer is None:
        return contextlib.nullcontext()
    return _recorded(tracer, name, kind, attributes)


def client_span(name: str, attributes: Attributes | None = None,
                ) -> contextlib.AbstractContextManager[_OtelSpan | None]:
    """:func:`span` of kind client (a call to another service)."""
    return span(name, attributes, kind="client")


def server_span(name: str, attributes: Attributes | None, headers: Mapping[str, str],
                ) -> contextlib.AbstractContextManager[_OtelSpan | None]:
    """A server span around an incoming request, continuing the caller's trace when its
    ``traceparent`` (W3C) is valid."""
    tracer = _TRACER
    if tracer is None:
        return contextlib.nullcontext()
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = TraceContextTextMapPropagator().extract(headers)
    return _recorded(tracer, name, "server", attributes, context)


def detached_span(name: str, attributes: Attributes | None = None, *,
                  kind: Kind = "client") -> _OtelSpan | None:
    """A started span that is *not* made current (the caller ends it): for work whose
    start and end are in different frames, such as a stream read across ``yield``\\ s."""
    tracer = _TRACER
    if tracer is None:
        return None
    return tracer.start_span(name, kind=_kind(kind), attributes=_clean(attributes),
                             record_exception=False, set_status_on_exception=False)


def trace_meta() -> dict[str, Any] | None:
    """The current span's W3C trace context (``traceparent``, and ``tracestate`` when
    there is one) for an outgoing request's ``params._meta``, as the MCP conventions
    carry it; None when traces are off or no span is current."""
    if _TRACER is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, Any] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier or None
