"""What the web console changes: MCP servers (allow/deny/ask lists, enable, register,
import, remove, probe, restart) and the vision routes' probes; the approvals queue is
:mod:`.approvals`, an OAuth server's sign-in :mod:`.signin`.

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
from typing import Any, cast

import tomlkit
from tomlkit import TOMLDocument

from deepseek_eyes.errors import ConsoleError, DeepSeekEyesError, McpError
from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.asking import asks_first
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.importer import import_document
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.mcp_host.policy import matches, risk_allowed
from deepseek_eyes.mcp_host.registration import registered_entry
from deepseek_eyes.mcp_host.settings_file import (
    add_servers,
    drop_selectors,
    edit_selectors,
    edit_settings_file,
    read_raw,
    remove_server,
    set_ask,
    set_server_value,
)
from deepseek_eyes.runtime.sight import Sight
from deepseek_eyes.settings import (
    McpAuthorizationCodeSettings,
    McpServerSettings,
    Settings,
    load_settings,
)
from deepseek_eyes.settings.writer import recording
from deepseek_eyes.store.replica_status import ReplicaStatus
from deepseek_eyes.terminal.service import TerminalService
from deepseek_eyes.vision.routing.router import VisionRouter

__all__ = ["ConsoleParts", "edit_list", "import_pasted", "lifecycle",
           "mcp_view", "order_routes", "probe_routes", "probe_sight", "register", "remove",
           "server_settings", "switch", "unavailable", "vision_view"]

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
    #: The gateway's final-model sight (what was learned, and its probe) and vision router.
    sight: Sight | None = None
    router: VisionRouter | None = None
    #: The final models the settings name (the only ones the console probes).
    models: tuple[str, ...] = ()
    #: Where the console lives, said with each action's audit row.
    actor: str = field(default="console")
    #: When this console started: an ask-first call asked before it and never answered
    #: waited in an earlier run of the gateway (:func:`past_asks`).
    started_at: float = field(default_factory=time.time)
    #: Set when the gateway begins to stop: the live streams (:func:`status_stream`) end
    #: then, so an open page never holds the stop up.
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    #: The sign-ins to OAuth servers the console started (:mod:`.signin`), by server id.
    signins: dict[str, Any] = field(default_factory=dict)


def unavailable(what: str) -> ConsoleError:
    return ConsoleError(f"{what} needs the running gateway (`deepseek-eyes serve`); this "
                        "console runs without it", code="CONSOLE_UNAVAILABLE")


def _servers(parts: ConsoleParts) -> list[McpServerSettings]:
    if parts.mcp_manager is not None:
        return list(parts.mcp_manager.settings.servers)
    if parts.settings_path is None:
        return []
    return list(load_settings(parts.settings_path).settings.mcp.servers)


def server_settings(parts: ConsoleParts, server_id: str) -> McpServerSettings:
    """The settings of one configured server.

    Raises:
        McpError: ``MCP_SERVER_UNKNOWN``.
    """
    for server in _servers(parts):
        if server.id == server_id:
            return server
    raise McpError(f"no MCP server {server_id!r}", code="MCP_SERVER_UNKNOWN",
                   details={"server": server_id[:200]})


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
    allow and deny lists, and each discovered tool's risk and whether it is offered;
    ``replicas``: every gateway replica's status snapshot of its servers (stale when that
    replica stopped writing)."""
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
                              "ask": asks_first(state.settings, tool.name),
                              "description": (tool.description or "")[:2000]})
        out.append({
            "id": server.id, "transport": server.transport, "enabled": server.enabled,
            "risk_policy": server.risk_policy,
            "status": None if live is None else live.get("status"),
            "last_error": None if live is None else live.get("last_error"),
            # Each plane's state, the last connect's latency, the failure's scrubbed words.
            "planes": None if live is None else {
                "tools": live.get("tools_status"), "content": live.get("content_status")},
            "latency_ms": None if live is None else live.get("latency_ms"),
            "error": None if live is None else live.get("error"),
            "allow": list(server.allow.tools), "deny": list(server.deny.tools),
            "ask": list(server.ask),
            # A person signs in to it (``mcp login``, or the console's Sign in), and how the
            # held sign-in stands (the token store's health: status and expiry, no token).
            "signs_in": isinstance(server.oauth, McpAuthorizationCodeSettings),
            "oauth": None if live is None else live.get("oauth"),
            "signin": (parts.signins[server.id].view() if server.id in parts.signins
                       else None),
            "tools": tools,
        })
    # Every replica's own connections (store/replica_status.py): this one's live status is
    # above (and streamed); the others' snapshots say what they hold.
    return {"running": manager is not None, "editable": parts.settings_path is not None,
            "servers": out, "replicas": ReplicaStatus(parts.home.db).listing()}


