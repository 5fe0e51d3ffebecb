"""Editing the settings file for the ``mcp`` commands: validate first, then replace.

An edit parses the file with :mod:`tomlkit`, changes the document in place, renders it, and
validates the *rendered text* with exactly the loader's validation
(:func:`deepseek_eyes.settings.validate_settings_file` on a temp file beside the target).
Only a valid result replaces the file, by an atomic rename; an invalid one writes nothing.
Every edit is one writer at a time (:mod:`deepseek_eyes.settings.writer`): under the file's
lock, re-read, hash-compared before the replace, a symlink's target edited in place of it.

Why tomlkit: the settings file is written by people, with comments that explain a choice
and an order that groups things. ``tomlkit`` keeps every comment, blank line and key order
it did not touch, so ``mcp allow`` or ``mcp disable`` changes one line, not the file's
layout. New entries are written in the style of the documentation: a ``[[mcp.servers]]``
table whose secret references and selectors are inline tables.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import AoT, Array, InlineTable, Table
from tomlkit.toml_document import TOMLDocument

from deepseek_eyes.errors import ConfigError, McpError
from deepseek_eyes.settings import Settings, validate_settings_file
from deepseek_eyes.settings.writer import rewrite

__all__ = [
    "add_servers",
    "drop_selectors",
    "dumps",
    "edit_selectors",
    "edit_settings_file",
    "read_raw",
    "remove_server",
    "server_table",
    "set_ask",
    "set_server_value",
]


def dumps(data: Mapping[str, Any]) -> str:
    """Render plain ``data`` (as :mod:`tomllib` returns it) as TOML text."""
    return tomlkit.dumps(data)


def read_raw(path: Path) -> dict[str, Any]:
    """The file as plain data (an absent file is an empty one).

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


def _parse_document(path: Path, text: str | None) -> TOMLDocument:
    if text is None:
        return tomlkit.document()
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.TOMLKitError as exc:
        raise ConfigError(f"settings file {path} cannot be read: {exc}",
                          code="CONFIG_UNREADABLE", details={"path": str(path)}) from exc


def edit_settings_file(path: Path, change: Callable[[TOMLDocument], None]) -> Settings:
    """Apply ``change`` to the file's document, validate the result, then replace the file,
    one writer at a time (:func:`deepseek_eyes.settings.writer.rewrite`: under the file's
    lock, on what the file says now, hash-compared before the atomic replace; a symlink's
    target is what is edited). ``change`` may run more than once when another writer
    changed the file under it: it must be a function of the document alone.

    Raises:
        ConfigError: ``CONFIG_UNREADABLE``, or ``CONFIG_INVALID`` with every error's path;
            ``CONFIG_EDIT_BUSY``, ``CONFIG_EDIT_CONFLICT``, ``CONFIG_WRITE_FAILED``
            (nothing is written).
        McpError: whatever ``change`` raises (nothing is written).
    """
    path = path.absolute()
    validated: list[Settings] = []

    def render(text: str | None) -> str:
        document = _parse_document(path, text)
        change(document)
        return tomlkit.dumps(document)

    def check(tmp: Path) -> None:
        try:
            validated.append(validate_settings_file(tmp))
        except ConfigError as exc:
            # Report the file the user named, not our temp file beside it.
            count = len(exc.details.get("errors", []))
            raise ConfigError(
                f"the edit would make {path} invalid ({count} error(s)); nothing was written",
                code=exc.code, details={**exc.details, "path": str(path)}) from None

    written = rewrite(path, render, check=check)
    if not written.changed:  # nothing to write: the file as it is, validated as it loads
        check(written.path)
    return validated[-1]


