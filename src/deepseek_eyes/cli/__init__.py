"""The ``deepseek-eyes`` command line: a thin layer over the library.

Each command group lives in its own module and holds no business logic: it parses options,
calls the library and renders. Every DeepSeekEyes error reaches the user as its code and one
sentence, never as a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from deepseek_eyes import __version__
from deepseek_eyes.cli.ask import ask_command, serve_command, sessions_group
from deepseek_eyes.cli.config import config_group
from deepseek_eyes.cli.evidence import evidence_group
from deepseek_eyes.cli.mcp import mcp_group
from deepseek_eyes.cli.see import routes_command, see_command
from deepseek_eyes.cli.terminal import terminal_group
from deepseek_eyes.cli.usage import usage_command
from deepseek_eyes.errors import DeepSeekEyesError

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Settings file (default: ./deepseek-eyes.toml, then the user config dir).",
)
@click.version_option(__version__, prog_name="deepseek-eyes")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None) -> None:
    """DeepSeekEyes: validated visual evidence for a text-only reasoning model."""
    ctx.ensure_object(dict)
    ctx.obj["config_path"] = config_path


cli.add_command(see_command)
cli.add_command(routes_command)
cli.add_command(evidence_group)
cli.add_command(config_group)
cli.add_command(usage_command)
cli.add_command(terminal_group)
cli.add_command(mcp_group)
cli.add_command(ask_command)
cli.add_command(sessions_group)
cli.add_command(serve_command)


def main() -> None:
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except DeepSeekEyesError as exc:
        click.echo(f"error {exc.code}: {exc.message}", err=True)
        for item in exc.details.get("errors", []) if isinstance(exc.details, dict) else []:
            if isinstance(item, dict) and "path" in item:
                click.echo(f"  {item['path']}: {item['message']}", err=True)
        sys.exit(1)
    except SystemExit:
        raise
