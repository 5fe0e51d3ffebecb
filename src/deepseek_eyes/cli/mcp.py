"""``deepseek-eyes mcp …``: inspect, probe, allow and call the configured MCP servers.

Thin: ``call``, ``read`` and ``get-prompt`` go through
:class:`~deepseek_eyes.mcp_host.host.McpHost`,
the path the model's calls take, so an operator sees exactly what the model would. ``allow``,
``deny`` and ``import`` edit the settings file through the loader's own validation and
write nothing when the result would be invalid. Each command starts only the servers it
needs (:mod:`deepseek_eyes.mcp_host.running` says which, and why that keeps the budgets honest).
The lifecycle and entry commands (``watch``, ``register``, ``restart``, ``enable``,
``disable``, ``remove``) live in :mod:`deepseek_eyes.cli.mcp_manage`, and ``login``/``logout``
in :mod:`deepseek_eyes.cli.mcp_login`, which this module adds to its group; what they share
is in :mod:`deepseek_eyes.cli.mcp_common`.

Commands that connect servers show, on a terminal and past the first second, whether they are
still connecting or waiting for an answer (:mod:`deepseek_eyes.cli.progress`).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click

from deepseek_eyes.cli.common import audited_settings_edit, dump_json, loaded_settings
from deepseek_eyes.cli.mcp_common import (
    apply_to_gateway,
    json_option,
    live_gateway,
    target_file,
    with_host,
)
from deepseek_eyes.cli.mcp_login import LOGIN_COMMANDS
from deepseek_eyes.cli.mcp_manage import MANAGE_COMMANDS
from deepseek_eyes.cli.progress import progress_on_stderr
from deepseek_eyes.errors import McpError
from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.audit import stored_records
from deepseek_eyes.mcp_host.host import CallResult, McpHost
from deepseek_eyes.mcp_host.importer import import_servers
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.mcp_host.oauth import set_token_root
from deepseek_eyes.mcp_host.redact import Redactor
from deepseek_eyes.mcp_host.running import only, server_of_public_name, through
from deepseek_eyes.mcp_host.settings_file import (
    add_servers,
    edit_selectors,
    read_raw,
    set_ask,
)
from deepseek_eyes.mcp_host.stderr_log import server_log_dir
from deepseek_eyes.mcp_host.tokens import token_root
from deepseek_eyes.runtime.approval import TerminalPrompt
from deepseek_eyes.settings import data_home

__all__ = ["mcp_group"]

_args_option = click.option("--args", "args_json", default="{}", show_default=True,
                            help="Arguments as a JSON object.")
_kind_option = click.option("--kind", type=click.Choice(["tools", "resources", "prompts"]),
                            default="tools", show_default=True,
                            help="Which selector list to extend.")


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise McpError(f"--args is not valid JSON: {exc}", code="MCP_ARGUMENTS_INVALID") from None
    if not isinstance(value, dict):
        raise McpError("--args must be a JSON object", code="MCP_ARGUMENTS_INVALID")
    return value


def _show_result(result: CallResult, as_json: bool) -> None:
    if as_json:
        view: dict[str, Any] = result._asdict()
        view["images"] = [{"blob": i.blob.uri, "mime_type": i.mime_type} for i in result.images]
        click.echo(dump_json(view))
    else:
        click.echo(result.preview)
        click.echo(f"result {result.result_sha256}" + (" (truncated)" if result.truncated else ""),
                   err=True)
        if result.artifact:
            click.echo(f"artifact {result.artifact}", err=True)
        for image in result.images:
            click.echo(f"image {image.blob.uri} {image.mime_type}", err=True)
    if result.is_error:
        click.echo("the tool reported an error (isError)", err=True)
        raise SystemExit(1)


def _table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    if not rows:
        click.echo("(none)")
        return
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    click.echo("  ".join(c.ljust(widths[c]) for c in columns).rstrip())
    for row in rows:
        click.echo("  ".join(str(row.get(c, "")).ljust(widths[c]) for c in columns).rstrip())


@click.group("mcp")
def mcp_group() -> None:
    """The MCP host: servers, exposure policy, calls and their audit."""


@mcp_group.command("list")
@json_option
@click.pass_context
def list_command(ctx: click.Context, as_json: bool) -> None:
    """Configured servers, without connecting."""
    mcp = loaded_settings(ctx).settings.mcp
    rows = [{
        "id": s.id, "name": s.display_name, "transport": s.transport,
        "enabled": mcp.enabled and s.enabled, "risk_policy": s.risk_policy,
        "planes": ",".join(p for p, on in (("tools", s.tools_enabled),
                                          ("resources", s.resources_enabled),
                                          ("prompts", s.prompts_enabled)) if on) or "-",
        "allow": sum(len(getattr(s.allow, k)) for k in ("tools", "resources", "prompts")),
        "deny": sum(len(getattr(s.deny, k)) for k in ("tools", "resources", "prompts")),
    } for s in mcp.servers]
    if as_json:
        click.echo(dump_json({"enabled": mcp.enabled, "servers": rows}))
        return
    if not mcp.enabled:
        click.echo("mcp.enabled = false: no server connects")
    _table(rows, ["id", "name", "transport", "enabled", "planes", "risk_policy", "allow", "deny"])


@mcp_group.command("status")
@json_option
@click.pass_context
def status_command(ctx: click.Context, as_json: bool) -> None:
    """Connect the enabled servers and show each one's health; exit 1 when one failed.
    With a gateway running for the settings file, its servers' health, from it."""
    async def work(host: McpHost) -> tuple[list[dict[str, Any]], bool]:
        return host.manager.status(), any(s.failed for s in host.manager.servers.values())

    gateway = live_gateway(ctx)
    if gateway is not None:
        rows = gateway.request("GET", "/control/status")["servers"]
        failed = any(row["status"] == "failed" for row in rows)
    else:
        rows, failed = with_host(ctx, as_json, work)
    if as_json:
        click.echo(dump_json({"servers": rows}))
    else:
        notes = []
        for row in rows:
            oauth = row.get("oauth")
            row["oauth"] = oauth["status"] if oauth else "-"
            if row["missing_env"]:
                row["last_error"] = f"{row['last_error']} ({row['missing_env']})"
            if row["error"] and row["status"] != "ready":
                notes.append(f"  {row['id']}: {row['error']}")
            notes.extend(f"  {row['id']}: {plane} plane failed ({row[f'{plane}_error']})"
                         for plane in ("tools", "content") if row[f"{plane}_error"])
            row["last_error"] = row["last_error"] or "-"
        _table(rows, ["id", "status", "tools_status", "content_status", "protocol",
                      "generation", "tools", "resources", "prompts", "latency_ms",
                      "last_error", "oauth"])
        for note in notes:
            click.echo(note)
        if any(row["stderr_log"] for row in rows):
            logs = server_log_dir(data_home(loaded_settings(ctx).settings))
            click.echo(f"stdio servers' stderr: {logs}/<id>.stderr.log")
    if failed:
        raise SystemExit(1)


