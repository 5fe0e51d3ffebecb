"""A chat completion request body, checked before anything is stored or sent upstream.

Why a module of its own: every value a client sends ends up in three places that each
fail in their own way on hostile input — the session log (canonical JSON, UTF-8 in
SQLite), the upstream request (JSON that forbids NaN) and the runtime's own recursion
(``deepcopy``, ``json.dumps``). A failure in any of them after the user message was
logged leaves a session with an event and no turn, and surfaces as a bare 500. So the
body is refused whole, with a 400 and a stable code, at the door:

* nesting is bounded (:data:`MAX_JSON_DEPTH`); the C parser's own ``RecursionError`` on
  absurd depth is the same refusal (``GATEWAY_JSON_TOO_DEEP``);
* ``NaN``, ``Infinity`` and numbers that overflow to infinity (``1e999``) are refused, as
  RFC 8259 has no such numbers and the upstream request could not carry them;
* a lone surrogate (``"\\ud800"``) in any string or key is refused: it cannot be UTF-8;
* the fields the gateway or the upstream interpret have their OpenAI types (``stream`` a
  boolean, ``tools`` a list of function objects, ...), so a wrong type is the client's
  400 with ``param`` naming the field, never forwarded for the upstream to trip on;
* what OpenAI's API refuses across fields is refused here too, before any upstream call
  (a turn that would only fail there has by then logged its user message): a
  ``max_tokens`` below 1, a ``tool_choice`` naming a function the request's ``tools`` do
  not offer, a ``tool`` message whose ``tool_call_id`` answers no call of the assistant
  message before it.

A body must cost what it weighs (:func:`read_request`, the gateway's door). Parsed, one
byte of ``{}`` becomes some 40 bytes of Python objects, so a body's size says little about
its cost; a base64 image, on the other hand, is one string as large as its bytes. So before
anything is parsed, on the text itself:

* bytes that are not base64 image data (``"data:image/…;base64,…"`` strings) count toward
  a text allowance (``gateway.max_text_bytes``), far below the body limit that images are
  allowed (``GATEWAY_BODY_TEXT_TOO_LARGE``);
* the JSON values are counted from the structure left once strings are cut out (every
  value but a container's first follows a comma), so an element count past
  ``gateway.max_body_nodes`` is refused without building one of them
  (``GATEWAY_JSON_TOO_MANY_NODES``); no array or object may hold more than
  :data:`MAX_JSON_ITEMS` members either;
* top-level fields the gateway does not read are skipped by a small validating scanner,
  never built, and named in the answer (``deepseekeyes.ignored``): their text must still be
  JSON (a body that is not JSON is refused whole) within the depth bound, and their keys
  hold no lone surrogate.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import GatewayError
from deepseek_eyes.gateway.resent import Kept, ResentBodies, continue_messages

__all__ = [
    "KNOWN_FIELDS", "MAX_IGNORED_LISTED", "MAX_JSON_DEPTH", "MAX_JSON_ITEMS", "BodyLimits",
    "RequestBody", "check_fields", "parse_body", "read_request",
]

#: Deepest nesting of arrays and objects a request body may have.
MAX_JSON_DEPTH = 64
#: Most members one array or object may hold.
MAX_JSON_ITEMS = 100_000
#: Names of ignored fields an answer lists (each cut to 64 characters).
MAX_IGNORED_LISTED = 32

_SURROGATE = re.compile("[\ud800-\udfff]")
_TOOL_CHOICES = frozenset({"none", "auto", "required"})


def _bad(message: str, *, param: str | None = None, reason: str | None = None) -> GatewayError:
    details: JsonObject = {}
    if param is not None:
        details["param"] = param
    if reason is not None:
        details["reason"] = reason
    return GatewayError(message, code="GATEWAY_BAD_REQUEST", details=details)


def _too_deep() -> GatewayError:
    return GatewayError(
        f"the request body nests deeper than {MAX_JSON_DEPTH} levels",
        code="GATEWAY_JSON_TOO_DEEP",
        details={"limit": MAX_JSON_DEPTH},
    )


def _no_constant(name: str) -> Any:
    raise _bad(f"the request body holds {name}, which JSON has no number for",
               reason="non_finite_number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _bad("the request body holds a number too large for a float",
                   reason="non_finite_number")
    return value


def _too_many_items(count: int) -> GatewayError:
    return GatewayError(
        f"an array or object in the request body holds {count} members, more than "
        f"{MAX_JSON_ITEMS}", code="GATEWAY_JSON_TOO_MANY_NODES",
        details={"items_limit": MAX_JSON_ITEMS})


def _may_hold_surrogates(text: str) -> bool:
    """Whether a body's text can put a surrogate into any string it parses to: only a
    ``\\uD800``-``\\uDFFF`` escape or a surrogate decoded as is (``surrogatepass``) can.
    Both are found in C over the text; without either, no string need be searched."""
    return ("\\ud" in text or "\\uD" in text
            or (not text.isascii() and _SURROGATE.search(text) is not None))


def _check_tree(document: Any, *, strings: bool = True) -> None:
    """Depth and strings of the whole document, without recursion. An ASCII string holds no
    surrogate, and ``str.isascii`` answers from a flag every string carries: only the
    others are searched (an image's base64 is most of a body, and searching it was most of
    the parse). ``strings`` False (the text can hold none, :func:`_may_hold_surrogates`):
    only the arrays and objects are walked, for their depth and size."""
    if not strings:
        _check_containers(document)
        return
    stack: list[tuple[Any, int]] = [(document, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if not value.isascii() and _SURROGATE.search(value):
                raise _bad("the request body holds a lone UTF-16 surrogate (\\ud800-\\udfff)",
                           reason="lone_surrogate")
        elif isinstance(value, dict | list):
            if depth >= MAX_JSON_DEPTH:
                raise _too_deep()
            if len(value) > MAX_JSON_ITEMS:
                raise _too_many_items(len(value))
            if isinstance(value, dict):
                for key, item in value.items():
                    stack.append((key, depth))
                    stack.append((item, depth + 1))
            else:
                stack.extend((item, depth + 1) for item in value)


def _check_containers(document: Any) -> None:
    """:func:`_check_tree` without strings: the depth and size of every array and object
    (a level at a time, leaves never pushed: a long history is mostly flat messages)."""
    level: list[Any] = [document] if isinstance(document, dict | list) else []
    depth = 0
    while level:
        if depth >= MAX_JSON_DEPTH:
            raise _too_deep()
        below: list[Any] = []
        for value in level:
            if len(value) > MAX_JSON_ITEMS:
                raise _too_many_items(len(value))
            below.extend(item for item in (value.values() if value.__class__ is dict else value)
                         if item.__class__ is dict or item.__class__ is list)
        level = below
        depth += 1


def parse_body(raw: bytes) -> JsonObject:
    """The request body as a JSON object.

    Raises:
        GatewayError: ``GATEWAY_BAD_REQUEST`` (not JSON, not an object, NaN or Infinity,
            a lone surrogate) or ``GATEWAY_JSON_TOO_DEEP``.
    """
    try:
        document = json.loads(raw, parse_constant=_no_constant, parse_float=_finite_float,
                              parse_int=_bounded_int)
    except RecursionError:
        raise _too_deep() from None
    except GatewayError:
        raise
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, too many int digits
        raise _bad("the request body is not JSON", reason="not_json") from exc
    if not isinstance(document, dict):
        raise _bad("the request body must be a JSON object", reason="not_object")
    _check_tree(document)
    return document


# -- the gateway's door: bounded before parsed -------------------------------------------


@dataclass(frozen=True)
class BodyLimits:
    """What a request body may cost: bytes that are not image data, and JSON values."""

    max_text_bytes: int = 8 * 1024 * 1024
    max_nodes: int = 250_000


@dataclass(frozen=True)
class RequestBody:
    """A request body at the door: the fields the gateway reads, and the names of the
    top-level fields it skipped (never built). ``kept``: its messages as a client's
    resent-history memo keeps them (kept once the body passed every check, see
    :meth:`remember`); ``base``: the kept body whose messages it starts with, and
    ``reused``: how many (0: parsed whole)."""

    fields: JsonObject
    ignored: tuple[str, ...] = ()
    kept: Kept | None = field(default=None, repr=False, compare=False)
    base: Kept | None = field(default=None, repr=False, compare=False)
    reused: int = 0

    def remember(self, memo: ResentBodies) -> None:
        """Keep this body's messages for its client's next request (after every check)."""
        if self.kept is not None:
            memo.keep(self.kept, self.base)


_WS = re.compile(r"[ \t\n\r]*")
# A JSON string as the grammar has it: no raw control character, only the named escapes.
_STRING_BODY = r'"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*"'
_STRING = re.compile(_STRING_BODY)
_TOKEN = re.compile(
    r"[ \t\n\r]*(?:(?P<s>" + _STRING_BODY + r")"
    r"|(?P<n>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<l>true|false|null)|(?P<p>[{}\[\],:]))")
_IMAGE_DATA = '"data:image'
_BASE64 = ";base64,"
_UNITS = {"utf-8": 1, "utf-16": 2, "utf-16-le": 2, "utf-16-be": 2, "utf-32": 4,
          "utf-32-le": 4, "utf-32-be": 4}
#: The top-level fields the gateway or the runtime read; any other is skipped.
KNOWN_FIELDS: frozenset[str] = frozenset()  # filled in below, from _FIELDS


def _image_chars(text: str) -> int:
    """Characters of base64 image data in the body: from each ``"data:image/…;base64,`` to
    the next quote. Whatever stands there sits inside a string, which costs what it weighs;
    an escaped quote ends the count early, which only counts more as text. ``str.find``
    throughout: a regex over a 60 MiB body costs more than parsing it."""
    total = pos = 0
    while (start := text.find(_IMAGE_DATA, pos)) >= 0:
        payload = text.find(_BASE64, start, start + 96)
        if payload < 0:
            pos = start + len(_IMAGE_DATA)
            continue
        payload += len(_BASE64)
        end = text.find('"', payload)
        if end < 0:
            break
        total += end - payload
        pos = end + 1
    return total + _base64_field_chars(text)


_DATA_KEY = '"data":'
#: How base64 of each image format DeepSeek takes begins (PNG, JPEG, GIF, WebP).
_IMAGE_BASE64_MAGIC = ("iVBORw0KGgo", "/9j/", "R0lGOD", "UklGR")


def _base64_field_chars(text: str) -> int:
    """Characters of base64 image data in ``"data"`` fields (Anthropic's image ``source``:
    ``{"type": "base64", "media_type": "image/png", "data": "iVBOR…"}``), known by the
    first bytes of an image format, so a text field named ``data`` still counts as text."""
    total = pos = 0
    while (start := text.find(_DATA_KEY, pos)) >= 0:
        value = start + len(_DATA_KEY)
        while value < len(text) and text[value] in " \t\r\n":
            value += 1
        pos = value
        if not text.startswith('"', value) or not text.startswith(_IMAGE_BASE64_MAGIC,
                                                                   value + 1):
            continue
        end = text.find('"', value + 1)
        if end < 0:
            break
        total += end - value - 1
        pos = end + 1
    return total


def _value_count(text: str, limit: int) -> int:
    """An upper bound on the JSON values in ``text``: one for the document, one per
    container (its first member), one per comma. Counted on the text first (fast; base64
    holds none of these characters); only past ``limit`` again on the structure with
    strings cut out, so that commas in prose do not count."""
    def count(of: str) -> int:
        return 1 + of.count("{") + of.count("[") + of.count(",")

    rough = count(text)
    return rough if rough <= limit else count(_STRING.sub('""', text))


def _not_json() -> GatewayError:
    return _bad("the request body is not JSON", reason="not_json")


def _checked_key(token: str) -> str:
    key = json.loads(token)
    if not key.isascii() and _SURROGATE.search(key):
        raise _bad("the request body holds a lone UTF-16 surrogate (\\ud800-\\udfff)",
                   reason="lone_surrogate")
    return str(key)


def _decode_value(text: str, pos: int) -> tuple[Any, int]:
    """The JSON value at ``pos`` of ``text`` and where it ends, a failure as the gateway's
    error (too deep, or not JSON)."""
    try:
        return _DECODER.raw_decode(text, pos)
    except RecursionError:
        raise _too_deep() from None
    except GatewayError:
        raise
    except ValueError:
        raise _not_json() from None


def _skip_value(text: str, pos: int) -> int:
    """The end of the JSON value at ``pos``, checked against the grammar (and the depth
    bound, finite numbers, keys without lone surrogates) without building it."""
    stack: list[str] = []
    expect = "value"  # value | first_value | key | first_key | colon | next
    while True:
        match = _TOKEN.match(text, pos)
        if match is None:
            raise _not_json()
        pos = match.end()
        kind, lexeme = match.lastgroup, match.group(match.lastgroup or 0)
        closed = False
        if expect in ("value", "first_value"):
            if kind == "p" and lexeme in "{[":
                if len(stack) + 1 >= MAX_JSON_DEPTH:
                    raise _too_deep()
                stack.append(lexeme)
                expect = "first_key" if lexeme == "{" else "first_value"
                continue
            if expect == "first_value" and lexeme == "]":
                closed = True
            elif kind == "n" and any(c in lexeme for c in ".eE"):
                _finite_float(lexeme)
            elif kind not in ("s", "n", "l"):
                raise _not_json()
        elif expect in ("key", "first_key"):
            if expect == "first_key" and lexeme == "}":
                closed = True
            elif kind == "s":
                _checked_key(lexeme)
                expect = "colon"
                continue
            else:
                raise _not_json()
        elif expect == "colon":
            if lexeme != ":":
                raise _not_json()
            expect = "value"
            continue
        else:  # next: a comma or the end of the container
            if lexeme == ",":
                expect = "key" if stack[-1] == "{" else "value"
                continue
            if lexeme != ("}" if stack[-1] == "{" else "]"):
                raise _not_json()
            closed = True
        if closed:
            stack.pop()
        if not stack:
            return pos
        expect = "next"


def _decode(raw: bytes) -> str:
    try:
        return raw.decode(json.detect_encoding(raw), "surrogatepass")
    except (UnicodeDecodeError, LookupError):
        raise _not_json() from None


def _bounded_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # past sys.get_int_max_str_digits(): costly to convert, refused
        raise _bad(f"the request body holds an integer of {len(text.lstrip('-'))} digits, "
                   f"more than the {sys.get_int_max_str_digits()} a number may have",
                   reason="integer_too_long") from None


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float,
                            parse_int=_bounded_int)


def read_request(raw: bytes, limits: BodyLimits, known: frozenset[str] | None = None, *,
                 memo: ResentBodies | None = None, scope: str | None = None,
                 front: str = "openai", history: str = "messages") -> RequestBody:
    """A chat completion body at the door: bounded in text and values before anything is
    built, then the fields the gateway reads parsed and checked as :func:`parse_body` does,
    and every other top-level field skipped (validated, never built) and named. ``known``
    names the fields another wire format reads (default: :data:`KNOWN_FIELDS`).

    ``memo`` and ``scope``: the messages of the client's last body of ``front`` that this
    one starts with, byte for byte, are taken from there instead of being parsed and
    walked again (gateway/resent.py: the same text, the same values; any other body is
    parsed whole); ``history`` names the field that holds them (``input`` for the
    Responses front), when it is one ``known`` names.

    Raises:
        GatewayError: ``GATEWAY_BODY_TEXT_TOO_LARGE``, ``GATEWAY_JSON_TOO_MANY_NODES``, and
            what :func:`parse_body` raises.
    """
    known = known if known is not None else KNOWN_FIELDS
    text = _decode(raw)
    unit = _UNITS.get(json.detect_encoding(raw), 1)
    images = _image_chars(text) * unit
    if len(raw) - images > limits.max_text_bytes:
        raise GatewayError(
            f"the request body holds {len(raw) - images} bytes that are not image data, more "
            f"than gateway.max_text_bytes ({limits.max_text_bytes})",
            code="GATEWAY_BODY_TEXT_TOO_LARGE",
            details={"text_bytes": len(raw) - images, "limit": limits.max_text_bytes,
                     "image_bytes": images})
    if _value_count(text, limits.max_nodes) > limits.max_nodes:
        raise GatewayError(
            f"the request body holds more than gateway.max_body_nodes ({limits.max_nodes}) "
            "JSON values", code="GATEWAY_JSON_TOO_MANY_NODES",
            details={"limit": limits.max_nodes})
    fields: JsonObject = {}
    ignored: dict[str, None] = {}
    base: Kept | None = None
    reused = 0
    messages_at: tuple[int, int, Any] | None = None  # where the messages value was read
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]  # matches the empty string
    if not text.startswith("{", pos):
        if text.startswith("[", pos) or _TOKEN.match(text, pos):
            raise _bad("the request body must be a JSON object", reason="not_object")
        raise _not_json()
    pos += 1
    first = True
    while True:
        match = _TOKEN.match(text, pos)
        if match is None:
            raise _not_json()
        lexeme = match.group(match.lastgroup or 0)
        if lexeme == "}" and first:
            pos = match.end()
            break
        if match.lastgroup != "s":
            raise _not_json()
        key = _checked_key(lexeme)
        colon = _TOKEN.match(text, match.end())
        if colon is None or colon.group(0).strip() != ":":
            raise _not_json()
        pos = _WS.match(text, colon.end()).end()  # type: ignore[union-attr]
        if key == history and key in known and memo is not None and scope is not None:
            fields.pop(key, None)
            continued = None
            for candidate in memo.candidates(scope, front):
                continued = continue_messages(text, pos, candidate, _DECODER)
                if continued is not None:
                    base, reused = candidate, len(candidate.messages)
                    break
            else:
                base, reused = None, 0
            value_at = pos
            fields[key], pos = continued or _decode_value(text, pos)
            messages_at = (value_at, pos, fields[key])
        elif key in known:
            fields[key], pos = _decode_value(text, pos)
        else:
            pos = _skip_value(text, pos)
            fields.pop(key, None)  # as json.loads: the last of a repeated key wins
            ignored[key] = None
        first = False
        after = _TOKEN.match(text, pos)
        if after is None or after.group("p") not in (",", "}"):
            raise _not_json()
        pos = after.end()
        if after.group("p") == "}":
            break
    if _WS.match(text, pos).end() != len(text):  # type: ignore[union-attr]
        raise _not_json()
    for key in fields:
        ignored.pop(key, None)  # a known field repeated after an unknown spelling: kept
    messages = fields.get(history)
    if messages_at is None or messages_at[2] is not messages:
        base, reused = None, 0  # a repeated key: the last one's value, parsed whole
    if reused and isinstance(messages, list):
        # The kept messages passed this walk in the body they came from, at this depth.
        if len(messages) > MAX_JSON_ITEMS:
            raise _too_many_items(len(messages))
        _check_tree({**fields, history: messages[reused:]},
                    strings=_may_hold_surrogates(text))
    else:
        _check_tree(fields, strings=_may_hold_surrogates(text))
    listed = tuple(name[:64] for name in list(ignored)[:MAX_IGNORED_LISTED])
    kept = None
    if memo is not None and scope is not None and messages_at is not None \
            and messages_at[2] is messages:
        kept = _kept(text, scope, front, messages_at[0], messages_at[1], messages)
    return RequestBody(fields, listed, kept=kept, base=base, reused=reused)


def _kept(text: str, scope: str, front: str, start: int, end: int,
          messages: Any) -> Kept | None:
    """The entry a body's messages are kept under: the text up to the ``}`` that ends its
    last message (``end`` is past the array's ``]``), when that message is an object."""
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    last = end - 1  # the "]"
    while last > start and text[last - 1] in " \t\n\r":
        last -= 1
    if text[last - 1:last] != "}":
        return None
    return Kept(scope, front, start, text[:last], list(messages))


# -- field types ------------------------------------------------------------------------


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_object(value: Any) -> bool:
    return isinstance(value, dict)


def _is_stop(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(item, str) for item in value)
    )


