"""``deepseek-eyes browser …``: serve the browser MCP server, or observe one page now.
Thin: the work is in :mod:`deepseek_eyes.browser`.

``serve --stdio`` speaks MCP on standard input and output, so nothing else may reach
standard output: ``--json`` describes the server on standard error instead.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import click

from deepseek_eyes.cli.common import dump_json, loaded_settings
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import Settings

__all__ = ["browser_group"]


def _downloads(settings: Settings, home: DataHome) -> Path:
    return settings.browser.downloads_dir or home.root / "browser" / "downloads"


@click.group("browser")
def browser_group() -> None:
    """A headless browser for models: compact observations, actions on the newest state."""


@browser_group.command("serve")
@click.option("--stdio", "transport", flag_value="stdio", default="stdio",
              help="JSON-RPC over stdin/stdout (the only transport so far).")
@click.option("--json", "as_json", is_flag=True,
              help="Describe the server as one JSON object on standard error.")
@click.pass_context
def serve_command(ctx: click.Context, transport: str, as_json: bool) -> None:
    """Serve the browser tools over MCP (stdio)."""
    settings = loaded_settings(ctx).settings
    browser = settings.browser
    described = {"transport": transport, "visual_mode": browser.visual_mode,
                 "schemes": list(browser.allowed_schemes), "allow_hosts": list(
                     browser.allow_hosts), "deny_hosts": list(browser.deny_hosts)}
    click.echo(dump_json(described) if as_json else
               f"browser: MCP over stdio; schemes {', '.join(browser.allowed_schemes)}; "
               f"visual mode {browser.visual_mode}", err=True)
    with DataHome.open(settings) as home:
        asyncio.run(_serve_stdio(settings, home))


async def _serve_stdio(settings: Settings, home: DataHome) -> None:
    from deepseek_eyes.browser.server import build_browser_server
    from deepseek_eyes.browser.service import BrowserService

    service = BrowserService(settings.browser, downloads_dir=_downloads(settings, home),
                             blobs=home.blobs)
    await build_browser_server(service).run_stdio_async()


@browser_group.command("observe")
@click.argument("url")
@click.option("--page", type=click.IntRange(1, 100_000), default=1,
              help="Page of the observation (1 = the viewport).")
@click.option("--detail", type=click.Choice(["compact", "text"]), default="compact",
              help="text: every text block in full.")
@click.option("--find", default=None, help="Only the items containing this text.")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"state_id", "url", "title", "page", "pages", "observation", …}.')
@click.pass_context
def observe_command(ctx: click.Context, url: str, page: int, detail: str, find: str | None,
                    as_json: bool) -> None:
    """Load URL in a fresh headless browser and print what a model would see."""
    settings = loaded_settings(ctx).settings
    with DataHome.open(settings) as home:
        data = asyncio.run(_observe(settings, home, url, page, detail, find))
    if as_json:
        click.echo(dump_json(data))
    else:
        click.echo(data["observation"])


async def _observe(settings: Settings, home: DataHome, url: str, page: int, detail: str,
                   find: str | None) -> dict[str, Any]:
    from deepseek_eyes.browser.service import BrowserService
    from deepseek_eyes.errors import BrowserError

    service = BrowserService(settings.browser, downloads_dir=_downloads(settings, home))
    try:
        loaded = await service.call("browser_navigate", {"url": url})
        result = loaded
        if not loaded.is_error and (page > 1 or detail != "compact" or find):
            arguments: dict[str, Any] = {"state_id": loaded.data["state_id"], "page": page,
                                         "detail": detail}
            if find:
                arguments["find"] = find
            result = await service.call("browser_observe", arguments)
    finally:
        await service.aclose()
    if result.is_error:
        error = result.data["error"]
        raise BrowserError(error["message"], code=error["code"], details=error["details"])
    return {**result.data, "observation": result.text}