@mcp_group.command("probe")
@click.argument("server_id")
@json_option
@click.pass_context
def probe_command(ctx: click.Context, server_id: str, as_json: bool) -> None:
    """Connect to one server, list its catalog and close (from the running gateway, when
    one runs for the settings file: its live connection is untouched)."""
    gateway = live_gateway(ctx)
    if gateway is not None:
        report = gateway.request("POST", f"/control/probe/{server_id}")
    else:
        settings = loaded_settings(ctx).settings
        set_token_root(token_root(data_home(settings)))
        manager = McpManager(settings.mcp, log_dir=server_log_dir(data_home(settings)))
        with progress_on_stderr(as_json=as_json) as progress:
            progress.update(f"mcp probe {server_id}: connecting…")
            report = asyncio.run(manager.probe(server_id))
    # The planes are listed apart: one that failed is named, the other still reported.
    failed = report["tools_error"] or report["content_error"]
    if as_json:
        click.echo(dump_json(report))
    else:
        click.echo(f"{report['id']}: ok, protocol {report['protocol']}, "
                   f"{report['latency_ms']} ms")
        tools = f"failed ({report['tools_error']})" if report["tools_error"] else (
            ", ".join(report["tools"]) or "-")
        click.echo(f"  tools ({len(report['tools'])}): {tools}")
        content = (f"content: failed ({report['content_error']})" if report["content_error"]
                   else f"resources: {report['resources']}  prompts: {report['prompts']}")
        click.echo(f"  {content}  instructions: {'yes' if report['instructions'] else 'no'}")
    if failed:
        raise SystemExit(1)