# -- the [[mcp.servers]] entries -----------------------------------------------------------
def _servers(document: TOMLDocument, *, create: bool = False) -> AoT | Array | None:
    """The document's ``mcp.servers`` list (a ``[[mcp.servers]]`` array of tables, or an
    inline array), created as an array of tables when asked."""
    mcp = document.get("mcp")
    if mcp is None:
        if not create:
            return None
        mcp = tomlkit.table(is_super_table=True)
        document["mcp"] = mcp
    if not isinstance(mcp, MutableMapping):
        raise ConfigError("mcp in the settings file is not a table", code="CONFIG_INVALID")
    servers = mcp.get("servers")
    if servers is None:
        if not create:
            return None
        servers = tomlkit.aot()
        mcp["servers"] = servers
    if not isinstance(servers, AoT | Array):
        raise ConfigError("mcp.servers in the settings file is not a list of tables",
                          code="CONFIG_INVALID")
    return servers


def _index_of(document: TOMLDocument, server_id: str) -> tuple[AoT | Array, int]:
    servers = _servers(document)
    for index, entry in enumerate(servers if servers is not None else ()):
        if isinstance(entry, Mapping) and entry.get("id") == server_id:
            assert servers is not None
            return servers, index
    raise McpError(f"no MCP server {server_id!r} in the settings file",
                   code="MCP_SERVER_UNKNOWN", details={"server": server_id})


def _server_entry(document: TOMLDocument, server_id: str) -> MutableMapping[str, Any]:
    servers, index = _index_of(document, server_id)
    entry = servers[index]
    assert isinstance(entry, MutableMapping)
    return entry


def _inline(value: Mapping[str, Any]) -> InlineTable:
    table = tomlkit.inline_table()
    for key, item in value.items():
        table[key] = _inline(item) if isinstance(item, Mapping) else item
    return table


def server_table(entry: Mapping[str, Any]) -> Table:
    """A new ``[[mcp.servers]]`` table: plain keys in the entry's order, tables inline."""
    table = tomlkit.table()
    for key, value in entry.items():
        table[key] = _inline(value) if isinstance(value, Mapping) else value
    return table


#: The keys an import writes: what the other host's file says of a server. The rest of an
#: entry (allow and deny lists, risk policy, plane switches, timeouts, ``enabled``) is this
#: host's own policy, which a re-import with ``replace`` keeps.
IMPORTED_KEYS = ("name", "transport", "command", "args", "env", "cwd", "url", "headers")


def _replace_entry(entry: MutableMapping[str, Any], new: Mapping[str, Any]) -> None:
    """Rewrite an entry's imported keys in place (its comments and other keys stay)."""
    for key in IMPORTED_KEYS:
        if key in entry:
            del entry[key]
    if new.get("transport") != "streamable-http" and "oauth" in entry:
        del entry["oauth"]  # OAuth is only for HTTP; a stdio entry with it would not load
    for key, value in new.items():
        if key in IMPORTED_KEYS:
            entry[key] = _inline(value) if isinstance(value, Mapping) else value
        elif key not in entry:
            entry[key] = value


def add_servers(path: Path, entries: Iterable[Mapping[str, Any]], *,
                replace: bool = False) -> Settings:
    """Append server entries (as plain data) to the file; with ``replace``, an entry whose
    id is taken rewrites that entry's :data:`IMPORTED_KEYS` instead, where it stands.

    Raises:
        McpError: ``MCP_SERVER_EXISTS`` when an id is already in the file (without
            ``replace``).
        ConfigError: ``CONFIG_INVALID`` (an invalid entry); nothing is written.
    """
    new = list(entries)

    def change(document: TOMLDocument) -> None:
        servers = _servers(document, create=True)
        assert servers is not None
        taken = {e.get("id") for e in servers if isinstance(e, Mapping)}
        for entry in new:
            if entry["id"] in taken and replace:
                _replace_entry(_server_entry(document, entry["id"]), entry)
                continue
            if entry["id"] in taken:
                raise McpError(f"a server {entry['id']!r} is already configured; remove it "
                               "first or choose another id", code="MCP_SERVER_EXISTS",
                               details={"server": entry["id"]})
            taken.add(entry["id"])
            servers.append(server_table(entry) if isinstance(servers, AoT) else _inline(entry))

    return edit_settings_file(path, change)


