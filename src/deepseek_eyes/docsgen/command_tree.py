"""The command reference: every command of the click tree, its options and arguments.

Walked through click's own API (``list_commands``/``get_command``), so the lazy root group
imports each command's module here, as it does when that command runs. What a command's
``--json`` prints is the ``--json`` option's own help (every command has one: a CLI test
walks the tree for it), shown beside the command so the shape is read from the code.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import click

from deepseek_eyes.docsgen.markdown import anchor, cell, code

__all__ = ["CommandDoc", "ParamDoc", "command_docs", "commands_page"]

PROG = "deepseek-eyes"
#: click 8.3 marks "no default" with a sentinel of its own (older versions use None).
_UNSET = getattr(click.core, "UNSET", None)


@dataclass(frozen=True)
class ParamDoc:
    """One option or argument as the reference shows it."""

    names: str  # "--route" / "-h, --help" / "IMAGES..."
    kind: str  # "option" or "argument"
    type: str
    default: str
    help: str
    required: bool


@dataclass(frozen=True)
class CommandDoc:
    """One command (a group is a command too) at its full path, ``deepseek-eyes mcp call``."""

    path: str
    usage: str
    help: str
    params: tuple[ParamDoc, ...]
    subcommands: tuple[str, ...] = ()
    json_help: str | None = None
    long_options: tuple[str, ...] = field(default=())


def _default(param: click.Parameter) -> str:
    if isinstance(param, click.Option) and (param.is_flag or param.count):
        return ""
    value = param.default
    if value is None or callable(value) or value is _UNSET:
        return ""
    if isinstance(value, tuple | list):
        return ", ".join(str(v) for v in value)
    return str(value)


def _param(param: click.Parameter, ctx: click.Context) -> ParamDoc:
    if isinstance(param, click.Option):
        names = ", ".join([*param.opts, *param.secondary_opts])
        help_text = param.help or ""
        kind = "option"
    else:
        names = param.make_metavar(ctx)
        help_text = ""
        kind = "argument"
    type_name = "flag" if isinstance(param, click.Option) and param.is_flag else (
        param.type.get_metavar(param, ctx) or param.type.name)
    return ParamDoc(names, kind, type_name, _default(param), help_text, param.required)


def command_docs() -> list[CommandDoc]:
    """Every command of ``deepseek-eyes``, root first, then depth-first in name order."""
    from deepseek_eyes.cli import cli  # the top layer: imported when the docs are built

    out: list[CommandDoc] = []

    def walk(command: click.Command, ctx: click.Context) -> None:
        params = tuple(_param(p, ctx) for p in command.get_params(ctx)
                       if not getattr(p, "hidden", False) and p.name != "help")
        subcommands: tuple[str, ...] = ()
        children: list[tuple[str, click.Command]] = []
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                child = command.get_command(ctx, name)
                if child is not None and not child.hidden:
                    children.append((name, child))
            subcommands = tuple(name for name, _ in children)
        json_help = next((p.help for p in params if "--json" in p.names.split(", ")), None)
        longs = tuple(name for p in params if p.kind == "option"
                      for name in p.names.split(", ") if name.startswith("--"))
        out.append(CommandDoc(
            path=ctx.command_path,
            usage=" ".join(command.collect_usage_pieces(ctx)),
            help=inspect.cleandoc(command.help or ""),
            params=params, subcommands=subcommands, json_help=json_help,
            long_options=longs,
        ))
        for name, child in children:
            walk(child, click.Context(child, info_name=name, parent=ctx))

    walk(cli, click.Context(cli, info_name=PROG))
    return out


def _section(doc: CommandDoc) -> list[str]:
    lines = [f"## {doc.path}", "", "```text", f"{doc.path} {doc.usage}".rstrip()]
    if doc.help:
        lines += ["", doc.help.replace("\b\n", "")]
    lines += ["```", ""]
    if doc.json_help:
        lines += [f"**`--json`:** {cell(doc.json_help)}", ""]
    if doc.subcommands:
        links = ", ".join(f"[`{name}`](#{anchor(f'{doc.path} {name}')})"
                          for name in doc.subcommands)
        lines += [f"**Commands:** {links}", ""]
    if doc.params:
        lines += ["| option or argument | type | default | what it does |",
                  "| --- | --- | --- | --- |"]
        for p in doc.params:
            required = " (required)" if p.required else ""
            default = code(p.default) if p.default else ""
            lines.append(f"| {code(p.names)}{required} | {cell(p.type)} | {default} | "
                         f"{cell(p.help)} |")
        lines.append("")
    return lines


def commands_page(docs: list[CommandDoc] | None = None) -> str:
    """The Markdown page of the whole command tree."""
    docs = command_docs() if docs is None else docs
    options = sum(len(d.long_options) for d in docs)
    lines = [
        "# Commands",
        "",
        "Generated from the click command tree when this site was built: "
        f"{len(docs)} commands and {options} long options. Every command takes `--json`; "
        "a failure then prints `{\"error\": {\"code\", \"message\", \"details\"}}` on "
        "standard output. Exit status: 0 success, 1 failure, 2 usage (`CLI_USAGE`). "
        "The codes are in [Error codes](../errors.md); a task-by-task tour of the "
        "commands is in [the command line guide](../how-to/command-line.md).",
        "",
    ]
    for doc in docs:
        lines += _section(doc)
    return "\n".join(lines)
