"""The terminal's HTTP security: the shared layer of :mod:`deepseek_eyes.serving.security`
with the terminal's refusal codes (``TERMINAL_UNAUTHORIZED``, ``TERMINAL_FORBIDDEN``,
``TERMINAL_RATE_LIMITED``, ``TERMINAL_BODY_TOO_LARGE``) and its token check
(``TERMINAL_TOKEN_WEAK``).

The names the terminal always exported stay importable from here.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp

from deepseek_eyes.errors import TerminalError
from deepseek_eyes.serving import security as _shared
from deepseek_eyes.serving.security import (
    MIN_TOKEN_BITS,
    RateLimiter,
    RefusalCodes,
    host_allowed,
    loopback_hosts,
    loopback_origins,
)

__all__ = [
    "MIN_TOKEN_BITS",
    "TERMINAL_REFUSALS",
    "RateLimiter",
    "SecurityMiddleware",
    "check_token_strength",
    "host_allowed",
    "loopback_hosts",
    "loopback_origins",
]

TERMINAL_REFUSALS = RefusalCodes.prefixed("TERMINAL", realm="deepseek-eyes-terminal")


def check_token_strength(token: str) -> None:
    """Refuse tokens that cannot hold 256 bits of randomness (``TERMINAL_TOKEN_WEAK``)."""
    _shared.check_token_strength(token, error=TerminalError, prefix="TERMINAL")


class SecurityMiddleware(_shared.SecurityMiddleware):
    """The shared middleware, answering with the terminal's codes unless told otherwise."""

    def __init__(self, app: ASGIApp, *, codes: RefusalCodes = TERMINAL_REFUSALS,
                 **options: Any) -> None:
        super().__init__(app, codes=codes, **options)
