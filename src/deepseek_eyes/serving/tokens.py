"""How strong a bearer token is: one rule for every server we run, the gateway included.

Two numbers decide. The *capacity* is what the token's length and alphabet could hold
(length × log2 of the union of the character classes present): a short token fails here
however random it is. The *estimate* prices the patterns a guesser tries first. zxcvbn
(the estimator password meters use) finds the repeats, sequences, keyboard walks,
dictionary words and dates in the token and what each is worth in guesses; the cheapest
explanation of the whole token is then searched here, with every character no pattern
explains at the alphabet's full width. ``'0123456789' * 8`` has a capacity of 265 bits and
an estimate of 8.

zxcvbn's own search prices an unexplained character at ten guesses, which makes it leave
words beside random letters unexplained (``-Admin-`` was random to it); and it misses
keyboard columns (``yhnujm``), separators used again and again, words used again further
on, and units repeated beyond its window. Each is priced here: walk steps at 3 bits,
punctuation at 5 (2 when used before), a back-reference to earlier text at 4, and a token
of period *p* as its first *p* characters plus log2 of the count.

Why not demand 256 estimated bits: the matchers find short words in random text too, so a
token from ``secrets.token_urlsafe(32)`` (258 bits of capacity) is estimated at ~175–250
bits. :data:`MIN_ESTIMATED_BITS` (128) leaves that margin, is far beyond any guessing
attack, and refuses patterned tokens (a block of 16 random hex digits repeated three times
estimates ~77; eight common words joined by dashes ~120).

zxcvbn's work grows with the square of the length, so only the first
:data:`_ESTIMATED_PREFIX` characters (of the repeated unit) are estimated; a token whose
prefix is strong is strong. The check runs once, when a server starts; zxcvbn (20 ms of
word lists to import) is imported then, not by every process that imports the HTTP layer.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Protocol

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
MIN_ESTIMATED_BITS = 128
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


@functools.cache
def _neighbours() -> dict[str, frozenset[str]]:
    """Each key's neighbours on the keyboards zxcvbn knows (qwerty, dvorak, keypads)."""
    from zxcvbn.adjacency_graphs import ADJACENCY_GRAPHS

    found: dict[str, set[str]] = {}
    for graph in ADJACENCY_GRAPHS.values():
        for key, around in graph.items():
            for char in key:
                found.setdefault(char, set()).update(c for n in around if n for c in n)
    return {char: frozenset(chars) for char, chars in found.items()}


#: What one more step of a walk is worth: the next key among a handful.
_STEP_BITS = 3.0
#: A punctuation character (one of ~32), and one already used earlier in the token.
_SEPARATOR_BITS = 5.0
_SEPARATOR_AGAIN_BITS = 2.0
#: A word or pattern that already appeared earlier in the token: which earlier one.
_BACK_REFERENCE_BITS = 4.0
_BACK_REFERENCE_MIN = 3
#: Steps in a row before a run counts as a walk (random text has short ones by chance).
_WALK_STEPS = 3


def _linked(before: str, char: str) -> bool:
    """``char`` continues a walk from ``before``: a keyboard neighbour, the next or previous
    code point, or the same letter in the other case."""
    return (char in _neighbours().get(before, ()) or abs(ord(char) - ord(before)) <= 1
            or char.lower() == before.lower())


def _period(token: str) -> int:
    """The shortest period of ``token`` (its length when it has none): ``abcabca`` → 3."""
    for period in range(1, len(token) // 2 + 1):
        if token[period:] == token[:-period]:
            return period
    return len(token)


def _char_bits(text: str, index: int, per_char: float) -> float:
    """One character nothing explains: the alphabet's width, or :data:`_STEP_BITS` when it
    is at least the :data:`_WALK_STEPS`-th linked step in a row (a walk zxcvbn's own
    matchers miss, such as a keyboard column)."""
    char = text[index]
    if not char.isalnum():
        # Separators: a person joins words with one or two of them, again and again.
        return _SEPARATOR_AGAIN_BITS if char in text[:index] else min(per_char, _SEPARATOR_BITS)
    if index < _WALK_STEPS:
        return per_char
    walked = all(_linked(text[i - 1], text[i]) for i in range(index - _WALK_STEPS + 1, index + 1))
    return _STEP_BITS if walked else per_char


def _estimate(text: str, per_char: float) -> float:
    """The cheapest explanation of ``text``: zxcvbn's matches, each worth its guesses (a
    match repeating text seen earlier only :data:`_BACK_REFERENCE_BITS`), and what they
    leave at :func:`_char_bits`. zxcvbn's own search prices an unexplained
    character at ten guesses, which makes a word next to random letters cheaper to leave
    unexplained; here it costs what a random character of this alphabet costs."""
    from zxcvbn import matching, scoring

    matches = matching.omnimatch(text)
    lowered = text.lower()
    ending: dict[int, list[tuple[int, float]]] = {}
    for match in matches:
        start, end = int(match["i"]), int(match["j"]) + 1
        guesses = float(scoring.estimate_guesses(match, text))
        bits = min((end - start) * per_char, math.log2(max(guesses, 1.0)))
        if end - start >= _BACK_REFERENCE_MIN and lowered[start:end] in lowered[:start]:
            bits = min(bits, _BACK_REFERENCE_BITS)  # a word used again, anywhere before
        ending.setdefault(end, []).append((start, bits))
    best = [0.0] * (len(text) + 1)
    for end in range(1, len(text) + 1):
        best[end] = best[end - 1] + _char_bits(text, end - 1, per_char)
        for start, bits in ending.get(end, ()):
            best[end] = min(best[end], best[start] + bits)
    return best[-1]


def token_strength(token: str) -> TokenStrength:
    """The capacity and the pattern-priced estimate of ``token`` (0 for white space)."""
    if not token or any(c.isspace() for c in token):
        return TokenStrength(0, 0)
    alphabet = _alphabet(token)
    per_char = math.log2(alphabet) if alphabet > 1 else 0.0
    capacity = int(len(token) * per_char)
    # A token that repeats a unit, however long, holds that unit's bits and the count.
    period = _period(token)
    unit = token[:min(period, _ESTIMATED_PREFIX)]
    estimate = _estimate(unit, per_char) + math.log2(len(token) / period)
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
