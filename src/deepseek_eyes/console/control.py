"""What the web console changes: terminal approvals and MCP allow/deny lists.

Approvals act on the terminal service the gateway runs in process (the very object a
paused turn's :class:`~deepseek_eyes.runtime.approval.ConsoleWait` watches), recorded as
approvals ``via`` the console ``by`` the console login that gave them. Plans of sessions
that ended while waiting are listed as ``expired``, with no action.

MCP edits go through the same writer the CLI's ``mcp allow``/``mcp deny`` use
(:mod:`deepseek_eyes.mcp_host.settings_file` over :mod:`deepseek_eyes.settings.writer`:
validated like the settings file, one writer at a time, atomically replaced), are audited as
``settings.change`` rows like the CLI's, and are then applied to the running gateway at once
through its settings watch (``reload``), not at the watch's next look.

Why each tool is or is not offered is said with the exposure's own stages, in its order:
``denied`` (a deny selector), ``not allowed`` (no allow selector), ``risk gate`` (the
server's ``read-only`` risk policy), ``budget`` (past the tool or schema budget), else
``offered``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from deepseek_eyes.errors import ConsoleError, DeepSeekEyesError
from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.mcp_host.policy import matches, risk_allowed
from deepseek_eyes.mcp_host.settings_file import drop_selectors, edit_selectors
from deepseek_eyes.settings import McpServerSettings, load_settings
from deepseek_eyes.settings.writer import recording
from deepseek_eyes.terminal.service import TerminalService

__all__ = ["ConsoleParts", "approvals", "decide", "edit_list", "mcp_view"]

#: The settings watch's look, asked after an edit (the gateway's); None: no gateway here.
Reload = Callable[[], Awaitable[object]]


@dataclass
class ConsoleParts:
    """What one console serves: a data directory, and of a running gateway (None when the
    console runs alone, ``deepseek-eyes console``) its terminal service, MCP manager and
    host, and its settings watch's look."""

    home: DataHome
    settings_path: Path | None
    terminal: TerminalService | None = None
    mcp_manager: McpManager | None = None
    mcp_host: McpHost | None = None
    reload: Reload | None = None
    #: Where the console lives, said with each action's audit row.
    actor: str = field(default="console")


def _unavailable(what: str) -> ConsoleError:
    return ConsoleError(f"{what} needs the running gateway (`deepseek-eyes serve`); this "
                        "console runs without it", code="CONSOLE_UNAVAILABLE")


def approvals(parts: ConsoleParts) -> dict[str, Any]:
    """Every plan waiting for a person, with its age; expired ones after."""
    service = parts.terminal
    if service is None:
        return {"running": False, "plans": []}
    plans = service.waiting()
    now = time.time()
    for plan in plans:
        plan["age_s"] = round(now - float(plan["created_at"]), 1)
    return {"running": True, "plans": plans}


def decide(parts: ConsoleParts, session_id: str, plan_id: str,
           verdict: Literal["approve", "deny"], person: str) -> dict[str, Any]:
    """Approve or deny a waiting plan.

    Raises:
        ConsoleError: ``CONSOLE_UNAVAILABLE`` without a terminal here.
        TerminalError: the service's own (``TERMINAL_SESSION_NOT_FOUND`` for an expired
            one, ``TERMINAL_PLAN_STATE`` for one decided already).
    """
    service = parts.terminal
    if service is None:
        raise _unavailable("approving")
    if verdict == "approve":
        return service.approve(session_id, plan_id, via="console", by=person)
    return service.deny(session_id, plan_id, via="console", by=person)


def _servers(parts: ConsoleParts) -> list[McpServerSettings]:
    if parts.mcp_manager is not None:
        return list(parts.mcp_manager.settings.servers)
    if parts.settings_path is None:
        return []
    return list(load_settings(parts.settings_path).settings.mcp.servers)


