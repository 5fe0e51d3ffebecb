"""The web console's credentials: the person's one-time link, and the gateway key.

A login from the one-time link the server prints is the person's own: every view and
action. The gateway key may log in too (the issue's "or the gateway key"), but such a login
is bound to that key's client scope (:mod:`deepseek_eyes.store.scopes`): the client's own
conversations and nothing of the person's (approvals, MCP, vision, audit, usage). Why: the
key is what a client holds, and a client must not approve its own plans or widen its own
tools with it (the trust-in-scope rule of :mod:`deepseek_eyes.serving.console_login`).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable

from deepseek_eyes.errors import ConsoleError, DeepSeekEyesError
from deepseek_eyes.serving.console_login import CookieLogins
from deepseek_eyes.store import scopes

__all__ = ["API", "WebConsoleLogins", "gateway_key_login"]

API = "/console/api"


class WebConsoleLogins(CookieLogins):
    """The web console's credentials (see :class:`CookieLogins`).

    ``key_scope`` (the gateway's): the client scope of a presented gateway key, None for
    a wrong one. A login with the key is bound to that scope: it sees that client's own
    conversations, and none of the person's views (approvals, MCP, vision, audit, usage),
    so a client cannot approve its own plans or widen its own tools with its key.
    """

    def __init__(self, on_code: Callable[[str], None], *,
                 key_scope: Callable[[str], str | None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 ttl: float | None = None) -> None:
        super().__init__(on_code, clock=clock, ttl=ttl)
        self.key_scope = key_scope

    prefix = API + "/"
    cookie_name = "deepseek_eyes_web_console"
    login_path = API + "/login"
    credential_prefix = "web-"
    refusal = ("CONSOLE_LOGIN_REQUIRED",
               "the web console API takes the console's login (the one-time link the server "
               "printed, then its cookie), never the gateway key or an MCP token")

    def invalid_code(self) -> DeepSeekEyesError:
        return ConsoleError("that console login code is wrong or already used; open the "
                            "newest link the server printed", code="CONSOLE_LOGIN_INVALID")


def gateway_key_login(key: str | None) -> Callable[[str], str | None] | None:
    """The ``key_scope`` of a console beside a gateway whose key is ``key``: that key's
    client scope (``store.scopes.gateway``) for the key itself, compared in constant time;
    None (no key login at all) for a gateway without a key."""
    if not key:
        return None
    expected = key.encode("utf-8", "surrogatepass")
    bound = scopes.gateway(key)

    def scope(presented: str) -> str | None:
        given = presented.encode("utf-8", "surrogatepass")
        return bound if hmac.compare_digest(given, expected) else None
    return scope