async def edit_list(parts: ConsoleParts, server_id: str, which: str, op: str,
                    selector: str) -> dict[str, Any]:
    """Add a selector to, or drop one from, a server's tool ``allow``, ``deny`` or ``ask``
    (ask a person first) list; applied to the running gateway before this returns.

    Raises:
        ConsoleError: ``CONSOLE_ARGUMENT_INVALID``, ``CONSOLE_UNAVAILABLE`` (no settings
            file to edit).
        DeepSeekEyesError: the writer's own (``MCP_SERVER_UNKNOWN``, ``CONFIG_INVALID``:
            nothing written).
    """
    if which not in ("allow", "deny", "ask") or op not in ("add", "remove"):
        raise ConsoleError("which is allow, deny or ask, op is add or remove",
                           code="CONSOLE_ARGUMENT_INVALID")
    if not selector or len(selector) > 200 or selector != selector.strip():
        raise ConsoleError("a selector is a tool name or a prefix ending in *, 1-200 "
                           "characters, no surrounding spaces",
                           code="CONSOLE_ARGUMENT_INVALID", details={"field": "selector"})
    if which == "ask":
        applied = await _write(parts, lambda path: set_ask(path, server_id, selector,
                                                           op == "add"))
        return {"server": server_id, "list": which, "op": op, "selector": selector,
                "applied": applied}
    edit = edit_selectors if op == "add" else drop_selectors
    applied = await _write(parts, lambda path: edit(path, server_id, which, "tools",
                                                    (selector,)))
    return {"server": server_id, "list": which, "op": op, "selector": selector,
            "applied": applied}


async def _write(parts: ConsoleParts, change: Callable[[Path], object]) -> object:
    """One edit of the settings file, the CLI's way: through the settings-file writer
    (validated like the file, one writer at a time, atomically replaced), audited as a
    ``settings.change``, then applied to the running gateway before this returns (its
    settings watch's answer; None without a gateway here).

    Raises:
        ConsoleError: ``CONSOLE_UNAVAILABLE``: no settings file to edit.
        DeepSeekEyesError: the writer's (nothing written) or the gateway's refusal.
    """
    path = parts.settings_path
    if path is None:
        raise ConsoleError("this console has no settings file to edit (start it with "
                           "--config)", code="CONSOLE_UNAVAILABLE")

    def write() -> list[Any]:
        with recording() as writes:
            change(path)
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
    return applied


async def switch(parts: ConsoleParts, server_id: str, enabled: bool) -> dict[str, Any]:
    """Enable or disable a server, as ``mcp enable``/``mcp disable`` do.

    Raises:
        DeepSeekEyesError: as :func:`_write` (``MCP_SERVER_UNKNOWN``).
    """
    applied = await _write(parts, lambda path: set_server_value(path, server_id, "enabled",
                                                                enabled))
    return {"server": server_id, "enabled": enabled, "applied": applied}


async def remove(parts: ConsoleParts, server_id: str) -> dict[str, Any]:
    """Remove a server's entry, as ``mcp remove`` does (the same writer); the running
    gateway stops it before this returns. Its stored sign-in, if any, is kept (``mcp
    logout`` forgets it).

    Raises:
        DeepSeekEyesError: as :func:`_write` (``MCP_SERVER_UNKNOWN``: nothing written).
    """
    applied = await _write(parts, lambda path: remove_server(path, server_id))
    parts.signins.pop(server_id, None)
    return {"server": server_id, "removed": True, "applied": applied}


def _strings(value: object, field_name: str, *, limit: int = 64) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > limit or not all(
            isinstance(v, str) and len(v) <= 4096 for v in value):
        raise ConsoleError(f"{field_name} is a list of at most {limit} strings",
                           code="CONSOLE_ARGUMENT_INVALID", details={"field": field_name})
    return list(value)


