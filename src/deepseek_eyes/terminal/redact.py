"""Scrub secrets from text before it is signed into a receipt or sent to a console.

Two layers: exact values we know are secret (the bearer token, receipt keys, the values of
``terminal.redact_env`` variables), and patterns for the secrets commands commonly print
(``KEY=value`` assignments with secret-looking names, ``Authorization: Bearer …``, private
key blocks, well-known token prefixes). Redaction happens *before* signing, so a signature
never vouches for a secret and a receipt can be handed on.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Iterator

__all__ = ["MARKER", "Redactor"]

MARKER = "[REDACTED]"
_MIN_SECRET = 6  # shorter "secrets" would redact ordinary words

# ``NAME=value`` / ``NAME: value`` where NAME is a run of name characters holding a secret
# word. The match starts where the run starts and never backtracks into it (an atomic
# group, a possessive run): the older form, ``\b[run]*WORD[run]*``, retried every word
# boundary inside a run and every word in it, so a line like ``token.token.token…`` took
# cubic time. Only the value is replaced; the name is kept as it was.
_KEYWORDS = ("api", "secret", "token", "passw", "credential", "private", "access")
_ASSIGNMENT = re.compile(
    r"(?i)(?<![A-Z0-9_.\-])((?>[A-Z0-9_.\-]*?(?:api[_-]?key|secret|token|passw(?:or)?d|passwd|"
    r"credential|private[_-]?key|access[_-]?key))[A-Z0-9_.\-]*+)(\s*+[=:]\s*+)"
    r"(\"[^\"]*\"|'[^']*'|[^\s,;]+)"
)
_RUN_CHARS = frozenset(string.ascii_letters + string.digits + "_.-")

# Each pattern with the lower-case strings one of which any match contains: a pattern whose
# hints are all absent from an ASCII text cannot match and is skipped, which keeps redacting
# megabytes of ordinary output cheap. Text that is not ASCII is always run through every
# pattern (case-insensitive matching knows non-ASCII equivalents: K, ſ, ı).
_PATTERNS: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = (
    (re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|$)",
                re.S), MARKER, ("-----begin ",)),
    (re.compile(r"(?i)\b(authorization\s*[:=]\s*(?:bearer|basic|token)\s+)[^\s\"']+"),
     r"\1" + MARKER, ("authorization",)),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/\-]{12,}=*"), r"\1" + MARKER, ("bearer",)),
    (_ASSIGNMENT, r"\1\2" + MARKER, _KEYWORDS),
    (re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{16,}"), MARKER, ("sk-", "pk-", "rk-")),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), MARKER, ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), MARKER, ("github_pat_",)),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"), MARKER, tuple(f"xox{c}-" for c in "abposr")),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), MARKER, ("akia",)),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"), MARKER, ("aiza",)),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), MARKER,
     ("eyj",)),
    (re.compile(r"(?i)(://[^/\s:@]+:)[^/\s@]+@"), r"\1" + MARKER + "@", ("://",)),
)


def _lowered(text: str) -> str | None:
    return text.lower() if text.isascii() else None


def _may_match(hints: tuple[str, ...], lowered: str | None) -> bool:
    return lowered is None or any(hint in lowered for hint in hints)


def _find_all(text: str, word: str) -> Iterator[int]:
    at = text.find(word)
    while at != -1:
        yield at
        at = text.find(word, at + 1)


def _assignments(text: str, lowered: str) -> Iterator[re.Match[str]]:
    """What ``_ASSIGNMENT.finditer(text)`` finds in ASCII text, trying the pattern only at
    the start of each run of name characters that holds a secret word (the only places a
    match can start), so text without those words costs a few ``str.find`` calls."""
    hits = sorted(at for word in _KEYWORDS for at in _find_all(lowered, word))
    end = tried = last_hit = last_start = -1
    for hit in hits:
        start = hit
        while start > 0 and text[start - 1] in _RUN_CHARS:
            start -= 1
            if start == last_hit:  # the same run as the last hit
                start = last_start
                break
        last_hit, last_start = hit, start
        if start < end or start == tried:
            continue
        tried = start
        match = _ASSIGNMENT.match(text, start)
        if match:
            end = match.end()
            yield match


def _subn(
    pattern: re.Pattern[str], replacement: str, text: str, lowered: str | None
) -> tuple[str, int]:
    if pattern is not _ASSIGNMENT or lowered is None:
        return pattern.subn(replacement, text)
    parts: list[str] = []
    last = count = 0
    for match in _assignments(text, lowered):
        parts += [text[last:match.start()], match.expand(replacement)]
        last = match.end()
        count += 1
    return "".join(parts) + text[last:], count


class Redactor:
    """Replaces known secret values and secret-looking patterns with :data:`MARKER`."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = {s for s in secrets if s and len(s) >= _MIN_SECRET}
        # Longest first, so a secret that contains another is replaced whole.
        self._values = sorted(values, key=len, reverse=True)

    def add(self, secret: str) -> None:
        if secret and len(secret) >= _MIN_SECRET and secret not in self._values:
            self._values.append(secret)
            self._values.sort(key=len, reverse=True)

    def redact(self, text: str) -> tuple[str, int]:
        """``(scrubbed text, number of replacements)``."""
        count = 0
        for value in self._values:
            if value in text:
                count += text.count(value)
                text = text.replace(value, MARKER)
        lowered = _lowered(text)
        for pattern, replacement, hints in _PATTERNS:
            if not _may_match(hints, lowered):
                continue
            text, n = _subn(pattern, replacement, text, lowered)
            if n:
                count += n
                lowered = _lowered(text)
        return text, count