def remove_server(path: Path, server_id: str) -> Settings:
    """Remove one server entry (its own comments go with it; others stay).

    Raises:
        McpError: ``MCP_SERVER_UNKNOWN``.
    """
    def change(document: TOMLDocument) -> None:
        servers, index = _index_of(document, server_id)
        del servers[index]

    return edit_settings_file(path, change)


def set_server_value(path: Path, server_id: str, key: str, value: Any) -> Settings:
    """Set one key of a server entry (``enabled``, ``tools_enabled``, …).

    Raises:
        McpError: ``MCP_SERVER_UNKNOWN``.
        ConfigError: ``CONFIG_INVALID``; nothing is written.
    """
    def change(document: TOMLDocument) -> None:
        _server_entry(document, server_id)[key] = value

    return edit_settings_file(path, change)


def edit_selectors(path: Path, server_id: str, which: str, kind: str,
                   selectors: tuple[str, ...]) -> Settings:
    """Add ``selectors`` to ``[mcp.servers] <which>.<kind>`` (which: allow|deny).

    Raises:
        McpError: ``MCP_SERVER_UNKNOWN``.
        ConfigError: ``CONFIG_INVALID`` (e.g. a bare ``*``); nothing is written.
    """
    def change(document: TOMLDocument) -> None:
        entry = _server_entry(document, server_id)
        if which not in entry:
            entry[which] = tomlkit.inline_table()
        table = entry[which]
        if not isinstance(table, MutableMapping):
            raise ConfigError(f"{which} of {server_id} is not a table", code="CONFIG_INVALID")
        current = table.get(kind)
        if current is None:
            table[kind] = list(dict.fromkeys(selectors))
            return
        if not isinstance(current, list):
            raise ConfigError(f"{which}.{kind} of {server_id} is not a list",
                              code="CONFIG_INVALID")
        for selector in selectors:
            if selector not in current:
                current.append(selector)  # in place: the array's comments stay

    return edit_settings_file(path, change)


def drop_selectors(path: Path, server_id: str, which: str, kind: str,
                   selectors: tuple[str, ...]) -> Settings:
    """Remove ``selectors`` from ``[mcp.servers] <which>.<kind>`` (which: allow|deny); a
    selector not listed is no change.

    Raises:
        McpError: ``MCP_SERVER_UNKNOWN``.
        ConfigError: ``CONFIG_INVALID``; nothing is written.
    """
    def change(document: TOMLDocument) -> None:
        entry = _server_entry(document, server_id)
        table = entry.get(which)
        if table is None:
            return
        if not isinstance(table, MutableMapping):
            raise ConfigError(f"{which} of {server_id} is not a table", code="CONFIG_INVALID")
        current = table.get(kind)
        if current is None:
            return
        if not isinstance(current, list):
            raise ConfigError(f"{which}.{kind} of {server_id} is not a list",
                              code="CONFIG_INVALID")
        for selector in selectors:
            while selector in current:
                current.remove(selector)  # in place: the array's other comments stay

    return edit_settings_file(path, change)


def set_ask(path: Path, server_id: str, selector: str, on: bool) -> Settings:
    """Add ``selector`` to (``on``) or drop it from a server's ``ask`` list: the tools that
    wait for a person's approval before each call. Adding one listed, or dropping one not
    listed, is no change.

    Raises:
        McpError: ``MCP_SERVER_UNKNOWN``.
        ConfigError: ``CONFIG_INVALID`` (e.g. ``pre*fix``); nothing is written.
    """
    def change(document: TOMLDocument) -> None:
        entry = _server_entry(document, server_id)
        current = entry.get("ask")
        if current is None:
            if on:
                entry["ask"] = [selector]
            return
        if not isinstance(current, list):
            raise ConfigError(f"ask of {server_id} is not a list", code="CONFIG_INVALID")
        if on and selector not in current:
            current.append(selector)  # in place: the array's comments stay
        while not on and selector in current:
            current.remove(selector)

    return edit_settings_file(path, change)
