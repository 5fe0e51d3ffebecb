"""A server entry from command-line flags, for ``mcp register``.

``--env NAME=VAR`` and ``--header NAME=VAR`` say where a value comes from: the child's (or
the request's) ``NAME`` is read from *our* environment variable ``VAR`` at connect time and
kept in the file as ``{ env = "VAR" }``. ``VAR`` may also be written ``${VAR}`` or
``${env:VAR}``, as in other hosts' files. Anything else after the ``=`` is a literal value
and is refused: every env and header value of a server is a reference, and a literal that
looks like a credential, or stands under a name that says it carries one (``--header
"X-Api-Key: V"``, ``--header Cookie=a.b``), is refused with ``MCP_CREDENTIAL_IN_ARGUMENTS``
without being repeated. The command line and the URL go through the same credential checks
as an import (:mod:`deepseek_eyes.mcp_host.credentials`). A registered server arrives with
nothing allowed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp_host.credentials import refuse_credentials, refuse_url_credentials
from deepseek_eyes.mcp_host.redact import TOKEN_PATTERNS
from deepseek_eyes.settings.credentials import names_a_credential_header, names_a_secret

__all__ = ["registered_entry"]

_VARIABLE = re.compile(r"^(?:\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]{0,127})\}|"
                       r"([A-Za-z_][A-Za-z0-9_]{0,127}))$")
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


def _names_a_credential(option: str, name: str) -> bool:
    if option == "--header":
        return names_a_credential_header(name)
    return names_a_secret(name)


def _literal(option: str, name: str) -> McpError:
    return McpError(
        f"{option} {name}=… holds a literal value; write {option} {name}=VAR, where VAR "
        "is the environment variable that holds the value (kept in the file as "
        "{ env = \"VAR\" })", code="MCP_CREDENTIAL_IN_ARGUMENTS",
        details={"option": option, "name": name})


def _references(option: str, pairs: Sequence[str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for index, pair in enumerate(pairs, start=1):
        name, eq, source = pair.partition("=")
        header_name = pair.partition(":")[0].strip()
        if option == "--header" and ":" in pair and _NAME.match(header_name) \
                and names_a_credential_header(header_name):
            # "X-Api-Key: V", as curl takes it: a credential header with its value.
            raise _literal(option, header_name)
        if not eq or not _NAME.match(name):
            raise McpError(f"{option} #{index} must be NAME=VAR (VAR: the environment variable "
                           "that holds the value)", code="MCP_ARGUMENTS_INVALID",
                           details={"option": option, "index": index})
        match = _VARIABLE.match(source)
        if match is None:
            secretish = (any(p.search(source) for _, p in TOKEN_PATTERNS) or len(source) >= 16
                         or _names_a_credential(option, name))
            if secretish:
                raise _literal(option, name)
            raise McpError(
                f"{option} {name}=… holds a literal value; write {option} {name}=VAR, where VAR "
                "is the environment variable that holds the value (kept in the file as "
                "{ env = \"VAR\" })", code="MCP_ARGUMENTS_INVALID",
                details={"option": option, "name": name})
        out[name] = {"env": match.group(1) or match.group(2)}
    return out


def registered_entry(
    server_id: str, *, command: Sequence[str] = (), url: str | None = None,
    env: Sequence[str] = (), headers: Sequence[str] = (), name: str | None = None,
    cwd: Path | None = None, risk_policy: str | None = None, enabled: bool = True,
    sign_in: bool = False,
) -> dict[str, Any]:
    """The ``[[mcp.servers]]`` entry for these flags (validated later, with the file).
    ``sign_in``: an HTTP server a person signs in to (``oauth = { type =
    "authorization_code" }``; then ``mcp login ID`` or the web console's Sign in).

    Raises:
        McpError: ``MCP_CREDENTIAL_IN_ARGUMENTS`` for a credential in the command line, the
            URL or a ``NAME=VAR`` pair; ``MCP_ARGUMENTS_INVALID`` for neither or both of a
            command and a URL, or a malformed pair.
    """
    if bool(command) == bool(url):
        raise McpError("give either a command (after --) for a stdio server or --url for a "
                       "Streamable HTTP one", code="MCP_ARGUMENTS_INVALID")
    entry: dict[str, Any] = {"id": server_id}
    if name:
        entry["name"] = name
    if url:
        refuse_url_credentials(url, "--url")
        entry["transport"] = "streamable-http"
        entry["url"] = url
        if env:
            raise McpError("--env is for stdio servers; an HTTP server takes --header",
                           code="MCP_ARGUMENTS_INVALID")
        if headers:
            entry["headers"] = _references("--header", headers)
        if sign_in:
            entry["oauth"] = {"type": "authorization_code"}
    else:
        if sign_in:
            raise McpError("--sign-in is for HTTP servers (--url); a stdio server has no "
                           "sign-in", code="MCP_ARGUMENTS_INVALID")
        refuse_credentials(command[0], command[1:], server=server_id)
        entry["transport"] = "stdio"
        entry["command"] = command[0]
        if len(command) > 1:
            entry["args"] = list(command[1:])
        if headers:
            raise McpError("--header is for HTTP servers; a stdio server takes --env",
                           code="MCP_ARGUMENTS_INVALID")
        if env:
            entry["env"] = _references("--env", env)
        if cwd is not None:
            entry["cwd"] = str(cwd)
    if risk_policy:
        entry["risk_policy"] = risk_policy
    if not enabled:
        entry["enabled"] = False
    return entry
