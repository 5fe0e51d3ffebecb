"""Other hosts' MCP JSON (Claude Desktop, Claude Code, Cursor, VS Code) as our server entries.

Both top-level shapes are read: ``mcpServers`` (Claude, Cursor) and ``servers`` (VS Code).
A value in ``env`` or ``headers`` must be a whole ``${VAR}`` or ``${env:VAR}`` reference and
becomes ``{ env = "VAR" }``; anything else there is a literal secret (or may be one) and the
import is refused, naming the key and how to reference it, never echoing the value. Imported
servers arrive enabled with empty allow lists: they connect, and expose nothing until an
operator allows something.
"""

from __future__ import annotations

import json
import re
from collections.abc import Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepseek_eyes.errors import McpError

__all__ = ["MAX_IMPORT_BYTES", "ImportResult", "import_servers", "server_id_for"]

MAX_IMPORT_BYTES = 1024 * 1024
_REFERENCE = re.compile(r"^\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]{0,127})\}$")
#: Read to choose the transport; every other unknown key is reported as not carried over.
_USED = frozenset({"type", "transportType"})


@dataclass
class ImportResult:
    servers: list[dict[str, Any]]
    ignored: list[str] = field(default_factory=list)  # "<server>.<key>" we did not carry


def _invalid(message: str, **details: Any) -> McpError:
    return McpError(message, code="MCP_IMPORT_INVALID", details=details)


def server_id_for(name: str) -> str:
    """A valid id from a host's server name: ``My Server.v2`` → ``my-server-v2``."""
    text = re.sub(r"[^a-z0-9_-]+", "-", name.lower())
    text = re.sub(r"_{2,}", "_", text).strip("-_")[:32].rstrip("-_")
    return text or "server"


def _references(server: str, table: str, values: Any) -> dict[str, dict[str, str]]:
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise _invalid(f"{server}: {table} must be an object", server=server)
    out: dict[str, dict[str, str]] = {}
    for key, value in values.items():
        match = _REFERENCE.match(value) if isinstance(value, str) else None
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
        for arg in args:
            if "${" in arg:
                raise _invalid(f"{name}: an argument uses ${{...}} interpolation, which is "
                               "not expanded here; pass the value through env instead",
                               server=name)
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


def import_servers(path: Path, existing_ids: Set[str] = frozenset()) -> ImportResult:
    """Read ``path`` and return our ``[[mcp.servers]]`` entries for it.

    Raises:
        McpError: ``MCP_IMPORT_INVALID`` (malformed file, literal secret, id taken).
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_IMPORT_BYTES + 1)
    except OSError as exc:
        raise _invalid(f"cannot read {path}: {exc.strerror or exc}") from exc
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
    servers = [_entry(str(name), spec, ignored) for name, spec in table.items()]
    seen = set(existing_ids)
    for entry in servers:
        if entry["id"] in seen:
            raise _invalid(f"server id {entry['id']!r} (from {entry['name']!r}) is already "
                           "configured or imported twice; rename one", server=entry["name"])
        seen.add(entry["id"])
    return ImportResult(servers, sorted(set(ignored)))
