"""The approval console's own credential: a one-time login code, then a cookie.

Why a credential of its own: approving is what a *person* does, and the MCP client that
planned a command holds the MCP bearer token. Were the console guarded by that token, the
client could approve its own plans through ``/api/``. So the console API
(``/api/…``) takes only this credential and never the bearer token, and ``/mcp`` takes only
the token (:class:`~deepseek_eyes.serving.security.SessionCredential`).

The mechanism (a code printed on standard error, spent once for an ``HttpOnly``,
``SameSite=Strict`` cookie; digests only, in memory only) is the one every console shares,
:class:`deepseek_eyes.serving.console_login.CookieLogins`; this module names the terminal's
paths, cookie and ``TERMINAL_`` codes. Each login is its own credential (``console-`` and 8
hex digits), and that id is what a receipt's ``approval.by`` records.
"""

from __future__ import annotations

from deepseek_eyes.errors import DeepSeekEyesError, TerminalError
from deepseek_eyes.serving.console_login import CookieLogins, login_url

__all__ = [
    "CONSOLE_PREFIX",
    "COOKIE",
    "CREDENTIAL_TTL_S",
    "LOGIN_PATH",
    "LOGOUT_PATH",
    "MAX_CREDENTIALS",
    "ConsoleLogins",
    "login_url",
]

COOKIE = "deepseek_eyes_console"
CONSOLE_PREFIX = "/api/"
LOGIN_PATH = "/api/login"
LOGOUT_PATH = "/api/logout"
#: How long a console login lasts (the cookie's Max-Age, and enforced here).
CREDENTIAL_TTL_S = 12 * 3600
#: Live console logins at once; the oldest is ended past this.
MAX_CREDENTIALS = 16


class ConsoleLogins(CookieLogins):
    """The terminal console's credentials (see :class:`CookieLogins`)."""

    prefix = CONSOLE_PREFIX
    cookie_name = COOKIE
    login_path = LOGIN_PATH
    credential_prefix = "console-"
    refusal = ("TERMINAL_CONSOLE_LOGIN_REQUIRED",
               "the console API takes the console's login (the one-time link the server "
               "printed, then its cookie), never the MCP bearer token")
    default_ttl = CREDENTIAL_TTL_S
    max_credentials = MAX_CREDENTIALS

    def invalid_code(self) -> DeepSeekEyesError:
        return TerminalError(
            "that console login code is wrong or already used; open the newest link "
            "the server printed", code="TERMINAL_CONSOLE_LOGIN_INVALID")
