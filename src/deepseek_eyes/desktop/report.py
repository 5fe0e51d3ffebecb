"""Report v2 of a desktop session: steps, states, assertions, screenshots, timing.

Typed text is never kept: a ``text`` argument becomes its length and a keyed hash
(:func:`deepseek_eyes.untrusted.secret_digest`; a desktop cannot tell a password field from
any other as reliably as a web page, and a plain SHA-256 of a short password is undone by
trying candidates). Screenshots appear by their hashes only; the text form fences what
applications said.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deepseek_eyes.desktop.state import StateSummary
from deepseek_eyes.toolkit.report import hidden_text, report_text, verdict
from deepseek_eyes.untrusted import quote

__all__ = ["REPORT_SCHEMA", "Assertion", "ReportRecorder", "Step", "redact_arguments"]

REPORT_SCHEMA = "deepseekeyes.desktop.report.v2"
MAX_STEPS = 2000
MAX_ASSERTIONS = 1000


def redact_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in list(arguments.items())[:20]:
        if key == "text" and isinstance(value, str):
            out[key] = hidden_text(value)
        elif isinstance(value, (int, float, bool)) or value is None:
            out[key] = value
        else:
            out[key] = str(value)[:300]
    return out


@dataclass(frozen=True)
class Step:
    index: int
    tool: str
    arguments: dict[str, Any]
    state_before: str | None
    state_after: str | None
    outcome: str  # ok | refused | error
    code: str | None
    duration_ms: int
    screenshot: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "tool": self.tool, "arguments": self.arguments,
                "state_before": self.state_before, "state_after": self.state_after,
                "outcome": self.outcome, "code": self.code, "duration_ms": self.duration_ms,
                "screenshot": self.screenshot}


@dataclass(frozen=True)
class Assertion:
    kind: str
    expected: str
    actual: str
    passed: bool | None  # None: visual evidence, for the model to judge
    state_id: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "expected": self.expected, "actual": self.actual,
                "passed": self.passed, "state_id": self.state_id}


class ReportRecorder:
    def __init__(self) -> None:
        self.started = time.time()
        self.steps: list[Step] = []
        self.assertions: list[Assertion] = []
        self.screenshots: list[str] = []

    def add_step(self, step: Step) -> None:
        if len(self.steps) < MAX_STEPS:
            self.steps.append(step)
        if step.screenshot and step.screenshot not in self.screenshots:
            self.screenshots.append(step.screenshot)

    def add_assertion(self, assertion: Assertion) -> None:
        if len(self.assertions) < MAX_ASSERTIONS:
            self.assertions.append(assertion)

    def to_dict(self, states: Sequence[StateSummary]) -> dict[str, Any]:
        outcomes = [s.outcome for s in self.steps]
        passed = [a.passed for a in self.assertions]
        return {"schema": REPORT_SCHEMA, "started_at": round(self.started, 3),
                "duration_ms": int((time.time() - self.started) * 1000),
                "steps": [s.to_dict() for s in self.steps], "states": list(states[-200:]),
                "assertions": [a.to_dict() for a in self.assertions],
                "screenshots": self.screenshots[-500:],
                "summary": {"steps": len(outcomes), "refused": outcomes.count("refused"),
                            "errors": outcomes.count("error"),
                            "assertions_passed": passed.count(True),
                            "assertions_failed": passed.count(False)}}

    def text(self, states: Sequence[StateSummary]) -> str:
        data = self.to_dict(states)
        head = f"desktop report ({REPORT_SCHEMA}): {data['summary']}"
        lines = [f"  {step.index}. {step.tool} {step.state_before}->{step.state_after} "
                  f"{step.outcome}{' ' + step.code if step.code else ''} {step.duration_ms} ms"
                  for step in self.steps[-50:]]
        lines.extend(f"  {verdict(a.passed)} {a.kind}: expected {quote(a.expected, 200)}, "
                     f"actual {quote(a.actual, 200)}" for a in self.assertions[-50:])
        return report_text([head], lines)
