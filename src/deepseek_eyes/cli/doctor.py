"""``deepseek-eyes doctor``: every check of a setup, one line each with its fix.

Thin over :mod:`deepseek_eyes.doctor`: ``ok``/``warn``/``FAIL`` then the check's name and
what it found, and under a check that is not ok, ``fix:`` and what to do. Exit status 1
when a check failed (a warning alone exits 0). ``--json`` prints the list of
``{check, status, detail, fix}`` objects and nothing else.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from deepseek_eyes.cli.common import dump_json
from deepseek_eyes.cli.progress import progress_on_stderr

__all__ = ["doctor_command"]

_MARK = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON list of {check, status, detail, fix}.")
@click.option("--probe", is_flag=True,
              help="Also probe the final models and the vision routes now (billed calls).")
@click.option("--timeout", type=click.FloatRange(min=0.1, max=120), default=5.0,
              show_default=True, help="Seconds each party may take to answer.")
@click.pass_context
def doctor_command(ctx: click.Context, as_json: bool, probe: bool, timeout: float) -> None:
    """Check the setup: one line a check with its fix; exit 1 when one fails."""
    from deepseek_eyes.doctor import DoctorOptions, failed, run_doctor

    config: Path | None = (ctx.find_root().obj or {}).get("config_path")
    with progress_on_stderr(as_json=as_json) as progress:
        progress.update("doctor: checking…")
        checks = asyncio.run(run_doctor(DoctorOptions(config, probe, timeout)))
    if as_json:
        click.echo(dump_json([c.json() for c in checks]))
    else:
        width = max(len(c.check) for c in checks)
        for check in checks:
            click.echo(f"{_MARK[check.status]}  {check.check.ljust(width)}  {check.detail}")
            if check.status != "ok" and check.fix:
                click.echo(f"      {''.ljust(width)}  fix: {check.fix}")
    if failed(checks):
        sys.exit(1)
