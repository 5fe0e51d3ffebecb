"""``deepseek-eyes config check``: validate a settings file and print every error.

An invalid file is an ordinary failure (``CONFIG_*``), reported by the entry point like any
other, so ``config check`` prints the same ``error CODE: sentence`` lines (and the same
JSON with ``--json``) as a command that loads the file.
"""

from __future__ import annotations

from pathlib import Path

import click

from deepseek_eyes.cli.common import dump_json, loaded_settings
from deepseek_eyes.settings import validate_settings_file

__all__ = ["config_group"]


@click.group("config")
def config_group() -> None:
    """Inspect and validate settings."""


@config_group.command("check")
@click.argument("path", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--json", "as_json", is_flag=True,
              help='Print {"valid": true, "path"}; errors as {"error": ...} on stdout.')
@click.pass_context
def check_command(ctx: click.Context, path: Path | None, as_json: bool) -> None:
    """Validate PATH (default: the file --config or the search path would load)."""
    if path is not None:
        validate_settings_file(path)
        source: Path | None = path
    else:
        source = loaded_settings(ctx).source
    if as_json:
        click.echo(dump_json({"valid": True, "path": None if source is None else str(source)}))
    elif source is None:
        click.echo("no settings file found; using the built-in defaults (valid)")
    else:
        click.echo(f"{source}: valid")
