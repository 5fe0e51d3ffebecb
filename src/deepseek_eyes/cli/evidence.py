"""``deepseek-eyes evidence validate``: the strict gate, from the command line.

Invalid evidence is the library's own ``EVIDENCE_SCHEMA_INVALID`` (every issue's JSON
pointer in its details) and a file that is not JSON is ``EVIDENCE_FILE_INVALID``, both
reported by the entry point like any other failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from deepseek_eyes.cli.common import dump_json
from deepseek_eyes.errors import EvidenceError
from deepseek_eyes.vision.evidence.gate import require_valid
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
@click.option("--json", "as_json", is_flag=True,
              help='Print {"valid": true, "file", "variant"}; errors as {"error": ...} on stdout.')
def validate_command(file: Path, variant: str | None, as_json: bool) -> None:
    """Exit 0 when FILE is valid evidence; 1 with each error's JSON pointer when not."""
    try:
        value = json.loads(file.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise EvidenceError(
            f"{file} is not UTF-8 JSON: {exc}", code="EVIDENCE_FILE_INVALID",
            details={"file": str(file)},
        ) from None
    if variant is not None:
        chosen = Variant.parse(variant)
    elif isinstance(value, dict) and value.get("schema") == Variant.TARGET.value:
        chosen = Variant.TARGET
    else:
        chosen = Variant.EVIDENCE
    require_valid(value, chosen)
    if as_json:
        click.echo(dump_json({"valid": True, "file": str(file), "variant": chosen.value}))
    else:
        click.echo(f"{file}: valid {chosen.value}")