def _is_tool_choice(value: Any) -> bool:
    return (isinstance(value, str) and value in _TOOL_CHOICES) or isinstance(value, dict)


#: Each top-level field the gateway or the upstream interprets, with its OpenAI type.
#: ``null`` is accepted for every one of them and means "not given".
_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "model": (_is_str, "a string"),
    "stream": (_is_bool, "a boolean"),
    "stream_options": (_is_object, "an object"),
    "n": (_is_int, "an integer"),
    "temperature": (_is_number, "a number"),
    "top_p": (_is_number, "a number"),
    "presence_penalty": (_is_number, "a number"),
    "frequency_penalty": (_is_number, "a number"),
    "max_tokens": (_is_int, "an integer"),
    "max_completion_tokens": (_is_int, "an integer"),
    "seed": (_is_int, "an integer"),
    "top_logprobs": (_is_int, "an integer"),
    "logprobs": (_is_bool, "a boolean"),
    "parallel_tool_calls": (_is_bool, "a boolean"),
    "user": (_is_str, "a string"),
    "reasoning_effort": (_is_str, "a string"),
    "response_format": (_is_object, "an object"),
    "thinking": (_is_object, "an object"),
    "logit_bias": (_is_object, "an object"),
    "stop": (_is_stop, "a string or a list of strings"),
    "tool_choice": (_is_tool_choice, "'none', 'auto', 'required' or an object"),
}


