"""Other hosts' MCP JSON (Claude Desktop, Claude Code, Cursor, VS Code) as our server entries.

Both top-level shapes are read: ``mcpServers`` (Claude, Cursor) and ``servers`` (VS Code).
A value in ``env`` or ``headers`` must be a whole ``${VAR}`` or ``${env:VAR}`` reference and
becomes ``{ env = "VAR" }``; anything else there is a literal secret (or may be one) and the
import is refused, naming the key and how to reference it, never echoing the value. Other
hosts' interpolation that we do not expand is refused by name: VS Code's ``${input:ID}``
(a value asked for at start-up), its predefined variables (``${workspaceFolder}``), shell
defaults (``${VAR:-default}``), and any ``${...}`` in an argument. A credential written into
the command line or the URL is refused with ``MCP_CREDENTIAL_IN_ARGUMENTS``
(:mod:`deepseek_eyes.mcp_host.credentials`). Imported servers arrive enabled with empty allow
lists: they connect, and expose nothing until an operator allows something.

A stdio server's command must exist at import (``MCP_COMMAND_NOT_FOUND``, naming it): on
the ``PATH`` the child will search — its own when its ``env`` sets ``PATH`` from a variable
that is set, ours otherwise, as :mod:`subprocess` looks a bare name up in the child's
environment — or, with a ``/`` in it, as an executable file (relative to its ``cwd``). A
typo then fails where it was made, not later as a connection failure in ``mcp status``.
An id that is taken refuses the import unless ``replace`` is asked for.

A real file mixes servers that carry over with some that cannot (one literal token in one
entry). Each server is judged on its own: what is valid is imported, and every refused
entry is listed with its code and its fix (:class:`Refused`). Only ``strict`` refuses the
whole file for one entry; a file whose every entry is refused is refused either way (by that
entry's own error when there is one, else ``MCP_IMPORT_INVALID`` listing them all).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.credentials import refuse_credentials, refuse_url_credentials

__all__ = ["MAX_IMPORT_BYTES", "ImportResult", "Refused", "import_document", "import_servers",
           "server_id_for"]

MAX_IMPORT_BYTES = 1024 * 1024
_REFERENCE = re.compile(r"^\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]{0,127})\}$")
#: ``${VAR:-x}``, ``${VAR-x}``, ``${VAR:=x}``, ``${VAR:?x}``, ``${VAR:+x}``.
_SHELL_DEFAULT = re.compile(r"^((?:env:)?[A-Za-z_][A-Za-z0-9_]*)(:?[-=?+])")
_INTERPOLATION = re.compile(r"\$\{([^{}]{0,200})\}")
#: VS Code's predefined variables: ``${workspaceFolder}`` is not an environment variable.
_VSCODE_VARIABLES = frozenset({
    "workspaceFolder", "workspaceFolderBasename", "workspaceRoot", "userHome", "cwd", "file",
    "fileBasename", "fileBasenameNoExtension", "fileDirname", "fileExtname",
    "fileWorkspaceFolder", "relativeFile", "relativeFileDirname", "lineNumber",
    "selectedText", "execPath", "pathSeparator", "defaultBuildTask",
})
#: Read to choose the transport; every other unknown key is reported as not carried over.
_USED = frozenset({"type", "transportType"})


@dataclass(frozen=True)
class Refused:
    """One server of the file that was not imported, and why (the message says the fix)."""

    server: str
    error: McpError

    def view(self) -> dict[str, Any]:
        return {"server": self.server, "code": self.error.code, "message": self.error.message}


@dataclass
class ImportResult:
    servers: list[dict[str, Any]]
    ignored: list[str] = field(default_factory=list)  # "<server>.<key>" we did not carry
    refused: list[Refused] = field(default_factory=list)


def _invalid(message: str, **details: Any) -> McpError:
    return McpError(message, code="MCP_IMPORT_INVALID", details=details)


def server_id_for(name: str) -> str:
    """A valid id from a host's server name: ``My Server.v2`` → ``my-server-v2``."""
    text = re.sub(r"[^a-z0-9_-]+", "-", name.lower())
    text = re.sub(r"_{2,}", "_", text).strip("-_")[:32].rstrip("-_")
    return text or "server"


