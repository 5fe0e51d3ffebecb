"""``deepseek-eyes vision serve``: the eyes as an MCP server. Thin: the work is in
:mod:`deepseek_eyes.vision_server`.

``--stdio`` speaks MCP on standard input and output, so nothing else may reach standard
output: ``--json`` describes the server on standard error instead. ``--http`` refuses to
start without a strong bearer token, and its ``--json`` object, printed on standard output
once the socket is bound, adds ``"listening": {"host", "port", "url"}``.
"""

from __future__ import annotations

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
from deepseek_eyes.errors import CliError
from deepseek_eyes.settings import Settings
from deepseek_eyes.store import scopes

__all__ = ["vision_group"]


@click.group("vision")
def vision_group() -> None:
    """The eyes as an MCP server: see, look and stored evidence for any MCP host."""


def _open_world(settings: Settings) -> bool:
    """Whether a route may send an image off this machine (the tools' open-world hint)."""
    return settings.vision.auto_detect or any(r.kind != "local" for r in settings.vision.routes)


@vision_group.command("serve")
@click.option("--stdio", "transport", flag_value="stdio", default="stdio",
              help="JSON-RPC over stdin/stdout (the default).")
@click.option("--http", "transport", flag_value="http",
              help="Streamable HTTP at /mcp, behind a bearer token (vision.serve.token or "
                   "DEEPSEEK_EYES_VISION_TOKEN).")
@click.option("--root", "roots", multiple=True,
              type=click.Path(path_type=Path, file_okay=False),
              help="A directory whose images see may read (repeatable; with vision.serve.roots "
                   "and the client's MCP roots). No root: paths are refused.")
@click.option("--host", default=None, help="HTTP bind address (default: vision.serve.host).")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="HTTP port (default: vision.serve.port; 0: any free port).")
@click.option("--json", "as_json", is_flag=True,
              help="Describe the server as one JSON object (over HTTP once it listens; on "
                   "standard error with --stdio, whose standard output is the protocol).")
@click.pass_context
def serve_command(ctx: click.Context, transport: str, roots: tuple[Path, ...],
                  host: str | None, port: int | None, as_json: bool) -> None:
    """Serve see, look and evidence resources over MCP (stdio or HTTP)."""
    settings = loaded_settings(ctx).settings
    serve = settings.vision.serve
    if transport == "stdio" and (host is not None or port is not None):
        raise click.UsageError("--host and --port need --http")
    all_roots = [*serve.roots, *roots]
    for root in all_roots:
        if not root.expanduser().is_dir():
            raise CliError(f"the root {root} is not a directory", code="CLI_USAGE",
                           details={"root": str(root)})
    token = None
    if transport == "http":
        from deepseek_eyes.vision_server.http import resolve_vision_token

        token = resolve_vision_token(serve)
    from deepseek_eyes.vision_server.roots import ServedRoots

    served = ServedRoots.of(all_roots)
    described: dict[str, Any] = {
        "transport": transport, "roots": [str(r) for r in served.roots],
        "client_roots": transport == "stdio" or serve.http_client_roots,
        "tools": ["see", "look"]}
    if transport == "stdio":
        click.echo(dump_json(described) if as_json else
                   f"vision: MCP over stdio; roots: "
                   f"{', '.join(described['roots']) or 'none (client roots only)'}", err=True)
        from deepseek_eyes.serving import loop

        loop.run(_serve_stdio(settings, served))
        return

    from deepseek_eyes.serving.security import HttpOptions
    from deepseek_eyes.vision_server.http import build_vision_http_app

    options = HttpOptions.from_settings(serve, token or "", host)
    bind_port = serve.port if port is None else port
    ensure_can_listen(options.host, bind_port)

    def announce(bound_host: str, bound_port: int) -> None:
        where = listening(bound_host, bound_port, "/mcp")
        if as_json:
            click.echo(dump_json({**described, "listening": where}))
        else:
            click.echo(f"vision: MCP at {where['url']}; roots: "
                       f"{', '.join(described['roots']) or 'none'}"
                       f"{' (and client roots)' if described['client_roots'] else ''}",
                       err=True)

    from deepseek_eyes.home import DataHome
    from deepseek_eyes.vision.bridge import VisionBridge
    from deepseek_eyes.vision_server.service import VisionService

    with DataHome.open(settings) as home:
        service = VisionService(VisionBridge(settings, home), served,
                                max_listed=serve.max_listed_evidence,
                                scope=scopes.vision(token))
        app = build_vision_http_app(service, options, open_world=_open_world(settings),
                                    client_roots=serve.http_client_roots)
        serve_http(app, options.host, bind_port, announce)


async def _serve_stdio(settings: Settings, served: Any) -> None:
    from deepseek_eyes.home import DataHome
    from deepseek_eyes.serving.stdio import run_stdio
    from deepseek_eyes.vision.bridge import VisionBridge
    from deepseek_eyes.vision_server.server import build_vision_server
    from deepseek_eyes.vision_server.service import VisionService

    with DataHome.open(settings) as home:
        service = VisionService(VisionBridge(settings, home), served,
                                max_listed=settings.vision.serve.max_listed_evidence)
        await run_stdio(build_vision_server(service, open_world=_open_world(settings)))
