"""``deepseek-eyes init [PATH]``: start from nothing with a commented settings file.

The text and the exclusive create live in :mod:`deepseek_eyes.settings.starter`; this
module only picks the path and says what to do next.
"""

from __future__ import annotations

from pathlib import Path

import click

from deepseek_eyes.cli.common import dump_json
from deepseek_eyes.settings.base import CONFIG_FILENAME
from deepseek_eyes.settings.starter import write_starter_settings

__all__ = ["init_command"]


@click.command("init")
@click.argument("path", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help='Print {"created": PATH}.')
def init_command(path: Path | None, as_json: bool) -> None:
    """Write a commented settings file (default ./deepseek-eyes.toml); never overwrites."""
    target = path if path is not None else Path(CONFIG_FILENAME)
    write_starter_settings(target)
    if as_json:
        click.echo(dump_json({"created": str(target)}))
        return
    click.echo(f"wrote {target}")
    click.echo('next: export DEEPSEEK_API_KEY=sk-... and '
               'export DEEPSEEK_EYES_GATEWAY_KEY="$(deepseek-eyes token)",')
    click.echo(f"      then deepseek-eyes config check {target}")
