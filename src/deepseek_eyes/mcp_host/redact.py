"""Scrub secrets from what a server says before it is shown, logged or audited.

A server's error message or stderr can echo what we sent it: a header, an environment
value, a URL with a password. Two layers, as in the terminal's redactor: the exact values
of the secret references *this server* is configured with (``env``, ``headers``, OAuth
client credentials), resolved when its redactor is built, and patterns for the secrets
any text may carry (``Bearer …`` and ``Authorization:`` values, ``user:password@`` in a
URL, ``KEY=value`` with a secret-looking name, well-known token shapes).

Why not the terminal's :mod:`redact <deepseek_eyes.terminal.execution.redact>`: the layer
contract keeps one capability from importing another, and what is scrubbed here is short
(an error message, one stderr line), so a plain pattern pass is enough; the token shapes
(:data:`TOKEN_PATTERNS`) come from the one owner of credential shapes,
:mod:`deepseek_eyes.settings.credentials`, shared with the catalog review.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.settings import McpServerSettings
from deepseek_eyes.settings.credentials import SECRET_NAME, TOKEN_PATTERNS

__all__ = ["MARKER", "SECRET_NAME", "TOKEN_PATTERNS", "Redactor", "redactor_for"]

MARKER = "[REDACTED]"
#: Known values shorter than this are not scrubbed: they would redact ordinary words.
MIN_SECRET = 6

_SUBSTITUTIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----"
                r"|$)", re.S), MARKER),
    (re.compile(r"(?i)\b(authorization\s*[:=]\s*(?:bearer|basic|token)?\s*)[^\s\"',;]+"),
     r"\1" + MARKER),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/\-]{8,}=*"), r"\1" + MARKER),
    # user:password@ in a URL: the user stays, the password goes.
    (re.compile(r"(://[^/\s:@]+:)[^/\s@]+@"), r"\1" + MARKER + "@"),
    # NAME=value / NAME: value / "NAME": "value" where NAME says it is a secret. The name
    # run is possessive, so a long run of name characters cannot make the match backtrack.
    (re.compile(r"(?i)(?<![A-Z0-9_.\-])((?>[A-Z0-9_.\-]*?(?:api[_-]?key|secret|token|"
                r"passw(?:or)?d|passwd|credential|private[_-]?key|access[_-]?key))"
                r"[A-Z0-9_.\-]*+\"?)(\s*+[=:]\s*+)(\"[^\"]*\"|'[^']*'|[^\s,;&\"']+)"),
     r"\1\2" + MARKER),
    *((pattern, MARKER) for name, pattern in TOKEN_PATTERNS
      if name not in ("private key block", "bearer token")),
)


class Redactor:
    """Scrubs known secret values and secret-shaped text from short texts."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        known = {v for v in values if len(v) >= MIN_SECRET}
        # A header value such as "Bearer abc…" is also scrubbed as its bare token.
        for value in list(known):
            scheme, _, token = value.partition(" ")
            if token and scheme.isalpha() and len(token) >= MIN_SECRET:
                known.add(token)
        # Longest first, so a value that contains another is removed whole.
        self._values = tuple(sorted(known, key=len, reverse=True))

    def scrub(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, MARKER)
        for pattern, replacement in _SUBSTITUTIONS:
            text = pattern.sub(replacement, text)
        return text

    def scrub_error(self, exc: DeepSeekEyesError) -> DeepSeekEyesError:
        """Scrub an error's message (and string details) in place; returns it."""
        exc.message = self.scrub(exc.message)
        exc.args = (exc.message,)
        for key, value in list(exc.details.items()):
            if isinstance(value, str):
                exc.details[key] = self.scrub(value)
        return exc


def redactor_for(server: McpServerSettings) -> Redactor:
    """A redactor that knows the values of the server's secret references that are set
    now (an unset one cannot leak; it fails the connection before anything is sent)."""
    refs = [*server.env.values(), *server.headers.values()]
    if server.oauth is not None:
        refs += server.oauth.secret_refs()
    return Redactor(ref.resolve() for ref in refs if ref.is_set())
