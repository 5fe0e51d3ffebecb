"""``deepseek-eyes browser …``: serve the browser MCP server, or observe one page now.
Thin: the work is in :mod:`deepseek_eyes.browser`.

``serve --stdio`` speaks MCP on standard input and output, so nothing else may reach
standard output: ``--json`` describes the server on standard error instead. ``serve --http``
refuses to start without a strong bearer token, and its ``--json`` object, printed on
standard output once the socket is bound, adds ``"listening": {"host", "port", "url"}``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import click

from deepseek_eyes.cli.common import (
    dump_json,
    ensure_can_listen,
    listening,
    loaded_settings,
    serve_http,
)
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
              help="JSON-RPC over stdin/stdout (the default).")
@click.option("--http", "transport", flag_value="http",
              help="Streamable HTTP at /mcp, behind a bearer token (browser.token or "
                   "DEEPSEEK_EYES_BROWSER_TOKEN).")
@click.option("--host", default=None, help="HTTP bind address (default: browser.host).")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="HTTP port (default: browser.port; 0: any free port).")
@click.option("--json", "as_json", is_flag=True,
              help="Describe the server as one JSON object (over HTTP once it listens; on "
                   "standard error with --stdio, whose standard output is the protocol).")
@click.pass_context
def serve_command(ctx: click.Context, transport: str, host: str | None, port: int | None,
                  as_json: bool) -> None:
    """Serve the browser tools over MCP: stdio, or HTTP with a browser per connection."""
    settings = loaded_settings(ctx).settings
    browser = settings.browser
    if transport == "stdio" and (host is not None or port is not None):
        raise click.UsageError("--host and --port need --http")
    token = None
    if transport == "http":
        from deepseek_eyes.browser.http import resolve_browser_token

        token = resolve_browser_token(browser)
    described = {"transport": transport, "visual_mode": browser.visual_mode,
                 "schemes": list(browser.allowed_schemes), "allow_hosts": list(
                     browser.allow_hosts), "deny_hosts": list(browser.deny_hosts),
                 "allow_private_network": browser.allow_private_network}
    if transport == "stdio":
        click.echo(dump_json(described) if as_json else
                   f"browser: MCP over stdio; schemes {', '.join(browser.allowed_schemes)}; "
                   f"visual mode {browser.visual_mode}", err=True)
        with DataHome.open(settings) as home:
            asyncio.run(_serve_stdio(settings, home))
        return

    from deepseek_eyes.browser.connections import BrowserPool
    from deepseek_eyes.browser.http import build_browser_http_app
    from deepseek_eyes.serving.security import HttpOptions

    options = HttpOptions.from_settings(browser, token or "", host)
    bind_port = browser.port if port is None else port
    ensure_can_listen(options.host, bind_port)

    def announce(bound_host: str, bound_port: int) -> None:
        where = listening(bound_host, bound_port, "/mcp")
        if as_json:
            click.echo(dump_json({**described, "listening": where}))
        else:
            click.echo(f"browser: MCP at {where['url']} (a browser per connection, at most "
                       f"{browser.max_sessions}); schemes "
                       f"{', '.join(browser.allowed_schemes)}", err=True)

    with DataHome.open(settings) as home:
        pool = BrowserPool(browser, downloads_dir=_downloads(settings, home), blobs=home.blobs,
                           audit=home.audit)
        serve_http(build_browser_http_app(pool, options), options.host, bind_port, announce)


async def _serve_stdio(settings: Settings, home: DataHome) -> None:
    from deepseek_eyes.browser.connections import BrowserPool
    from deepseek_eyes.browser.server import build_browser_server

    pool = BrowserPool(settings.browser, downloads_dir=_downloads(settings, home),
                       blobs=home.blobs, audit=home.audit)
    await build_browser_server(pool).run_stdio_async()


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

    service = BrowserService(settings.browser, downloads_dir=_downloads(settings, home),
                             audit=home.audit, data_dir=home.root)
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
