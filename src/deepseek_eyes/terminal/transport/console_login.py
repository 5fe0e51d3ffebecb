"""The approval console's own credential: a one-time login code, then a cookie.

Why a credential of its own: approving is what a *person* does, and the MCP client that
planned a command holds the MCP bearer token. Were the console guarded by that token, the
client could approve its own plans through ``/api/``. So the console API
(``/api/…``) takes only this credential and never the bearer token, and ``/mcp`` takes only
the token (:class:`~deepseek_eyes.serving.security.SessionCredential`).

How a person gets it: the server prints a one-time login link on its standard error (the
person who started the server reads it; an MCP client over HTTP never sees it). The console
page posts the code to ``POST /api/login``, which answers with an ``HttpOnly``,
``SameSite=Strict`` cookie and the credential's id; the code is spent, and a fresh one is
printed for the next browser. Each login is its own credential (``console-`` and 8 hex
digits, random, not derived from the secret), and that id is what a receipt's
``approval.by`` records. Codes and cookies live only in this process's memory, are stored
as SHA-256 digests, never logged, audited or written anywhere, and die with the process.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie

from deepseek_eyes.errors import TerminalError

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


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


def login_url(console_url: str, code: str) -> str:
    """The link a person opens: the code rides in the fragment, which no request carries."""
    return f"{console_url}#login={code}"


@dataclass(frozen=True)
class _Login:
    credential: str
    expires: float


class ConsoleLogins:
    """The console's credentials: the one live login code and the logins made with it.

    ``on_code`` is called with every new code (at :meth:`issue`, and after each login, so
    the next browser has one); the server prints it for the person.
    """

    prefix = CONSOLE_PREFIX
    open_paths = frozenset({("POST", LOGIN_PATH)})
    refusal = ("TERMINAL_CONSOLE_LOGIN_REQUIRED",
               "the console API takes the console's login (the one-time link the server "
               "printed, then its cookie), never the MCP bearer token")

    def __init__(self, on_code: Callable[[str], None], *,
                 clock: Callable[[], float] = time.monotonic,
                 ttl: float = CREDENTIAL_TTL_S) -> None:
        self._on_code = on_code
        self._clock = clock
        self.ttl = ttl
        self._code: bytes | None = None  # the live code's digest
        self._logins: OrderedDict[bytes, _Login] = OrderedDict()  # cookie digest -> login

    def issue(self) -> str:
        """A new one-time code (the previous one, if unused, stops working), given to
        ``on_code`` and returned."""
        code = secrets.token_urlsafe(24)
        self._code = _digest(code)
        self._on_code(code)
        return code

    def login(self, code: object) -> tuple[str, str]:
        """Spend the one-time ``code``: a new credential's ``(cookie value, id)``.

        Raises:
            TerminalError: ``TERMINAL_CONSOLE_LOGIN_INVALID`` for a wrong, spent or missing
                code.
        """
        live = self._code
        if not isinstance(code, str) or live is None or not hmac.compare_digest(
                _digest(code), live):
            raise TerminalError(
                "that console login code is wrong or already used; open the newest link "
                "the server printed", code="TERMINAL_CONSOLE_LOGIN_INVALID")
        self._code = None
        secret = secrets.token_urlsafe(32)
        credential = f"console-{secrets.token_hex(4)}"
        self._logins[_digest(secret)] = _Login(credential, self._clock() + self.ttl)
        while len(self._logins) > MAX_CREDENTIALS:
            self._logins.popitem(last=False)
        self.issue()
        return secret, credential

    def holder(self, cookie: str | None) -> str | None:
        """The id of the live console credential a ``Cookie`` header carries, or None."""
        secret = _cookie_value(cookie)
        if secret is None:
            return None
        key = _digest(secret)
        login = self._logins.get(key)
        if login is None:
            return None
        if login.expires <= self._clock():
            del self._logins[key]
            return None
        return login.credential

    def logout(self, cookie: str | None) -> bool:
        """End the credential a ``Cookie`` header carries; whether there was one."""
        secret = _cookie_value(cookie)
        return secret is not None and self._logins.pop(_digest(secret), None) is not None

    def set_cookie(self, secret: str) -> str:
        """The ``Set-Cookie`` value of a new login: script cannot read it, no other site's
        request carries it, and it reaches only the console's API."""
        return (f"{COOKIE}={secret}; Path=/api/; HttpOnly; SameSite=Strict; "
                f"Max-Age={int(self.ttl)}")

    @staticmethod
    def clear_cookie() -> str:
        return f"{COOKIE}=; Path=/api/; HttpOnly; SameSite=Strict; Max-Age=0"


def _cookie_value(header: str | None) -> str | None:
    if not header:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None and morsel.value else None
