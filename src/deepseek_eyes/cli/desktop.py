"""``deepseek-eyes desktop …``: serve the desktop MCP server, or observe the desktop now.
Thin: the work is in :mod:`deepseek_eyes.desktop`.

``serve --stdio`` speaks MCP on standard input and output, so nothing else may reach
standard output: ``--json`` describes the server on standard error instead. ``--xvfb``
starts a private headless desktop (Xvfb, D-Bus, AT-SPI) for the session, for servers with
no display.
"""

from __future__ import annotations

import asyncio
from typing import Any

import click

from deepseek_eyes.cli.common import dump_json, loaded_settings
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
              help="JSON-RPC over stdin/stdout (the default and only transport).")
@click.option("--xvfb", is_flag=True,
              help="Start a private Xvfb + D-Bus + AT-SPI desktop (desktop.headless).")
@click.option("--json", "as_json", is_flag=True,
              help="Describe the server as one JSON object on standard error (standard "
                   "output is the protocol).")
@click.pass_context
def serve_command(ctx: click.Context, transport: str, xvfb: bool, as_json: bool) -> None:
    """Serve the desktop tools over MCP on stdio."""
    settings = loaded_settings(ctx).settings
    desktop = _desktop(settings, xvfb)
    described = {"transport": transport, "headless": desktop.headless,
                 "display": desktop.display, "visual_mode": desktop.visual_mode,
                 "apps": sorted(desktop.apps), "max_elements": desktop.max_elements}
    where = "a private Xvfb" if desktop.headless else f"display {desktop.display or '$DISPLAY'}"
    apps = ", ".join(sorted(desktop.apps)) or "none"
    click.echo(dump_json(described) if as_json else
               f"desktop: MCP over stdio on {where}; apps {apps}", err=True)
    with DataHome.open(settings) as home:
        asyncio.run(_serve_stdio(desktop, home))


async def _serve_stdio(desktop: DesktopSettings, home: DataHome) -> None:
    from deepseek_eyes.desktop.server import build_desktop_server
    from deepseek_eyes.desktop.service import DesktopService

    await build_desktop_server(DesktopService(desktop, blobs=home.blobs)).run_stdio_async()


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