def _construct(inner: str) -> str | None:
    """Why ``${inner}`` cannot be carried over, or ``None`` for a plain variable reference."""
    if inner.startswith("input:"):
        return (f"${{{inner}}} is a VS Code input (a value it asks for at start-up), which "
                "this host cannot ask for; put the value in an environment variable NAME and "
                "write \"${env:NAME}\"")
    default = _SHELL_DEFAULT.match(inner)
    if default is not None:
        name, sep = default.groups()
        return (f"${{{name}{sep}…}} is a shell-style default or check, which is not expanded "
                f"here; set {name.removeprefix('env:')} in the environment and write "
                f"\"${{{name.removeprefix('env:')}}}\"")
    if inner in _VSCODE_VARIABLES:
        return (f"${{{inner}}} is a VS Code variable, which is not expanded here; write the "
                "value itself")
    if ":" in inner and not inner.startswith("env:"):
        prefix = inner.split(":", 1)[0]
        return (f"${{{prefix}:…}} is a VS Code {prefix} variable, which is not expanded "
                "here; write the value itself")
    return None


def _check_command(name: str, entry: dict[str, Any]) -> None:
    """Refuse a stdio entry whose command the child could not be started with.

    Raises:
        McpError: ``MCP_COMMAND_NOT_FOUND``.
    """
    command = entry["command"]
    if "/" in command:
        cwd = entry.get("cwd")
        target = Path(cwd or ".") / Path(command).expanduser()
        found = target.is_file() and os.access(target, os.X_OK)
        where = f"at {command!r}" + (f" (from {cwd!r})" if cwd else "")
    else:
        variable = entry.get("env", {}).get("PATH", {}).get("env")
        search = os.environ.get(variable) if variable else None
        where = f"on the server's PATH (${variable})" if search is not None else "on PATH"
        if search is None:
            search = os.environ.get("PATH", os.defpath)
        found = shutil.which(command, path=search) is not None
    if not found:
        raise McpError(
            f"{name}: the command {command!r} is not an executable file {where}; install "
            "it, or write its full path in the file, and import again",
            code="MCP_COMMAND_NOT_FOUND", details={"server": name, "command": command})


def _references(server: str, table: str, values: Any) -> dict[str, dict[str, str]]:
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise _invalid(f"{server}: {table} must be an object", server=server)
    out: dict[str, dict[str, str]] = {}
    for key, value in values.items():
        match = _REFERENCE.match(value) if isinstance(value, str) else None
        if match is not None and match.group(1) in _VSCODE_VARIABLES:
            match = None
        for found in _INTERPOLATION.finditer(value if isinstance(value, str) else ""):
            why = _construct(found.group(1))
            if why is not None:
                raise _invalid(f"{server}: {table}.{key}: {why}", server=server,
                               key=f"{table}.{key}")
        if match is None:
            hint = f"${{{key.upper().replace('-', '_')}}}" if table == "env" else "${MY_VAR}"
            raise _invalid(
                f"{server}: {table}.{key} holds a literal value; put it in an environment "
                f"variable and write \"{hint}\" (or \"${{env:NAME}}\") in the file, which "
                f"becomes {{ env = \"NAME\" }}; a value with a prefix such as \"Bearer \" must "
                f"be whole in the variable",
                server=server, key=f"{table}.{key}",
            )
        out[str(key)] = {"env": match.group(1)}
    return out


def _entry(name: str, spec: Any, ignored: list[str]) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise _invalid(f"{name}: a server must be an object", server=name)
    kind = str(spec.get("type") or spec.get("transportType") or "")
    entry: dict[str, Any] = {"id": server_id_for(name), "name": name[:100], "enabled": True}
    if kind.lower() == "sse":
        raise _invalid(f"{name}: the SSE transport is not supported; configure the server's "
                       "Streamable HTTP endpoint instead", server=name)
    if "url" in spec or kind.lower() in ("http", "streamable-http", "streamablehttp"):
        entry["transport"] = "streamable-http"
        entry["url"] = str(spec.get("url", ""))
        if "${" in entry["url"]:
            found = _INTERPOLATION.search(entry["url"])
            raise _invalid(f"{name}: the url: " + ((_construct(found.group(1)) if found else None)
                           or "interpolation in the url is not expanded here; write the URL "
                           "itself and put credentials in headers"), server=name)
        refuse_url_credentials(entry["url"], f"{name}: the url")
        headers = _references(name, "headers", spec.get("headers"))
        if headers:
            entry["headers"] = headers
        known = {"url", "headers"}
    elif "command" in spec:
        entry["transport"] = "stdio"
        entry["command"] = str(spec["command"])
        args = spec.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise _invalid(f"{name}: args must be a list of strings", server=name)
        for index, arg in enumerate(args, start=1):
            found = _INTERPOLATION.search(arg)
            if found is not None or "${" in arg:
                why = _construct(found.group(1)) if found is not None else None
                raise _invalid(
                    f"{name}: argument {index}: "
                    + (why or f"${{{found.group(1) if found else '...'}}} is an environment "
                       "reference, and interpolation in arguments is not expanded here (the "
                       "server would get the text as it is); pass the value through env "
                       "instead"), server=name, argument=index)
        refuse_credentials(entry["command"], args, server=name)
        if args:
            entry["args"] = list(args)
        env = _references(name, "env", spec.get("env"))
        if env:
            entry["env"] = env
        if spec.get("cwd"):
            entry["cwd"] = str(spec["cwd"])
        known = {"command", "args", "env", "cwd"}
    else:
        raise _invalid(f"{name}: a server needs a command or a url", server=name)
    if "envFile" in spec:
        raise _invalid(f"{name}: envFile is not supported; reference each variable with "
                       "${VAR} in env instead", server=name)
    ignored.extend(f"{name}.{k}" for k in spec if k not in known and k not in _USED)
    return entry


