"""``deepseek-eyes console``: the web console over a data directory, without the gateway.

It serves the same console ``serve`` mounts at ``/console`` (conversations with their
evidence, audit, usage, and the MCP servers of the settings file, whose allow and deny
lists it edits through the CLI's writer), on loopback only, on a port of its own. Without a
running gateway there are no approvals and no live MCP status; an MCP edit reaches a
gateway that runs for the same settings file through its settings watch.

The one-time login link is printed on standard error (with ``--json``, where it listens is
``{"listening": {...}}`` on standard output, the link still only on standard error).
"""

from __future__ import annotations

import socket
import sys

import click

from deepseek_eyes.cli.common import dump_json, ensure_can_listen, listening, loaded_settings

__all__ = ["console_command"]

DEFAULT_PORT = 8767


@click.command("console")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535),
              help="Loopback port (0: any free one).")
@click.option("--json", "as_json", is_flag=True,
              help='Say where it listens as {"listening": {...}} on standard output.')
@click.pass_context
def console_command(ctx: click.Context, port: int, as_json: bool) -> None:
    """Open the web console over the data directory, without the gateway."""
    # Imported here so that other commands never load the HTTP server stack.
    import uvicorn

    from deepseek_eyes.console.app import WebConsoleLogins, console_app, gateway_key_login
    from deepseek_eyes.console.control import ConsoleParts
    from deepseek_eyes.gateway.server import gateway_key
    from deepseek_eyes.home import DataHome
    from deepseek_eyes.serving import loop
    from deepseek_eyes.serving.console_login import login_url

    loaded = loaded_settings(ctx)
    host = "127.0.0.1"
    ensure_can_listen(host, port)
    where: list[str] = []

    def show_code(code: str) -> None:
        if where:
            click.echo(f"deepseek-eyes console login (one use): {login_url(where[0], code)}",
                       err=True)

    with DataHome.open(loaded.settings) as home:
        logins = WebConsoleLogins(show_code, key_scope=gateway_key_login(
            gateway_key(loaded.settings)))
        app = console_app(ConsoleParts(home, loaded.source, actor="cli"), logins)

        class _Announcing(uvicorn.Server):
            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets)
                if self.started and self.servers:
                    bound, bound_port = self.servers[0].sockets[0].getsockname()[:2]
                    shown = listening(bound, bound_port, "/console/")
                    if as_json:
                        click.echo(dump_json({"listening": shown}))
                    else:
                        click.echo(f"deepseek-eyes console listening on {shown['url']}",
                                   err=True)
                    where.append(shown["url"])
                    logins.issue()

        config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                                access_log=False, lifespan="off", server_header=False)
        loop.run(_Announcing(config).serve())
    sys.exit(0)