@mcp_group.command("tools")
@click.argument("server_id")
@json_option
@click.pass_context
def tools_command(ctx: click.Context, server_id: str, as_json: bool) -> None:
    """Discovered tools as the model reads them (description, server instructions), their
    risk class, whether the model is offered them, and text worth a second look."""
    async def work(host: McpHost) -> dict[str, Any]:
        return {"server": server_id, "instructions": host.server_instructions(server_id),
                "tools": host.discovered(server_id)}

    # Exposure depends on the servers declared before this one (the shared budgets).
    report = with_host(ctx, as_json, work, servers=lambda mcp: through(mcp, server_id))
    if as_json:
        click.echo(dump_json(report))
        return
    rows = report["tools"]
    _table([{**row, "exposed": "yes" if row["exposed"] else "no",
             "flags": len(row["flags"]) or "-"} for row in rows],
           ["name", "risk", "exposed", "flags", "public_name"])
    for row in rows:
        click.echo(f"\n{row['name']}:")
        click.echo(_indented(_masked(row["description"]) or "(no description)"))
        _echo_flags(row["flags"])
    instructions = report["instructions"]
    click.echo(f"\nserver instructions ({server_id}):")
    click.echo(_indented(_masked(instructions["text"] or "") or "(none)"))
    _echo_flags(instructions["flags"])


def _masked(text: str) -> str:
    """Secret-looking text hidden on the terminal (the model would read it as it is)."""
    return Redactor().scrub(text)


