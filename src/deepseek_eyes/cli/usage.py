"""``deepseek-eyes usage``: totals per usage category."""

from __future__ import annotations

import click

from deepseek_eyes.cli.common import dump_json, loaded_settings
from deepseek_eyes.home import DataHome

__all__ = ["usage_command"]


@click.command("usage")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def usage_command(ctx: click.Context, as_json: bool) -> None:
    """Show exact provider usage and estimated attribution, kept apart."""
    with DataHome.open(loaded_settings(ctx).settings) as home:
        summary = home.usage.summary()
    if as_json:
        click.echo(dump_json(summary))
        return
    click.echo("exact provider usage:")
    for category, row in summary["exact"].items():
        click.echo(
            f"  {category:<18} calls={row['calls']} prompt={row['prompt_tokens']} "
            f"completion={row['completion_tokens']} reasoning={row['reasoning_tokens']} "
            f"cache_hit={row['cache_hit_tokens']} cache_miss={row['cache_miss_tokens']}"
        )
    if not summary["exact"]:
        click.echo("  (none)")
    click.echo("estimated attribution and counters:")
    for category, row in summary["estimated"].items():
        click.echo(f"  {category:<18} events={row['events']} tokens≈{row['estimated_tokens']}")
    if not summary["estimated"]:
        click.echo("  (none)")
