"""The toolkit: what every capability's tools are made of, written once.

A capability (browser, desktop, terminal, vision server) describes its tools in one table
of :class:`ToolDef` (name, description, JSON schema, MCP annotations, risk) and answers a
call with a :class:`ToolResult`. Its MCP server publishes the table with
:func:`register_tools` (the one place that reaches into the SDK) and answers with
:func:`to_call_result`; the runtime offers the same table to the model. What is offered —
by the runtime's tool hub and by the MCP host alike — is decided by the small composable
stages of :mod:`~deepseek_eyes.toolkit.exposure`.

Modules, one job each: ``spec`` (tool definitions), ``arguments`` (checked arguments),
``results`` (one result type), ``visual`` (when pixels reach the model; :class:`Describe`),
``screenshots`` (PNG and pixel hashes), ``report`` (what reports v2 share),
``registration`` (a table on an SDK server), ``exposure`` (filter, prefix, risk gate,
budget).

Layer: composition, beside ``home`` and ``serving``: the capabilities import it; it imports
only the foundation (settings, errors, untrusted) and the MCP SDK. The SDK is reached
through ``registration`` only, which this package does not import: a process that serves no
MCP (``serve`` with no MCP server) never loads it (issue 41: ~55 MiB of its resident set).
"""

from deepseek_eyes.toolkit.arguments import ToolArguments
from deepseek_eyes.toolkit.results import Shot, ToolResult
from deepseek_eyes.toolkit.spec import READ, Annotations, Risk, ToolDef, object_schema
from deepseek_eyes.toolkit.visual import Describe, should_deliver

__all__ = [
    "READ",
    "Annotations",
    "Describe",
    "Risk",
    "Shot",
    "ToolArguments",
    "ToolDef",
    "ToolResult",
    "object_schema",
    "should_deliver",
]