def import_servers(path: Path, existing_ids: Set[str] = frozenset(), *,
                   replace: bool = False, strict: bool = False) -> ImportResult:
    """Read ``path`` and return our ``[[mcp.servers]]`` entries for it, and the refused ones.

    ``replace``: an id in ``existing_ids`` is no refusal (the caller replaces that entry);
    two servers of the file that become one id still are. ``strict``: the first refused
    entry refuses the whole file.

    Raises:
        McpError: ``MCP_IMPORT_INVALID`` (malformed file; with ``strict`` or when no entry
            is left: a literal secret, an id taken), ``MCP_COMMAND_NOT_FOUND``,
            ``MCP_CREDENTIAL_IN_ARGUMENTS`` (the same two only then).
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_IMPORT_BYTES + 1)
    except OSError as exc:
        raise _invalid(f"cannot read {path}: {exc.strerror or exc}") from exc
    return import_document(data, existing_ids, replace=replace, strict=strict, where=str(path))


def import_document(data: bytes, existing_ids: Set[str] = frozenset(), *,
                    replace: bool = False, strict: bool = False,
                    where: str = "the pasted config") -> ImportResult:
    """:func:`import_servers` of a config's bytes (the web console's pasted text), named
    ``where`` in its errors.

    Raises:
        McpError: as :func:`import_servers`.
    """
    path = where
    if len(data) > MAX_IMPORT_BYTES:
        raise _invalid(f"{path} is larger than {MAX_IMPORT_BYTES:,} bytes")
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _invalid(f"{path} is not valid JSON: {exc}") from exc
    table = None
    if isinstance(doc, dict):
        table = doc.get("mcpServers", doc.get("servers"))
        if table is None and isinstance(doc.get("mcp"), dict):  # VS Code settings.json
            table = doc["mcp"].get("servers")
    if not isinstance(table, dict) or not table:
        raise _invalid(f"{path} has no mcpServers or servers object")
    ignored: list[str] = []
    refused: list[Refused] = []

    def refuse(server: str, error: McpError) -> None:
        if strict:
            raise error
        refused.append(Refused(server, error))

    servers: list[dict[str, Any]] = []
    for name, spec in table.items():
        own: list[str] = []
        try:
            servers.append(_entry(str(name), spec, own))
        except McpError as exc:
            refuse(str(name), exc)
        else:
            ignored.extend(own)
    seen: set[str] = set()
    unique: list[dict[str, Any]] = []
    for entry in servers:
        if entry["id"] in seen:
            refuse(entry["name"], _invalid(
                f"servers {entry['name']!r} and another of this file both become id "
                f"{entry['id']!r} (one id twice); rename one", server=entry["name"]))
        elif entry["id"] in existing_ids and not replace:
            refuse(entry["name"], _invalid(
                f"server id {entry['id']!r} (from {entry['name']!r}) is already configured; "
                "import with --replace to replace its entry (its allow and deny lists and "
                "switches are kept), or rename one", server=entry["name"]))
        else:
            seen.add(entry["id"])
            unique.append(entry)
    # Last: what the file says is judged whole before this machine is asked about it.
    kept: list[dict[str, Any]] = []
    for entry in unique:
        try:
            if entry["transport"] == "stdio":
                _check_command(entry["name"], entry)
        except McpError as exc:
            refuse(entry["name"], exc)
        else:
            kept.append(entry)
    if not kept:
        if len(refused) == 1:
            raise refused[0].error
        raise _invalid(
            f"no server of {path} could be imported: "
            + ", ".join(f"{r.server} ({r.error.code})" for r in refused[:16]), errors=[
                {"path": r.server, "message": f"{r.error.code}: {r.error.message}"}
                for r in refused])
    names = {e["name"] for e in kept}
    carried = sorted({key for key in ignored if key.partition(".")[0] in names})
    return ImportResult(kept, carried, refused)
