"""A tool, described once: name, description, JSON-schema parameters, MCP annotations, risk.

Every capability (browser, desktop, terminal, vision server) keeps one table of these; its
MCP server publishes them (:mod:`deepseek_eyes.toolkit.registration`) and its runtime source
offers the same definitions to the model, so a tool reads the same whichever way it is
reached.

The annotations are the MCP hints (``readOnlyHint``, ``destructiveHint``,
``idempotentHint``, ``openWorldHint``) and must be truthful. The runtime's *risk* (what its
read-only gate lets through) is derived from them — a read-only tool is ``read``, any other
``write`` — unless the table says better: the terminal's runs are ``exec``, and the browser
counts loading a page or closing its own tab as ``read`` (they change nothing a user owns,
though MCP must call them not read-only). A derived default keeps new tools honest; the
override keeps the gate's long-standing decisions byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["MOVE", "OBSERVE", "READ", "Annotations", "Risk", "ToolDef", "object_schema"]

Risk = Literal["read", "write", "exec", "unknown"]


@dataclass(frozen=True)
class Annotations:
    """The four MCP tool hints, always all given (an absent hint means the worst case to a
    client, which is not what a truthful table wants to say)."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool

    @property
    def risk(self) -> Risk:
        return "read" if self.read_only else "write"


#: Reads that change nothing and stay inside this machine.
READ = Annotations(read_only=True, destructive=False, idempotent=True, open_world=False)
#: An observation: read-only, but never idempotent (each one is a new state of a screen).
OBSERVE = Annotations(read_only=True, destructive=False, idempotent=False, open_world=False)
#: A change of a screen's own view (scrolling, focus), nothing a user owns.
MOVE = Annotations(read_only=False, destructive=False, idempotent=False, open_world=False)


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    parameters: Mapping[str, Any]  # a JSON schema of type "object"
    annotations: Annotations
    risk_override: Risk | None = None

    @property
    def risk(self) -> Risk:
        """What calling it may do, for the runtime's risk gate (see the module docstring)."""
        return self.risk_override or self.annotations.risk


def object_schema(properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A closed object schema (no properties beyond those named), the shape of every table's
    parameters."""
    return {"type": "object", "properties": dict(properties), "required": list(required),
            "additionalProperties": False}
