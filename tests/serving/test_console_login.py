"""A console's own credential (serving/console_login.py): one-time codes, cookies scoped
to the console's API, and CSRF tokens bound to one login."""

from __future__ import annotations

import pytest

from deepseek_eyes.console.app import WebConsoleLogins
from deepseek_eyes.errors import ConsoleError
from deepseek_eyes.serving.console_login import CSRF_TOKENS_PER_LOGIN


def test_a_code_is_spent_once_and_each_login_has_its_own_csrf_token() -> None:
    shown: list[str] = []
    now = [0.0]
    logins = WebConsoleLogins(shown.append, clock=lambda: now[0], ttl=60)
    first = logins.issue()
    secret, credential, csrf = logins.login_with_csrf(first)
    assert credential.startswith("web-")
    assert shown == [first, shown[1]]  # a fresh code for the next browser
    with pytest.raises(ConsoleError) as spent:
        logins.login_with_csrf(first)
    assert spent.value.code == "CONSOLE_LOGIN_INVALID"
    cookie = f"deepseek_eyes_web_console={secret}"
    assert logins.holder(cookie) == credential
    assert logins.csrf_ok(cookie, csrf)
    assert not logins.csrf_ok(cookie, "forged")
    assert not logins.csrf_ok(cookie, None)
    other_secret, _, other_csrf = logins.login_with_csrf(shown[-1])
    assert not logins.csrf_ok(cookie, other_csrf)  # bound to its own login
    fresh = logins.rotate_csrf(cookie)
    assert fresh is not None
    assert logins.csrf_ok(cookie, fresh)
    # Another page of the same login (a second tab) does not break the first one's token,
    # up to CSRF_TOKENS_PER_LOGIN pages; then the oldest stops working.
    assert logins.csrf_ok(cookie, csrf)
    for _ in range(CSRF_TOKENS_PER_LOGIN - 2):
        assert logins.rotate_csrf(cookie) is not None
    assert logins.csrf_ok(cookie, csrf)
    assert logins.rotate_csrf(cookie) is not None
    assert not logins.csrf_ok(cookie, csrf)
    assert logins.csrf_ok(cookie, fresh)
    set_cookie = logins.set_cookie(secret)
    assert "HttpOnly" in set_cookie
    assert "SameSite=Strict" in set_cookie
    assert "Path=/console/api/" in set_cookie
    now[0] = 61.0  # expired: neither the cookie nor its token counts
    assert logins.holder(cookie) is None
    assert not logins.csrf_ok(cookie, fresh)
    assert logins.rotate_csrf(f"deepseek_eyes_web_console={other_secret}") is None


def test_a_key_login_is_bound_to_its_scope_and_spends_no_code() -> None:
    from deepseek_eyes.console.app import gateway_key_login
    from deepseek_eyes.store import scopes

    shown: list[str] = []
    check = gateway_key_login("gw-key-123456")
    assert check is not None
    assert check("gw-key-123456") == scopes.gateway("gw-key-123456")
    assert check("gw-key-123457") is None
    assert gateway_key_login(None) is None  # a gateway without a key: no key login
    logins = WebConsoleLogins(shown.append, key_scope=check)
    code = logins.issue()
    secret, credential, csrf = logins.login_scoped(scopes.gateway("gw-key-123456"))
    assert credential.startswith("web-key-")
    cookie = f"deepseek_eyes_web_console={secret}"
    assert logins.scope_of(cookie) == scopes.gateway("gw-key-123456")
    assert logins.csrf_ok(cookie, csrf)
    assert logins.rotate_csrf(cookie) is not None
    assert logins.scope_of(cookie) == scopes.gateway("gw-key-123456")  # kept on rotation
    person, _, _ = logins.login_with_csrf(code)  # the code was not spent by the key login
    assert logins.scope_of(f"deepseek_eyes_web_console={person}") is None