def _indented(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def _echo_flags(flags: list[dict[str, Any]]) -> None:
    for flag in flags:
        note = " (masked above; the model reads it)" if flag["kind"] == "secret" else ""
        click.echo(f"  ! {flag['kind']}: {flag['what']}: {flag['match']}{note}")


def _edit(ctx: click.Context, which: str, server_id: str, kind: str,
          selectors: tuple[str, ...], as_json: bool) -> None:
    path = target_file(ctx)
    with audited_settings_edit(ctx, path):
        settings = edit_selectors(path, server_id, which, kind, selectors)
    apply_to_gateway(ctx)
    if as_json:
        server = next(s for s in settings.mcp.servers if s.id == server_id)
        click.echo(dump_json({
            "path": str(path), "server": server_id, "list": which, "kind": kind,
            "added": list(selectors), "selectors": list(getattr(getattr(server, which), kind)),
        }))
        return
    click.echo(f"{path}: {server_id} {which}.{kind} += {', '.join(selectors)}")


@mcp_group.command("allow")
@click.argument("server_id")
@click.argument("selectors", nargs=-1, required=True)
@_kind_option
@json_option
@click.pass_context
def allow_command(ctx: click.Context, server_id: str, selectors: tuple[str, ...],
                  kind: str, as_json: bool) -> None:
    """Add allow selectors (a name, or a prefix ending in *)."""
    _edit(ctx, "allow", server_id, kind, selectors, as_json)


@mcp_group.command("deny")
@click.argument("server_id")
@click.argument("selectors", nargs=-1, required=True)
@_kind_option
@json_option
@click.pass_context
def deny_command(ctx: click.Context, server_id: str, selectors: tuple[str, ...],
                 kind: str, as_json: bool) -> None:
    """Add deny selectors (deny always wins over allow)."""
    _edit(ctx, "deny", server_id, kind, selectors, as_json)


@mcp_group.command("ask")
@click.argument("server_id")
@click.argument("tool")
@click.option("--off", is_flag=True, help="Stop asking first for this tool (or selector).")
@json_option
@click.pass_context
def ask_command(ctx: click.Context, server_id: str, tool: str, off: bool,
                as_json: bool) -> None:
    """Ask a person before each call of TOOL (a name, a prefix*, or * for all), in the web
    console's Approvals or at chat's terminal; --off stops asking."""
    path = target_file(ctx)
    with audited_settings_edit(ctx, path):
        settings = set_ask(path, server_id, tool, not off)
    apply_to_gateway(ctx)
    server = next(s for s in settings.mcp.servers if s.id == server_id)
    if as_json:
        click.echo(dump_json({"path": str(path), "server": server_id, "tool": tool,
                              "ask": not off, "asks": list(server.ask)}))
        return
    click.echo(f"{path}: {server_id} ask {'-=' if off else '+='} {tool} "
               f"(now: {', '.join(server.ask) or 'nothing'})")


@mcp_group.command("call")
@click.argument("server_id")
@click.argument("tool", required=False)
@_args_option
@json_option
@click.pass_context
def call_command(ctx: click.Context, server_id: str, tool: str | None, args_json: str,
                 as_json: bool) -> None:
    """Call a tool under the model's policy (allow/deny, risk, budgets, admission): ID TOOL,
    or the public name alone (mcp__ID__TOOL)."""
    arguments = _arguments(args_json)
    public = server_id if tool is None else None
    if public is not None:
        server_id = server_of_public_name(public)

    async def work(host: McpHost) -> CallResult:
        name = public if public is not None else host.public_name_of(server_id, tool or "")
        # An ask-first tool asks the person at this terminal (there is no console here).
        asker = (TerminalPrompt(timeout=host.manager.settings.ask_timeout).decide
                 if TerminalPrompt.available() else None)
        return await host.call_tool(name, arguments, asker=asker)

    # The tool's server and those declared before it: they share the exposure budgets.
    _show_result(with_host(ctx, as_json, work, servers=lambda mcp: through(mcp, server_id)),
                 as_json)


@mcp_group.command("resources")
@click.argument("server_id")
@json_option
@click.pass_context
def resources_command(ctx: click.Context, server_id: str, as_json: bool) -> None:
    """Discovered resources and templates, and whether each is allowed."""
    async def work(host: McpHost) -> list[dict[str, Any]]:
        return host.resources(server_id)

    rows = with_host(ctx, as_json, work, servers=lambda mcp: only(mcp, server_id))
    if as_json:
        click.echo(dump_json({"server": server_id, "resources": rows}))
        return
    for row in rows:
        row["kind"] = "template" if row.pop("template") else "resource"
        row["allowed"] = "yes" if row["allowed"] else "no"
    _table(rows, ["uri", "kind", "allowed", "name"])


@mcp_group.command("read")
@click.argument("server_id")
@click.argument("uri")
@json_option
@click.pass_context
def read_command(ctx: click.Context, server_id: str, uri: str, as_json: bool) -> None:
    """Read an allowed resource under the model's policy."""
    async def work(host: McpHost) -> CallResult:
        return await host.read_resource(server_id, uri)

    _show_result(with_host(ctx, as_json, work, servers=lambda mcp: only(mcp, server_id)),
                 as_json)


@mcp_group.command("prompts")
@click.argument("server_id")
@json_option
@click.pass_context
def prompts_command(ctx: click.Context, server_id: str, as_json: bool) -> None:
    """Discovered prompts, their arguments, and whether each is allowed."""
    async def work(host: McpHost) -> list[dict[str, Any]]:
        return host.prompts(server_id)

    rows = with_host(ctx, as_json, work, servers=lambda mcp: only(mcp, server_id))
    if as_json:
        click.echo(dump_json({"server": server_id, "prompts": rows}))
        return
    for row in rows:
        row["arguments"] = ",".join(row["arguments"]) or "-"
        row["allowed"] = "yes" if row["allowed"] else "no"
    _table(rows, ["name", "allowed", "arguments"])


@mcp_group.command("get-prompt")
@click.argument("server_id")
@click.argument("name")
@_args_option
@json_option
@click.pass_context
def get_prompt_command(ctx: click.Context, server_id: str, name: str, args_json: str,
                       as_json: bool) -> None:
    """Get an allowed prompt under the model's policy."""
    arguments = _arguments(args_json)

    async def work(host: McpHost) -> CallResult:
        return await host.get_prompt(server_id, name, arguments)

    _show_result(with_host(ctx, as_json, work, servers=lambda mcp: only(mcp, server_id)),
                 as_json)


@mcp_group.command("import")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--replace", is_flag=True,
              help="Replace a server whose id is taken (its command, URL, env and headers; "
              "its allow/deny lists and switches are kept).")
