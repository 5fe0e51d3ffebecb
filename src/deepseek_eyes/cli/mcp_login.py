"""``deepseek-eyes mcp login SERVER`` and ``mcp logout SERVER``: sign in to a remote server.

Thin over :mod:`deepseek_eyes.mcp_host.signin`. The authorization URL is printed (on stderr,
so ``--json`` stays one object on stdout) and opened in a browser when a desktop is present;
the redirect comes back to a loopback port. :mod:`deepseek_eyes.cli.mcp` adds
:data:`LOGIN_COMMANDS` to its group.
"""

from __future__ import annotations

import asyncio
import os
import sys
import webbrowser

import anyio
import click

from deepseek_eyes.cli.common import dump_json, loaded_settings
from deepseek_eyes.cli.mcp_common import json_option
from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.signin import sign_in, sign_out
from deepseek_eyes.mcp_host.tokens import token_root
from deepseek_eyes.settings import McpServerSettings, Settings, data_home

__all__ = ["LOGIN_COMMANDS", "login_command", "logout_command"]


def _server(settings: Settings, server_id: str) -> McpServerSettings:
    for server in settings.mcp.servers:
        if server.id == server_id:
            return server
    raise McpError(f"no MCP server {server_id!r}", code="MCP_SERVER_UNKNOWN",
                   details={"server": server_id})


def _has_desktop() -> bool:
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


async def _show(url: str, *, open_browser: bool) -> None:
    click.echo(f"Open this URL to sign in:\n\n  {url}\n", err=True)
    if open_browser and _has_desktop():
        await anyio.to_thread.run_sync(webbrowser.open, url)
    click.echo("Waiting for the sign-in to finish…", err=True)


@click.command("login")
@click.argument("server_id")
@click.option("--no-browser", is_flag=True, help="Only print the URL; never open a browser.")
@click.option("--timeout", type=click.FloatRange(min=5, max=3600), default=300.0,
              show_default=True, metavar="SECONDS", help="How long to wait for the sign-in.")
@json_option
@click.pass_context
def login_command(ctx: click.Context, server_id: str, no_browser: bool, timeout: float,
                  as_json: bool) -> None:
    """Sign in to an authorization-code server and keep its tokens (mode 0600)."""
    settings = loaded_settings(ctx).settings
    server = _server(settings, server_id)

    async def show(url: str) -> None:
        await _show(url, open_browser=not no_browser)

    health = asyncio.run(sign_in(server, token_root(data_home(settings)), open_url=show,
                                 timeout=timeout))
    if as_json:
        click.echo(dump_json({"id": server_id, "signed_in": True, **health}))
    else:
        click.echo(f"{server_id}: signed in")


@click.command("logout")
@click.argument("server_id")
@json_option
@click.pass_context
def logout_command(ctx: click.Context, server_id: str, as_json: bool) -> None:
    """Forget a server's stored tokens and registration."""
    settings = loaded_settings(ctx).settings
    removed = sign_out(_server(settings, server_id), token_root(data_home(settings)))
    if as_json:
        click.echo(dump_json({"id": server_id, "removed": removed}))
    else:
        click.echo(f"{server_id}: {'signed out' if removed else 'no sign-in was held'}")


LOGIN_COMMANDS: tuple[click.Command, ...] = (login_command, logout_command)
