"""``deepseek-eyes config check``: validate a settings file and print every error."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from deepseek_eyes.cli.common import loaded_settings
from deepseek_eyes.errors import ConfigError
from deepseek_eyes.settings import validate_settings_file

__all__ = ["config_group"]


@click.group("config")
def config_group() -> None:
    """Inspect and validate settings."""


@config_group.command("check")
@click.argument("path", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.pass_context
def check_command(ctx: click.Context, path: Path | None) -> None:
    """Validate PATH (default: the file --config or the search path would load)."""
    try:
        if path is not None:
            validate_settings_file(path)
            source: Path | None = path
        else:
            source = loaded_settings(ctx).source
    except ConfigError as exc:
        click.echo(f"{exc.details.get('path', path)}: {exc.message} [{exc.code}]", err=True)
        for item in exc.details.get("errors", []):
            click.echo(f"  {item['path']}: {item['message']}", err=True)
        sys.exit(1)
    if source is None:
        click.echo("no settings file found; using the built-in defaults (valid)")
    else:
        click.echo(f"{source}: valid")