def _why(server: McpServerSettings, name: str, risk: str, offered: set[str],
         public: str) -> str:
    if matches(server.deny.tools, name):
        return "denied"
    if not matches(server.allow.tools, name):
        return "not allowed"
    if not risk_allowed(server, cast(Any, risk)):
        return "risk gate"
    if public not in offered:
        return "budget"
    return "offered"


def mcp_view(parts: ConsoleParts) -> dict[str, Any]:
    """Every configured server with its live status (when the gateway runs here), its
    allow and deny lists, and each discovered tool's risk and whether it is offered."""
    manager, host = parts.mcp_manager, parts.mcp_host
    status = {str(s.get("id")): s for s in manager.status()} if manager is not None else {}
    offered = {t.public_name for t in host.exposed()} if host is not None else set()
    out = []
    for server in _servers(parts):
        live = status.get(server.id)
        tools: list[dict[str, Any]] = []
        state = manager.servers.get(server.id) if manager is not None else None
        if state is not None and state.catalog is not None:
            for tool in state.catalog.tools:
                why = _why(state.settings, tool.name, tool.risk, offered, tool.public_name)
                tools.append({"name": tool.name, "public_name": tool.public_name,
                              "risk": tool.risk, "offered": why == "offered", "why": why,
                              "description": (tool.description or "")[:2000]})
        out.append({
            "id": server.id, "transport": server.transport, "enabled": server.enabled,
            "risk_policy": server.risk_policy,
            "status": None if live is None else live.get("status"),
            "last_error": None if live is None else live.get("last_error"),
            "allow": list(server.allow.tools), "deny": list(server.deny.tools),
            "tools": tools,
        })
    return {"running": manager is not None, "editable": parts.settings_path is not None,
            "servers": out}


async def edit_list(parts: ConsoleParts, server_id: str, which: str, op: str,
                    selector: str) -> dict[str, Any]:
    """Add a selector to, or drop one from, a server's tool ``allow`` or ``deny`` list;
    applied to the running gateway before this returns.

    Raises:
        ConsoleError: ``CONSOLE_ARGUMENT_INVALID``, ``CONSOLE_UNAVAILABLE`` (no settings
            file to edit).
        DeepSeekEyesError: the writer's own (``MCP_SERVER_UNKNOWN``, ``CONFIG_INVALID``:
            nothing written).
    """
    if which not in ("allow", "deny") or op not in ("add", "remove"):
        raise ConsoleError("which is allow or deny, op is add or remove",
                           code="CONSOLE_ARGUMENT_INVALID")
    if not selector or len(selector) > 200 or selector != selector.strip():
        raise ConsoleError("a selector is a tool name or a prefix ending in *, 1-200 "
                           "characters, no surrounding spaces",
                           code="CONSOLE_ARGUMENT_INVALID", details={"field": "selector"})
    path = parts.settings_path
    if path is None:
        raise ConsoleError("this console has no settings file to edit (start it with "
                           "--config)", code="CONSOLE_UNAVAILABLE")
    edit = edit_selectors if op == "add" else drop_selectors

    def write() -> list[Any]:
        with recording() as writes:
            edit(path, server_id, which, "tools", (selector,))
        return writes

    writes = await asyncio.to_thread(write)
    for written in writes:
        parts.home.audit.append("settings.change", f"console {parts.actor}",
                                path=str(path.absolute()), before_sha256=written.before,
                                after_sha256=written.sha256)
    applied: object = None
    if parts.reload is not None:
        last = await parts.reload()
        view = getattr(last, "view", None)
        applied = view() if callable(view) else None
        if isinstance(applied, dict) and applied.get("state") == "refused":
            error = applied.get("error") or {}
            raise DeepSeekEyesError(str(error.get("message", "the gateway refused it")),
                                    code=str(error.get("code", "CONFIG_INVALID")))
    return {"server": server_id, "list": which, "op": op, "selector": selector,
            "applied": applied}
