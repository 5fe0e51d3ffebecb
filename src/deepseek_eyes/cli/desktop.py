"""``deepseek-eyes desktop …``: serve the desktop MCP server, or observe the desktop now.
Thin: the work is in :mod:`deepseek_eyes.desktop`.

``serve --stdio`` speaks MCP on standard input and output, so nothing else may reach
standard output: ``--json`` describes the server on standard error instead. ``serve --http``
refuses to start without a strong bearer token, and its ``--json`` object, printed on
standard output once the socket is bound, adds ``"listening": {"host", "port", "url"}``. ``--xvfb``
starts a private headless desktop (Xvfb, D-Bus, AT-SPI) for the session, for servers with
no display.
"""

from __future__ import annotations

import asyncio
from typing import Any

import click

from deepseek_eyes.cli.common import (
    dump_json,
    ensure_can_listen,
    listening,
    loaded_settings,
    serve_http,
)
from deepseek_eyes.errors import DesktopError
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import DesktopSettings, Settings

__all__ = ["desktop_group"]


def _desktop(settings: Settings, xvfb: bool) -> DesktopSettings:
    return settings.desktop.model_copy(update={"headless": True}) if xvfb else settings.desktop


@click.group("desktop")
def desktop_group() -> None:
    """The Linux desktop for models: accessibility trees, guarded input, the newest state."""


@desktop_group.command("serve")
@click.option("--stdio", "transport", flag_value="stdio", default="stdio",
              help="JSON-RPC over stdin/stdout (the default).")
@click.option("--http", "transport", flag_value="http",
              help="Streamable HTTP at /mcp, behind a bearer token (desktop.token or "
                   "DEEPSEEK_EYES_DESKTOP_TOKEN); every connection shares the one desktop.")
@click.option("--host", default=None, help="HTTP bind address (default: desktop.host).")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="HTTP port (default: desktop.port; 0: any free port).")
@click.option("--xvfb", is_flag=True,
              help="Start a private Xvfb + D-Bus + AT-SPI desktop (desktop.headless).")
@click.option("--json", "as_json", is_flag=True,
              help="Describe the server as one JSON object (over HTTP once it listens; on "
                   "standard error with --stdio, whose standard output is the protocol).")
@click.pass_context
def serve_command(ctx: click.Context, transport: str, host: str | None, port: int | None,
                  xvfb: bool, as_json: bool) -> None:
    """Serve the desktop tools over MCP: stdio, or HTTP."""
    settings = loaded_settings(ctx).settings
    desktop = _desktop(settings, xvfb)
    if transport == "stdio" and (host is not None or port is not None):
        raise click.UsageError("--host and --port need --http")
    described = {"transport": transport, "headless": desktop.headless,
                 "display": desktop.display, "visual_mode": desktop.visual_mode,
                 "apps": sorted(desktop.apps), "max_elements": desktop.max_elements}
    where = "a private Xvfb" if desktop.headless else f"display {desktop.display or '$DISPLAY'}"
    apps = ", ".join(sorted(desktop.apps)) or "none"
    if transport == "stdio":
        click.echo(dump_json(described) if as_json else
                   f"desktop: MCP over stdio on {where}; apps {apps}", err=True)
        with DataHome.open(settings) as home:
            asyncio.run(_serve_stdio(desktop, home))
        return

    from deepseek_eyes.desktop.http import build_desktop_http_app, resolve_desktop_token
    from deepseek_eyes.desktop.service import DesktopService
    from deepseek_eyes.serving.security import HttpOptions

    options = HttpOptions.from_settings(desktop, resolve_desktop_token(desktop), host)
    bind_port = desktop.port if port is None else port
    ensure_can_listen(options.host, bind_port)

    def announce(bound_host: str, bound_port: int) -> None:
        listening_at = listening(bound_host, bound_port, "/mcp")
        if as_json:
            click.echo(dump_json({**described, "listening": listening_at}))
        else:
            click.echo(f"desktop: MCP at {listening_at['url']} on {where}; apps {apps}",
                       err=True)

    with DataHome.open(settings) as home:
        service = DesktopService(desktop, blobs=home.blobs, audit=home.audit, owner="http")
        serve_http(build_desktop_http_app(service, options), options.host, bind_port,
                   announce)


async def _serve_stdio(desktop: DesktopSettings, home: DataHome) -> None:
    from deepseek_eyes.desktop.server import build_desktop_server
    from deepseek_eyes.desktop.service import DesktopService

    service = DesktopService(desktop, blobs=home.blobs, audit=home.audit, owner="stdio")
    await build_desktop_server(service).run_stdio_async()


@desktop_group.command("observe")
@click.option("--window", default=None, help="A window's ref or title: observe its elements.")
@click.option("--xvfb", is_flag=True, help="Observe a private, empty headless desktop.")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"state_id", "scope", "origin", "scale", "windows", …, '
                   '"observation"}.')
@click.pass_context
def observe_command(ctx: click.Context, window: str | None, xvfb: bool, as_json: bool) -> None:
    """Observe the desktop (or one window) and print what a model would see."""
    settings = loaded_settings(ctx).settings
    data = asyncio.run(_observe(_desktop(settings, xvfb), window))
    if as_json:
        click.echo(dump_json(data))
    else:
        click.echo(data["observation"])


async def _observe(desktop: DesktopSettings, window: str | None) -> dict[str, Any]:
    from deepseek_eyes.desktop.service import DesktopService

    service = DesktopService(desktop)
    try:
        arguments: dict[str, Any] = {"scope": "window", "window": window} if window else {}
        result = await service.call("desktop_observe", arguments)
    finally:
        await service.aclose()
    if result.is_error:
        error = result.data["error"]
        raise DesktopError(error["message"], code=error["code"], details=error["details"])
    data = {k: v for k, v in result.data.items() if k != "delta"}
    return {**data, "observation": result.text}