@click.option("--strict", is_flag=True,
              help="Refuse the whole file when one server cannot be imported.")
@json_option
@click.pass_context
def import_command(ctx: click.Context, file: Path, replace: bool, strict: bool,
                   as_json: bool) -> None:
    """Import Claude Desktop / Claude Code / Cursor / VS Code MCP JSON (enabled, nothing
    allowed); what cannot be imported is listed with its fix."""
    path = target_file(ctx)
    servers = read_raw(path).get("mcp", {}).get("servers", [])
    existing = {str(i) for i in (s.get("id") for s in servers if isinstance(s, dict)) if i}
    result = import_servers(file, existing, replace=replace, strict=strict)
    replaced = [e["id"] for e in result.servers if e["id"] in existing]

    with audited_settings_edit(ctx, path):
        add_servers(path, result.servers, replace=replace)
    apply_to_gateway(ctx)
    if as_json:
        click.echo(dump_json({
            "path": str(path),
            "imported": [{"id": e["id"], "transport": e["transport"]} for e in result.servers],
            "replaced": replaced,
            "ignored": list(result.ignored),
            "refused": [r.view() for r in result.refused],
        }))
        return
    for entry in result.servers:
        if entry["id"] in replaced:
            click.echo(f"replaced {entry['id']} ({entry['transport']}): its allow and deny "
                       "lists and switches are kept")
        else:
            click.echo(f"imported {entry['id']} ({entry['transport']}): enabled, nothing "
                       "allowed")
    for key in result.ignored:
        click.echo(f"  not carried over: {key}", err=True)
    for refusal in result.refused:
        click.echo(f"refused {refusal.server}: {refusal.error.code}: {refusal.error.message}",
                   err=True)
    added = len(result.servers) - len(replaced)
    click.echo(f"{path}: {added} server(s) added, {len(replaced)} replaced"
               + (f", {len(result.refused)} refused (fix each and import again, or import "
                  "with --strict to refuse the whole file)" if result.refused else "")
               + "; allow tools with `deepseek-eyes mcp allow ID NAME`")


@mcp_group.command("audit")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@json_option
@click.pass_context
def audit_command(ctx: click.Context, limit: int, as_json: bool) -> None:
    """Recent MCP calls: identities, hashes, durations and codes (never arguments)."""
    with DataHome.open(loaded_settings(ctx).settings) as home:
        rows = stored_records(home.db, limit)
    if as_json:
        click.echo(dump_json({"calls": rows}))
        return
    for row in rows:
        row["code"] = row.get("code") or "-"
    _table(rows, ["server", "tool", "kind", "risk", "status", "duration_ms", "code"])


# The lifecycle and entry commands join the group (a module of their own keeps this one
# about inspection and calls; the dependency runs this way only).
for _command in (*MANAGE_COMMANDS, *LOGIN_COMMANDS):
    mcp_group.add_command(_command)