async def register(parts: ConsoleParts, body: dict[str, Any]) -> dict[str, Any]:
    """Add a server from the console's form, as ``mcp register`` does: a stdio ``command``
    (argv) or an HTTP ``url``; ``env`` and ``headers`` only as ``NAME=VAR`` (the value is
    read from our environment variable VAR: a secret is never written); ``sign_in``: an
    HTTP server a person signs in to (``mcp register --sign-in``); nothing allowed.

    Raises:
        ConsoleError: ``CONSOLE_ARGUMENT_INVALID``.
        McpError: ``registered_entry``'s (``MCP_CREDENTIAL_IN_ARGUMENTS``,
            ``MCP_ARGUMENTS_INVALID``); the writer's (``CONFIG_INVALID``).
    """
    server_id = body.get("id")
    url = body.get("url") or None
    if not isinstance(server_id, str) or not server_id or (
            url is not None and not isinstance(url, str)):
        raise ConsoleError("a server needs an id, and a command or a url",
                           code="CONSOLE_ARGUMENT_INVALID", details={"field": "id"})
    risk = body.get("risk_policy") or None
    if risk not in (None, "allow", "read-only"):
        raise ConsoleError("risk_policy is allow or read-only", code="CONSOLE_ARGUMENT_INVALID",
                           details={"field": "risk_policy"})
    entry = registered_entry(server_id, command=_strings(body.get("command"), "command"),
                             url=url, env=_strings(body.get("env"), "env"),
                             headers=_strings(body.get("headers"), "headers"),
                             risk_policy=risk, enabled=body.get("enabled") is not False,
                             sign_in=body.get("sign_in") is True)
    applied = await _write(parts, lambda path: add_servers(path, [entry]))
    return {"server": entry["id"], "transport": entry["transport"], "applied": applied}


async def import_pasted(parts: ConsoleParts, text: str, *, replace: bool) -> dict[str, Any]:
    """Import a pasted Claude Desktop / Claude Code / Cursor / VS Code MCP config, as
    ``mcp import`` does (a literal secret refused: only ``${VAR}`` references carry over).

    Raises:
        ConsoleError: ``CONSOLE_UNAVAILABLE``.
        McpError: the importer's (``MCP_IMPORT_INVALID``, ``MCP_COMMAND_NOT_FOUND``, ...).
    """
    if parts.settings_path is None:
        raise ConsoleError("this console has no settings file to edit (start it with "
                           "--config)", code="CONSOLE_UNAVAILABLE")
    servers = read_raw(parts.settings_path).get("mcp", {}).get("servers", [])
    existing = {str(s.get("id")) for s in servers if isinstance(s, dict) and s.get("id")}
    result = import_document(text.encode("utf-8", "surrogatepass"), existing,
                             replace=replace)
    applied = await _write(parts, lambda path: add_servers(path, result.servers,
                                                           replace=replace))
    return {"imported": [{"id": e["id"], "transport": e["transport"],
                          "replaced": e["id"] in existing} for e in result.servers],
            "ignored": list(result.ignored),
            "refused": [r.view() for r in result.refused], "applied": applied}


async def lifecycle(parts: ConsoleParts, server_id: str, action: str) -> dict[str, Any]:
    """Probe a server (a separate connection; the live one untouched) or restart it, on
    the running gateway's manager, as ``mcp probe`` and ``mcp restart`` do.

    Raises:
        ConsoleError: ``CONSOLE_UNAVAILABLE`` without a gateway here, ``CONSOLE_NOT_FOUND``
            for another action.
        McpError: the manager's (``MCP_SERVER_UNKNOWN``, ``MCP_SERVER_DISABLED``, a
            connect code).
    """
    if action not in ("probe", "restart"):
        raise ConsoleError("a server takes probe or restart", code="CONSOLE_NOT_FOUND")
    manager = parts.mcp_manager
    if manager is None:
        raise unavailable("probing or restarting a server")
    if action == "probe":
        return {"server": server_id, "probe": await manager.probe(server_id)}
    state = manager.require(server_id)
    await manager.restart(server_id, wait=state.settings.connect_timeout + 1)
    return {"server": server_id, "after": manager.require(server_id).view()}


def _learned(parts: ConsoleParts) -> dict[str, dict[str, Any]]:
    """Every learned sight verdict kept here (``model_sight``), expired ones too, newest
    first: a person wants to see what was learned, and when it lapses."""
    out: dict[str, dict[str, Any]] = {}
    for row in parts.home.db.query(
            "SELECT upstream, model, sees, how, code, checked_at, expires_at FROM model_sight"
            " ORDER BY checked_at DESC LIMIT 200"):
        out.setdefault(str(row[1]), {"upstream": row[0], "model": row[1], "sees": bool(row[2]),
                                     "how": row[3], "code": row[4], "checked_at": row[5],
                                     "expires_at": row[6]})
    return out


