"""Scrub secrets from text before it is signed into a receipt or sent to a console.

Two layers: exact values we know are secret (the bearer token, receipt keys, the values of
``terminal.redact_env`` variables), and patterns for the secrets commands commonly print
(``KEY=value`` assignments with secret-looking names, ``Authorization: Bearer …``, private
key blocks, well-known token prefixes). Redaction happens *before* signing, so a signature
never vouches for a secret and a receipt can be handed on.

Live output (the SSE ``output`` events) goes through the same :class:`Redactor`, by
:class:`LiveRedactor`: a command's output arrives in chunks of any size, and a secret can
be cut in two by a chunk boundary, so each stream is redacted a line at a time. The
unfinished last line is held back until its newline arrives, or until it grows past a cap,
when all but a tail longer than any secret is released (never cutting through a match).
A private key block stays hidden from its ``BEGIN`` line to its ``END`` line.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Iterator

import ahocorasick_rs

__all__ = ["MARKER", "LiveRedactor", "Redactor"]

MARKER = "[REDACTED]"
_MIN_SECRET = 6  # shorter "secrets" would redact ordinary words
LINE_CAP = 8192  # characters of an unfinished line held back before part of it is released
_TAIL = 512  # characters always held back at a forced release (longer than a pattern needs)
_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_KEY_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY-----")
_WORD = re.compile(r"\S*")

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
# megabytes of ordinary output (live output included) cheap. Text that is not ASCII is always
# run through every pattern (case-insensitive matching knows non-ASCII equivalents: K, ſ, ı).
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


# Every hint of every pattern in one Aho-Corasick automaton (a DFA, in Rust): one pass over
# the text finds which hints occur, instead of one substring search per hint. Live output
# is redacted chunk by chunk as it streams; 29 separate searches held it to ~50 MB/s, one
# pass runs at ~500 MB/s.
_HINTS: tuple[str, ...] = tuple(sorted({h for _, _, hints in _PATTERNS for h in hints}))
_HINT_INDEX = {hint: i for i, hint in enumerate(_HINTS)}
_AUTOMATON = ahocorasick_rs.BytesAhoCorasick(
    [h.encode("ascii") for h in _HINTS], implementation=ahocorasick_rs.Implementation.DFA
)


def _hints_present(lowered: str | None) -> frozenset[int] | None:
    """The indexes of the hints in ``lowered`` (None: not ASCII, every pattern must run)."""
    if lowered is None:
        return None
    found = _AUTOMATON.find_matches_as_indexes(lowered.encode("ascii"), overlapping=True)
    return frozenset(index for index, _, _ in found)


def _may_match(hints: tuple[str, ...], present: frozenset[int] | None) -> bool:
    return present is None or any(_HINT_INDEX[hint] in present for hint in hints)


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


def _finditer(pattern: re.Pattern[str], text: str, lowered: str | None) -> Iterator[re.Match[str]]:
    if pattern is _ASSIGNMENT and lowered is not None:
        return _assignments(text, lowered)
    return pattern.finditer(text)


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
        if not text:
            return text, 0
        count = 0
        for value in self._values:
            if value in text:
                count += text.count(value)
                text = text.replace(value, MARKER)
        lowered = _lowered(text)
        present = _hints_present(lowered)
        if present is not None and not present:  # no pattern's hint: none can match
            return text, count
        for pattern, replacement, hints in _PATTERNS:
            if not _may_match(hints, present):
                continue
            text, n = _subn(pattern, replacement, text, lowered)
            if n:
                count += n
                lowered = _lowered(text)
                present = _hints_present(lowered)
        return text, count

    def longest_secret(self) -> int:
        return len(self._values[0]) if self._values else 0

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where in ``text`` a known secret or a pattern matches (start, end)."""
        found: list[tuple[int, int]] = []
        for value in self._values:
            start = text.find(value)
            while start != -1:
                found.append((start, start + len(value)))
                start = text.find(value, start + 1)
        lowered = _lowered(text)
        present = _hints_present(lowered)
        for pattern, _, hints in _PATTERNS:
            if _may_match(hints, present):
                found.extend(m.span() for m in _finditer(pattern, text, lowered))
        return found


class LiveRedactor:
    """Redacts one output stream chunk by chunk; see the module docstring.

    ``feed`` returns the text that is safe to publish now (possibly ``""``); ``flush``
    returns the rest once the stream has ended. Memory is bounded: at most about
    ``4 × line_cap`` characters are held, however long a line is. ``feed(…, publish=False)``
    (nobody is listening) skips the redaction itself but keeps the held line and the
    key-block state, so a subscriber who joins later still never sees part of a secret.
    """

    def __init__(self, redactor: Redactor, line_cap: int = LINE_CAP) -> None:
        self.redactor = redactor
        self.line_cap = line_cap
        self.hard_cap = 4 * line_cap
        self._pending = ""
        self._in_key = False  # inside a private key block
        self._skip_word = False  # hiding the rest of a match cut at the hard cap

    def feed(self, text: str, *, publish: bool = True) -> str:
        if self._skip_word:
            text = self._skip(text)
        self._pending += text
        cut = self._pending.rfind("\n") + 1
        if len(self._pending) - cut > self.line_cap:
            cut = self._forced_cut()
        if cut <= 0:
            return ""
        ready, self._pending = self._pending[:cut], self._pending[cut:]
        return self._scrub(ready, publish)

    def flush(self) -> str:
        ready, self._pending = self._pending, ""
        return self._scrub(ready) if ready else ""

    def _skip(self, text: str) -> str:
        word = _WORD.match(text)
        rest = text[word.end():] if word else text
        self._skip_word = not rest
        return rest

    def _forced_cut(self) -> int:
        """Release all but a tail longer than any secret, never cutting through a match;
        a match longer than the hard cap is cut, and the rest of its word hidden."""
        hold = max(_TAIL, self.redactor.longest_secret())
        end = len(self._pending)
        cut = end - hold
        spans = self.redactor.spans(self._pending)
        moved = True
        while moved and cut > 0:
            moved = False
            for start, stop in spans:
                if start < cut < stop:
                    cut, moved = start, True
        if end - cut <= self.hard_cap:
            return max(cut, 0)
        cut = end - hold
        self._pending = self._pending[:cut] + self._skip(self._pending[cut:])
        return cut

    def _scrub(self, text: str, publish: bool = True) -> str:
        if self._in_key:  # hide everything up to the block's END line
            end = _KEY_END.search(text)
            if end is None:
                return ""
            self._in_key = False
            text = text[end.end():]
        begins = list(_KEY_BEGIN.finditer(text))
        if begins and _KEY_END.search(text, begins[-1].end()) is None:
            self._in_key = True
        return self.redactor.redact(text)[0] if publish else ""
