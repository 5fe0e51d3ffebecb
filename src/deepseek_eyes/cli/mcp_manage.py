"""``deepseek-eyes mcp watch|register|restart|enable|disable|remove``: the servers' lifecycle
and their entries in the settings file.

Thin, like :mod:`deepseek_eyes.cli.mcp`, whose group these commands join: that module adds
:data:`MANAGE_COMMANDS` to it, and this one never imports it (what both use is in
:mod:`deepseek_eyes.cli.mcp_common`; an import-linter contract keeps it so). ``watch`` prints
the manager's status events (:mod:`deepseek_eyes.mcp_host.events`), ``restart`` is
:meth:`McpManager.restart`, and the entry commands are the validated, comment-keeping edits
of :mod:`deepseek_eyes.mcp_host.settings_file`. With a gateway running for the settings file,
``restart`` and ``watch`` act on its manager through its control API and each edit is
applied to it once written (:mod:`deepseek_eyes.cli.mcp_common`); with none, ``restart`` and
``watch`` act on a manager of their own, in this process, and the entry commands take effect
when a process next loads the settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import math
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import click

from deepseek_eyes.cli.common import audited_settings_edit, dump_json, loaded_settings
from deepseek_eyes.cli.mcp_common import (
    apply_to_gateway,
    json_option,
    live_gateway,
    target_file,
    with_host,
)
from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.mcp_host.oauth import set_token_root
from deepseek_eyes.mcp_host.registration import registered_entry
from deepseek_eyes.mcp_host.running import only
from deepseek_eyes.mcp_host.settings_file import add_servers, remove_server, set_server_value
from deepseek_eyes.mcp_host.stderr_log import server_log_dir
from deepseek_eyes.mcp_host.tokens import token_root

if TYPE_CHECKING:
    from deepseek_eyes.gateway.control_client import ControlClient

__all__ = ["MANAGE_COMMANDS", "disable_command", "enable_command", "register_command",
           "remove_command", "restart_command", "watch_command"]

_plane_option = click.option(
    "--plane", type=click.Choice(["tools", "resources", "prompts"]), default=None,
    help="Switch one plane of the server instead of the whole server.")


def _describe(view: dict[str, Any]) -> str:
    """One human line for a server's view."""
    parts = [view["id"], view["status"], f"tools={view['tools_status']}",
             f"content={view['content_status']}", f"generation={view['generation']}"]
    if view.get("last_error"):
        error = view["last_error"]
        if view.get("missing_env"):
            error += f" ({view['missing_env']})"
        parts.append(f"error={error}")
    if view.get("retry_delay_s") is not None:
        parts.append(f"retry in {view['retry_delay_s']} s")
    return " ".join(parts)


def _watch_gateway(gateway: ControlClient, duration: float | None,
                   show: Callable[[dict[str, Any]], None]) -> None:
    """Print the running gateway's status events for ``duration`` seconds (or until it
    ends the stream). The stream is read in a thread so that the deadline holds while no
    event comes."""
    events: queue.Queue[dict[str, Any] | BaseException | None] = queue.Queue()

    def read() -> None:
        try:
            for event in gateway.stream("/control/watch"):
                events.put(event)
        except BaseException as exc:  # handed to the main thread, which raises it
            events.put(exc)
        events.put(None)

    threading.Thread(target=read, daemon=True, name="mcp-watch").start()
    deadline = None if duration is None else time.monotonic() + duration
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return
        try:
            item = events.get(timeout=left)
        except queue.Empty:
            return
        if item is None:
            return
        if isinstance(item, BaseException):
            raise item
        show(item)


@click.command("watch")
@click.option("--for", "duration", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="SECONDS", help="Stop after SECONDS (default: until Ctrl-C).")
@json_option
@click.pass_context
def watch_command(ctx: click.Context, duration: float | None, as_json: bool) -> None:
    """Start the enabled servers and print their status changes as they happen (the
    running gateway's, when one runs for the settings file)."""
    settings = loaded_settings(ctx).settings

    def show(event: dict[str, Any]) -> None:
        if as_json:
            click.echo(dump_json(event))
        else:
            stamp = dt.datetime.fromtimestamp(event["ts"]).strftime("%H:%M:%S")
            click.echo(f"{stamp} {_describe(event)}")

    gateway = live_gateway(ctx)
    if gateway is not None:
        with contextlib.suppress(KeyboardInterrupt):
            _watch_gateway(gateway, duration, show)
        return

    async def run() -> None:
        with DataHome.open(settings) as home:
            set_token_root(token_root(home.root))
            manager = McpManager(settings.mcp, log_dir=server_log_dir(home.root))
            async with manager.events.subscribe() as events:
                await manager.start(wait=None)
                try:
                    with anyio.move_on_after(duration if duration else math.inf):
                        async for event in events:
                            show(event)
                finally:
                    await manager.stop()

    # Ctrl-C is how a watch ends: the servers were stopped on the way out.
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


@click.command("register")
@click.argument("server_id")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--url", default=None, help="A Streamable HTTP server's endpoint.")
@click.option("--env", "env", multiple=True, metavar="NAME=VAR",
              help="The child's NAME comes from our environment variable VAR (repeatable).")
