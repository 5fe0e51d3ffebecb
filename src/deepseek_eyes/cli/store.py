"""``deepseek-eyes store migrate --to postgresql://…``: move a data directory's store into
PostgreSQL. Thin over :mod:`deepseek_eyes.store.copy`: the rows and blobs are copied into
an empty database, then the audit chain is verified *on the target* with the data
directory's audit keyring, and the command exits 1 naming the first problem when it does
not verify. Point ``[store] database_url`` (and ``blobs_url = "database"``) at the target
afterwards; the data directory keeps its keyrings and artifacts.
"""

from __future__ import annotations

import click

from deepseek_eyes.audit.keys import AuditKeyring, audit_directory
from deepseek_eyes.audit.verify import verify_path
from deepseek_eyes.cli.common import dump_json, loaded_settings
from deepseek_eyes.errors import ConfigError
from deepseek_eyes.settings import data_home
from deepseek_eyes.settings.store import check_database_url
from deepseek_eyes.store.copy import copy_to_postgresql
from deepseek_eyes.store.postgres import redact

__all__ = ["store_group"]


@click.group("store")
def store_group() -> None:
    """The store's database: move a data directory into PostgreSQL."""


@store_group.command("migrate")
@click.option("--to", "url", required=True, metavar="postgresql://USER@HOST:PORT/DB",
              help="An empty PostgreSQL database (no password in the URL: PGPASSWORD, "
                   "~/.pgpass or [store] database_password).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def migrate_command(ctx: click.Context, url: str, as_json: bool) -> None:
    """Copy the data directory's rows and blobs into an empty PostgreSQL database and
    verify the audit chain there; exit 1 when it does not verify."""
    try:
        check_database_url(url)
    except ValueError as exc:
        raise ConfigError(f"--to {exc}", code="CONFIG_INVALID") from exc
    settings = loaded_settings(ctx).settings
    root = data_home(settings)
    password = settings.store.password()
    summary = copy_to_postgresql(root, url, password=password)
    report = verify_path(root / "eyes.db", AuditKeyring.read_only(audit_directory(root)),
                         url=url, password=password)
    view = {"target": redact(url), "rows": summary.rows, "blobs": summary.blobs,
            "blob_bytes": summary.blob_bytes, "verify": report.as_json()}
    if as_json:
        click.echo(dump_json(view))
    else:
        click.echo(f"{redact(url)}: {sum(summary.rows.values())} rows in "
                   f"{len(summary.rows)} tables, {summary.blobs} blobs "
                   f"({summary.blob_bytes} bytes)")
    if report.problem is not None:
        p = report.problem
        click.echo(f"error {p.code}: the chain does not verify on the target: {p.reason}",
                   err=True)
        raise SystemExit(1)
    if not as_json:
        click.echo(f"ok: the chain verifies on the target ({report.entries} entries)")
