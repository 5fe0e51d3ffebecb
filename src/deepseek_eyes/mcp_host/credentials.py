"""Refuse a credential written into a server's command line or URL (``register``, ``import``).

What counts as a credential is decided in one place, :mod:`deepseek_eyes.settings.credentials`,
which the settings model's validators also call, so a file edited by hand is refused with
the same checks when it is loaded (``CONFIG_INVALID``, the field's path and the argument's
position). These two functions only run those checks *before* an entry is written, to answer
with ``MCP_CREDENTIAL_IN_ARGUMENTS`` and say what to do instead. The message names the
argument by position and option name; it never repeats the value.
"""

from __future__ import annotations

from collections.abc import Sequence

from deepseek_eyes.errors import McpError
from deepseek_eyes.settings.credentials import argument_credential, url_credential

__all__ = ["FIX", "refuse_credentials", "refuse_url_credentials"]

#: What to do instead, said by every refusal (the settings validators say it too).
FIX = ("let the server read it from its environment instead (register: --env NAME=VAR; "
       "an imported file: an env entry \"NAME\": \"${VAR}\"), which the settings keep as "
       "{ env = \"VAR\" }")


def _refused(where: str, what: str) -> McpError:
    return McpError(f"{where} {what}; a credential on a command line is visible to every user "
                    f"of this machine and would be written into the settings file: {FIX}",
                    code="MCP_CREDENTIAL_IN_ARGUMENTS", details={"argument": where})


def refuse_url_credentials(url: str, where: str = "the url") -> None:
    """Raises McpError ``MCP_CREDENTIAL_IN_ARGUMENTS`` for ``user:password@`` or a
    credential key in the query, a matrix parameter or the fragment (a user name alone is
    refused later, by the settings)."""
    found = url_credential(url, allow_user=True)
    if found is not None:
        raise _refused(where, found)


def refuse_credentials(command: str | None, args: Sequence[str], *, server: str) -> None:
    """Look at a stdio server's command and arguments for a literal credential.

    Raises:
        McpError: ``MCP_CREDENTIAL_IN_ARGUMENTS``, naming the argument, never its value.
    """
    found = argument_credential(command, args)
    if found is not None:
        raise _refused(f"{server}: {found.where}", found.what)
