"""The ``deepseek-eyes`` command line: a thin layer over the library.

Each command group lives in its own module and holds no business logic: it parses options,
calls the library and renders.

Commands are imported only when they run. The library's layers pull in heavy dependencies
at import time (the MCP SDK, uvicorn, the OCR engine, the HTTP client, numpy), and importing
every command to print ``--help`` or to answer ``see`` from the cache cost about two seconds
of a start-up that should cost tens of milliseconds. So the root group knows each command
by name, module and one-line summary (:data:`COMMANDS`; a test keeps the summaries equal to
the commands' own help) and imports the module on first use.

Every failure reaches the user the same way, never as a traceback: ``error CODE: one
sentence`` on standard error, or with ``--json`` on the command line
``{"error": {"code", "message", "details"}}`` on standard output, where the rest of the
machine-readable output goes. Exit status: 0 success, 1 failure, 2 usage (``CLI_USAGE``).

Every command takes ``--json`` (a test walks the command tree for it). Progress goes to
standard error only, and only for a person at a terminal (:mod:`deepseek_eyes.cli.progress`).
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from deepseek_eyes import __version__
from deepseek_eyes.errors import DeepSeekEyesError

__all__ = ["COMMANDS", "cli", "main"]

#: name -> (module, attribute, first line of its help). Imported on first use only.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "see": ("deepseek_eyes.cli.see", "see_command",
            "Turn each IMAGE into validated visual evidence."),
    "routes": ("deepseek_eyes.cli.see", "routes_command",
               "List vision routes with their order, health, circuit and probe state."),
    "models": ("deepseek_eyes.cli.models", "models_command",
               "List the final models: whether each sees, and how that is known."),
    "evidence": ("deepseek_eyes.cli.evidence", "evidence_group",
                 "Work with evidence objects."),
    "config": ("deepseek_eyes.cli.config", "config_group", "Inspect and validate settings."),
    "doctor": ("deepseek_eyes.cli.doctor", "doctor_command",
               "Check the setup: one line a check with its fix; exit 1 when one fails."),
    "init": ("deepseek_eyes.cli.init", "init_command",
             "Write a commented settings file (default ./deepseek-eyes.toml); never "
             "overwrites."),
    "usage": ("deepseek_eyes.cli.usage", "usage_command",
              "Show exact provider usage, estimated attribution and counters, kept apart."),
    "terminal": ("deepseek_eyes.cli.terminal", "terminal_group",
                 "The terminal MCP server: plan, approve, execute, with signed receipts."),
    "mcp": ("deepseek_eyes.cli.mcp", "mcp_group",
            "The MCP host: servers, exposure policy, calls and their audit."),
    "browser": ("deepseek_eyes.cli.browser", "browser_group",
                "A headless browser for models: compact observations, actions on the newest "
                "state."),
    "desktop": ("deepseek_eyes.cli.desktop", "desktop_group",
                "The Linux desktop for models: accessibility trees, guarded input, the newest "
                "state."),
    "ask": ("deepseek_eyes.cli.ask", "ask_command",
            'Ask about IMAGE... : deepseek-eyes ask [IMAGE...] "QUESTION".'),
    "chat": ("deepseek_eyes.cli.chat", "chat_command",
             "Chat with the model: one line a message, /help lists the commands."),
    "sessions": ("deepseek_eyes.cli.ask", "sessions_group",
                 "Inspect stored sessions (append-only event logs)."),
    "serve": ("deepseek_eyes.cli.serve", "serve_command", "Run the OpenAI-compatible gateway."),
    "console": ("deepseek_eyes.cli.console", "console_command",
                "Open the web console over the data directory, without the gateway."),
    "token": ("deepseek_eyes.cli.token", "token_command",
              "Print a fresh 256-bit bearer token for the gateway or any server."),
    "audit": ("deepseek_eyes.cli.audit", "audit_group",
              "One tamper-evident audit chain: verify, export, show, checkpoint, rotate-key."),
    "store": ("deepseek_eyes.cli.store", "store_group",
              "The store's database: move a data directory into PostgreSQL."),
    "vision": ("deepseek_eyes.cli.vision", "vision_group",
               "The eyes as an MCP server: see, look and stored evidence for any MCP host."),
}

USAGE_EXIT = 2


class LazyGroup(click.Group):
    """A group that imports a command's module only when that command is looked up to run;
    its help lists the summaries from :data:`COMMANDS` without importing anything."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute, _ = COMMANDS[cmd_name]
            command = getattr(importlib.import_module(module), attribute)
            self.add_command(command, cmd_name)
            _started()
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            if name in COMMANDS and name not in self.commands:
                # Click's own shortening, applied to the summary without importing.
                summary = click.Command(name, help=COMMANDS[name][2]).get_short_help_str(limit)
            else:
                summary = self.commands[name].get_short_help_str(limit)
            rows.append((name, summary))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
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


def wants_json(args: Sequence[str]) -> bool:
    """Whether ``--json`` was given (before any ``--``): failures are then JSON too. Read
    from the arguments, not from a parsed option, so that a usage error is JSON as well."""
    head = list(args)
    if "--" in head:
        head = head[: head.index("--")]
    return "--json" in head


