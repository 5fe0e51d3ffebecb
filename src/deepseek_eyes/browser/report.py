"""Report v2: what a browser session did, as JSON and as text a person reads.

Steps (each tool call: arguments with typed secrets reduced to a length and a hash, the
state it was planned on and the state it ended in, its outcome and code, its duration),
the states seen, every assertion with expected and actual values, every screenshot by its
hashes, and timing. A report never holds page text beyond what an assertion compared and
the titles of the states, and never a screenshot's bytes (only their hashes; the bytes are
in the blob store).

What a report must never hold, and how: text typed into a field is kept only when the
handler resolved the field and found it not secret (a password, one-time-code or card
field is known by its type and ``autocomplete``); a call refused before that — a stale
state id, an unknown ref, a read-only field — keeps only the text's length and keyed hash,
whatever field it named. Every URL (steps, states, arguments) is written through
:func:`deepseek_eyes.untrusted.redact_url`. A prompt dialog's answer is always hashed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deepseek_eyes.toolkit.report import hidden_text, report_text, verdict
from deepseek_eyes.untrusted import escape_controls, quote, redact_url, redact_url_part

__all__ = ["MAX_STEPS", "REPORT_SCHEMA", "Assertion", "ReportRecorder", "Step", "hidden_text",
           "redact_arguments"]

REPORT_SCHEMA = "deepseekeyes.browser.report.v2"
MAX_STEPS = 2000
MAX_ASSERTIONS = 1000
MAX_SCREENSHOTS = 500
#: (tool, argument) whose text is typed into a field: kept only when the field is known
#: to be plain; and those always hashed (a prompt may ask for a password).
_TYPED = frozenset({("browser_type", "text"), ("browser_assert", "value")})
_ALWAYS_HIDDEN = frozenset({("browser_dialog", "text")})
MAX_ARGUMENT_CHARS = 300


@dataclass(frozen=True)
class Step:
    index: int
    tool: str
    arguments: dict[str, Any]
    state_before: str | None
    state_after: str | None
    outcome: str  # ok | refused | error
    code: str | None
    url: str | None
    started_at: float
    duration_ms: int
    changes: dict[str, int] = field(default_factory=dict)
    screenshot: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "tool": self.tool, "arguments": self.arguments,
                "state_before": self.state_before, "state_after": self.state_after,
                "outcome": self.outcome, "code": self.code, "url": self.url,
                "started_at": round(self.started_at, 3), "duration_ms": self.duration_ms,
                "changes": self.changes, "screenshot": self.screenshot}


@dataclass(frozen=True)
class Assertion:
    kind: str
    expected: str
    actual: str
    passed: bool | None  # None: visual evidence, for the model to judge
    state_id: str | None
    step: int

    def to_dict(self) -> dict[str, Any]:  # actual may be page text: no raw controls
        return {"kind": self.kind, "expected": escape_controls(self.expected),
                "actual": escape_controls(self.actual),
                "passed": self.passed, "state_id": self.state_id, "step": self.step}


def redact_arguments(tool: str, arguments: Mapping[str, Any], *,
                     typed_in_clear: bool = False) -> dict[str, Any]:
    """Arguments as a report keeps them: typed text becomes its length and keyed hash
    unless ``typed_in_clear`` (its field was resolved and is not secret); URLs are
    redacted; strings are escaped and cut."""
    out: dict[str, Any] = {}
    url_expected = arguments.get("kind") == "url"
    for raw_key, value in list(arguments.items())[:20]:
        key = escape_controls(str(raw_key)[:40])
        typed = (tool, key) in _TYPED
        if isinstance(value, str) and ((tool, key) in _ALWAYS_HIDDEN
                                       or (typed and not typed_in_clear)):
            out[key] = hidden_text(value)
        elif isinstance(value, str) and key == "url":
            out[key] = escape_controls(redact_url(value, limit=MAX_ARGUMENT_CHARS))
        elif isinstance(value, str) and key == "expected" and url_expected:
            out[key] = escape_controls(redact_url_part(value, limit=MAX_ARGUMENT_CHARS))
        elif isinstance(value, str):
            out[key] = escape_controls(value[:MAX_ARGUMENT_CHARS])
        elif isinstance(value, (int, float, bool)) or value is None:
            out[key] = value
        elif typed and not typed_in_clear:
            out[key] = hidden_text(str(value))
        elif isinstance(value, list):
            out[key] = [escape_controls(str(v)[:MAX_ARGUMENT_CHARS]) for v in value[:20]]
        else:
            out[key] = escape_controls(str(value)[:MAX_ARGUMENT_CHARS])
    return out


class ReportRecorder:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.started_at = clock()
        self._mono = time.monotonic()
        self.steps: list[Step] = []
        self.assertions: list[Assertion] = []
        self.screenshots: list[dict[str, Any]] = []
        self.dropped = {"steps": 0, "assertions": 0, "screenshots": 0}

    def now(self) -> float:
        return self._clock()

    def add_step(self, step: Step) -> None:
        if len(self.steps) < MAX_STEPS:
            self.steps.append(step)
        else:
            self.dropped["steps"] += 1

    def add_assertion(self, assertion: Assertion) -> None:
        if len(self.assertions) < MAX_ASSERTIONS:
            self.assertions.append(assertion)
        else:
            self.dropped["assertions"] += 1

    def add_screenshot(self, summary: dict[str, Any]) -> None:
        if len(self.screenshots) < MAX_SCREENSHOTS:
            self.screenshots.append(summary)
        else:
            self.dropped["screenshots"] += 1

    @property
    def next_index(self) -> int:
        return len(self.steps) + self.dropped["steps"] + 1

    def to_dict(self, states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        passed = sum(1 for a in self.assertions if a.passed is True)
        failed = sum(1 for a in self.assertions if a.passed is False)
        outcomes: dict[str, int] = {}
        for step in self.steps:
            outcomes[step.outcome] = outcomes.get(step.outcome, 0) + 1
        return {
            "schema": REPORT_SCHEMA,
            "started_at": round(self.started_at, 3),
            "generated_at": round(self._clock(), 3),
            "summary": {"steps": len(self.steps) + self.dropped["steps"],
                        "outcomes": outcomes, "states": len(states),
                        "assertions": {"passed": passed, "failed": failed,
                                       "evidence": len(self.assertions) - passed - failed},
                        "screenshots": len(self.screenshots)},
            "timing": {"elapsed_ms": int((time.monotonic() - self._mono) * 1000),
                       "in_steps_ms": sum(s.duration_ms for s in self.steps)},
            "steps": [s.to_dict() for s in self.steps],
            "states": [dict(s) for s in states],
            "assertions": [a.to_dict() for a in self.assertions],
            "screenshots": list(self.screenshots),
            "dropped": {k: v for k, v in self.dropped.items() if v},
        }

    def to_text(self, states: Sequence[Mapping[str, Any]]) -> str:
        data = self.to_dict(states)
        summary = data["summary"]
        head = [
            f"browser report ({REPORT_SCHEMA})",
            f"{summary['steps']} steps, {summary['states']} states, assertions "
            f"{summary['assertions']['passed']} passed / {summary['assertions']['failed']} "
            f"failed / {summary['assertions']['evidence']} visual, "
            f"{summary['screenshots']} screenshots, {data['timing']['in_steps_ms']} ms in steps",
        ]
        lines: list[str] = []  # assertions quote page text: the whole list is fenced
        for step in self.steps:
            arguments = ", ".join(f"{k}={v!r}" for k, v in step.arguments.items()
                                  if k != "state_id")
            code = f" {step.code}" if step.code else ""
            states_moved = f"{step.state_before or '-'} → {step.state_after or '-'}"
            url = f" at {quote(step.url, 200)}" if step.url else ""
            lines.append(f"{step.index:>3}. {step.tool}({arguments[:160]}) {step.outcome}{code}"
                         f" [{states_moved}] {step.duration_ms} ms{url}")
        lines.extend(f"  {verdict(a.passed)} {a.kind}: expected {quote(a.expected, 200)}, got "
                     f"{quote(a.actual, 160)} (step {a.step})" for a in self.assertions)
        lines.extend(f"  screenshot sha256:{shot['sha256'][:16]} pixels "
                     f"{shot['pixel_sha256'][:16]} {shot['width']}x{shot['height']} "
                     f"({shot.get('state_id')})" for shot in self.screenshots)
        return report_text(head, lines)
