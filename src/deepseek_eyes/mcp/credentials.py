"""Refuse a credential written into a server's command line or URL (``register``, ``import``).

A value on a command line is visible to every user of the machine (``ps``), lands in shell
history, and would be written into the settings file, where secrets exist only as
``{ env = "NAME" }`` references. So before a server entry is added we look for the shapes a
credential takes on a command line:

* an option whose name ends in a secret word, with its value attached (``--token=V``) or
  as the next argument (``--api-key V``); names that point *at* a secret (``--token-file``,
  ``--password-env``) are fine;
* ``KEY=value`` with a secret-looking ``KEY`` (``-e API_KEY=V``, ``API_TOKEN=V``);
* an ``Authorization:`` header value or a token-shaped string anywhere;
* ``user:password@`` in a URL, or a URL query key that names a secret with a value.

The message names the argument by position and option name and says what to do instead; it
never repeats the value. The settings loader keeps its own, narrower checks for files
written by hand (:mod:`deepseek_eyes.settings.mcp`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import urlsplit

from deepseek_eyes.errors import McpError
from deepseek_eyes.mcp.redact import SECRET_NAME, TOKEN_PATTERNS

__all__ = ["refuse_credentials", "refuse_url_credentials"]

#: Words that, as a name's last word, say it holds a secret; "key" only after a qualifier.
_SECRET_WORDS = frozenset({"token", "secret", "password", "passwd", "pwd", "apikey",
                           "credential", "credentials", "pat"})
_KEY_QUALIFIERS = frozenset({"api", "access", "private", "auth", "client", "secret",
                             "signing", "encryption"})


def _names_a_secret(name: str) -> bool:
    """``--api-key``, ``API_TOKEN``, ``client.secret``: yes; ``--token-file``,
    ``TOKENIZERS_PARALLELISM``, ``SORT_KEY``: no."""
    words = [w for w in re.split(r"[-_.]+", name.lower().lstrip("-")) if w]
    if not words:
        return False
    if words[-1] in _SECRET_WORDS:
        return True
    return words[-1] == "key" and len(words) > 1 and words[-2] in _KEY_QUALIFIERS


_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_.\-]*)=(.+)$", re.S)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>]+")
_AUTH_HEADER = re.compile(r"(?i)^\s*(?:proxy-)?authorization\s*:\s*\S")
_FIX = ("let the server read it from its environment instead (register: --env NAME=VAR; "
        "an imported file: an env entry \"NAME\": \"${VAR}\"), which the settings keep as "
        "{ env = \"VAR\" }")


def _refused(where: str, what: str) -> McpError:
    return McpError(f"{where} {what}; a credential on a command line is visible to every user "
                    f"of this machine and would be written into the settings file: {_FIX}",
                    code="MCP_CREDENTIAL_IN_ARGUMENTS", details={"argument": where})


def refuse_url_credentials(url: str, where: str = "the url") -> None:
    """Raises McpError ``MCP_CREDENTIAL_IN_ARGUMENTS`` for ``user:password@`` or a query
    key that names a secret and has a value."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return  # not a URL we can read; the settings validation says what is wrong
    if password:
        raise _refused(where, "carries a password (user:password@)")
    for pair in parts.query.split("&"):
        key, _, value = pair.partition("=")
        if value and SECRET_NAME.search(key):
            raise _refused(where, f"carries a credential in its query ({key}=…)")


def refuse_credentials(command: str | None, args: Sequence[str], *, server: str) -> None:
    """Look at a stdio server's command and arguments for a literal credential.

    Raises:
        McpError: ``MCP_CREDENTIAL_IN_ARGUMENTS``, naming the argument, never its value.
    """
    argv = [command, *args] if command else list(args)
    for index, arg in enumerate(argv):
        number = index if command else index + 1
        where = f"{server}: the command" if command and index == 0 else \
            f"{server}: argument {number}"
        option, eq, value = arg.partition("=")
        if option.startswith("-") and _names_a_secret(option):
            if eq and value:
                raise _refused(f"{where} ({option}=…)", "passes a credential")
            following = argv[index + 1] if index + 1 < len(argv) else None
            if not eq and following and not following.startswith("-"):
                raise _refused(f"{where} ({option})", "is followed by a credential")
        # KEY=value, alone (env-style) or as an option's value (--env=KEY=value).
        assignment = _ASSIGNMENT.match(value if option.startswith("-") and eq else arg)
        if assignment and _names_a_secret(assignment.group(1)):
            raise _refused(f"{where} ({assignment.group(1)}=…)", "assigns a credential")
        if _AUTH_HEADER.match(arg):
            raise _refused(where, "is an Authorization header with its value")
        for url in _URL.findall(arg):
            refuse_url_credentials(url, where)
        for name, pattern in TOKEN_PATTERNS:
            if pattern.search(arg):
                raise _refused(where, f"looks like a {name}")
