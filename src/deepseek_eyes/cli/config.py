"""``deepseek-eyes config check``: validate a settings file and print every error.

An invalid file is an ordinary failure (``CONFIG_*``), reported by the entry point like any
other, so ``config check`` prints the same ``error CODE: sentence`` lines (and the same
JSON with ``--json``) as a command that loads the file.

A valid file can still define a vision route that no acquisition will ever try (an
auto-detected model whose name a configured route takes, ...). That is a warning, not an
error: ``warning CONFIG_ROUTE_UNREACHABLE: sentence`` on standard error (a ``warnings`` list
in the JSON, present only when there is one), and the exit status stays 0
(:mod:`deepseek_eyes.vision.routing.reach` judges). So is a model name DeepSeek has made an
alias or retired (``CONFIG_MODEL_RENAMED``, naming its successor). And so is each
``{ env = "NAME" }`` the file names whose variable is not set in this environment
(``CONFIG_ENV_MISSING``, the code the first use would fail with, once per reference, naming
the key path and the variable): the file is valid, but what needs it will not run here.
``--strict`` makes any warning exit 1 (a check before a deployment), the output unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from deepseek_eyes.cli.common import dump_json, loaded_settings
from deepseek_eyes.llm.known import renamed, renamed_note
from deepseek_eyes.settings import Settings, validate_settings_file
from deepseek_eyes.settings.references import unset_references
from deepseek_eyes.vision.routing.reach import unreachable_routes

__all__ = ["config_group"]


@click.group("config")
def config_group() -> None:
    """Inspect and validate settings."""


@config_group.command("check")
@click.argument("path", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--json", "as_json", is_flag=True,
              help='Print {"valid": true, "path"} (and "warnings" when any); errors as '
                   '{"error": ...} on stdout.')
@click.option("--strict", is_flag=True, help="Exit 1 when there is any warning.")
@click.pass_context
def check_command(ctx: click.Context, path: Path | None, as_json: bool, strict: bool) -> None:
    """Validate PATH (default: the file --config or the search path would load)."""
    if path is not None:
        settings = validate_settings_file(path)
        source: Path | None = path
    else:
        loaded = loaded_settings(ctx)
        settings, source = loaded.settings, loaded.source
    warnings = [w.to_dict() for w in unreachable_routes(settings)]
    warnings += renamed_models(settings)
    warnings += unset_variables(settings)
    if as_json:
        # "warnings" only when there are some: a clean file reads as it always did.
        body: dict[str, Any] = {"valid": True, "path": None if source is None else str(source)}
        if warnings:
            body["warnings"] = warnings
        click.echo(dump_json(body))
    else:
        if source is None:
            click.echo("no settings file found; using the built-in defaults (valid)")
        else:
            click.echo(f"{source}: valid")
        for warning in warnings:
            click.echo(f"warning {warning['code']}: {warning['message']}", err=True)
    if strict and warnings:
        ctx.exit(1)


def unset_variables(settings: Settings) -> list[dict[str, Any]]:
    """A ``CONFIG_ENV_MISSING`` warning for each named reference whose variable is unset."""
    return [{"code": "CONFIG_ENV_MISSING",
             "message": f"{ref.path} = {{ env = \"{ref.env}\" }}, but {ref.env} is not set "
                        "in this environment; set it where deepseek-eyes runs (what needs it "
                        "fails until then)",
             "details": {"path": ref.path, "env": ref.env}}
            for ref in unset_references(settings)]


def renamed_models(settings: Settings) -> list[dict[str, Any]]:
    """A ``CONFIG_MODEL_RENAMED`` warning for each alias or retired name the settings use."""
    names = [settings.llm.model, *(m.id for m in settings.llm.models),
             settings.vision.deepseek.model]
    out: list[dict[str, Any]] = []
    for model in dict.fromkeys(n for n in names if n is not None):
        name, note = renamed(model), renamed_note(model)
        if name is None or note is None:
            continue
        out.append({"code": "CONFIG_MODEL_RENAMED", "message": note,
                    "details": {"model": model, "successor": name.successor,
                                "kind": name.kind, "since": name.since}})
    return out