async def vision_view(parts: ConsoleParts) -> dict[str, Any]:
    """The vision routes in the order they are tried, each with its health, circuit and
    probe state (the running gateway's router), and for each final model what is known of
    its sight: the settings' word, the learned verdict (a pixel probe or a refusal) and the
    priors (``/models``, the shipped table), and which of them is in force."""
    router, sight = parts.router, parts.sight
    routes = [dict(r) for r in router.status()] if router is not None else []
    learned = await asyncio.to_thread(_learned, parts)
    models = []
    for model in dict.fromkeys([*parts.models, *learned]):
        entry: dict[str, Any] = {"model": model, "learned": learned.get(model),
                                 "probe": model in parts.models and sight is not None}
        if sight is not None:
            configured = sight.configured(model)
            current = sight.learned(model)
            priors = await sight.priors(model)
            entry["settings"] = None if configured is None else configured.json()
            entry["priors"] = priors.json()
            entry["in_force"] = (configured or current or priors).json()
        models.append(entry)
    return {"running": router is not None, "routes": routes, "models": models,
            "editable": parts.settings_path is not None}


async def order_routes(parts: ConsoleParts, order: list[str]) -> dict[str, Any]:
    """Write the vision routes' order of preference (``vision.route_priority``: tried in
    this order, each failing route falling back to the next), validated like the settings
    file (an unknown route is ``CONFIG_INVALID``: nothing written), audited as a
    ``settings.change``, and given to the running gateway's router before this returns.

    Raises:
        ConsoleError: ``CONSOLE_ARGUMENT_INVALID``, ``CONSOLE_UNAVAILABLE`` (no settings
            file).
        ConfigError: the writer's (``CONFIG_INVALID``: nothing written).
    """
    if not order or len(order) > 64 or len(set(order)) != len(order):
        raise ConsoleError("order is a list of distinct route names",
                           code="CONSOLE_ARGUMENT_INVALID", details={"field": "order"})
    written: list[Settings] = []

    def change(document: TOMLDocument) -> None:
        vision = document.get("vision")
        if vision is None:
            vision = tomlkit.table()
            document["vision"] = vision
        vision["route_priority"] = list(order)

    await _write(parts, lambda path: written.append(edit_settings_file(path, change)))
    settings = written[-1].vision
    if parts.router is not None:
        parts.router.reorder(route=settings.route, priority=settings.route_priority)
    return {"order": list(settings.route_priority), "route": settings.route,
            "routes": [dict(r) for r in parts.router.status()] if parts.router else []}


async def probe_sight(parts: ConsoleParts, model: str) -> dict[str, Any]:
    """Ask a final model the pixel probe again now (one small call) and keep its verdict.

    Raises:
        ConsoleError: ``CONSOLE_UNAVAILABLE`` without a gateway here, ``CONSOLE_NOT_FOUND``
            for a model the settings do not name, ``CONSOLE_PROBE_FAILED`` when no verdict
            came (audited; the priors stay).
    """
    if parts.sight is None:
        raise unavailable("probing a model's sight")
    if model not in parts.models:
        raise ConsoleError("the console probes only the final models the settings name",
                           code="CONSOLE_NOT_FOUND", details={"model": model[:200]})
    verdict = await parts.sight.probe(model)
    if verdict is None:
        raise ConsoleError(f"the sight probe of {model} got no answer; nothing was learned",
                           code="CONSOLE_PROBE_FAILED", details={"model": model})
    return {"model": model, "verdict": verdict.json()}


async def probe_routes(parts: ConsoleParts) -> dict[str, Any]:
    """Health-check and probe every vision route now (``routes --probe``).

    Raises:
        ConsoleError: ``CONSOLE_UNAVAILABLE`` without a gateway here.
    """
    if parts.router is None:
        raise unavailable("probing the vision routes")
    reports = await parts.router.probe_all()
    return {"reports": [{"name": r["name"], "ok": r["ok"], "code": r["code"],
                         "correct": r.get("correct")} for r in reports],
            "routes": [dict(r) for r in parts.router.status()]}
