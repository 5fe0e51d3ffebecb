"""What both ``mcp`` command modules use: the ``--json`` option, a host to run on, the
settings file an edit writes, and the gateway running for that file, if any.

When ``serve`` runs for the settings file a command names, ``status``, ``watch``, ``probe``
and ``restart`` ask that gateway (its control API, :mod:`deepseek_eyes.gateway.control`)
instead of starting servers of their own, and an edit, once written, is applied to it
(:func:`apply_to_gateway`); with none running they act on the file alone.

It exists to keep the dependency between :mod:`deepseek_eyes.cli.mcp` (inspection and
calls, and the group itself) and :mod:`deepseek_eyes.cli.mcp_manage` (lifecycle and
entries) one-way: ``mcp`` adds ``mcp_manage``'s commands to its group, and ``mcp_manage``
knows nothing of ``mcp``. Both import their shared pieces from here. An import-linter
contract in ``pyproject.toml`` keeps ``mcp_manage`` (and this module) from importing
``mcp``, lazily or not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from deepseek_eyes.cli.common import loaded_settings
from deepseek_eyes.cli.progress import Progress, progress_on_stderr
from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.running import running_host
from deepseek_eyes.settings import CONFIG_FILENAME, McpSettings, data_home

if TYPE_CHECKING:
    from deepseek_eyes.gateway.control_client import ControlClient

__all__ = ["apply_to_gateway", "json_option", "live_gateway", "target_file", "with_host"]

T = TypeVar("T")

json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def with_host(ctx: click.Context, as_json: bool,
              work: Callable[[McpHost], Awaitable[T]],
              servers: Callable[[McpSettings], Collection[str]] | None = None) -> T:
    """Run ``work`` on a host with the enabled servers started (those ``servers`` names)."""
    settings = loaded_settings(ctx).settings
    name = f"mcp {ctx.info_name}"
    started = servers(settings.mcp) if servers is not None else None

    async def run(progress: Progress) -> T:
        with DataHome.open(settings) as home:
            progress.update(f"{name}: connecting the servers…")
            async with running_host(settings, home, servers=started) as host:
                progress.update(f"{name}: waiting for the answer…")
                return await work(host)

    with progress_on_stderr(as_json=as_json) as progress:
        return asyncio.run(run(progress))


def target_file(ctx: click.Context) -> Path:
    """The file an edit writes: --config, else the one the search path finds, else ./."""
    root = ctx.find_root()
    explicit: Path | None = (root.obj or {}).get("config_path")
    if explicit is not None:
        return explicit
    source = loaded_settings(ctx).source
    return source if source is not None else Path.cwd() / CONFIG_FILENAME


def live_gateway(ctx: click.Context) -> ControlClient | None:
    """The control client of the gateway running for this command's settings file."""
    # Imported here: a command that finds no gateway loads no HTTP client.
    from deepseek_eyes.gateway.control_client import running_gateway

    loaded = loaded_settings(ctx)
    return running_gateway(data_home(loaded.settings), loaded.source)


def apply_to_gateway(ctx: click.Context) -> None:
    """After an edit: have the gateway running for the file apply it now (it would within
    half a second anyway; asking makes the command return once it is applied).

    Raises:
        DeepSeekEyesError: ``CONFIG_INVALID`` (and the like) when the gateway refused it.
    """
    from deepseek_eyes.errors import DeepSeekEyesError

    client = live_gateway(ctx)
    if client is None:
        return
    try:
        report = client.request("POST", "/control/reload", ok=(200, 202, 422))
    except DeepSeekEyesError as exc:
        if exc.code != "CONTROL_MCP_NOT_RUNNING":
            raise
        # The edit is written; only this gateway cannot take it live.
        click.echo(f"warning {exc.code}: {exc.message}", err=True)
        return
    if report.get("state") == "refused" or report["error"]:
        error = report["error"] or {}
        raise DeepSeekEyesError(str(error.get("message", "refused")),
                                code=str(error.get("code", "CONFIG_INVALID")),
                                details=error.get("details") or {})
    if not report["applied"]:  # the file changed again meanwhile (another edit, by hand)
        click.echo("the running gateway follows the file: it applies the newest version "
                   "once it settles", err=True)
        return
    click.echo("the running gateway applied it", err=True)
