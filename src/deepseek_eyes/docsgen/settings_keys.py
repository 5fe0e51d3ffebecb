"""The settings reference: every key of :class:`deepseek_eyes.settings.Settings`, with its
type, default, environment variable and description, read from the pydantic model.

Keys are written as a settings file spells them, in full: ``vision.routes[].timeout`` is the
``timeout`` of one ``[[vision.routes]]`` entry. A field whose type is a union of tables (an
MCP server's ``oauth``) is listed once per variant. The environment variable of a key is the
one its ``{ env = "NAME" }`` default names, or the ``DEEPSEEK_*`` variable its description
says wins over it.
"""

from __future__ import annotations

import os
import re
import types
import typing
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from deepseek_eyes.docsgen.markdown import cell, code
from deepseek_eyes.settings import SecretRef, Settings

__all__ = ["SettingDoc", "setting_docs", "settings_page"]

_ENV_NAME = re.compile(r"\b(DEEPSEEK_[A-Z0-9_]+)\b")


@dataclass(frozen=True)
class SettingDoc:
    """One settings key."""

    key: str  # "vision.routes[].timeout"
    table: str  # "vision.routes[]"
    type: str
    default: str  # "" when there is none (required, or unset)
    required: bool
    env: str  # "" when no variable is involved
    description: str
    variant: str = ""  # for a union of tables: which one ("authorization_code")


def _strip(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _members(annotation: Any) -> list[Any]:
    annotation = _strip(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


def _is_table(annotation: Any) -> bool:
    return (isinstance(annotation, type) and issubclass(annotation, BaseModel)
            and not issubclass(annotation, SecretRef))


# bool before int: a bool is an int to issubclass.
_SCALARS = {bool: "boolean", str: "string", int: "integer", float: "number", Path: "path"}


def _type_name(annotation: Any) -> str:
    annotation = _strip(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(m) for m in typing.get_args(annotation) if m is not type(None)]
        optional = any(m is type(None) for m in typing.get_args(annotation))
        return " or ".join(names) + (" (optional)" if optional else "")
    if origin is typing.Literal:
        return " | ".join(f'"{v}"' if isinstance(v, str) else str(v)
                          for v in typing.get_args(annotation))
    if origin in (tuple, list, frozenset, set):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"table of {_type_name(typing.get_args(annotation)[1])}"
    if isinstance(annotation, type):
        if issubclass(annotation, SecretRef):
            return '{ env = "NAME" }'
        if issubclass(annotation, Enum):
            return " | ".join(f'"{m.value}"' for m in annotation)
        if issubclass(annotation, BaseModel):
            return "table"
        for base, name in _SCALARS.items():
            if issubclass(annotation, base):
                return name
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, SecretRef):
        return f'{{ env = "{value.env}" }}'
    if isinstance(value, Enum):
        return _toml(value.value)
    if isinstance(value, str | Path):
        return f'"{value}"'
    if isinstance(value, tuple | list | frozenset | set):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}" = {_toml(v)}' for k, v in value.items()) + "}"
    return str(value)


def _default(info: FieldInfo) -> tuple[str, bool, Any]:
    """(rendered default, required, the value)."""
    if info.default is not PydanticUndefined:
        value = info.default
    elif info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    else:
        return "", True, None
    if value is None or value == {} or (isinstance(value, BaseModel) and not isinstance(
            value, SecretRef)):
        return "", False, value
    return _toml(value), False, value


def _walk(model: type[BaseModel], table: str, variant: str, out: list[SettingDoc]) -> None:
    """The model's own keys first, then its tables, so each table is one section."""
    later: list[tuple[type[BaseModel], str, str]] = []
    for name, info in model.model_fields.items():
        key = f"{table}.{name}" if table else name
        members = [m for m in _members(info.annotation) if m is not type(None)]
        tables = [m for m in members if _is_table(m)]
        origin = typing.get_origin(_strip(info.annotation))
        if origin in (tuple, list):
            inner = [a for a in typing.get_args(_strip(info.annotation)) if a is not Ellipsis]
            inner_tables = [m for m in _members(inner[0]) if _is_table(m)] if inner else []
            if inner_tables:
                later += [(sub, f"{key}[]", "") for sub in inner_tables]
                continue
        if tables and len(tables) == len(members):
            later += [(sub, key, _variant_label(sub) if len(tables) > 1 else variant)
                      for sub in tables]
            continue
        rendered, required, value = _default(info)
        description = info.description or ""
        env = value.env if isinstance(value, SecretRef) else ""
        if not env:
            found = _ENV_NAME.search(description)
            env = found.group(1) if found else ""
        out.append(SettingDoc(key, table, _type_name(info.annotation), rendered, required,
                              env, description, variant))
    for sub, sub_table, label in later:
        _walk(sub, sub_table, label, out)


def _variant_label(model: type[BaseModel]) -> str:
    field = model.model_fields.get("type")
    if field is not None:
        args = typing.get_args(_strip(field.annotation))
        if args:
            return f'type = "{args[0]}"'
    return model.__name__


def setting_docs() -> list[SettingDoc]:
    """Every settings key, in the model's order. Defaults are those of a machine where no
    ``DEEPSEEK_*`` variable is set (a default factory may read one), so the page does not
    depend on the environment it is built in."""
    out: list[SettingDoc] = []
    saved = {name: value for name, value in os.environ.items() if name.startswith("DEEPSEEK_")}
    for name in saved:
        del os.environ[name]
    try:
        _walk(Settings, "", "", out)
    finally:
        os.environ.update(saved)
    return out


def _heading(table: str, variant: str) -> str:
    title = f"[[{table[:-2]}]]" if table.endswith("[]") else f"[{table}]"
    return f"## {title}" + (f" ({variant})" if variant else "")


def settings_page(docs: list[SettingDoc] | None = None) -> str:
    """The Markdown page of every settings key."""
    docs = setting_docs() if docs is None else docs
    keys = len({d.key for d in docs})
    lines = [
        "# Settings",
        "",
        f"Generated from the settings model when this site was built: {keys} keys. Settings "
        "come from one TOML file (`--config PATH`, else `./deepseek-eyes.toml`, else "
        "`deepseek-eyes.toml` in the user config directory); no file at all is valid, and "
        "an unknown key is an error (`CONFIG_INVALID`, naming the closest known key). A "
        "secret is never written in the file: it is a reference, `{ env = \"NAME\" }`, to "
        "an environment variable. Worked examples: [Configuration](configuration.md).",
        "",
    ]
    current: tuple[str, str] | None = None
    for doc in docs:
        if (doc.table, doc.variant) != current:
            current = (doc.table, doc.variant)
            lines += ["", _heading(doc.table, doc.variant), "",
                      "| key | type | default | environment | what it sets |",
                      "| --- | --- | --- | --- | --- |"]
        default = "required" if doc.required else (code(doc.default) if doc.default else "")
        env = code(doc.env) if doc.env else ""
        lines.append(f"| {code(doc.key)} | {cell(doc.type)} | {default} | {env} | "
                     f"{cell(doc.description)} |")
    return "\n".join(lines) + "\n"
