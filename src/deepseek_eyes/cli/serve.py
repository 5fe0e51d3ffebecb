"""``deepseek-eyes serve``: the OpenAI-compatible gateway, with the listening address checked
first.

uvicorn reports a busy port as a log line and exit status 3; the command line promises
``error CODE: sentence`` and status 1 for every failure, so the port is tried here before the
server starts. Once ``gateway.server.serve`` raises a coded error for a failed bind, the check
can go.

With ``--json``, the one JSON object is ``{"listening": {"host", "port", "url"}}``, printed
on standard output once the socket is bound (so a supervisor that starts it with
``--port 0`` learns the port from it); the gateway's warnings stay on standard error.
"""

from __future__ import annotations

import sys

import click

from deepseek_eyes.cli.common import dump_json, ensure_can_listen, listening, loaded_settings

__all__ = ["serve_command"]


def _announce_json(host: str, port: int) -> None:
    click.echo(dump_json({"listening": listening(host, port, "/v1")}))


@click.command("serve")
@click.option("--host", default=None, help="Bind address (default gateway.host, 127.0.0.1).")
@click.option("--port", default=None, type=click.IntRange(0, 65535),
              help="Port (default gateway.port, 8765).")
@click.option("--json", "as_json", is_flag=True,
              help='Say where it listens as {"listening": {...}} on standard output.')
@click.pass_context
def serve_command(ctx: click.Context, host: str | None, port: int | None,
                  as_json: bool) -> None:
    """Run the OpenAI-compatible gateway."""
    # Imported here so that other commands never load the HTTP server stack.
    from deepseek_eyes.gateway.server import serve

    loaded = loaded_settings(ctx)
    settings = loaded.settings
    gateway = settings.gateway
    ensure_can_listen(host or gateway.host, gateway.port if port is None else port)
    serve(settings, host=host, port=port, announce=_announce_json if as_json else None,
          settings_path=loaded.source)
    sys.exit(0)
