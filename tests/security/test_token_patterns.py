"""Bearer tokens a person would make up, generated, against the one rule every server uses.

Attacker model: the token of a loopback server (terminal, browser, desktop, ``vision serve``)
or the gateway's key is the only thing between any local program or rebinding page and
that server; an attacker guesses. Length × alphabet cannot see repeats, sequences, keyboard
walks or words: ``'0123456789' * 8`` passes such a count. Each class here is generated, so a
fix that matches a few strings does not pass, and real random tokens must still pass, so the
rule cannot simply refuse everything.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
import string
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepseek_eyes.browser.http import resolve_browser_token
from deepseek_eyes.cli.token import new_token
from deepseek_eyes.desktop.http import resolve_desktop_token
from deepseek_eyes.errors import DeepSeekEyesError, GatewayError
from deepseek_eyes.gateway.server import check_key
from deepseek_eyes.serving.security import RateLimiter, RefusalCodes, SecurityMiddleware
from deepseek_eyes.serving.tokens import (
    MIN_ESTIMATED_BITS,
    MIN_TOKEN_BITS,
    is_strong_token,
    token_strength,
)
from deepseek_eyes.settings import BrowserSettings, DesktopSettings, Settings
from deepseek_eyes.settings.vision import VisionServeSettings
from deepseek_eyes.terminal.config import resolve_token
from deepseek_eyes.vision_server.http import resolve_vision_token

_ALPHABETS = [string.digits, string.ascii_lowercase, string.ascii_letters + string.digits,
              string.ascii_letters + string.digits + "-_", string.printable[:94]]


def _fill(unit: str, length: int = 80) -> str:
    return (unit * (length // max(1, len(unit)) + 1))[:length]


#: A short random unit repeated: random inside, a pattern as a whole.
repeats = st.builds(
    lambda alphabet, unit, length: _fill(unit, length),
    st.sampled_from(_ALPHABETS),
    st.text(alphabet=string.ascii_letters + string.digits + "-_", min_size=1, max_size=20),
    st.integers(64, 160),
)
#: Runs through an alphabet (abc…, 0123…, zyx…), from any start, any step of one.
sequences = st.builds(
    lambda alphabet, start, reverse, length: _fill(
        (alphabet[start:] + alphabet[:start])[::-1 if reverse else 1], length),
    st.sampled_from([string.digits, string.ascii_lowercase, string.ascii_uppercase]),
    st.integers(0, 9), st.booleans(), st.integers(64, 120),
)
#: Keyboard rows and columns walked, with shifts and separators.
_ROWS = ["qwertyuiop", "asdfghjkl", "zxcvbnm", "1234567890", "qazwsxedcrfvtgbyhnujmikolp",
         "!@#$%^&*()"]
walks = st.builds(
    lambda rows, sep, upper: sep.join(r.upper() if upper else r for r in rows) * 3,
    st.lists(st.sampled_from(_ROWS), min_size=2, max_size=5), st.sampled_from(["", "-", "_"]),
    st.booleans(),
).filter(lambda t: len(t) >= 44)
#: Words (and the digits people add to them), the way passphrases and "Password123!" grow.
_WORDS = ["password", "secret", "dragon", "monkey", "letmein", "football", "welcome", "admin",
          "correct", "horse", "battery", "staple", "sunshine", "shadow", "master", "token"]
words = st.builds(
    lambda ws, digits, sep, cap: sep.join(w.capitalize() if cap else w for w in ws) + digits,
    st.lists(st.sampled_from(_WORDS), min_size=4, max_size=8), st.sampled_from(["", "123", "1!",
                                                                              "2024", "!"]),
    st.sampled_from(["", "-", "_", "."]), st.booleans(),
).map(lambda t: _fill(t, max(len(t), 64)))
#: A little randomness padded out with a pattern: the estimate must not count the padding.
padded = st.builds(
    lambda core, pad, left: (pad + core) if left else (core + pad),
    st.text(alphabet=string.ascii_letters + string.digits, min_size=4, max_size=16),
    st.sampled_from(["a" * 60, "0123456789" * 6, "abcabcabc" * 7, "qwertyuiop" * 6]),
    st.booleans(),
)


@pytest.mark.parametrize("kind", [repeats, sequences, walks, words, padded],
                         ids=["repeats", "sequences", "walks", "words", "padded"])
def test_every_patterned_token_is_refused(kind: st.SearchStrategy[str]) -> None:
    @settings(max_examples=60, deadline=None)
    @given(token=kind)
    def check(token: str) -> None:
        strength = token_strength(token)
        assert not strength.strong, (token, strength.capacity_bits, strength.estimated_bits)

    check()


@settings(max_examples=80, deadline=None)
@given(raw=st.binary(min_size=32, max_size=64), encoding=st.sampled_from(["url", "hex", "b64"]))
def test_random_tokens_of_256_bits_pass(raw: bytes, encoding: str) -> None:
    # hypothesis shrinks bytes toward zeros, which are no random token: draw real randomness
    # of the same size, encoded as the token makers of the field encode it.
    data = secrets.token_bytes(len(raw))
    token = {"url": base64.urlsafe_b64encode(data).decode().rstrip("="),
             "hex": data.hex(), "b64": base64.b64encode(data).decode()}[encoding]
    strength = token_strength(token)
    assert strength.capacity_bits >= MIN_TOKEN_BITS
    assert strength.estimated_bits >= MIN_ESTIMATED_BITS, token


def test_the_token_command_makes_tokens_the_rule_accepts() -> None:
    tokens = {new_token() for _ in range(50)}
    assert len(tokens) == 50
    assert all(is_strong_token(t) for t in tokens)


@pytest.mark.parametrize("token", ["", " " * 64, "Sk3" + " " + secrets.token_urlsafe(40),
                                   secrets.token_urlsafe(20)],
                         ids=["empty", "blank", "inner-space", "short"])
def test_white_space_and_short_tokens_are_refused(token: str) -> None:
    assert not is_strong_token(token)


def _servers(monkeypatch: pytest.MonkeyPatch) -> dict[str, Callable[[str], object]]:
    """Each server's own token path, given ``token`` through its environment variable."""
    def through(env: str, resolve: Callable[[], object]) -> Callable[[str], object]:
        def call(token: str) -> object:
            monkeypatch.setenv(env, token)
            return resolve()
        return call

    return {
        "TERMINAL": through("DEEPSEEK_EYES_TERMINAL_TOKEN", lambda: resolve_token(Settings())),
        "BROWSER": through("DEEPSEEK_EYES_BROWSER_TOKEN",
                           lambda: resolve_browser_token(BrowserSettings())),
        "DESKTOP": through("DEEPSEEK_EYES_DESKTOP_TOKEN",
                           lambda: resolve_desktop_token(DesktopSettings())),
        "VISION": through("DEEPSEEK_EYES_VISION_TOKEN",
                          lambda: resolve_vision_token(VisionServeSettings())),
        "GATEWAY": lambda token: check_key(Settings(), token),
    }