KNOWN_FIELDS = frozenset({*_FIELDS, "messages", "tools"})


def _check_tools(tools: Any) -> None:
    if not isinstance(tools, list):
        raise _bad("tools must be a list of tool objects", param="tools")
    for index, tool in enumerate(tools):
        at = f"tools[{index}]"
        if not isinstance(tool, dict):
            raise _bad(f"{at} must be an object", param=at)
        if tool.get("type", "function") != "function":
            raise _bad(f"{at}.type must be 'function'", param=f"{at}.type")
        function = tool.get("function")
        if not isinstance(function, dict):
            raise _bad(f"{at}.function must be an object", param=f"{at}.function")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise _bad(f"{at}.function.name must be a non-empty string",
                       param=f"{at}.function.name")
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise _bad(f"{at}.function.parameters must be an object",
                       param=f"{at}.function.parameters")


def _check_max_tokens(body: JsonObject) -> None:
    for name in ("max_tokens", "max_completion_tokens"):
        value = body.get(name)
        if value is not None and value < 1:
            raise _bad(f"{name} must be at least 1 (got {value})", param=name,
                       reason="below_minimum")


def _check_tool_choice(body: JsonObject) -> None:
    """A ``tool_choice`` object must name one of the request's own functions (the tools
    the gateway adds itself are not the client's to force)."""
    choice = body.get("tool_choice")
    if not isinstance(choice, dict):
        return
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if choice.get("type", "function") != "function" or not isinstance(name, str) or not name:
        raise _bad('tool_choice must be {"type": "function", "function": {"name": NAME}}',
                   param="tool_choice")
    offered = [tool["function"]["name"] for tool in body.get("tools") or ()]
    if name not in offered:
        listed = ", ".join(repr(n) for n in offered[:16]) or "none"
        raise _bad(f"tool_choice names the function {name[:64]!r}, which tools does not "
                   f"offer (offered: {listed})", param="tool_choice.function.name",
                   reason="tool_not_offered")


