"""``deepseek-eyes evidence validate``: the strict gate, from the command line.

Invalid evidence is the library's own ``EVIDENCE_SCHEMA_INVALID`` (every issue's JSON
pointer in its details) and a file that is not JSON is ``EVIDENCE_FILE_INVALID``, both
reported by the entry point like any other failure.

The file may also be what ``see --json`` printed, as it is: one record a line, each with
its evidence under ``"evidence"``. Each record's evidence is gated, its pointers read from
the record (``/evidence/confidence``) and a failure names its line; a line where ``see``
refused the image holds no evidence and is ``EVIDENCE_FILE_INVALID``. One tool's output is
the other's input, with no ``jq`` in between.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    """Exit 0 when FILE is valid evidence (or see --json output); 1 with each error's JSON
    pointer when not."""
    try:
        text = file.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _not_json(file, exc) from None
    documents = _documents(file, text)
    chosen: list[Variant] = []
    for line, document in documents:
        value, prefix = _evidence_of(file, line, document)
        picked = _variant(value, variant)
        try:
            require_valid(value, picked)
        except EvidenceError as exc:
            raise _placed(exc, line if len(documents) > 1 else None, prefix) from None
        chosen.append(picked)
    first = chosen[0].value
    if as_json:
        body: dict[str, Any] = {"valid": True, "file": str(file), "variant": first}
        if len(documents) > 1:
            body["objects"] = len(documents)
        click.echo(dump_json(body))
    elif len(documents) > 1:
        click.echo(f"{file}: {len(documents)} valid objects ({first}, ...)")
    else:
        click.echo(f"{file}: valid {first}")


def _not_json(file: Path, exc: Exception) -> EvidenceError:
    return EvidenceError(f"{file} is not UTF-8 JSON: {exc}", code="EVIDENCE_FILE_INVALID",
                         details={"file": str(file)})


def _documents(file: Path, text: str) -> list[tuple[int, Any]]:
    """``(line, value)`` for one JSON document, else for each line of JSON lines."""
    try:
        return [(1, json.loads(text))]
    except ValueError as whole:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            raise _not_json(file, whole) from None
        documents: list[tuple[int, Any]] = []
        for number, line in lines:
            try:
                documents.append((number, json.loads(line)))
            except ValueError as exc:
                raise _not_json(file, ValueError(f"line {number}: {exc}")) from None
        return documents


def _evidence_of(file: Path, line: int, document: Any) -> tuple[Any, str]:
    """The evidence a document holds and its pointer prefix: a ``see --json`` record's
    ``evidence``, or the document itself."""
    if isinstance(document, dict) and isinstance(document.get("image"), dict):
        if "evidence" in document:
            return document["evidence"], "/evidence"
        if isinstance(document.get("error"), dict):
            code = document["error"].get("code")
            raise EvidenceError(
                f"{file} line {line}: see refused this image ({code}); it has no evidence",
                code="EVIDENCE_FILE_INVALID", details={"file": str(file), "line": line},
            )
    return document, ""


def _variant(value: Any, given: str | None) -> Variant:
    if given is not None:
        return Variant.parse(given)
    if isinstance(value, dict) and value.get("schema") == Variant.TARGET.value:
        return Variant.TARGET
    return Variant.EVIDENCE


def _placed(exc: EvidenceError, line: int | None, prefix: str) -> EvidenceError:
    """The gate's error with its pointers read from the file's own document."""
    if line is None and not prefix:
        return exc
    details = dict(exc.details)
    details["errors"] = [{**issue, "pointer": prefix + str(issue.get("pointer", ""))}
                         for issue in details.get("errors", [])]
    if line is not None:
        details["line"] = line
    message = exc.message
    issues = exc.details.get("errors") or []
    if prefix and issues:  # the gate's message names its first pointer: read it from here
        first = str(issues[0].get("pointer", "")) or "the root"
        message = message.replace(f" at {first}:", f" at {details['errors'][0]['pointer']}:", 1)
    where = f"line {line}: " if line is not None else ""
    return EvidenceError(f"{where}{message}", code=exc.code, details=details)
