"""Secrets written down only as short keyed hashes: :func:`redact_url` and :func:`masked`.

A URL's query values, its fragment and its user info can carry a password, a one-time code
or a session token (a GET form puts every field in the query). Wherever we write a URL —
an observation, an event, report v2 and its blob, an audit row — it goes through
:func:`redact_url` first: ``https://u:p@host/path?token=abc&q=1#frag`` becomes
``https://<h:1a2b3c4d>@host/path?token=<h:5e6f7a8b>&q=<h:0c1d2e3f>#<h:9a8b7c6d>``.
Names are kept (they say what the page did); values are replaced whole.

The hash is ``h:`` and the first 8 hex digits of HMAC-SHA256 over the (percent-decoded)
value, keyed with 32 random bytes drawn when the process starts and never written
anywhere. A plain SHA-256 of a six-digit code or a common password is undone by trying
every candidate; a keyed one is not. Equal values hash alike within one process (one
report), so a reader still sees "the same token again", but hashes of two processes cannot
be compared.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from urllib.parse import unquote, unquote_plus

__all__ = ["masked", "redact_url", "redact_url_part", "redact_urls_in", "secret_digest"]

_KEY = secrets.token_bytes(32)
MAX_URL_CHARS = 2000
_NAME = re.compile(r"[A-Za-z0-9_.~+*\-\[\]%]{1,64}")
_AUTHORITY_END = re.compile(r"[/\\?#]")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
# A URL inside free text: scheme://, up to whitespace, a quote, an angle bracket or a
# backslash (Chromium percent-encodes all but the last two inside a URL).
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"<>\\]+")
_TRAILING = "'),.;:]!"


def secret_digest(value: str) -> str:
    """``h:`` + 8 hex digits of the process-keyed HMAC-SHA256 of ``value``."""
    mac = hmac.new(_KEY, value.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return "h:" + mac.hexdigest()[:8]


def masked(value: str) -> str:
    """``value`` as it is written in a URL or a line: ``<h:1a2b3c4d>``."""
    return f"<{secret_digest(value)}>"


def _query(query: str) -> str:
    parts: list[str] = []
    for part in query.split("&"):
        name, eq, value = part.partition("=")
        if not eq:
            parts.append(masked(unquote_plus(part)) if part else "")
            continue
        shown = name if _NAME.fullmatch(name) else masked(unquote_plus(name))
        parts.append(f"{shown}={masked(unquote_plus(value)) if value else ''}")
    return "&".join(parts)


def _userinfo(head: str) -> str:
    scheme = _SCHEME.match(head)
    start = scheme.end() if scheme else 0
    if not head.startswith("//", start):
        return head
    start += 2
    end_match = _AUTHORITY_END.search(head, start)
    end = end_match.start() if end_match else len(head)
    at = head.rfind("@", start, end)
    if at < 0:
        return head
    return head[:start] + masked(unquote(head[start:at])) + head[at:]


def redact_url(url: str, *, limit: int = MAX_URL_CHARS) -> str:
    """``url`` with every query value, the fragment and the user info replaced by
    :func:`masked` hashes (names, scheme, host and path kept), cut at ``limit``."""
    if not url:
        return url
    lowered = url[:11].lower()
    if lowered.startswith(("data:", "javascript:")):  # the whole body is the payload
        scheme, _, body = url.partition(":")
        return f"{scheme}:{masked(body)}" if body else url
    rest, hash_sign, fragment = url.partition("#")
    head, question, query = rest.partition("?")
    out = _userinfo(head)
    if question:
        out += "?" + _query(query)
    if hash_sign:
        out += "#" + (masked(unquote(fragment)) if fragment else "")
    if len(out) > limit:
        out = out[: max(0, limit - 1)] + "…"
    return out


def redact_url_part(text: str, *, limit: int = MAX_URL_CHARS) -> str:
    """A piece of a URL (what a URL assertion expects: ``token=abc``, ``?q=1``, a whole
    URL): redacted like a URL when it has a query, a fragment or a scheme, as a query when
    it has ``=``, else kept (a host or a path)."""
    if "://" in text or "?" in text or "#" in text or text.startswith("//"):
        return redact_url(text, limit=limit)
    if "=" in text:
        return redact_url("?" + text, limit=limit + 1)[1:]
    return text[:limit]


def _redact_match(match: re.Match[str]) -> str:
    found = match.group()
    kept = len(found.rstrip(_TRAILING))
    return redact_url(found[:kept]) + found[kept:]


def redact_urls_in(text: str) -> str:
    """Free text (an event, an error message) with every ``scheme://`` URL in it redacted."""
    return _URL_IN_TEXT.sub(_redact_match, text)
