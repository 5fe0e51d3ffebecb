"""How strong a bearer token is: one rule for every server we run, the gateway included.

Two numbers decide. The *capacity* is what the token's length and alphabet could hold
(length × log2 of the union of the character classes present): a short token fails here
however random it is. The *estimate* prices the patterns a guesser tries first: zxcvbn
(the estimator password meters use) splits the token into repeats, sequences, keyboard
walks, dictionary words and dates, each worth only its own guesses, and what it cannot
explain is counted at the alphabet's full width. ``'0123456789' * 8`` has a capacity of 265
bits and an estimate of 8.

Why not demand 256 estimated bits: zxcvbn finds short words in random text too, so a token
from ``secrets.token_urlsafe(32)`` (258 bits of capacity) is estimated anywhere between ~220
and 258 bits. The estimate has to leave that margin: :data:`MIN_ESTIMATED_BITS` (192) is
far beyond any guessing attack and still refuses every patterned token (a block of 48
random hex digits repeated three times estimates ~100).

zxcvbn's work grows with the square of the length, so only the first
:data:`_ESTIMATED_PREFIX` characters are estimated; a token whose prefix is strong is strong.
The check runs once, when a server starts.
"""

from __future__ import annotations

import math
import os
from typing import Protocol

from zxcvbn import zxcvbn

from deepseek_eyes.errors import DeepSeekEyesError

__all__ = [
    "MIN_ESTIMATED_BITS",
    "MIN_TOKEN_BITS",
    "TOKEN_COMMAND",
    "TokenStrength",
    "check_token_strength",
    "estimated_token_bits",
    "is_strong_token",
    "resolve_bearer_token",
    "token_strength",
]

#: The capacity a token needs (length × alphabet).
MIN_TOKEN_BITS = 256
#: The bits left once zxcvbn has priced the token's patterns.
MIN_ESTIMATED_BITS = 192
#: The command that makes a token every server accepts.
TOKEN_COMMAND = "deepseek-eyes token"  # noqa: S105 - a command line, not a token
_ESTIMATED_PREFIX = 128
_CLASSES = (
    ("abcdefghijklmnopqrstuvwxyz", 26), ("ABCDEFGHIJKLMNOPQRSTUVWXYZ", 26),
    ("0123456789", 10), ("-_", 2), ("+/=.~", 5),
)


class TokenStrength:
    """A token's capacity and its estimate, in bits."""

    __slots__ = ("capacity_bits", "estimated_bits")

    def __init__(self, capacity_bits: int, estimated_bits: int) -> None:
        self.capacity_bits = capacity_bits
        self.estimated_bits = estimated_bits

    @property
    def strong(self) -> bool:
        return (self.capacity_bits >= MIN_TOKEN_BITS
                and self.estimated_bits >= MIN_ESTIMATED_BITS)


def _alphabet(token: str) -> int:
    size = sum(n for chars, n in _CLASSES if any(c in chars for c in token))
    other = {c for c in token if not any(c in chars for chars, _ in _CLASSES)}
    return size + 4 * len(other)


def token_strength(token: str) -> TokenStrength:
    """The capacity and the pattern-priced estimate of ``token`` (0 for white space)."""
    if not token or any(c.isspace() for c in token):
        return TokenStrength(0, 0)
    alphabet = _alphabet(token)
    per_char = math.log2(alphabet) if alphabet > 1 else 0.0
    capacity = int(len(token) * per_char)
    prefix = token[:_ESTIMATED_PREFIX]
    estimate = 0.0
    for match in zxcvbn(prefix, max_length=len(prefix))["sequence"]:
        width = len(match["token"]) * per_char
        if match["pattern"] == "bruteforce":
            estimate += width
        else:
            estimate += min(width, math.log2(max(float(match["guesses"]), 1.0)))
    return TokenStrength(capacity, int(estimate))


def estimated_token_bits(token: str) -> int:
    """The bits a guesser must still cover once the token's patterns are priced."""
    return token_strength(token).estimated_bits


def is_strong_token(token: str) -> bool:
    """Capacity ≥ :data:`MIN_TOKEN_BITS` and estimate ≥ :data:`MIN_ESTIMATED_BITS`."""
    return token_strength(token).strong


def check_token_strength(token: str, *, error: type[DeepSeekEyesError], prefix: str,
                         code: str | None = None) -> None:
    """Refuse a weak token: ``code`` (default ``{prefix}_TOKEN_WEAK``), raised as ``error``,
    with both numbers in its details and never the token."""
    strength = token_strength(token)
    if strength.strong:
        return
    if strength.capacity_bits < MIN_TOKEN_BITS:
        why = (f"its length and characters hold at most {strength.capacity_bits} bits; "
               f"{MIN_TOKEN_BITS} are needed")
    else:
        why = (f"it is built from patterns (repeats, sequences, keyboard walks or words) "
               f"worth about {strength.estimated_bits} bits; {MIN_ESTIMATED_BITS} are needed")
    raise error(
        f"the bearer token is too weak: {why} (`{TOKEN_COMMAND}` makes a strong one)",
        code=code or f"{prefix}_TOKEN_WEAK",
        details={"capacity_bits": strength.capacity_bits,
                 "estimated_bits": strength.estimated_bits},
    )


class _Secret(Protocol):
    def resolve(self) -> str: ...


def resolve_bearer_token(
    ref: _Secret | None, *, env: str, setting: str, error: type[DeepSeekEyesError],
    prefix: str,
) -> str:
    """An HTTP server's bearer token: the setting's ``{ env = … }`` reference, else the
    variable ``env``, checked for strength.

    Raises:
        DeepSeekEyesError: as ``error``, ``{prefix}_TOKEN_MISSING`` or ``{prefix}_TOKEN_WEAK``.
        ConfigError: ``CONFIG_ENV_MISSING`` when the setting names an unset variable.
    """
    token = ref.resolve() if ref is not None else os.environ.get(env, "")
    if not token:
        raise error(f"serving over HTTP needs a bearer token: set {env} or {setting} "
                    f"(`{TOKEN_COMMAND}` makes one)", code=f"{prefix}_TOKEN_MISSING")
    check_token_strength(token, error=error, prefix=prefix)
    return token
