"""``deepseek-eyes audit verify|export|show|checkpoint|rotate-key``: the one audit chain.

Thin over :mod:`deepseek_eyes.audit`: verify walks the chain in the database (or in an
export with ``--file``) and exits 1 naming the first problem; ``--checkpoint`` adds a
checkpoint pinned outside the database, which is what catches a cut tail. Verify, show and
export open nothing for writing: not the data directory, not the database (read-only,
unmigrated), not the keyring (a missing one is reported, never created), so they work on a
read-only copy of a data directory. ``export --seal`` signs a checkpoint first, and so
writes, as ``checkpoint`` (the head signed now, the pinnable line printed) and
``rotate-key`` (a fresh signing key in front; older checkpoints keep verifying) do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from deepseek_eyes.audit.checkpoints import Checkpoint, checkpoint_if_new, sign_checkpoint
from deepseek_eyes.audit.export import export_path
from deepseek_eyes.audit.keys import AuditKeyring, audit_directory
from deepseek_eyes.audit.show import show
from deepseek_eyes.audit.verify import Report, verify_file, verify_path
from deepseek_eyes.cli.common import dump_json, loaded_settings
from deepseek_eyes.errors import AuditError
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import data_home
from deepseek_eyes.store.db import Database

__all__ = ["audit_group"]

_json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def _home(ctx: click.Context) -> DataHome:
    return DataHome.open(loaded_settings(ctx).settings)


@click.group("audit")
def audit_group() -> None:
    """One tamper-evident audit chain: verify, export, show, checkpoint, rotate-key."""


def _print_report(report: Report, as_json: bool) -> None:
    """The verdict first. A failed walk prints its error and then, on standard error and
    worded as what it got through before stopping, the counts: a summary that reads like
    success above the error hid the failure from a person skimming the output."""
    if as_json:
        click.echo(dump_json(report.as_json()))
        if report.problem is not None:
            raise SystemExit(1)
        return
    view = report.as_json()
    head = view["head"]
    counts = (f"{view['entries']} entries, {view['records_checked']} records checked, "
              f"{view['records_retained']} removed under retention, {view['checkpoints']} "
              f"checkpoints ({view['entries_after_last_checkpoint']} entries after the last)")
    if report.problem is None:
        click.echo(f"{view['source']}: {counts}; head "
                   f"{head['seq'] if head else '-'} {head['hash'][:16] if head else ''}; "
                   f"{view['seconds']} s")
        click.echo("ok: the chain is intact")
        return
    p = report.problem
    where = f"entry {p.seq}" if p.seq is not None else "outside the chain"
    click.echo(f"error {p.code}: {where}: {p.reason}", err=True)
    click.echo(f"  {view['source']}: the walk stopped there, after {counts}", err=True)
    raise SystemExit(1)


@audit_group.command("verify")
@click.option("--file", "path", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              default=None, help="Verify an export (audit export) instead of the database.")
@click.option("--checkpoint", "pinned", default=None, metavar="SEQ:HASH:TS:KEY:MAC",
              help="A checkpoint kept outside the database (audit checkpoint prints one).")
@_json_option
@click.pass_context
def verify_command(ctx: click.Context, path: Path | None, pinned: str | None,
                   as_json: bool) -> None:
    """Walk the whole chain; exit 0 when intact, 1 naming the first problem. Writes
    nothing."""
    checkpoint = Checkpoint.parse(pinned) if pinned else None
    settings = loaded_settings(ctx).settings
    root = data_home(settings)
    keyring = AuditKeyring.read_only(audit_directory(root))
    url = settings.store.url()
    report = (verify_file(path, keyring, pinned=checkpoint) if path is not None
              else verify_path(root / "eyes.db", keyring, pinned=checkpoint, url=url,
                               password=settings.store.password() if url else None))
    _print_report(report, as_json)


@audit_group.command("export")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--seal", is_flag=True,
              help="Sign a checkpoint of the head first (writes to the data directory); "
                   "the export's header is signed either way.")
@_json_option
@click.pass_context
def export_command(ctx: click.Context, path: Path, seal: bool, as_json: bool) -> None:
    """Write the chain to PATH as JSON lines (records as hashes, checkpoints included).
    Writes nothing to the data directory unless --seal."""
    settings = loaded_settings(ctx).settings
    root = data_home(settings)
    url = settings.store.url()
    if seal:  # asked for: a failure to sign is this command's failure, not a warning
        home = _home(ctx)
        try:
            checkpoint_if_new(home.db, home.audit_keys())
        finally:
            home.db.close()
    summary = export_path(root / "eyes.db", path, AuditKeyring.read_only(audit_directory(root)),
                          url=url, password=settings.store.password() if url else None)
    if as_json:
        click.echo(dump_json(summary))
    else:
        click.echo(f"{summary['path']}: {summary['entries']} entries, "
                   f"{summary['checkpoints']} checkpoints")


def _brief(item: dict[str, Any]) -> str:
    entry = item.get("chain")
    mark = "unchained" if entry is None else (
        f"#{entry['seq']} {'intact' if entry['intact'] else 'TAMPERED'}")
    return f"{item['ref']} [{mark}]"


@audit_group.command("show")
@click.argument("ident", metavar="ID")
@_json_option
@click.pass_context
def show_command(ctx: click.Context, ident: str, as_json: bool) -> None:
    """Show a chain entry, turn, session, image, evidence, request or operation, with its
    chain entries; a turn id shows the answer's whole provenance."""
    # Like verify, show only reads: a forensic or read-only copy of a data directory works.
    settings = loaded_settings(ctx).settings
    path = data_home(settings) / "eyes.db"
    url = settings.store.url()
    if url is None and not path.exists():
        raise AuditError(f"nothing is stored yet ({path} does not exist)",
                         code="AUDIT_NOT_FOUND")
    db = Database.open_read_only(path, url=url,
                                 password=settings.store.password() if url else None)
    try:
        view = show(db, ident)
    finally:
        db.close()
    if as_json:
        click.echo(dump_json(view))
        return
    click.echo(f"{view['kind']} {view.get('id', '')}".rstrip())
    for key, value in view.items():
        if isinstance(value, list):
            for item in value:
                if "ref" in item:
                    click.echo(f"  {key}: {_brief(item)}")
                elif isinstance(item, dict):  # an image of a turn
                    click.echo(f"  image {item.get('sha256')}")
                    for sub, items in item.items():
                        if isinstance(items, list):
                            for one in items:
                                click.echo(f"    {sub}: {_brief(one)}")
        elif key == "entry":
            click.echo(f"  entry #{value['seq']} {value['kind']} {value['hash']}")
        elif key == "record" and isinstance(value, dict):
            click.echo(f"  record: {_brief(value)}")


@audit_group.command("checkpoint")
@_json_option
@click.pass_context
def checkpoint_command(ctx: click.Context, as_json: bool) -> None:
    """Sign the chain's head now; print the line to keep elsewhere (verify --checkpoint)."""
    home = _home(ctx)
    try:
        checkpoint = sign_checkpoint(home.db, home.audit_keys())
    finally:
        home.db.close()
    if as_json:
        click.echo(dump_json(checkpoint.as_json()))
    else:
        click.echo(checkpoint.token())


@audit_group.command("rotate-key")
@_json_option
@click.pass_context
def rotate_key_command(ctx: click.Context, as_json: bool) -> None:
    """Put a fresh checkpoint key in front; older checkpoints keep verifying."""
    with _home(ctx) as home:
        keyring = home.audit_keys()
        old = keyring.active_id
        new = keyring.rotate()
        home.audit.append("audit.key_rotated", new, previous=old)
    if as_json:
        click.echo(dump_json({"active": new, "previous": old, "keys": keyring.ids()}))
    else:
        click.echo(f"audit key rotated: {old} -> {new}")
