"""The terminal's tools, described once: names, MCP annotations, risk, and the runtime's face.

Both the terminal MCP server (:mod:`~deepseek_eyes.terminal.transport.server`) and the
runtime's ``terminal`` source read this table. :data:`ANNOTATIONS` names every tool the MCP
server registers and its truthful hints: only the plan and the reads are read-only (a plan
records intent and changes nothing outside the server); execute, run, cancel and closing a
session are destructive and open-world; approving, denying, pausing and opening change only
the server's own state.

:data:`RUNTIME_TOOLS` is the subset the runtime offers its model, under the same names and
argument names, with the same hints and ``exec`` risk for what runs a command. It is a
narrower face, not a copy: no ``terminal_approve`` or ``terminal_deny`` (a person approves,
through the turn's approver), ``session_id`` is optional (the conversation's own session),
and the runtime always waits. The MCP server keeps its typed functions, whose signatures
the SDK turns into the published schemas and validates (docstrings are the descriptions).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deepseek_eyes.toolkit.spec import READ, Annotations, ToolDef

__all__ = ["ANNOTATIONS", "RUNTIME_TOOLS", "RUNTIME_TOOL_NAMES"]

_STATE = Annotations(read_only=False, destructive=False, idempotent=False, open_world=False)
_RUN = Annotations(read_only=False, destructive=True, idempotent=False, open_world=True)

ANNOTATIONS: Mapping[str, Annotations] = {
    "terminal_plan": READ,
    "terminal_approve": _STATE,
    "terminal_deny": _STATE,
    "terminal_execute": _RUN,
    "terminal_run": _RUN,
    "terminal_cancel": _RUN,
    "terminal_pause": _STATE,
    "terminal_resume": _STATE,
    "terminal_session_open": _STATE,
    "terminal_session_close": _RUN,
    "terminal_session_status": READ,
    "terminal_receipt_get": READ,
    "terminal_receipt_share": READ,
    "terminal_advise": READ,
}

_COMMAND: dict[str, Any] = {
    "argv": {"type": "array", "items": {"type": "string"},
             "description": "The command as an argv list (preferred)."},
    "command": {"type": "string",
                "description": "A command string, split WITHOUT shell features (no pipes, "
                               "redirections, ;, &&, $VAR, globs)."},
    "cwd": {"type": "string", "description": "Working directory inside the workspace."},
    "timeout_s": {"type": "number", "exclusiveMinimum": 0,
                  "description": "Seconds before the process group is killed."},
}
_SESSION: dict[str, Any] = {"session_id": {
    "type": "string", "description": "A terminal session of this conversation (default: its own)."}}


def _runtime(name: str, description: str, parameters: Mapping[str, Any]) -> ToolDef:
    hints = ANNOTATIONS[name]
    # What runs a command is "exec" to the runtime's risk gate, more than a "write".
    return ToolDef(name, description, parameters, hints,
                   "exec" if hints.destructive and hints.open_world else None)


RUNTIME_TOOLS: tuple[ToolDef, ...] = (
    _runtime("terminal_plan", (
        "Judge one command and record a plan; runs nothing. Returns the decision: allowed, "
        "requires_approval, risk, effects, reasons, and the plan_id."),
        {"type": "object", "properties": {**_COMMAND, **_SESSION},
         "additionalProperties": False}),
    _runtime("terminal_execute", (
        "Run a recorded plan. A plan that needs approval is shown to the user first and "
        "runs only if they approve. Returns the exit code, status and output."),
        {"type": "object", "required": ["plan_id"], "additionalProperties": False,
         "properties": {"plan_id": {"type": "string"}, **_SESSION}}),
    _runtime("terminal_run", (
        "Plan one command and run it: at once when the policy allows it, after the user's "
        "approval when it needs one, never when refused. Returns the decision and, when "
        "it ran, the exit code, status and output."),
        {"type": "object", "properties": {**_COMMAND, **_SESSION},
         "additionalProperties": False}),
    _runtime("terminal_session_status", (
        "The terminal session's plans (with states), active process and receipt ids."),
        {"type": "object", "properties": dict(_SESSION), "additionalProperties": False}),
    _runtime("terminal_receipt_get", "A signed receipt of an earlier run, by receipt_id.",
             {"type": "object", "required": ["receipt_id"], "additionalProperties": False,
              "properties": {"receipt_id": {"type": "string"}}}),
)
RUNTIME_TOOL_NAMES = tuple(tool.name for tool in RUNTIME_TOOLS)
