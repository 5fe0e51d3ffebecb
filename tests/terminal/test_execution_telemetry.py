"""What operations see of the terminal: an execution's span (the policy's verdict and the
outcome, never the command line or its output) and the approvals gauge's count."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deepseek_eyes import telemetry
from helpers import recorded_spans
from terminal.support import ServiceFactory

pytestmark = pytest.mark.anyio


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with recorded_spans() as exporter:
        yield exporter


async def test_an_execution_is_a_span_without_its_command_or_output(
        make_service: ServiceFactory, spans: InMemorySpanExporter) -> None:
    service = make_service(mode="confirm")
    plan = service.plan(argv=["touch", "secret-name.txt"])
    assert service.waiting_count() == 1  # the approvals gauge: one plan waits
    service.approve(plan["session_id"], plan["plan_id"], via="console", by="tester")
    assert service.waiting_count() == 0
    with telemetry.span("turn"):
        receipt = await service.execute(plan["session_id"], plan["plan_id"])
    assert receipt["status"] == "completed"
    turn, execute = sorted(spans.get_finished_spans(), key=lambda s: s.name != "turn")
    assert execute.name == "terminal.execute"
    assert execute.parent is not None
    assert execute.parent.span_id == turn.context.span_id
    attrs = dict(execute.attributes or {})
    assert attrs["deepseek_eyes.terminal.plan_id"] == plan["plan_id"]
    assert attrs["deepseek_eyes.terminal.approved"] is True
    assert attrs["deepseek_eyes.terminal.status"] == "completed"
    assert attrs["process.exit.code"] == 0
    text = json.dumps(attrs)
    for leak in ("secret-name", "touch"):
        assert leak not in text