@pytest.mark.parametrize("token", ["0123456789" * 8, "abcdefghij" * 6, "Password123!" * 6,
                                   "7f3a9c2e5b1d8046" * 3, "qwertyuiopasdfghjkl" * 4])
def test_every_server_refuses_a_patterned_token(monkeypatch: pytest.MonkeyPatch,
                                                token: str) -> None:
    for prefix, resolve in _servers(monkeypatch).items():
        with pytest.raises(DeepSeekEyesError) as refused:
            resolve(token)
        code = "GATEWAY_KEY_WEAK" if prefix == "GATEWAY" else f"{prefix}_TOKEN_WEAK"
        assert refused.value.code == code
        assert token not in refused.value.message
        assert token not in str(refused.value.details)
        assert refused.value.details["estimated_bits"] < MIN_ESTIMATED_BITS


def test_every_server_takes_a_token_the_command_made(monkeypatch: pytest.MonkeyPatch) -> None:
    token = new_token()
    for resolve in _servers(monkeypatch).values():
        resolve(token)


def test_a_gateway_with_tools_on_this_machine_needs_a_key() -> None:
    for sources in (["terminal"], ["look", "browser"], ["desktop"]):
        settings = Settings.model_validate({"runtime": {"tool_sources": sources}})
        with pytest.raises(GatewayError) as refused:
            check_key(settings, None)
        assert refused.value.code == "GATEWAY_KEY_REQUIRED"
    def mcp(risk_policy: str) -> Settings:
        return Settings.model_validate({
            "runtime": {"tool_sources": ["mcp"]},
            "mcp": {"servers": [{"id": "fs", "transport": "stdio", "command": "fs-server",
                                 "allow": {"tools": ["write_file"]},
                                 "risk_policy": risk_policy}]},
        })

    with pytest.raises(GatewayError):
        check_key(mcp("allow"), None)
    reads = mcp("read-only")
    warning = check_key(reads, None)  # an open gateway of read-only tools is only a warning
    assert warning is not None
    assert "any program on this machine" in warning
    assert check_key(Settings(), None) is not None


