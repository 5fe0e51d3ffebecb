"""Scrub secrets from text before it is signed into a receipt or sent to a console.

Two layers: exact values we know are secret (the bearer token, receipt keys, the values of
``terminal.redact_env`` variables), and patterns for the secrets commands commonly print
(``KEY=value`` assignments with secret-looking names, ``Authorization: Bearer …``, private
key blocks, well-known token prefixes). Redaction happens *before* signing, so a signature
never vouches for a secret and a receipt can be handed on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MARKER", "Redactor"]

MARKER = "[REDACTED]"
_MIN_SECRET = 6  # shorter "secrets" would redact ordinary words

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|$)",
                re.S), MARKER),
    (re.compile(r"(?i)\b(authorization\s*[:=]\s*(?:bearer|basic|token)\s+)[^\s\"']+"),
     r"\1" + MARKER),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/\-]{12,}=*"), r"\1" + MARKER),
    (re.compile(
        r"(?i)\b([A-Z0-9_.\-]*(?:api[_-]?key|secret|token|passw(?:or)?d|passwd|credential|"
        r"private[_-]?key|access[_-]?key)[A-Z0-9_.\-]*)(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;]+)"
    ), r"\1\2" + MARKER),
    (re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{16,}"), MARKER),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), MARKER),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), MARKER),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"), MARKER),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), MARKER),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"), MARKER),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), MARKER),
    (re.compile(r"(?i)(://[^/\s:@]+:)[^/\s@]+@"), r"\1" + MARKER + "@"),
)


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
        if not text:
            return text, 0
        count = 0
        for value in self._values:
            if value in text:
                count += text.count(value)
                text = text.replace(value, MARKER)
        for pattern, replacement in _PATTERNS:
            text, n = pattern.subn(replacement, text)
            count += n
        return text, count
