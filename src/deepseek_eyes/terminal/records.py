"""The shapes of the terminal's JSON contracts: plans, sessions, receipts and their heads.

These are what the MCP tools, the HTTP console API and the CLI hand out, and what the
receipt log stores and signs, so they are TypedDicts (plain JSON on the wire, checked by
mypy in the code that builds and reads them) rather than classes. Their keys are API:
renaming one breaks clients and, for receipts and heads, every stored signature.

A receipt or head read back from a file is checked at the top level by
``receipts.chain`` and then by its signature; a signature that verifies under our keyring
means we wrote it, which is why the nested shapes below are trusted after verification.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

__all__ = [
    "Approval",
    "ControlState",
    "DecisionView",
    "Limits",
    "PlanView",
    "Receipt",
    "ReceiptCommand",
    "ReceiptHead",
    "ReceiptStream",
    "ResolutionView",
    "SandboxView",
    "SessionClosed",
    "SessionOpened",
    "SessionView",
    "Signature",
]


class DecisionView(TypedDict):
    """``policy.engine.Decision.to_dict``: the verdict on one command."""

    mode: str
    allowed: bool
    requires_approval: bool
    risk: str
    effects: list[str]
    reasons: list[str]
    network: bool
    writes: bool


class ResolutionView(TypedDict):
    """``policy.engine.Resolution.to_dict``: what a plan resolved to."""

    cwd: str
    executable: str
    executable_sha256: str
    paths: list[list[str]]


class SandboxView(TypedDict):
    kind: str
    network: bool
    workspace_writable: bool


class Limits(TypedDict):
    timeout_s: float
    max_output_bytes: int


class Approval(TypedDict):
    """Who approved or denied a plan. A receipt's copy also says whether it was needed
    (``required``); an unapproved plan's receipt has only ``approved`` and ``required``."""

    approved: bool
    via: NotRequired[str]
    by: NotRequired[str]
    at: NotRequired[str]
    required: NotRequired[bool]


class PlanView(TypedDict):
    """``execution.sessions.Plan.to_dict``: a plan as clients and the console see it."""

    schema: str
    schema_version: str
    plan_id: str
    session_id: str
    state: str
    argv: list[str]
    argv_visible: list[str]
    display: str
    cwd: str | None
    executable: str | None
    executable_sha256: str | None
    decision: DecisionView
    limits: Limits
    approval: Approval | None
    receipt_id: str | None
    plan_hash: str
    created_at: float


class SessionView(TypedDict):
    session_id: str
    created_at: float
    idle_s: float
    active_plan: str | None
    paused: bool
    plans: list[PlanView]
    receipts: list[str]


class SessionOpened(TypedDict):
    session_id: str
    mode: str
    idle_timeout_s: float


class SessionClosed(TypedDict):
    session_id: str
    closed: bool
    reason: str


class ControlState(TypedDict):
    """The answer to pause, resume, a cancel with nothing to wait on, and a
    non-waiting execute."""

    session_id: str
    plan_id: str | None
    state: str


class Signature(TypedDict):
    alg: str
    key_id: str
    value: str


class ReceiptCommand(TypedDict):
    argv: list[str]
    display: str
    cwd: str
    executable: str
    executable_sha256: str
    env_names: list[str]


class ReceiptStream(TypedDict):
    text: str
    bytes: int
    sha256: str
    truncated: bool


class Receipt(TypedDict):
    """A signed receipt (schema ``deepseek-eyes/terminal-receipt`` 1.0). ``sequence``,
    ``previous_hash`` and ``signature`` are added by the log when it appends the body;
    ``source_receipt_hash`` only a share export has."""

    schema: str
    schema_version: str
    receipt_id: str
    sequence: NotRequired[int]
    previous_hash: NotRequired[str | None]
    session_id: str
    plan_id: str
    plan_hash: str
    mode: str
    command: ReceiptCommand
    policy: DecisionView
    approval: Approval
    sandbox: SandboxView
    limits: Limits
    started_at: str
    ended_at: str
    duration_ms: float
    status: str
    exit_code: int | None
    signal: str | None
    stdout: ReceiptStream
    stderr: ReceiptStream
    redactions: int
    sharing_redacted: bool
    source_receipt_hash: NotRequired[str]
    signature: NotRequired[Signature]


class ReceiptHead(TypedDict):
    """The signed head of a receipt chain (schema ``deepseek-eyes/terminal-receipt-head``);
    ``signature`` is missing only while it is being signed."""

    schema: str
    schema_version: str
    sequence: int
    last_hash: str | None
    first_hash: str | None
    written_at: str
    signature: NotRequired[Signature]
