"""Editing the settings file for ``mcp allow|deny|import``: validate first, then replace.

An edit reads the file with :mod:`tomllib`, changes the data, renders it with the small TOML
writer below, and validates the *rendered text* with exactly the loader's validation
(:func:`deepseek_eyes.settings.validate_settings_file` on a temp file beside the target).
Only a valid result replaces the file, by an atomic rename; an invalid one writes nothing.

Why a writer of our own: the data we write back is what :mod:`tomllib` produced (tables,
arrays, strings, numbers, booleans, dates), so a writer of about a hundred lines covers it,
and a round-trip test pins that ``tomllib.loads(dumps(x)) == x``. The cost, said plainly in
the docs: comments and key order of the edited file are not kept.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import re
import tempfile
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from deepseek_eyes.errors import ConfigError, McpError
from deepseek_eyes.settings import Settings, validate_settings_file

__all__ = ["dumps", "edit_selectors", "edit_settings_file", "read_raw"]

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
            "\r": "\\r"}


def _string(value: str) -> str:
    out = []
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }" \
            if value else "{}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value) and all(
        isinstance(v, Mapping) for v in value)


def _inline(value: Any, path: list[str]) -> bool:
    """A small table of plain values below a section (``{ env = "X" }``) stays on one line."""
    return bool(path) and isinstance(value, Mapping) and bool(value) and all(
        not isinstance(v, Mapping) and not _is_table_array(v) for v in value.values()
    ) and len(_value(value)) <= 80


def _inline_only(table: Mapping[str, Any], path: list[str]) -> bool:
    return any(_inline(v, path) for v in table.values())


def _table(lines: list[str], table: Mapping[str, Any], path: list[str]) -> None:
    # Plain keys first: a key written after a sub-table header would belong to that table.
    for key, value in table.items():
        if _inline(value, path) or (
                not isinstance(value, Mapping) and not _is_table_array(value)):
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in table.items():
        sub = [*path, _key(key)]
        if _inline(value, path):
            continue
        if isinstance(value, Mapping):
            if not value or any(not isinstance(v, Mapping) and not _is_table_array(v)
                                for v in value.values()) or _inline_only(value, sub):
                lines.extend(["", f"[{'.'.join(sub)}]"])
            _table(lines, value, sub)
        elif _is_table_array(value):
            for item in value:
                lines.extend(["", f"[[{'.'.join(sub)}]]"])
                _table(lines, item, sub)


def dumps(data: Mapping[str, Any]) -> str:
    """Render ``data`` (as :mod:`tomllib` returns it) as TOML text."""
    lines: list[str] = []
    _table(lines, data, [])
    return "\n".join(lines).lstrip("\n") + "\n"


def read_raw(path: Path) -> dict[str, Any]:
    """The file as data (an absent file is an empty one).

    Raises:
        ConfigError: ``CONFIG_UNREADABLE`` for bad TOML or an unreadable file.
    """
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"settings file {path} cannot be read: {exc}",
                          code="CONFIG_UNREADABLE", details={"path": str(path)}) from exc


def edit_settings_file(path: Path, change: Callable[[dict[str, Any]], None]) -> Settings:
    """Apply ``change`` to the file's data, validate the result, then replace the file.

    Raises:
        ConfigError: ``CONFIG_UNREADABLE``, or ``CONFIG_INVALID`` with every error's path
            (nothing is written).
        McpError: whatever ``change`` raises (nothing is written).
    """
    raw = read_raw(path)
    change(raw)
    text = dumps(raw)
    path = path.absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".toml")
    tmp: Path | None = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        assert tmp is not None
        try:
            settings = validate_settings_file(tmp)
        except ConfigError as exc:
            # Report the file the user named, not our temp file beside it.
            count = len(exc.details.get("errors", []))
            raise ConfigError(
                f"the edit would make {path} invalid ({count} error(s)); nothing was written",
                code=exc.code, details={**exc.details, "path": str(path)}) from None
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()
    return settings


def _server_entry(raw: dict[str, Any], server_id: str) -> dict[str, Any]:
    servers = raw.get("mcp", {}).get("servers", [])
    for entry in servers if isinstance(servers, list) else ():
        if isinstance(entry, dict) and entry.get("id") == server_id:
            return entry
    raise McpError(f"no MCP server {server_id!r} in the settings file",
                   code="MCP_SERVER_UNKNOWN", details={"server": server_id})


def edit_selectors(path: Path, server_id: str, which: str, kind: str,
                   selectors: tuple[str, ...]) -> Settings:
    """Add ``selectors`` to ``[mcp.servers] <which>.<kind>`` (which: allow|deny).

    Raises:
        McpError: ``MCP_SERVER_UNKNOWN``.
        ConfigError: ``CONFIG_INVALID`` (e.g. a bare ``*``); nothing is written.
    """
    def change(raw: dict[str, Any]) -> None:
        entry = _server_entry(raw, server_id)
        table = entry.setdefault(which, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{which} of {server_id} is not a table", code="CONFIG_INVALID")
        current = list(table.get(kind, []))
        current.extend(s for s in selectors if s not in current)
        table[kind] = current

    return edit_settings_file(path, change)