def _usage_message(exc: click.ClickException) -> str:
    message = exc.format_message().strip().rstrip(".")
    context = getattr(exc, "ctx", None)
    if context is not None:
        message += f" (see '{context.command_path} --help')"
    return message + "."


def _report(error: dict[str, Any], as_json: bool) -> None:
    """Print one failure: JSON on stdout with ``--json``, else ``error CODE: message`` and
    any itemised errors (settings paths, JSON pointers) on stderr."""
    if as_json:
        click.echo(json.dumps({"error": error}, ensure_ascii=False, separators=(",", ":")))
        return
    click.echo(f"error {error['code']}: {error['message']}", err=True)
    details = error.get("details")
    for item in details.get("errors", []) if isinstance(details, dict) else []:
        if isinstance(item, dict) and "message" in item:
            where = item.get("path", item.get("pointer")) or "/"
            keyword = f" [{item['keyword']}]" if item.get("keyword") else ""
            click.echo(f"  {where}: {item['message']}{keyword}", err=True)


#: Whether this process's start-up turned the cyclic garbage collector off (see :func:`main`).
_collector_paused = False


def _started() -> None:
    """Start-up is over: the cyclic garbage collector runs again, and what start-up made
    (modules, classes, schemas: all of it kept for the life of the process) is frozen out
    of its walks, so a long-running command's collections never visit it."""
    global _collector_paused
    if _collector_paused:
        _collector_paused = False
        gc.freeze()
        gc.enable()


#: pydantic's switch for its plugins (the ``pydantic`` entry-point group).
PYDANTIC_PLUGINS_SWITCH = "PYDANTIC_DISABLE_PLUGINS"


def _no_pydantic_plugins() -> None:
    """This process loads no pydantic plugin unless its environment asks for them.

    pydantic looks for plugins when it builds its first validator, by reading the entry
    points of every installed distribution: a few hundred small files, 2-3% of a cached
    ``see`` in an environment of 150 packages, paid by every command. Nothing here uses a
    plugin, and a plugin is code from any installed package hooked into the validation of
    the settings. Who wants them sets ``PYDANTIC_DISABLE_PLUGINS`` (empty: load all), which
    is then left as it is.

    Switched off here, pydantic's plugin loader could only answer "none"; importing it
    still imports ``importlib.metadata`` (email, zipfile, csv: about 3% of a cached
    ``see``). So the loader's one function is given as that answer, unless pydantic loaded
    its own already; a test checks it is the only name pydantic takes from the module."""
    if PYDANTIC_PLUGINS_SWITCH in os.environ:
        return
    os.environ[PYDANTIC_PLUGINS_SWITCH] = "__all__"
    if PYDANTIC_PLUGIN_LOADER not in sys.modules:
        loader = types.ModuleType(PYDANTIC_PLUGIN_LOADER, "pydantic's plugins, switched off.")
        loader.get_plugins = _no_plugins  # type: ignore[attr-defined]
        sys.modules[PYDANTIC_PLUGIN_LOADER] = loader


#: The module pydantic asks for its plugins when it builds a validator.
PYDANTIC_PLUGIN_LOADER = "pydantic.plugin._loader"


def _no_plugins() -> tuple[()]:
    return ()


def _command_of(args: Sequence[str]) -> str | None:
    """The command the arguments name (``see`` in ``--config FILE see IMAGE``), if any."""
    rest = iter(args)
    for arg in rest:
        if arg == "--config":
            next(rest, None)
        elif not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def _keep_compiled_code(args: Sequence[str]) -> None:
    """The source texts the command's imports compile (dataclasses' methods, typing's
    forward references) take their code from the table kept for that command
    (:mod:`deepseek_eyes.cli.compiled_code`); nothing for ``--help`` or ``--version``."""
    command = _command_of(args)
    if command is not None:
        from deepseek_eyes.cli import compiled_code

        compiled_code.install(command)


def main(argv: Sequence[str] | None = None) -> None:
    """The process's command line (``argv`` None) or the given arguments (in process)."""
    global _collector_paused
    if argv is None:
        _no_pydantic_plugins()
    if argv is None and gc.isenabled():
        # Importing a command makes a few hundred thousand objects that live as long as
        # the process and hardly a garbage cycle; the collector walked them again and
        # again, a tenth of a cached `see`. Off until the command is imported; a caller
        # in process (argv given) keeps its collector as it is.
        _collector_paused = True
        gc.disable()
    if argv is None:
        _keep_compiled_code(sys.argv[1:])  # its table's code objects are such objects too
    try:
        _main(argv)
    finally:
        _started()


def _main(argv: Sequence[str] | None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = wants_json(args)
    try:
        status = cli.main(args=args, prog_name="deepseek-eyes", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        _report({"code": "CLI_USAGE", "message": _usage_message(exc), "details": {}}, as_json)
        sys.exit(USAGE_EXIT)
    except DeepSeekEyesError as exc:
        _report(exc.to_dict(), as_json)
        sys.exit(USAGE_EXIT if exc.code == "CLI_USAGE" else 1)
    if isinstance(status, int) and status:
        sys.exit(status)  # click's own exits (--help, --version) return their status
