"""``deepseek-eyes usage``: totals per usage category."""

from __future__ import annotations

import click

from deepseek_eyes.cli.common import dump_json, stored_database
from deepseek_eyes.usage import UsageCategory, UsageSummary, UsageTracker

__all__ = ["usage_command"]


@click.command("usage")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def usage_command(ctx: click.Context, as_json: bool) -> None:
    """Show exact provider usage, estimated attribution and counters, kept apart."""
    with stored_database(ctx) as db:
        summary: UsageSummary = (UsageTracker(db).summary() if db is not None
                                 else {"exact": {}, "estimated": {}})
    if as_json:
        click.echo(dump_json(summary))
        return
    click.echo("exact provider usage:")
    for category, totals in summary["exact"].items():
        click.echo(
            f"  {category:<18} calls={totals['calls']} prompt={totals['prompt_tokens']} "
            f"completion={totals['completion_tokens']} reasoning={totals['reasoning_tokens']} "
            f"cache_hit={totals['cache_hit_tokens']} cache_miss={totals['cache_miss_tokens']}"
        )
    if not summary["exact"]:
        click.echo("  (none)")
    # Counters (native visual turns, local OCR runs) cost no provider tokens: they are
    # listed apart, as events only, so a zero token count never reads like usage.
    estimated = {c: r for c, r in summary["estimated"].items() if not UsageCategory(c).counter}
    counters = {c: r for c, r in summary["estimated"].items() if UsageCategory(c).counter}
    click.echo("estimated attribution and avoided replay:")
    for category, row in estimated.items():
        click.echo(f"  {category:<18} events={row['events']} tokens≈{row['estimated_tokens']}")
    if not estimated:
        click.echo("  (none)")
    click.echo("counters (no provider, no tokens):")
    for category, row in counters.items():
        click.echo(f"  {category:<18} events={row['events']}")
    if not counters:
        click.echo("  (none)")
    unknown = summary.get("outcome_unknown")
    if unknown:
        # Written ahead and never completed: sent, billed or not, nobody knows.
        click.echo(f"called, outcome unknown: {unknown['calls']} upstream call(s) sent with no "
                   "answer recorded (the process ended or the disk filled); see `deepseek-eyes "
                   f"audit show TURN` for {', '.join(unknown['turns'][:5])}")
