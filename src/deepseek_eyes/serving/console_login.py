"""A person's own credential for a console: a one-time login code, then a cookie.

Why a credential of its own: approving a plan or changing which tools a model is offered is
what a *person* does, and the clients of a server (an MCP client, a gateway client) hold its
bearer token. Were a console guarded by that token, a client could approve its own plans or
widen its own tools. So a console's API takes only this credential and never the bearer
token (:class:`~deepseek_eyes.serving.security.SessionCredential`).

How a person gets it: the server prints a one-time login link on its standard error (the
person who started the server reads it; a client over HTTP never sees it). The link carries
the code in its fragment, which no request sends; the page posts it to the login path,
which answers with an ``HttpOnly``, ``SameSite=Strict`` cookie scoped to the API's path,
the credential's id and a CSRF token. The code is spent and a fresh one is printed for the
next browser. A console may also let a client's own key log in
(:meth:`CookieLogins.login_scoped`): such a login is bound to that client's scope and sees
only what the client may, never what only the person may (the web console's gateway-key
login). Each login is its own credential (a prefix and 8 hex digits, random, not derived
from the secret). Codes, cookies and CSRF tokens live only in this process's
memory, are stored as SHA-256 digests (the CSRF token compared in constant time), never
logged, audited or written anywhere, and die with the process.

Two consoles use it: the terminal's approval console (``/api/``, ``TERMINAL_`` codes) and
the web console (``/console/api/``, ``CONSOLE_`` codes); each subclass names its paths, its
cookie and its errors.
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

from deepseek_eyes.errors import DeepSeekEyesError

__all__ = ["CSRF_TOKENS_PER_LOGIN", "CookieLogins", "login_url"]


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


def login_url(console_url: str, code: str) -> str:
    """The link a person opens: the code rides in the fragment, which no request carries."""
    return f"{console_url}#login={code}"


#: CSRF tokens one login holds at once: each page (a tab, a reload) asks for its own, and
#: one tab's token must not stop another's from working; the oldest goes past this.
CSRF_TOKENS_PER_LOGIN = 8


@dataclass(frozen=True)
class _Login:
    credential: str
    expires: float
    csrf: tuple[bytes, ...]  # the live CSRF tokens' digests, oldest first
    #: None: a person's own login (the one-time code); else the client scope it is bound
    #: to (a login made with a client's key sees that client's own things only).
    scope: str | None = None


class CookieLogins:
    """A console's credentials: the one live login code and the logins made with it.

    ``on_code`` is called with every new code (at :meth:`issue`, and after each login, so
    the next browser has one); the server prints it for the person. Subclasses set the
    class attributes below and :meth:`invalid_code`.
    """

    #: The API paths this credential guards (the cookie's ``Path`` too).
    prefix = "/api/"
    cookie_name = "deepseek_eyes_console"
    login_path = "/api/login"
    credential_prefix = "console-"
    refusal = ("CONSOLE_LOGIN_REQUIRED", "the console API takes the console's login only")
    #: How long a login lasts (the cookie's Max-Age, and enforced here).
    default_ttl = 12 * 3600
    #: Live logins at once; the oldest is ended past this.
    max_credentials = 16

    def __init__(self, on_code: Callable[[str], None], *,
                 clock: Callable[[], float] = time.monotonic,
                 ttl: float | None = None) -> None:
        self._on_code = on_code
        self._clock = clock
        self.ttl = self.default_ttl if ttl is None else ttl
        self._code: bytes | None = None  # the live code's digest
        self._logins: OrderedDict[bytes, _Login] = OrderedDict()  # cookie digest -> login

    @property
    def open_paths(self) -> frozenset[tuple[str, str]]:
        return frozenset({("POST", self.login_path)})

    def invalid_code(self) -> DeepSeekEyesError:
        """The error a wrong, spent or missing code raises."""
        raise NotImplementedError

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
            DeepSeekEyesError: :meth:`invalid_code` for a wrong, spent or missing code.
        """
        secret, credential, _ = self.login_with_csrf(code)
        return secret, credential

    def login_with_csrf(self, code: object) -> tuple[str, str, str]:
        """:meth:`login`, and the new login's CSRF token (sent back in a header by every
        state-changing request).

        Raises:
            DeepSeekEyesError: :meth:`invalid_code`.
        """
        live = self._code
        if not isinstance(code, str) or live is None or not hmac.compare_digest(
                _digest(code), live):
            raise self.invalid_code()
        self._code = None
        made = self._new_login(None)
        self.issue()
        return made

    def login_scoped(self, scope: str) -> tuple[str, str, str]:
        """A login bound to one client ``scope`` (the caller proved the client's key): its
        ``(cookie value, id, CSRF token)``. The one-time code is not spent."""
        return self._new_login(scope)

    def _new_login(self, scope: str | None) -> tuple[str, str, str]:
        secret = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(32)
        kind = "" if scope is None else "key-"
        credential = f"{self.credential_prefix}{kind}{secrets.token_hex(4)}"
        self._logins[_digest(secret)] = _Login(credential, self._clock() + self.ttl,
                                               (_digest(csrf),), scope)
        while len(self._logins) > self.max_credentials:
            self._logins.popitem(last=False)
        return secret, credential, csrf

    def _live(self, cookie: str | None) -> _Login | None:
        secret = _cookie_value(cookie, self.cookie_name)
        if secret is None:
            return None
        key = _digest(secret)
        login = self._logins.get(key)
        if login is None:
            return None
        if login.expires <= self._clock():
            del self._logins[key]
            return None
        return login

    def holder(self, cookie: str | None) -> str | None:
        """The id of the live credential a ``Cookie`` header carries, or None."""
        login = self._live(cookie)
        return None if login is None else login.credential

    def scope_of(self, cookie: str | None) -> str | None:
        """The client scope the live login is bound to; None for a person's own login (and
        for no login: ask :meth:`holder` first)."""
        login = self._live(cookie)
        return None if login is None else login.scope

    def csrf_ok(self, cookie: str | None, token: str | None) -> bool:
        """Whether ``token`` is the CSRF token of the live login ``cookie`` carries."""
        login = self._live(cookie)
        if login is None or token is None:
            return False
        digest = _digest(token)
        # Every live token compared, none skipped: the time taken says nothing of which.
        return sum(hmac.compare_digest(digest, kept) for kept in login.csrf) > 0

    def rotate_csrf(self, cookie: str | None) -> str | None:
        """A fresh CSRF token for the live login ``cookie`` carries (a reloaded page asks
        for one: the token itself is never kept anywhere a page could leave it). The login's
        other pages keep theirs (up to :data:`CSRF_TOKENS_PER_LOGIN` at once)."""
        secret = _cookie_value(cookie, self.cookie_name)
        login = self._live(cookie)
        if secret is None or login is None:
            return None
        csrf = secrets.token_urlsafe(32)
        kept = (*login.csrf, _digest(csrf))[-CSRF_TOKENS_PER_LOGIN:]
        self._logins[_digest(secret)] = _Login(login.credential, login.expires, kept,
                                               login.scope)
        return csrf

    def logout(self, cookie: str | None) -> bool:
        """End the credential a ``Cookie`` header carries; whether there was one."""
        secret = _cookie_value(cookie, self.cookie_name)
        return secret is not None and self._logins.pop(_digest(secret), None) is not None

    def set_cookie(self, secret: str) -> str:
        """The ``Set-Cookie`` value of a new login: script cannot read it, no other site's
        request carries it, and it reaches only the console's API."""
        return (f"{self.cookie_name}={secret}; Path={self.prefix}; HttpOnly; SameSite=Strict; "
                f"Max-Age={int(self.ttl)}")

    def clear_cookie(self) -> str:
        return f"{self.cookie_name}=; Path={self.prefix}; HttpOnly; SameSite=Strict; Max-Age=0"


def _cookie_value(header: str | None, name: str) -> str | None:
    if not header:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None and morsel.value else None
