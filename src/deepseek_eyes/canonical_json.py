"""Canonical JSON: the one place that decides which bytes an object hashes, signs or keys to.

Hashes built over JSON are only as stable as the encoder flags behind them: key order,
separators, ``ensure_ascii`` and ``allow_nan`` each change the bytes of some object. Before
this module each hashing site spelled its own flags, and several spellings are now baked into
hashes already stored in users' databases, audit chains and receipt logs. So there is not one
format here but a few *named* ones, each documented with the stored hashes that depend on it.
Changing a format's flags invalidates those hashes: add a new format instead.

Every format sorts keys. All but :data:`SORTED_DEFAULT` use compact separators (``","`` and
``":"``). They differ in two flags:

* ``ensure_ascii``: whether non-ASCII text is written as ``\\uXXXX`` escapes (ASCII formats)
  or as itself (UTF-8 formats). The bytes differ for any non-ASCII string.
* ``allow_nan``: whether ``NaN``/``Infinity`` are written as Python's non-standard literals
  (lenient formats) or refused with ``ValueError`` (strict formats). Lenient formats exist
  where the input can carry such floats (a model's parsed JSON) and refusing would change
  behaviour.

The module-level :func:`dumps`, :func:`dumps_bytes` and :func:`sha256_hex` are
:data:`CANONICAL`, the format new code should use. Stdlib only: it sits in the foundation
layer beside ``errors`` and ``untrusted``.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ASCII",
    "ASCII_LENIENT",
    "CANONICAL",
    "LENIENT",
    "SORTED_DEFAULT",
    "CanonicalFormat",
    "JsonObject",
    "dumps",
    "dumps_bytes",
    "normalized_text",
    "sha256_hex",
]

JsonObject = dict[str, Any]
"""A JSON object whose shape is someone else's: a model's reply, an MCP server's result, a
client's request body. Our own records have TypedDicts or dataclasses; this alias is for
payloads we only pass on, bound or hash, never for shapes we define."""


@dataclass(frozen=True)
class CanonicalFormat:
    """One fixed set of encoder flags, with the stored hashes that depend on it named in
    its docstring at the definition below. ``sort_keys`` is always on."""

    name: str
    ensure_ascii: bool
    allow_nan: bool
    compact: bool = True
    _encode: Any = field(init=False, repr=False, compare=False)
    _checked: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # One encoder per format: json.dumps with non-default flags builds the same
        # encoder on every call, so reusing it gives identical output and saves the setup.
        encoder = json.JSONEncoder(
            sort_keys=True,
            ensure_ascii=self.ensure_ascii,
            allow_nan=self.allow_nan,
            separators=(",", ":") if self.compact else (", ", ": "),
        )
        object.__setattr__(self, "_checked", encoder.encode)
        object.__setattr__(self, "_encode", _built_once(encoder) or encoder.encode)

    def dumps(self, value: object) -> str:
        """``value`` as text in this format.

        Raises:
            TypeError: ``value`` holds something JSON cannot encode.
            ValueError: a strict format met ``NaN``/``Infinity``, or a circular reference.
        """
        try:
            text: str = self._encode(value)
        except RecursionError:
            # A circular value recurses in the encoder built once (see _built_once); the
            # checking one says so (ValueError), or recurses too where the value is deep.
            text = self._checked(value)
        return text

    def dumps_bytes(self, value: object) -> bytes:
        """``value`` in this format, UTF-8 encoded (ASCII formats give ASCII bytes)."""
        return self.dumps(value).encode("utf-8")

    def sha256_hex(self, value: object) -> str:
        """The SHA-256 of :meth:`dumps_bytes`, as 64 lower-case hex digits (no prefix)."""
        return hashlib.sha256(self.dumps_bytes(value)).hexdigest()


def _built_once(encoder: json.JSONEncoder) -> Callable[[object], str] | None:
    """``encoder.encode``, with the C encoder it makes on every call made once.

    ``JSONEncoder.encode`` builds a new C encoder per call, around a fresh dict of the
    containers it is inside (its circular-reference check). Built once, it runs without
    that dict: a circular value then recurses until ``RecursionError``, which
    :meth:`CanonicalFormat.dumps` hands to ``encoder.encode`` to name. The arguments are
    the ones ``JSONEncoder.iterencode`` passes, so every byte is the same. Most values
    hashed here are small (an MCP call encodes three), and for those the build cost about
    a third of the encode. ``None`` where the interpreter has no C encoder
    (``encoder.encode`` is used then).
    """
    make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if make_encoder is None:
        return None
    string = (json.encoder.encode_basestring_ascii if encoder.ensure_ascii
              else json.encoder.encode_basestring)
    chunks = make_encoder(None, encoder.default, string, encoder.indent, encoder.key_separator,
                          encoder.item_separator, encoder.sort_keys, encoder.skipkeys,
                          encoder.allow_nan)

    def encode(value: object) -> str:
        return "".join(chunks(value, 0))

    return encode


CANONICAL = CanonicalFormat("canonical", ensure_ascii=False, allow_nan=False)
"""UTF-8, strict. The audit chain's record digests, entry hashes and retention bodies
(``store.chain.canonical_bytes``; checkpoint MACs and export-header MACs go through it too)
and the terminal receipt signatures and chain hashes (``terminal.receipts.chain``)."""

LENIENT = CanonicalFormat("lenient", ensure_ascii=False, allow_nan=True)
"""UTF-8, writes ``NaN``/``Infinity``. Session event body digests (``store.events``),
evidence-record digests and evidence-cache keys (``vision.evidence.cache``), the lines
of an audit export (``audit.export``), whose rows come back from SQLite as they were, and
the noted histories of ``session_prefixes`` (``runtime.turn.prepare.prefix_chain``): each
message's digest in this format, its tool-call arguments and tool result text replaced by
``sha256:`` of their :func:`normalized_text` (history format 2). Rows noted before that
(format 1: arguments hashed as the client sent them) are still found by the chain of
``prefix_chain(..., legacy=True)``."""

ASCII = CanonicalFormat("ascii", ensure_ascii=True, allow_nan=False)
"""ASCII, strict. MCP tool-result hashes (``mcp_host.results``), terminal plan hashes
(``terminal.execution.sessions``) and receipt chain head slots (``terminal.receipts.chain``,
a fixed-width ASCII file). The head slots were written with NaN allowed; a head holds only
strings, integers and ``None``, so the strict flag changes no byte of them."""

ASCII_LENIENT = CanonicalFormat("ascii-lenient", ensure_ascii=True, allow_nan=True)
"""ASCII, writes ``NaN``/``Infinity``. The ``details`` column of audit rows
(``audit.log``) and of vision attempt rows (``vision.routing.attempts``): the chain hashes
those columns as stored text, so their spelling is part of every stored record digest."""

SORTED_DEFAULT = CanonicalFormat(
    "sorted-default", ensure_ascii=True, allow_nan=True, compact=False
)
"""``json.dumps(value, sort_keys=True)``: ASCII with Python's default ``", "``/``": "``
separators. An OpenAI-compatible vision route's answer fingerprint
(``vision.routes.openai_compat``), which is part of stored evidence-cache keys."""


def dumps(value: object) -> str:
    """``value`` as :data:`CANONICAL` text (see :meth:`CanonicalFormat.dumps`)."""
    return CANONICAL.dumps(value)


def dumps_bytes(value: object) -> bytes:
    """``value`` as :data:`CANONICAL` UTF-8 bytes."""
    return CANONICAL.dumps_bytes(value)


def sha256_hex(value: object) -> str:
    """The SHA-256 hex digest of ``value``'s :data:`CANONICAL` bytes."""
    return CANONICAL.sha256_hex(value)


def normalized_text(text: str, fmt: CanonicalFormat = LENIENT) -> str:
    """``text`` rewritten in ``fmt`` when it is a JSON object or array; anything else as it
    is. Two spellings of one value (spacing, key order, escapes) come out as one, so a
    history a client re-serialized hashes as the one it echoes (tool-call arguments parsed
    and dumped again by LangChain or pydantic-ai). Numbers keep their type: ``1`` and
    ``1.0`` stay two values."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return text
    try:
        return fmt.dumps(json.loads(stripped))
    except (ValueError, RecursionError):  # not JSON, or too deep to hash as a value
        return text