@click.option("--header", "headers", multiple=True, metavar="NAME=VAR",
              help="HTTP header NAME comes from our environment variable VAR (repeatable).")
@click.option("--name", default=None, help="Display name (default: the id).")
@click.option("--cwd", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Working directory of a stdio server.")
@click.option("--risk-policy", type=click.Choice(["allow", "read-only"]), default=None)
@click.option("--disabled", is_flag=True, help="Add it disabled.")
@click.option("--sign-in", "sign_in", is_flag=True,
              help="An HTTP server a person signs in to (OAuth authorization code); then "
                   "`mcp login ID`.")
@json_option
@click.pass_context
def register_command(ctx: click.Context, server_id: str, command: tuple[str, ...],
                     url: str | None, env: tuple[str, ...], headers: tuple[str, ...],
                     name: str | None, cwd: Path | None, risk_policy: str | None,
                     disabled: bool, sign_in: bool, as_json: bool) -> None:
    """Add a server to the settings file: ID [OPTIONS] -- COMMAND [ARGS...], or ID --url URL.
    It arrives with nothing allowed."""
    entry = registered_entry(server_id, command=command, url=url, env=env, headers=headers,
                             name=name, cwd=cwd, risk_policy=risk_policy, enabled=not disabled,
                             sign_in=sign_in)
    path = target_file(ctx)
    with audited_settings_edit(ctx, path):
        add_servers(path, [entry])
    apply_to_gateway(ctx)
    if as_json:
        click.echo(dump_json({"path": str(path), "server": entry}))
        return
    click.echo(f"{path}: registered {server_id} ({entry['transport']}): "
               f"{'disabled' if disabled else 'enabled'}, nothing allowed; allow tools with "
               f"`deepseek-eyes mcp allow {server_id} NAME`")


@click.command("restart")
@click.argument("server_id")
@json_option
@click.pass_context
def restart_command(ctx: click.Context, server_id: str, as_json: bool) -> None:
    """Connect ID, then restart it (a new process or connection, a fresh retry sequence) and
    show its status; exit 1 when it is not ready after."""
    async def work(host: McpHost) -> tuple[dict[str, Any], dict[str, Any], bool]:
        manager = host.manager
        before = manager.require(server_id).view()
        await manager.restart(server_id,
                              wait=manager.require(server_id).settings.connect_timeout + 1)
        state = manager.require(server_id)
        return before, state.view(), state.failed

    gateway = live_gateway(ctx)
    if gateway is not None:
        answer = gateway.request("POST", f"/control/restart/{server_id}")
        before, after, failed = answer["before"], answer["after"], answer["failed"]
    else:
        before, after, failed = with_host(ctx, as_json, work,
                                           servers=lambda mcp: only(mcp, server_id))
    if as_json:
        click.echo(dump_json({"server": server_id, "before": before, "after": after}))
    else:
        click.echo(f"before: {_describe(before)}")
        click.echo(f"after:  {_describe(after)}")
    if failed:
        raise SystemExit(1)


def _switch(ctx: click.Context, server_id: str, plane: str | None, value: bool,
            as_json: bool) -> None:
    key = "enabled" if plane is None else f"{plane}_enabled"
    path = target_file(ctx)
    with audited_settings_edit(ctx, path):
        set_server_value(path, server_id, key, value)
    apply_to_gateway(ctx)
    if as_json:
        click.echo(dump_json({"path": str(path), "server": server_id, "key": key,
                              "value": value}))
        return
    click.echo(f"{path}: {server_id} {key} = {'true' if value else 'false'}")


@click.command("enable")
@click.argument("server_id")
@_plane_option
@json_option
@click.pass_context
def enable_command(ctx: click.Context, server_id: str, plane: str | None,
                   as_json: bool) -> None:
    """Enable a server, or one of its planes with --plane."""
    _switch(ctx, server_id, plane, True, as_json)


@click.command("disable")
@click.argument("server_id")
@_plane_option
@json_option
@click.pass_context
def disable_command(ctx: click.Context, server_id: str, plane: str | None,
                    as_json: bool) -> None:
    """Disable a server, or one of its planes with --plane."""
    _switch(ctx, server_id, plane, False, as_json)


@click.command("remove")
@click.argument("server_id")
@json_option
@click.pass_context
def remove_command(ctx: click.Context, server_id: str, as_json: bool) -> None:
    """Remove a server's entry from the settings file."""
    path = target_file(ctx)
    with audited_settings_edit(ctx, path):
        remove_server(path, server_id)
    apply_to_gateway(ctx)
    if as_json:
        click.echo(dump_json({"path": str(path), "removed": server_id}))
        return
    click.echo(f"{path}: removed {server_id}")


#: The commands :mod:`deepseek_eyes.cli.mcp` adds to the ``mcp`` group.
MANAGE_COMMANDS: tuple[click.Command, ...] = (
    watch_command, register_command, restart_command, enable_command, disable_command,
    remove_command,
)