#: The tool-reply check's state after some messages: the ids the last assistant message
#: called (``None``: no assistant message since the last message of another role), or
#: ``False`` once a message that is not an object ended the check.
Replies = set[str] | None | bool


def _check_tool_replies(messages: Any, start: int = 0, calls: Replies = None) -> Replies:
    """Each ``tool`` message answers a call of the nearest assistant message before it
    (the OpenAI rule: only tool messages may stand between a call and its answer); from
    ``start`` on, in the state ``calls`` the messages before it left. Returns the state
    after the last message."""
    if not isinstance(messages, list) or calls is False:
        return False  # the runtime's parser names what is wrong with messages itself
    for index in range(start, len(messages)):
        message = messages[index]
        if not isinstance(message, dict):
            return False
        role = message.get("role")
        if role == "assistant":
            tool_calls = message.get("tool_calls")
            calls = {str(call.get("id")) for call in tool_calls if isinstance(call, dict)} \
                if isinstance(tool_calls, list) else set()
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(calls, set) or not isinstance(call_id, str) or call_id not in calls:
                raise _bad(
                    f"messages[{index}] is a tool message whose tool_call_id "
                    f"{str(call_id)[:64]!r} answers no tool call of the assistant message "
                    "before it", param=f"messages[{index}].tool_call_id",
                    reason="tool_reply_unmatched")
        else:
            calls = None
    return calls