def _asgi_status(middleware: Any, authorization: bytes, *,
                 headers: tuple[tuple[bytes, bytes], ...] = (), path: str = "/x",
                 method: str = "GET") -> int:
    """The status the middleware answers a request with this raw ``Authorization`` header
    (and ``headers``)."""
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    middleware.app = app
    scope = {"type": "http", "method": method, "path": path, "client": ("127.0.0.1", 1),
             "headers": [(b"host", b"127.0.0.1:9"), (b"authorization", authorization),
                         *headers]}
    asyncio.run(middleware(scope, receive, send))
    return int(sent[0]["status"])


def test_a_token_beyond_ascii_is_compared_as_the_bytes_sent() -> None:
    token = "schlüssel-" + secrets.token_urlsafe(32)
    guard = SecurityMiddleware(None, token=token, allowed_hosts=["127.0.0.1:*"],
                               allowed_origins=[], limiter=RateLimiter(600),
                               max_body_bytes=1024, codes=RefusalCodes.prefixed("X", "x"))
    assert _asgi_status(guard, b"Bearer " + token.encode()) == 200
    assert _asgi_status(guard, b"bearer  " + token.encode()) == 200
    assert _asgi_status(guard, b"Bearer " + token.encode("latin-1", "replace")) == 401
    assert _asgi_status(guard, b"Basic " + token.encode()) == 401


def test_x_api_key_only_where_a_server_takes_it() -> None:
    """Anthropic's clients send the key as ``x-api-key``: the gateway takes it there,
    compared as the bearer one is; a server that does not ask ignores the header."""
    token = secrets.token_urlsafe(32)

    def guard(**extra: Any) -> SecurityMiddleware:
        return SecurityMiddleware(None, token=token, allowed_hosts=["127.0.0.1:*"],
                                  allowed_origins=[], limiter=RateLimiter(600),
                                  max_body_bytes=1024, codes=RefusalCodes.prefixed("X", "x"),
                                  **extra)

    api_key = ((b"x-api-key", token.encode()),)
    wrong = ((b"x-api-key", b"not-" + token.encode()),)
    taking = guard(api_key_header=True, public_paths=frozenset({"/", "/api/hello"}))
    assert _asgi_status(taking, b"", headers=api_key) == 200
    assert _asgi_status(taking, b"", headers=wrong) == 401
    assert _asgi_status(taking, b"Bearer " + token.encode(), headers=wrong) == 200
    assert _asgi_status(guard(), b"", headers=api_key) == 401
    # The liveness probes, and only they, answer a GET or HEAD without a key.
    assert _asgi_status(taking, b"", path="/") == 200
    assert _asgi_status(taking, b"", path="/api/hello", method="HEAD") == 200
    assert _asgi_status(taking, b"", path="/api/hello/x") == 401
    assert _asgi_status(taking, b"", path="/v1/models") == 401
