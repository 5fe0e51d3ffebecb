"""``deepseek-eyes evidence validate``: the strict gate, from the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from deepseek_eyes.vision.evidence import validate_evidence
from deepseek_eyes.vision.types import Variant

__all__ = ["evidence_group"]


@click.group("evidence")
def evidence_group() -> None:
    """Work with evidence objects."""


@evidence_group.command("validate")
@click.argument("file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option(
    "--variant",
    type=click.Choice(["evidence", "target"]),
    default=None,
    help="Schema variant (default: from the object's own schema field, else evidence).",
)
def validate_command(file: Path, variant: str | None) -> None:
    """Exit 0 when FILE is valid evidence; 1 with each error's JSON pointer when not."""
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        click.echo(f"{file}: not JSON: {exc}", err=True)
        sys.exit(1)
    if variant is not None:
        chosen = Variant.parse(variant)
    elif isinstance(value, dict) and value.get("schema") == Variant.TARGET.value:
        chosen = Variant.TARGET
    else:
        chosen = Variant.EVIDENCE
    issues = validate_evidence(value, chosen)
    if not issues:
        click.echo(f"{file}: valid {chosen.value}")
        return
    click.echo(f"{file}: {len(issues)} error(s) against {chosen.value}", err=True)
    for issue in issues:
        click.echo(f"  {issue.pointer or '/'}: {issue.message} [{issue.keyword}]", err=True)
    sys.exit(1)