def check_fields(body: JsonObject, parsed: RequestBody | None = None) -> None:
    """The OpenAI types of the fields that matter, and what OpenAI refuses across them;
    ``messages`` is otherwise parsed elsewhere. ``parsed``: the body as read, whose
    messages the client's last body held are not checked again (their check's state is
    kept with them).

    Raises:
        GatewayError: ``GATEWAY_BAD_REQUEST`` with ``details['param']`` naming the field.
    """
    for name, (accepts, wanted) in _FIELDS.items():
        value = body.get(name)
        if value is not None and not accepts(value):
            raise _bad(f"{name} must be {wanted}", param=name)
    if body.get("n") not in (None, 1):
        raise _bad("only n = 1 is supported", param="n")
    options = body.get("stream_options")
    if options is not None:
        include = options.get("include_usage")
        if include is not None and not isinstance(include, bool):
            raise _bad("stream_options.include_usage must be a boolean",
                       param="stream_options.include_usage")
    if body.get("tools") is not None:
        _check_tools(body["tools"])
    thinking = body.get("thinking")
    if thinking is not None and not isinstance(thinking.get("type"), str):
        raise _bad('thinking must be {"type": "enabled"} or {"type": "disabled"}',
                   param="thinking.type")
    _check_max_tokens(body)
    _check_tool_choice(body)
    messages = body.get("messages")
    start, calls = 0, None
    if parsed is not None and parsed.reused and parsed.base is not None \
            and parsed.base.replies is not None and parsed.fields is body:
        start, calls = parsed.reused, parsed.base.replies[0]
    after = _check_tool_replies(messages, start, calls)
    if parsed is not None and parsed.kept is not None and parsed.fields is body:
        parsed.kept.replies = (after,)
